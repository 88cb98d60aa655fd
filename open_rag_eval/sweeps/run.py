"""Scheduled consistency sweeps: query -> evaluate -> record in the history -> compare with a baseline -> verdict.

``asweep(loaded)`` runs one sweep of the config's ``connector:`` (``repeats`` >= 2) through the normal pipeline
(outputs saved before judging, results in ``<output_dir>/sweeps/<sweep id>/``), appends it to the SQLite history
(``sweep.history``), then compares each metric named in ``sweep.thresholds`` with the baseline sweep (the previous
sweep of the same ``sweep.system``, or a pinned sweep id):

- per query the metric's value (the mean over runs for per-run metrics), paired over the queries both sweeps have;
- delta = mean(current) - mean(baseline), a seeded paired bootstrap CI and sign-flip permutation p-value;
- a **regression** is a change in the bad direction larger than the threshold *and* significant at ``sweep.alpha``,
  or a drop larger than the metric's ``sweep.fail_if_drop`` amount (no test needed); a thresholded metric with no
  value at all in the current sweep is a regression too (failures must not look like stability);
- **inconclusive**: beyond the threshold, but the test does not confirm it -- not significant, or with this many
  paired queries it cannot reach ``alpha`` at all (the sign-flip test's smallest possible p-value with n changed
  queries is 2 / 2^n, so n <= 5 can never be significant at 0.05). Such a sweep is neither stable nor a regression
  (exit code 7); ``fail_if_drop`` or more queries decide it.

The rule is ``scoring.verdict``'s, the one ``compare``, ``assert_metrics`` and ``ablate`` use.

Metrics where lower is better (spreads, failure counts, latency...) have their "drop" measured upwards.
Without thresholds a sweep records and reports, and is always stable.

The outcome also carries the sweep's run status (``run.status``): a sweep whose run is incomplete (a judged metric
failed for every output) says so at every door -- exit 6 in the CLI unless a regression was found, the service's
``incomplete`` job state -- beside its verdict.
"""

from __future__ import annotations

import asyncio
import logging
import math
import secrets
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from open_rag_eval.config import LoadedConfig, SweepOptions
from open_rag_eval.core.errors import ConfigError, OpenRagEvalError
from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.sweeps.history import HISTORY_DB, History, SweepRecord
from open_rag_eval.core.catalogue import lower_is_better
from open_rag_eval.scoring.paired import paired_test
from open_rag_eval.scoring.verdict import INCONCLUSIVE, REGRESSION, Rule, decide, min_p_value, queries_needed
from open_rag_eval.run.generation import real_folder
from open_rag_eval.run.status import RunStatus
from open_rag_eval.store.lock import FolderLock
from open_rag_eval.store.sqlite import db_path

# min_p_value is scoring.verdict's, importable here as before
__all__ = ["Comparison", "SweepOutcome", "asweep", "compare", "min_p_value", "never_trips", "sweep", "sweep_options"]

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
    threshold: float | None  # largest allowed drop when significant (None: only fail_if_drop applies)
    lower_is_better: bool
    regression: bool
    note: str = ""
    fail_if_drop: float | None = None  # a larger drop is a regression whatever the test says
    inconclusive: bool = False  # beyond the threshold, but the test cannot reach alpha with these queries
    min_p: float | None = None  # the smallest p-value the test could give with these queries

    @property
    def state(self) -> str:
        return "regression" if self.regression else "inconclusive" if self.inconclusive else "ok"


@dataclass
class SweepOutcome:
    sweep_id: str
    system: str
    output_dir: Path
    n_queries: int
    n_outputs: int
    n_failed_outputs: int
    repeats: int
    info: RunInfo  # the sweep's run: whether it was simulated, its config's digest
    baseline_id: str | None
    comparisons: list[Comparison] = field(default_factory=list)
    status: RunStatus = field(default_factory=RunStatus)  # the sweep's run: complete, or incomplete with why

    @property
    def regressions(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.regression]

    @property
    def inconclusive(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.state == "inconclusive"]

    @property
    def verdict(self) -> str:
        if self.baseline_id is None:
            return "first"
        return "regression" if self.regressions else "inconclusive" if self.inconclusive else "stable"


def sweep(loaded: LoadedConfig, **kwargs: Any) -> SweepOutcome:
    return asyncio.run(asweep(loaded, **kwargs))


def _now() -> datetime:
    return datetime.now(UTC)


def sweep_options(loaded: LoadedConfig) -> SweepOptions:
    config = loaded.config
    file = str(loaded.path or "")
    if config.connector is None:
        raise ConfigError("a sweep queries a live system: add a connector: section", path="connector", file=file)
    if config.connector.repeats < 2:
        raise ConfigError("a sweep needs repeats >= 2 to measure consistency", path="connector.repeats", file=file)
    return config.sweep or SweepOptions()


