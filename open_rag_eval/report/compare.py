"""Paired comparison of two evaluations (A = baseline, B = candidate) over the queries they share.

Unit of pairing: the query. Each side's value for a query is the mean over that query's runs (runs of one
query are repeated measurements, not independent samples, and run numbers do not pair across systems);
cross-run metrics (``run=all`` rows) have one value per query already. A query with no value on one side
for a metric is left out of that metric's test and counted (``n_missing``); queries present in only one
evaluation are listed, never silently dropped.

Per metric: mean difference B - A, 95% bootstrap CI and paired sign-flip permutation p-value (seeded;
``scoring.paired.paired_test``), Holm correction across the metrics compared (``scoring.paired.holm``). By
default the metrics compared are the headline ones (``default_metrics``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.store.csv_cells import csv_text
from open_rag_eval.store.fileio import atomic_write_text
from open_rag_eval.report.data import ResultSet
from open_rag_eval.core.catalogue import lower_is_better
from open_rag_eval.scoring.paired import holm, paired_test

__all__ = ["Comparison", "compare", "default_metrics", "format_table", "worse_than", "write_compare_csv"]

COLUMNS = ("metric", "n", "n_missing", "mean_a", "mean_b", "diff", "ci95_low", "ci95_high", "p_value",
           "p_holm_significant", "direction", "verdict")


@dataclass
class Comparison:
    label_a: str
    label_b: str
    rows: list[dict[str, Any]]
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # metric -> why it was not compared


def _query_means(result: ResultSet, metric: str) -> dict[str, float]:
    """Per query: the mean of its run values, or its cross-run value."""
    grouped: dict[str, list[float]] = {}
    for row in result.rows:
        value = row.scores.get(metric)
        if value is not None:
            grouped.setdefault(row.query_id, []).append(value)
    return {query: math.fsum(values) / len(values) for query, values in grouped.items()}


def _queries(result: ResultSet) -> set[str]:
    return {row.query_id for row in result.rows}


def _default_metrics(a: ResultSet, b: ResultSet) -> list[str]:
    shared = [m for m in a.metrics if m in set(b.metrics)]
    return [m for m in shared if not m.endswith((".n_invalid", ".n_failed", ".n_defaulted", ".n_unparsed"))]


def default_metrics(a: ResultSet, b: ResultSet) -> list[str]:
    """What ``compare`` tests unless told: the headline metrics both evaluations have (A's config
    ``report.headline``, else the report's defaults), so Holm corrects over a handful of metrics, not hundreds.
    Every shared metric when neither has a headline metric (e.g. CSVs with other names)."""
    from open_rag_eval.report.headline import headline_metrics, report_options

    shared = _default_metrics(a, b)
    return headline_metrics(shared, report_options(a.manifest)[0]) or shared


def _verdict(diff: float, significant: bool, metric: str) -> tuple[bool, bool, str]:
    better_sign = -1.0 if lower_is_better(metric) else 1.0
    better = significant and diff * better_sign > 0
    worse = significant and diff * better_sign < 0
    return better, worse, "B better" if better else "B worse" if worse else "no significant difference"


def compare(a: ResultSet, b: ResultSet, metrics: Sequence[str] | None = None, *, seed: int = 0,
            resamples: int = 10_000) -> Comparison:
    """Compare B against A metric by metric over shared queries (see the module docstring)."""
    queries_a, queries_b = _queries(a), _queries(b)
    result = Comparison(a.label, b.label, [], sorted(queries_a - queries_b), sorted(queries_b - queries_a))
    tested: list[tuple[str, Any, int]] = []
    for metric in metrics or _default_metrics(a, b):
        means_a, means_b = _query_means(a, metric), _query_means(b, metric)
        shared = sorted(set(means_a) & set(means_b))
        if not shared:
            result.skipped[metric] = "no query has a value on both sides"
            continue
        both = queries_a & queries_b
        test = paired_test([means_a[q] for q in shared], [means_b[q] for q in shared], seed=seed, resamples=resamples)
        tested.append((metric, test, len(both) - len(shared)))
    rejected = holm([test.p_value for _, test, _ in tested])
    for (metric, test, missing), significant in zip(tested, rejected):
        better, worse, verdict = _verdict(test.diff, significant, metric)
        result.rows.append({
            "metric": metric, "n": test.n, "n_missing": missing, "mean_a": test.mean_a, "mean_b": test.mean_b,
            "diff": test.diff, "ci95_low": test.ci95_low, "ci95_high": test.ci95_high, "p_value": test.p_value,
            "p_holm_significant": significant, "direction": "lower is better" if lower_is_better(metric)
            else "higher is better", "verdict": verdict, "significant": significant, "better": better, "worse": worse,
        })
    return result


def worse_than(comparison: Comparison, metric: str, threshold: float = 0.0) -> tuple[bool, str]:
    """Did B get worse than A on ``metric`` by more than ``threshold``, significantly after Holm?"""
    for row in comparison.rows:
        if row["metric"] == metric:
            drop = -row["diff"] if not lower_is_better(metric) else row["diff"]
            triggered = row["significant"] and drop > threshold
            return triggered, (f"{metric}: B - A = {row['diff']:+.4f} (95% CI {row['ci95_low']:+.4f} .. "
                               f"{row['ci95_high']:+.4f}, p={row['p_value']:.4g}, "
                               f"{'significant' if row['significant'] else 'not significant'} after Holm), "
                               f"threshold {threshold:g}")
    reason = comparison.skipped.get(metric, "not present in both evaluations")
    return False, f"{metric}: not compared ({reason})"


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def write_compare_csv(comparison: Comparison, path: Path) -> Path:
    """``compare.csv``: one row per metric, then one row per query present in only one evaluation."""
    rows = [[_cell(row[c]) for c in COLUMNS] for row in comparison.rows]
    for metric, reason in comparison.skipped.items():
        rows.append([metric] + [""] * (len(COLUMNS) - 2) + [f"not compared: {reason}"])
    for side, queries in (("A", comparison.only_a), ("B", comparison.only_b)):
        for query in queries:
            rows.append([f"query_only_in_{side}:{query}"] + [""] * (len(COLUMNS) - 1))
    atomic_write_text(path, csv_text(COLUMNS, rows))
    return path


def format_table(comparison: Comparison) -> str:
    """The console table."""
    head = f"{'metric':<30} {'n':>4} {'A':>8} {'B':>8} {'B-A':>8} {'95% CI':>19} {'p':>8}  verdict"
    lines = [f"A = {comparison.label_a}", f"B = {comparison.label_b}", head, "-" * len(head)]
    for r in comparison.rows:
        ci = f"[{r['ci95_low']:+.3f},{r['ci95_high']:+.3f}]"
        mark = " *" if r["significant"] else ""
        lines.append(f"{r['metric']:<30} {r['n']:>4} {r['mean_a']:>8.3f} {r['mean_b']:>8.3f} {r['diff']:>+8.3f} "
                     f"{ci:>19} {r['p_value']:>8.4f}  {r['verdict']}{mark}")
    lines.append("* significant at 0.05 after Holm correction across the metrics above; pairs = shared queries "
                 "(mean over runs)")
    for metric, reason in comparison.skipped.items():
        lines.append(f"not compared: {metric} ({reason})")
    if comparison.only_a:
        lines.append(f"{len(comparison.only_a)} queries only in A: {', '.join(comparison.only_a[:20])}"
                     + (" ..." if len(comparison.only_a) > 20 else ""))
    if comparison.only_b:
        lines.append(f"{len(comparison.only_b)} queries only in B: {', '.join(comparison.only_b[:20])}"
                     + (" ..." if len(comparison.only_b) > 20 else ""))
    return "\n".join(lines)
