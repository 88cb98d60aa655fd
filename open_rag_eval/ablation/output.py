"""What an ablation writes beside its variants' folders: ``ablation.csv`` (one row per variant and metric),
``ablation.md`` (the same as the console shows: means, tests against the baseline, best variant per metric),
``ablation.json`` (all of it, with each variant's settings and folder) and ``ablation.png`` (a boxplot per metric)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.ablation.table import COLUMNS, AblationTable
from open_rag_eval.ablation.variants import Variant
from open_rag_eval.store.csv_cells import csv_text
from open_rag_eval.store.fileio import atomic_write_text

__all__ = ["markdown", "write_csv", "write_json", "write_markdown"]


def _number(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}f}"


def _p(value: float) -> str:
    return f"{value:.4f}" if value >= 0.0001 else f"{value:.1e}"


def markdown(table: AblationTable, *, incomplete: Sequence[str] = ()) -> str:
    """The table for people: each variant's means, its paired tests against the baseline, the best per metric;
    ``incomplete`` names the variants whose run finished incomplete (said first)."""
    lines = [f"# Ablation: {len(table.variants)} variants, baseline `{table.baseline}`", ""]
    if table.simulated:
        lines += ["**SIMULATED JUDGE**: judged numbers come from the loopback simulated judge.", ""]
    if incomplete:
        lines += [f"**INCOMPLETE**: {', '.join(incomplete)}: a judged metric failed for every output of the run "
                  "(see its report.html); a missing mean there is a failure, not a zero. Re-run to retry.", ""]
    lines += ["## Means (over queries; a query's value is the mean over its runs)", "",
              "| variant | " + " | ".join(table.metrics) + " |", "|---|" + "---:|" * len(table.metrics)]
    for variant in table.variants:
        mark = " (baseline)" if variant == table.baseline else ""
        lines.append(f"| {variant}{mark} | " + " | ".join(_number(table.means[variant][m]) for m in table.metrics)
                     + " |")
    n_tests = len(table.rows)
    lines += ["", f"## Against the baseline (paired over queries; Holm across all {n_tests} tests at alpha "
              f"{table.alpha:g})", "", "| variant | metric | n | baseline | variant | diff | 95% CI | p | verdict |",
              "|---|---|---:|---:|---:|---:|---|---:|---|"]
    for row in table.rows:
        lines.append(f"| {row['variant']} | {row['metric']} | {row['n']} | {row['mean_baseline']:.4f} | "
                     f"{row['mean_variant']:.4f} | {row['diff']:+.4f} | [{row['ci95_low']:+.4f}, "
                     f"{row['ci95_high']:+.4f}] | {_p(row['p_value'])} | {row['verdict']}"
                     f"{' *' if row['significant'] else ''} |")
    lines += ["", "## Best variant per metric", "", "| metric | best | mean | note |", "|---|---|---:|---|"]
    for metric, best in table.best.items():
        lines.append(f"| {metric} | {', '.join(best['variants']) or '–'} | {_number(best['mean'])} | {best['note']} |")
    for variant, metric, why in table.skipped:
        verdict = table.skipped_verdicts.get((variant, metric), "")
        lines.append(f"\nnot compared: {variant} on {metric} ({why}): {verdict}")
    return "\n".join(lines) + "\n"


def write_markdown(table: AblationTable, path: Path, *, incomplete: Sequence[str] = ()) -> Path:
    atomic_write_text(path, markdown(table, incomplete=incomplete))
    return path


def _cell(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)


def write_csv(table: AblationTable, path: Path) -> Path:
    """One row per (variant, metric): the baseline's rows carry its mean only (verdict ``baseline``)."""
    rows = [[table.baseline, metric, "", "", table.means[table.baseline][metric], "", "", "", "", "", "baseline", ""]
            for metric in table.metrics]
    rows += [[row[column] for column in COLUMNS] for row in table.rows]
    rows += [[variant, metric, "", "", "", "", "", "", "", "", table.skipped_verdicts.get((variant, metric), ""),
              f"not compared: {why}"] for variant, metric, why in table.skipped]
    atomic_write_text(path, csv_text(COLUMNS, [[_cell(v) for v in row] for row in rows]))
    return path


def write_json(table: AblationTable, variants: Sequence[Variant], path: Path, *,
               incomplete: Sequence[str] = ()) -> Path:
    data = {"baseline": table.baseline, "alpha": table.alpha, "simulated": table.simulated, "metrics": table.metrics,
            "variants": [{"name": v.name, "settings": v.settings, "baseline": v.baseline,
                          "folder": v.folder.name, "complete": v.name not in incomplete} for v in variants],
            "means": table.means, "rows": table.rows, "best": table.best,
            "skipped": [{"variant": v, "metric": m, "reason": why} for v, m, why in table.skipped]}
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return path
