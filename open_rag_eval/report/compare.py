"""Paired comparison of two evaluations (A = baseline, B = candidate) over the queries they share.

Unit of pairing: the query. Each side's value for a query is the mean over that query's runs (runs of one
query are repeated measurements, not independent samples, and run numbers do not pair across systems);
cross-run metrics (``run=all`` rows) have one value per query already. A query with no value on one side
for a metric is left out of that metric's test and counted (``n_missing``); queries present in only one
evaluation are listed, never silently dropped.

Per metric: mean difference B - A, 95% bootstrap CI and paired sign-flip permutation p-value (seeded;
``scoring.paired.paired_test``), Holm correction across the metrics compared (``scoring.paired.holm``), and the
verdict of ``scoring.verdict`` -- PASS, REGRESSION or INCONCLUSIVE, with its reason -- under each metric's rule (the
gates', else no drop allowed). By default the metrics compared are the headline ones (``default_metrics``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.store.csv_cells import csv_text
from open_rag_eval.store.fileio import atomic_write_text
from open_rag_eval.report.data import ResultSet, ScoreTable
from open_rag_eval.core.catalogue import lower_is_better
from open_rag_eval.scoring.paired import holm, paired_test
from open_rag_eval.scoring.verdict import Rule, Verdict, decide

__all__ = ["Comparison", "compare", "default_metrics", "format_table", "gate", "write_compare_csv"]

COLUMNS = ("metric", "n", "n_missing", "mean_a", "mean_b", "diff", "ci95_low", "ci95_high", "p_value",
           "p_holm_significant", "direction", "verdict", "reason")
ALPHA = 0.05


@dataclass
class Comparison:
    label_a: str
    label_b: str
    rows: list[dict[str, Any]]
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # metric -> why it was not compared
    verdicts: dict[str, Verdict] = field(default_factory=dict)  # metric -> verdict, compared or not


Results = ResultSet | ScoreTable  # a run read whole, or its values by metric and query (``loader.scan_results``)


def _default_metrics(a: Results, b: Results) -> list[str]:
    shared = [m for m in a.metrics if m in set(b.metrics)]
    return [m for m in shared if not m.endswith((".n_invalid", ".n_failed", ".n_defaulted", ".n_unparsed"))]


def default_metrics(a: Results, b: Results) -> list[str]:
    """What ``compare`` tests unless told: the headline metrics both evaluations have (A's config
    ``report.headline``, else the report's defaults), so Holm corrects over a handful of metrics, not hundreds.
    Every shared metric when neither has a headline metric (e.g. CSVs with other names)."""
    from open_rag_eval.report.headline import headline_metrics, report_options

    shared = _default_metrics(a, b)
    return headline_metrics(shared, report_options(a.manifest)[0]) or shared


def compare(a: Results, b: Results, metrics: Sequence[str] | None = None, *, seed: int = 0,
            resamples: int = 10_000, rules: Mapping[str, Rule] | None = None) -> Comparison:
    """Compare B against A metric by metric over shared queries (see the module docstring); ``rules``: each
    gated metric's allowed drop (``scoring.verdict.Rule``), the others allow none."""
    queries_a, queries_b = a.queries(), b.queries()
    result = Comparison(a.label, b.label, [], sorted(queries_a - queries_b), sorted(queries_b - queries_a))
    rules = rules or {}
    tested: list[tuple[str, Any, int, int]] = []
    for metric in metrics or _default_metrics(a, b):
        means_a, means_b = a.query_means(metric), b.query_means(metric)
        shared = sorted(set(means_a) & set(means_b))
        if not shared:
            result.skipped[metric] = ("B has no value for it" if means_a and not means_b
                                      else "no query has a value on both sides")
            result.verdicts[metric] = decide(metric, None, lower=lower_is_better(metric),
                                             no_value=result.skipped[metric] if means_a and not means_b else "")
            continue
        both = queries_a & queries_b
        test = paired_test([means_a[q] for q in shared], [means_b[q] for q in shared], seed=seed, resamples=resamples)
        changed = sum(1 for q in shared if abs(means_b[q] - means_a[q]) > 1e-12)
        tested.append((metric, test, len(both) - len(shared), changed))
    rejected = holm([test.p_value for _, test, _, _ in tested], ALPHA)
    for (metric, test, missing, changed), significant in zip(tested, rejected):
        lower = lower_is_better(metric)
        verdict = decide(metric, test, lower=lower, rule=rules.get(metric, Rule()), significant=significant,
                         alpha=ALPHA, n_changed=changed, tests=len(tested))
        result.verdicts[metric] = verdict
        better = significant and test.diff * (-1.0 if lower else 1.0) > 0
        result.rows.append({
            "metric": metric, "n": test.n, "n_missing": missing, "mean_a": test.mean_a, "mean_b": test.mean_b,
            "diff": test.diff, "ci95_low": test.ci95_low, "ci95_high": test.ci95_high, "p_value": test.p_value,
            "p_holm_significant": significant, "direction": "lower is better" if lower else "higher is better",
            "verdict": verdict.outcome, "reason": verdict.reason, "significant": significant, "better": better,
            "worse": significant and not better and abs(test.diff) > 0, "changed": changed,
        })
    return result


def gate(comparison: Comparison, metric: str) -> Verdict:
    """The verdict on one gated metric; a metric that was not asked for is INCONCLUSIVE (nothing to tell)."""
    return comparison.verdicts.get(metric) or decide(metric, None, lower=lower_is_better(metric))


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
        rows.append([metric] + [""] * (len(COLUMNS) - 3) + [comparison.verdicts[metric].outcome, f"not compared: {reason}"])
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
        better = " (B better)" if r["better"] else ""
        lines.append(f"{r['metric']:<30} {r['n']:>4} {r['mean_a']:>8.3f} {r['mean_b']:>8.3f} {r['diff']:>+8.3f} "
                     f"{ci:>19} {r['p_value']:>8.4f}  {r['verdict']}{better}{mark}")
    lines.append("* significant at 0.05 after Holm correction across the metrics above; pairs = shared queries "
                 "(mean over runs)")
    for r in comparison.rows:
        if r["verdict"] != "PASS":
            lines.append(f"{r['verdict']} {r['metric']}: {r['reason']}")
    for metric, reason in comparison.skipped.items():
        lines.append(f"not compared: {metric} ({reason}): {comparison.verdicts[metric].outcome}")
    if comparison.only_a:
        lines.append(f"{len(comparison.only_a)} queries only in A: {', '.join(comparison.only_a[:20])}"
                     + (" ..." if len(comparison.only_a) > 20 else ""))
    if comparison.only_b:
        lines.append(f"{len(comparison.only_b)} queries only in B: {', '.join(comparison.only_b[:20])}"
                     + (" ..." if len(comparison.only_b) > 20 else ""))
    return "\n".join(lines)
