"""`open-rag-eval compare A B`: paired comparison of two evaluations with significance tests."""

from __future__ import annotations

import argparse
import logging
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from open_rag_eval.report.loader import ScoreTable

from open_rag_eval.cli.terminal import echo
from open_rag_eval.core.errors import EXIT_INCONCLUSIVE

HELP = ("compare evaluation B against baseline A over their shared queries (mean over runs per query): "
        "mean difference, 95%% bootstrap CI, permutation p-value, Holm correction across the metrics compared "
        "(by default the headline metrics); writes compare.csv and compare.png")

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("a", metavar="A",
                        help="baseline: result directory or CSV (ours or from vectara's open-rag-eval)")
    parser.add_argument("b", metavar="B", help="candidate: result directory or CSV")
    parser.add_argument("--metrics", nargs="+", default=None, metavar="METRIC",
                        help="metrics to compare, comma- or space-separated; 'all' for every metric both have "
                        "(default: the headline metrics both have: A's config report.headline, else umbrela.mean, "
                        "nuggets.vital_strict, nuggets.weighted, citation.f1, hhem.score, no_answer.answered, "
                        "golden nDCG and recall)")
    parser.add_argument("-o", "--output", "--output-dir", dest="output_dir", default=".", metavar="DIR", help="where compare.csv and compare.png go (and compare_corrected.csv when both runs were "
                        "evaluated with people's labels: docs/calibration.md) (default: .)")
    parser.add_argument("--fail-if-worse", action="append", default=[], metavar="METRIC[:THRESHOLD]",
                        help="gate on METRIC, repeatable. Without THRESHOLD: exit 1 (REGRESSION) when B is "
                        "significantly worse than A (after Holm), exit 7 (INCONCLUSIVE) when B is worse but the test "
                        "cannot confirm it. With THRESHOLD: an absolute rule, exit 1 when B dropped by more than "
                        "THRESHOLD whatever the p-value")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap and permutation test")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap / permutation resamples")


def parse_gates(specs: list[str], flag: str = "--fail-if-worse") -> list[tuple[str, float | None]]:
    from open_rag_eval.core.errors import InputError
    from open_rag_eval.report.peer import metric_name

    gates = []
    for spec in specs:
        name, _, threshold = spec.partition(":")
        try:
            value: float | None = float(threshold) if threshold else None
        except ValueError:
            value = math.nan
        if value is not None and (not math.isfinite(value) or value < 0):
            raise InputError(f"threshold must be a finite number >= 0, got {threshold!r}", field=flag)
        gates.append((metric_name(name.strip()), value))
    return gates


def _check_gates(gates: list[tuple[str, float | None]], a: ScoreTable, b: ScoreTable) -> None:
    """A gate on a metric that A or B does not have could never trip: refuse it, naming the close names."""
    import difflib

    from open_rag_eval.core.errors import InputError

    have_a, have_b = set(a.metrics), set(b.metrics)
    for metric, _ in gates:
        missing = [label for label, have in (("A", have_a), ("B", have_b)) if metric not in have]
        if missing:
            close = difflib.get_close_matches(metric, sorted(have_a | have_b), n=5, cutoff=0.5)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise InputError(f"no metric '{metric}' in {' and '.join(missing)}, so this gate could never trip{hint}",
                             field="--fail-if-worse")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.report.loader import scan_results
    from open_rag_eval.scoring.verdict import Rule

    gates = parse_gates(args.fail_if_worse)
    rules = {m: Rule() if amount is None else Rule(max_drop=amount, fail_if_drop=amount) for m, amount in gates}
    a = scan_results(Path(args.a))  # the values by metric and query, on disk: a run of any size
    try:
        b = scan_results(Path(args.b))
        try:
            return _compare(args, a, b, gates, rules)
        finally:
            b.close()
    finally:
        a.close()


