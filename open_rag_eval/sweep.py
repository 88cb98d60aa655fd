"""Scheduled consistency sweeps: query -> evaluate -> record in the history -> compare with a baseline -> verdict.

``asweep(loaded)`` runs one sweep of the config's ``connector:`` (``repeats`` >= 2) through the normal pipeline
(outputs saved before judging, results in ``<output_dir>/sweeps/<sweep id>/``), appends it to the SQLite history
(``sweep.history``), then compares each metric named in ``sweep.thresholds`` with the baseline sweep (the previous
sweep of the same ``sweep.system``, or a pinned sweep id):

- per query the metric's value (the mean over runs for per-run metrics), paired over the queries both sweeps have;
- delta = mean(current) - mean(baseline), a seeded paired bootstrap CI and sign-flip permutation p-value;
- a **regression** is a change in the bad direction larger than the threshold *and* significant at ``sweep.alpha``
  (with fewer than 2 paired queries no test is possible and the threshold alone decides); a thresholded metric
  with no value at all in the current sweep is a regression too (failures must not look like stability).

Metrics where lower is better (spreads, failure counts, latency...) have their "drop" measured upwards.
Without thresholds a sweep records and reports, and is always stable.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from open_rag_eval.config import LoadedConfig, SweepOptions
from open_rag_eval.errors import ConfigError, OpenRagEvalError
from open_rag_eval.history import History, SweepRecord
from open_rag_eval.report.names import lower_is_better
from open_rag_eval.scoring.paired import paired_test

__all__ = ["Comparison", "SweepOutcome", "asweep", "compare", "sweep"]

log = logging.getLogger(__name__)

@dataclass
class Comparison:
    metric: str
    baseline: float | None
    current: float | None
    delta: float | None  # current - baseline over the paired queries
    p_value: float | None
    ci95: tuple[float, float] | None
    n: int  # paired queries
    threshold: float
    lower_is_better: bool
    regression: bool
    note: str = ""


@dataclass
class SweepOutcome:
    sweep_id: str
    system: str
    output_dir: Path
    n_queries: int
    n_outputs: int
    n_failed_outputs: int
    repeats: int
    simulated: bool
    baseline_id: str | None
    comparisons: list[Comparison] = field(default_factory=list)

    @property
    def regressions(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.regression]

    @property
    def verdict(self) -> str:
        if self.baseline_id is None:
            return "first"
        return "regression" if self.regressions else "stable"


def sweep(loaded: LoadedConfig, **kwargs: Any) -> SweepOutcome:
    return asyncio.run(asweep(loaded, **kwargs))


def _now() -> datetime:
    return datetime.now(UTC)


def _options(loaded: LoadedConfig) -> SweepOptions:
    config = loaded.config
    file = str(loaded.path or "")
    if config.connector is None:
        raise ConfigError("a sweep queries a live system: add a connector: section", path="connector", file=file)
    if config.connector.repeats < 2:
        raise ConfigError("a sweep needs repeats >= 2 to measure consistency", path="connector.repeats", file=file)
    return config.sweep or SweepOptions()


async def asweep(loaded: LoadedConfig, *, now: datetime | None = None) -> SweepOutcome:
    from open_rag_eval.connector import fetch_outputs
    from open_rag_eval.pipeline import arun

    options = _options(loaded)
    connector = loaded.config.connector
    assert connector is not None
    started = now or _now()
    sweep_id = f"{started:%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"
    outputs = await fetch_outputs(loaded, connector)
    failed = [o for o in outputs if o.error is not None]
    if outputs and len(failed) == len(outputs):
        raise OpenRagEvalError(f"every call to the RAG system failed; first: {failed[0].error}")
    out = loaded.resolve_path(loaded.config.output_dir) / "sweeps" / sweep_id
    report = await arun(loaded, outputs=outputs, output_dir=out)
    record = SweepRecord(
        id=sweep_id, started_at=started.isoformat(timespec="seconds"), finished_at=_now().isoformat(timespec="seconds"),
        system=options.system, config_digest=loaded.digest, output_dir=str(out),
        n_queries=len({o.query_id for o in outputs}), n_outputs=len(outputs), n_failed_outputs=len(failed),
        simulated=report.simulated, scores=report.result.scores, summary=report.summary)
    with History(loaded.resolve_path(options.history)) as history:
        history.append(record)
        baseline = _baseline(history, sweep_id, options, str(loaded.path or ""))
        outcome = SweepOutcome(sweep_id, options.system, out, record.n_queries, len(outputs), len(failed),
                               connector.repeats, report.simulated, baseline)
        if baseline is not None:
            outcome.comparisons = compare(history, baseline, sweep_id, options)
        history.set_verdict(sweep_id, outcome.verdict, {"baseline": baseline,
                                                        "comparisons": [asdict(c) for c in outcome.comparisons]})
    return outcome


def _baseline(history: History, sweep_id: str, options: SweepOptions, file: str) -> str | None:
    if options.baseline == "previous":
        previous = history.previous(sweep_id, options.system)
        return previous.id if previous else None
    if history.get(options.baseline) is None:
        raise ConfigError(f"no sweep '{options.baseline}' in the history {history.path}", path="sweep.baseline",
                          file=file)
    return options.baseline


def compare(history: History, baseline_id: str, current_id: str, options: SweepOptions) -> list[Comparison]:
    """One comparison per thresholded metric (see the module doc for the rule)."""
    return [_compare_metric(history, baseline_id, current_id, metric, limit, options)
            for metric, limit in sorted(options.thresholds.items())]


def _compare_metric(history: History, baseline_id: str, current_id: str, metric: str, limit: float,
                    options: SweepOptions) -> Comparison:
    before, _ = history.per_query(baseline_id, metric)
    after, failed = history.per_query(current_id, metric)
    lower = lower_is_better(metric)
    if not after:
        note = f"no value in this sweep ({failed} failed rows)"
        return Comparison(metric, _mean(before.values()), None, None, None, None, 0, limit, lower, True, note)
    common = sorted(set(before) & set(after))
    if not common:
        return Comparison(metric, None, _mean(after.values()), None, None, None, 0, limit, lower, False,
                          "not in the baseline: nothing to compare")
    a, b = [before[q] for q in common], [after[q] for q in common]
    delta = _mean(b) - _mean(a)
    drop = delta if lower else -delta
    if len(common) < 2:
        return Comparison(metric, a[0], b[0], delta, None, None, 1, limit, lower, drop > limit,
                          "one paired query: no test, the threshold alone decides")
    test = paired_test(a, b, seed=options.seed)
    regression = drop > limit and test.p_value <= options.alpha
    note = "" if regression or drop <= limit else f"beyond the threshold but not significant (alpha {options.alpha})"
    return Comparison(metric, test.mean_a, test.mean_b, delta, test.p_value, (test.ci95_low, test.ci95_high),
                      len(common), limit, lower, regression, note)


def _mean(values: Any) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None
