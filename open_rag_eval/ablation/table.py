"""The comparison of an ablation: every variant against the baseline variant, metric by metric, and the best
variant per metric.

Per (variant, metric): the paired comparison ``compare`` makes (queries paired, a query's value the mean over its
runs; mean difference variant - baseline, 95% bootstrap CI, sign-flip permutation p-value), then the Holm
correction across every (variant, metric) test of the table at ``alpha`` -- one family, so trying more variants
does not make a chance difference look significant -- and the verdict every gate gives (``scoring.verdict``):
REGRESSION (significantly worse than the baseline), INCONCLUSIVE (worse, but the test cannot confirm it, with why),
PASS (not worse; "better" when significantly better). The best variant of a metric has the highest mean over its
queries (the lowest for lower-is-better metrics); ties are all named.

``gate``: the verdicts of the gated metrics (``ablate --fail-if-worse``), one per variant other than the baseline,
under each metric's rule (``scoring.verdict.Rule``: the allowed drop); the command exits with the worst of them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from open_rag_eval.report.compare import compare, default_metrics
from open_rag_eval.report.data import ResultSet
from open_rag_eval.core.catalogue import lower_is_better
from open_rag_eval.scoring.paired import PairedResult, holm
from open_rag_eval.scoring.verdict import Rule, Verdict, decide

__all__ = ["COLUMNS", "AblationTable", "ablation_table", "gate", "query_mean"]

COLUMNS = ("variant", "metric", "n", "mean_baseline", "mean_variant", "diff", "ci95_low", "ci95_high", "p_value",
           "significant", "verdict", "reason")


@dataclass
class AblationTable:
    baseline: str
    variants: list[str]  # every variant, the baseline included, in grid order
    metrics: list[str]
    means: dict[str, dict[str, float | None]]  # variant -> metric -> mean over its queries
    rows: list[dict[str, Any]] = field(default_factory=list)  # one per (variant other than the baseline, metric)
    best: dict[str, dict[str, Any]] = field(default_factory=dict)  # metric -> {"variants", "mean", "note"}
    skipped: list[tuple[str, str, str]] = field(default_factory=list)  # (variant, metric, why not compared)
    skipped_verdicts: dict[tuple[str, str], str] = field(default_factory=dict)  # (variant, metric) -> its verdict
    alpha: float = 0.05
    verdicts: dict[tuple[str, str], Verdict] = field(default_factory=dict)  # (variant, metric), compared or not
    simulated: bool = False  # a variant's run was judged by the simulated judge (as its result files say)


def query_mean(result: ResultSet, metric: str) -> float | None:
    """The mean over queries of each query's value (the mean over its runs); None when no query has one."""
    means = list(result.query_means(metric).values())  # a set read from a folder: its values on disk, not its rows
    return math.fsum(means) / len(means) if means else None


def _metrics(baseline: ResultSet, others: Sequence[ResultSet]) -> list[str]:
    """The headline metrics every variant has (see ``report.compare.default_metrics``)."""
    chosen = default_metrics(baseline, others[0]) if others else []
    return [m for m in chosen if all(m in default_metrics(baseline, other) for other in others[1:])]


def _verdict(row: dict[str, Any], significant: bool, tests: int, alpha: float, rule: Rule) -> Verdict:
    test = PairedResult(row["n"], row["mean_a"], row["mean_b"], row["diff"], row["ci95_low"], row["ci95_high"],
                        row["p_value"])
    return decide(row["metric"], test, lower=lower_is_better(row["metric"]), rule=rule, significant=significant,
                  alpha=alpha, n_changed=row["changed"], tests=tests)


def _verdict_cells(row: dict[str, Any], significant: bool, verdict: Verdict) -> dict[str, Any]:
    better = significant and (row["diff"] < 0 if lower_is_better(row["metric"]) else row["diff"] > 0)
    return {"verdict": verdict.outcome + (" (better)" if better else ""), "reason": verdict.reason, "better": better}


def gate(table: AblationTable, metrics: Sequence[str]) -> list[Verdict]:
    """The verdict of each gated metric for each variant other than the baseline, named ``metric (variant)``."""
    return [replace(verdict, metric=f"{metric} ({variant})") for metric in metrics for variant in table.variants
            if variant != table.baseline and (verdict := table.verdicts.get((variant, metric))) is not None]


def _best(table: AblationTable, metric: str) -> dict[str, Any]:
    scored = [(v, mean) for v in table.variants if (mean := table.means[v][metric]) is not None]
    if not scored:
        return {"variants": [], "mean": None, "note": "no variant has a value"}
    pick = min if lower_is_better(metric) else max
    top = pick(mean for _, mean in scored)
    winners = [v for v, mean in scored if math.isclose(mean, top, rel_tol=0, abs_tol=1e-12)]
    if table.baseline in winners:
        note = "the baseline" + (" (tied)" if len(winners) > 1 else "")
    else:
        row = next((r for r in table.rows if r["variant"] == winners[0] and r["metric"] == metric), None)
        note = ("significantly better than the baseline" if row and row["better"]
                else "not significantly different from the baseline")
    return {"variants": winners, "mean": top, "note": note}


def ablation_table(baseline: ResultSet, variants: Sequence[ResultSet], metrics: Sequence[str] | None = None, *,
                   alpha: float = 0.05, seed: int = 0, resamples: int = 10_000,
                   rules: Mapping[str, Rule] | None = None) -> AblationTable:
    """Compare each of ``variants`` (labelled by name; the baseline among them or not) with ``baseline``;
    ``rules``: each gated metric's allowed drop (compared even when not among ``metrics``), the others allow none."""
    others = [v for v in variants if v.label != baseline.label]
    rules = rules or {}
    chosen = list(metrics) if metrics else _metrics(baseline, others)
    chosen += [metric for metric in rules if metric not in chosen]
    labels = [v.label for v in variants]
    ordered = labels if baseline.label in labels else [baseline.label, *labels]
    sets = {baseline.label: baseline, **{v.label: v for v in others}}
    table = AblationTable(baseline.label, ordered, chosen,
                          {label: {m: query_mean(sets[label], m) for m in chosen} for label in ordered}, alpha=alpha,
                          simulated=any(bool(s.simulated) for s in sets.values()))
    tested = []
    for other in others:
        comparison = compare(baseline, other, chosen, seed=seed, resamples=resamples, rules=rules)
        table.skipped += [(other.label, metric, why) for metric, why in comparison.skipped.items()]
        table.skipped_verdicts.update({(other.label, m): comparison.verdicts[m].outcome for m in comparison.skipped})
        table.verdicts.update({(other.label, m): comparison.verdicts[m] for m in comparison.skipped})
        tested += [(other.label, row) for row in comparison.rows]
    rejected = holm([row["p_value"] for _, row in tested], alpha)
    for (label, row), significant in zip(tested, rejected):
        verdict = _verdict(row, significant, len(tested), alpha, rules.get(row["metric"], Rule()))
        table.verdicts[(label, row["metric"])] = verdict
        table.rows.append({"variant": label, "metric": row["metric"], "n": row["n"], "mean_baseline": row["mean_a"],
                           "mean_variant": row["mean_b"], "diff": row["diff"], "ci95_low": row["ci95_low"],
                           "ci95_high": row["ci95_high"], "p_value": row["p_value"], "significant": significant,
                           **_verdict_cells(row, significant, verdict)})
    table.best = {metric: _best(table, metric) for metric in chosen}
    return table
