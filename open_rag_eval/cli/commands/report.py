"""`open-rag-eval report DIR [DIR ...]`: (re)write the report of a results directory, or compare several."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

HELP = ("write DIR/report.html (summary, diagnosis, per-query drill-down); with two or more DIRs, one page "
        "comparing them (the first is the baseline)")

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directories", nargs="+", metavar="DIR", help="output directories of 'open-rag-eval eval'")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE",
                        help="where the page goes (default: DIR/report.html for one DIR, ./compare.html for several)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the comparison's bootstrap and permutation test")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.report import write_report

    directories = [Path(d) for d in args.directories]
    if len(directories) == 1:
        if args.output is None:
            log.info("report written to %s", write_report(directories[0]))
        else:
            log.info("report written to %s", write_report(directories[0], args.output))
        return 0
    from open_rag_eval.report.comparison import write_comparison

    path = write_comparison(directories, args.output or Path("compare.html"), seed=args.seed)
    log.info("comparison of %d runs written to %s", len(directories), path)
    return 0
