"""`open-rag-eval merge DIR...`: join the shard folders of `eval --shard i/n` into one run's results."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

log = logging.getLogger("open_rag_eval")

HELP = ("join the shard folders written by `eval --shard i/n` (one config, one input, every shard once) into the "
        "results a single run writes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folders", nargs="+", type=Path, metavar="DIR", help="shard folders")
    parser.add_argument("-o", "--output", "--output-dir", dest="output_dir", type=Path, metavar="DIR", help="results folder (default: the config's output_dir)")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from open_rag_eval.cli.console import ProgressDisplay, print_summary
    from open_rag_eval.executors.array import merge_shards
    from open_rag_eval.core.progress import Progress

    progress = Progress()
    with ProgressDisplay(progress, stream=sys.stderr):
        report = asyncio.run(merge_shards(args.folders, args.output_dir, progress))
        if not report.status.complete:
            progress.outcome = "incomplete"
    print_summary(report, every_metric=getattr(args, "verbose", False))
    if not report.status.complete:
        from open_rag_eval.run.status import EXIT_INCOMPLETE

        log.error("%s", report.status.line(report.output_dir))
        return EXIT_INCOMPLETE
    return 0