async def asweep(loaded: LoadedConfig, *, now: datetime | None = None, **run_options: Any) -> SweepOutcome:
    """``run_options`` go to the evaluation run (``pipeline.arun``), e.g. the service's ``wrap_judge``."""
    from open_rag_eval.run.fetch import fetch_outputs
    from open_rag_eval.report import write_report
    from open_rag_eval.run.pipeline import arun

    options = sweep_options(loaded)
    connector = loaded.config.connector
    assert connector is not None
    started = now or _now()
    sweep_id = f"{started:%Y%m%dT%H%M%SZ}-{secrets.token_hex(2)}"
    root = real_folder(loaded.resolve_path(loaded.config.output_dir))
    with FolderLock(root), History(db_path(options.history, loaded.base_dir, HISTORY_DB)) as history:
        outputs = await fetch_outputs(loaded, connector)
        failed = [o for o in outputs if o.error is not None]
        if outputs and len(failed) == len(outputs):
            raise OpenRagEvalError(f"every call to the RAG system failed; first: {failed[0].error}")
        out = root / "sweeps" / sweep_id
        report = await arun(loaded, outputs=outputs, output_dir=out, write_report=write_report, **run_options)
        record = SweepRecord(
            id=sweep_id, started_at=started.isoformat(timespec="seconds"),
            finished_at=_now().isoformat(timespec="seconds"), system=options.system, config_digest=report.info.config_digest,
            output_dir=str(out), n_queries=len({o.query_id for o in outputs}), n_outputs=len(outputs),
            n_failed_outputs=len(failed), simulated=report.info.simulated, scores=report.result.scores,
            summary=report.summary)
        history.append(record)
        baseline = _baseline(history, sweep_id, options, str(loaded.path or ""))
        outcome = SweepOutcome(sweep_id, options.system, out, record.n_queries, len(outputs), len(failed),
                               connector.repeats, report.info, baseline, status=report.status)
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
    """One comparison per metric of ``thresholds`` or ``fail_if_drop`` (see the module doc for the rule)."""
    metrics = sorted(set(options.thresholds) | set(options.fail_if_drop))
    return [_compare_metric(history, baseline_id, current_id, metric, options) for metric in metrics]


def never_trips(options: SweepOptions, n_queries: int) -> list[str]:
    """Why some thresholds of ``options`` can never trip with ``n_queries`` queries: one message per metric."""
    from open_rag_eval.core.catalogue import axis_range  # noqa: PLC0415

    problems: list[str] = []
    if min_p_value(n_queries) >= options.alpha:
        needed = queries_needed(options.alpha)
        for metric in sorted(set(options.thresholds) - set(options.fail_if_drop)):
            problems.append(
                f"sweep.thresholds.{metric}: with {n_queries} queries the paired test can never reach alpha "
                f"{options.alpha:g} (smallest possible p {min_p_value(n_queries):.3g}), so this threshold can never "
                f"trip: a drop beyond it is INCONCLUSIVE (exit 7). Use at least {needed} queries, or add "
                f"sweep.fail_if_drop.{metric}")
    for section, rules in (("thresholds", options.thresholds), ("fail_if_drop", options.fail_if_drop)):
        for metric, amount in sorted(rules.items()):
            bounds = axis_range(metric)
            if bounds is not None and not metric.endswith(".alpha") and amount >= bounds[1] - bounds[0]:
                problems.append(f"sweep.{section}.{metric}: {amount:g} can never trip: the metric lies in "
                                f"[{bounds[0]:g}, {bounds[1]:g}], so it cannot move by more than {bounds[1] - bounds[0]:g}")
    return problems


def _compare_metric(history: History, baseline_id: str, current_id: str, metric: str,
                    options: SweepOptions) -> Comparison:
    """The metric's verdict (``scoring.verdict``; no threshold: only ``fail_if_drop`` can trip)."""
    limit, absolute = options.thresholds.get(metric), options.fail_if_drop.get(metric)
    before, _ = history.per_query(baseline_id, metric)
    after, failed = history.per_query(current_id, metric)
    lower = lower_is_better(metric)
    common = sorted(set(before) & set(after))
    a, b = [before[q] for q in common], [after[q] for q in common]
    changed = sum(1 for x, y in zip(a, b) if abs(y - x) > 1e-12)
    test = paired_test(a, b, seed=options.seed) if common else None
    p_value = test.p_value if test is not None and len(common) > 1 else None  # one pair: no test
    verdict = decide(metric, test, lower=lower, alpha=options.alpha, n_changed=changed,
                     rule=Rule(max_drop=math.inf if limit is None else limit, fail_if_drop=absolute),
                     significant=p_value is not None and p_value <= options.alpha,
                     no_value="" if after else f"no value in this sweep ({failed} failed rows)")
    regression, inconclusive = verdict.outcome == REGRESSION, verdict.outcome == INCONCLUSIVE
    note = "" if verdict.outcome == "PASS" else verdict.reason
    if test is None:
        return Comparison(metric, _mean(before.values()), _mean(after.values()), None, None, None, 0, limit, lower,
                          regression, note, absolute, inconclusive)
    return Comparison(metric, _mean(a), _mean(b), test.diff, p_value,
                      (test.ci95_low, test.ci95_high) if p_value is not None else None, len(common), limit, lower,
                      regression, note, absolute, inconclusive, min_p_value(changed))


def _mean(values: Any) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None