def _compare_corrected(a: Path, b: Path, out: Path) -> None:
    """Runs corrected with people's labels (corrected.json in both folders): the corrected difference of each metric,
    printed and written to compare_corrected.csv (docs/calibration.md)."""
    from open_rag_eval.run.corrected import DIFFERENCE_COLUMNS, corrected_differences, read_corrected
    from open_rag_eval.store.csv_cells import csv_text
    from open_rag_eval.store.fileio import atomic_write_text

    values = [read_corrected(folder) if folder.is_dir() else None for folder in (a, b)]
    if values[0] is None or values[1] is None:
        if values[0] is not None or values[1] is not None:
            log.warning("no corrected differences: only %s was evaluated with people's labels (eval --labels)",
                        "A" if values[0] is not None else "B")
        return
    found = corrected_differences(values[0], values[1])
    lines = [f"{'corrected B - A':<26} {'diff [95% CI]':<28} {'p':>7} {'judge diff':>10} {'labelled':>8} "
             f"{'unlabelled':>10}"]
    for d in found:
        cell = "—" if d.diff is None else f"{d.diff.value:+.3f} [{d.diff.low:+.3f}, {d.diff.high:+.3f}]"
        p = "" if d.p_value is None else f"{d.p_value:.3g}"
        judge = "" if d.judge_diff is None else f"{d.judge_diff:+.3f}"
        lines.append(f"{d.metric:<26} {cell:<28} {p:>7} {judge:>10} {d.n_labelled:>8} {d.n_unlabelled:>10}  "
                     f"{d.note}".rstrip())
    echo("\n".join(lines))
    out.mkdir(parents=True, exist_ok=True)
    rows = [["" if v is None else f"{v:.6g}" if isinstance(v, float) else v for v in d.row()] for d in found]
    atomic_write_text(out / "compare_corrected.csv", csv_text(DIFFERENCE_COLUMNS, rows))
    log.info("wrote %s", out / "compare_corrected.csv")


def _compare(args: argparse.Namespace, a: ScoreTable, b: ScoreTable, gates: list[tuple[str, float | None]],
             rules: dict[str, Any]) -> int:
    from open_rag_eval.core.errors import MissingDependency
    from open_rag_eval.report import compare as cmp
    from open_rag_eval.report.peer import metric_name
    from open_rag_eval.scoring.verdict import INCONCLUSIVE, REGRESSION, worst

    _check_gates(gates, a, b)
    if a.label == b.label:
        a.label, b.label = str(args.a), str(args.b)
    names = [p.strip() for item in args.metrics or [] for p in item.split(",") if p.strip()]
    if names == ["all"]:
        metrics = None
    else:
        metrics = [metric_name(n) for n in names] if names else cmp.default_metrics(a, b)
        metrics += [m for m, _ in gates if m not in metrics]
    comparison = cmp.compare(a, b, metrics, seed=args.seed, resamples=args.resamples, rules=rules)
    echo(cmp.format_table(comparison))
    out = Path(args.output_dir)
    _compare_corrected(Path(args.a), Path(args.b), out)
    log.info("wrote %s", cmp.write_compare_csv(comparison, out / "compare.csv"))
    if comparison.rows:
        try:
            from open_rag_eval.report.plots import plot_forest

            log.info("wrote %s", plot_forest(comparison.rows, out / "compare.png", sets=(a, b)))
        except MissingDependency as error:
            log.warning("no compare.png: %s", error)
    verdicts = [cmp.gate(comparison, metric) for metric, _ in gates]
    outcome = worst(verdicts)  # each verdict and its reason are in the table above
    if verdicts:
        named = ", ".join(f"{v.metric} {v.outcome}" for v in verdicts)
        log.log(logging.INFO if outcome == "PASS" else logging.ERROR, "gates: %s (%s)", outcome, named)
    return 1 if outcome == REGRESSION else EXIT_INCONCLUSIVE if outcome == INCONCLUSIVE else 0
