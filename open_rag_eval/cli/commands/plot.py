"""`open-rag-eval plot`: boxplots of TREC metrics, or per-query consistency across runs, as one PNG.

Each file is read as a stream keeping only the values of the metrics it may draw (``load_results(metrics=...)``):
memory holds the values plotted, a float each, and the query ids, not the rows."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

HELP = ("plot results (our result directories or results.csv files, or the TREC/consistency CSVs of vectara's "
        "open-rag-eval) as a PNG")

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="result directories or CSV files")
    parser.add_argument("-e", "--evaluator", required=True, choices=("trec", "generation", "consistency"),
                        help="trec / generation: boxplots per metric (their defaults) + %% answered; consistency: "
                        "per-query spread across runs")
    parser.add_argument("-o", "--output", "--output-file", dest="output_file", default="metrics_comparison.png",
                        metavar="FILE", help="PNG to write (default: metrics_comparison.png)")
    parser.add_argument("--metrics-to-plot", nargs="+", default=None, metavar="METRIC",
                        help="metric names, comma- or space-separated: ours (umbrela.mean) or those of vectara's "
                        "open-rag-eval (retrieval_score_mean_umbrela_score, consistency_bert_score)")
    parser.add_argument("--labels", default=None, help="comma-separated legend labels, one per FILE")


def _metrics(requested: list[str] | None) -> list[str] | None:
    if not requested:
        return None
    from open_rag_eval.report.peer import metric_name

    names = [metric_name(part.strip()) for item in requested for part in item.split(",") if part.strip()]
    return [name for name in dict.fromkeys(names) if name != "no_answer.answered"]


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.core.errors import InputError
    from open_rag_eval.report import plots
    from open_rag_eval.report.loader import load_results
    from open_rag_eval.core.catalogue import plot_defaults

    labels = [x.strip() for x in args.labels.split(",")] if args.labels else [None] * len(args.files)
    if len(labels) != len(args.files):
        raise InputError(f"--labels gives {len(labels)} labels for {len(args.files)} files", field="--labels")
    metrics = _metrics(args.metrics_to_plot)
    trec = args.evaluator in ("trec", "generation")
    defaults = plot_defaults(args.evaluator)
    drawn = [*(metrics or defaults), "no_answer.answered" if trec else "hhem.score"]
    sets = [load_results(Path(f), label, metrics=drawn) for f, label in zip(args.files, labels)]
    output = Path(args.output_file)
    if trec:
        if metrics is None:
            metrics = [m for m in defaults if any(s.values(m) for s in sets)] or list(defaults)
        title = "open-rag-eval: TREC metrics" if args.evaluator == "trec" else "open-rag-eval: generation metrics"
        plots.plot_trec(sets, metrics, output, title)
    else:
        if metrics is None:
            metrics = [m for m in defaults if any(s.per_query(m) for s in sets)] or ["hhem.score"]
        plots.plot_consistency(sets, metrics, output)
    log.info("plot written to %s", output)
    return 0
