"""`open-rag-eval eval --config FILE`: evaluate RAG outputs and write the results directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


HELP = "evaluate RAG outputs (CSV/JSONL or a connector) and write results, summary, manifest and report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="YAML config")
    parser.add_argument("--output-dir", type=Path, help="results folder (overrides output_dir)")
    parser.add_argument("--limit", type=int, metavar="N", help="evaluate only the first N queries (all their runs)")
    parser.add_argument("--dry-run", action="store_true", help="validate and estimate judge calls and cost; call nothing")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.console import ProgressDisplay, print_plan, print_summary
    from open_rag_eval.progress import Progress

    if args.dry_run:
        from open_rag_eval import pipeline
        from open_rag_eval.config import load_config

        loaded = load_config(args.config)
        outputs = pipeline.load_outputs(loaded, args.limit)
        print_plan(loaded, outputs, pipeline.plan(loaded, outputs))
        return 0
    progress = Progress()
    progress.begin("read", "config")
    with ProgressDisplay(progress, stream=sys.stderr):  # on screen before the imports below take their time
        from open_rag_eval import pipeline
        from open_rag_eval.config import load_config

        loaded = load_config(args.config)
        report = pipeline.run(loaded, output_dir=args.output_dir, limit=args.limit, progress=progress)
    print_summary(report)
    return 0
