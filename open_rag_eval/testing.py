"""pytest helpers: gate CI on evaluation results.

    from open_rag_eval import evaluate
    from open_rag_eval.testing import assert_metrics

    def test_rag_quality():
        results = evaluate("tests/rag_outputs.jsonl", judge={"model": "gpt-4o-mini"})
        assert_metrics(results, {"citation.f1": 0.5, "nuggets.vital_strict": 0.4}, baseline="results/main")

A threshold is met when the metric's mean is at least the threshold -- at most, for a lower-is-better metric
(the metric catalogue's direction, ``core.catalogue.lower_is_better``). With ``baseline`` (``Results`` or a result
folder), each metric of ``thresholds`` -- or the headline metrics, when there are none -- gets the verdict of
``open-rag-eval compare`` (``scoring.verdict``: per-query means paired, permutation p-value, Holm across the metrics):
REGRESSION when it dropped by more than ``max_drop`` and the drop is significant or its whole CI is beyond
``max_drop``, or when it dropped by more than its ``fail_if_drop`` amount whatever the p-value; INCONCLUSIVE when it
dropped by more than ``max_drop`` but the test cannot confirm it. Every threshold missed and every REGRESSION is
listed in one AssertionError (metric, value, threshold or verdict, and the worst queries); when nothing failed but
a verdict is INCONCLUSIVE, ``open_rag_eval.core.errors.Inconclusive`` is raised instead (never a pass).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from open_rag_eval.api.results import Results

__all__ = ["assert_metrics"]

WORST = 3  # queries shown per failed metric


def assert_metrics(results: Results, thresholds: Mapping[str, float] | None = None, *,
                   baseline: Results | str | Path | None = None, max_drop: float = 0.0,
                   fail_if_drop: Mapping[str, float] | None = None, seed: int = 0, resamples: int = 10_000) -> None:
    """Raise ``AssertionError`` listing every metric below its threshold or worse than ``baseline``;
    ``Inconclusive`` when nothing failed but the paired test cannot tell for a metric."""
    from open_rag_eval.core.catalogue import lower_is_better
    from open_rag_eval.core.errors import Inconclusive

    thresholds = dict(thresholds or {})
    failures: list[str] = []
    for metric, threshold in thresholds.items():
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not math.isfinite(threshold):
            raise ValueError(f"threshold of {metric} must be a finite number, got {threshold!r}")
        try:
            mean = results.mean(metric)
        except KeyError:
            close = difflib.get_close_matches(metric, results.metrics, n=3, cutoff=0.5)
            failures.append(f"{metric}: no such metric in the results"
                            + (f"; did you mean {', '.join(close)}?" if close else ""))
            continue
        lower = lower_is_better(metric)
        if mean is None:
            failures.append(f"{metric}: no value (every output failed for it), threshold "
                            f"{'<=' if lower else '>='} {threshold:g}{_failed(results, metric)}")
        elif (mean > threshold) if lower else (mean < threshold):
            failures.append(f"{metric} = {mean:.4f}, threshold {'<=' if lower else '>='} {threshold:g}; worst "
                            f"queries: {_worst(results, metric, lower)}")
    unsure: list[str] = []
    if baseline is not None:
        metrics = list(dict.fromkeys([*thresholds, *(fail_if_drop or {})])) or None
        for outcome, line in _verdicts(results, _as_results(baseline), metrics, max_drop, dict(fail_if_drop or {}),
                                       seed, resamples):
            (failures if outcome == "REGRESSION" else unsure).append(line)
    if failures:
        raise AssertionError(f"{len(failures)} metric gate(s) failed:\n  " + "\n  ".join([*failures, *unsure]))
    if unsure:
        raise Inconclusive(f"{len(unsure)} metric gate(s) INCONCLUSIVE (the test cannot tell; never a pass):\n  "
                           + "\n  ".join(unsure))


def _as_results(baseline: Results | str | Path) -> Results:
    from open_rag_eval.api.results import Results

    return baseline if isinstance(baseline, Results) else Results.from_folder(baseline)


def _verdicts(results: Results, baseline: Results, metrics: list[str] | None, max_drop: float,
              fail_if_drop: dict[str, float], seed: int, resamples: int) -> list[tuple[str, str]]:
    """(outcome, line) for each compared metric that did not PASS."""
    from open_rag_eval.core.catalogue import lower_is_better
    from open_rag_eval.report.compare import default_metrics
    from open_rag_eval.scoring.verdict import PASS, Rule

    if metrics is None:
        metrics = default_metrics(baseline.result_set("baseline"), results.result_set("new"))
    rules = {m: Rule(max_drop=max_drop, fail_if_drop=fail_if_drop.get(m)) for m in metrics}
    comparison = results.comparison(baseline, metrics, seed=seed, resamples=resamples, rules=rules)
    lines: list[tuple[str, str]] = []
    for metric, verdict in comparison.verdicts.items():
        if verdict.outcome != PASS:
            lines.append((verdict.outcome, f"{verdict} (new against the baseline); worst queries: "
                                           f"{_worst(results, metric, lower_is_better(metric))}"))
    return lines


def _worst(results: Results, metric: str, lower: bool) -> str:
    """The ``WORST`` queries with the worst mean over their runs: ``q7 (0.1), q2 (0.25)``."""
    values: dict[str, list[float]] = {}
    for row in results.rows():
        value = row.get(metric)
        if isinstance(value, float) and not math.isnan(value):
            values.setdefault(row["query_id"], []).append(value)
    means = {query: math.fsum(v) / len(v) for query, v in values.items()}
    order = sorted(means, key=lambda q: (-means[q] if lower else means[q], q))[:WORST]
    return ", ".join(f"{query} ({means[query]:.3g})" for query in order) or "none has a value"


def _failed(results: Results, metric: str) -> str:
    reasons = [row.get(f"{metric}.error") for row in results.rows() if row.get(f"{metric}.error")]
    return f"; first reason: {reasons[0]}" if reasons else ""
