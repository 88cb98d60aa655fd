"""`open-rag-eval report DIR`: (re)write the self-contained report.html of a results directory."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

HELP = "write DIR/report.html: one self-contained HTML file (summary, diagnosis, per-query drill-down)"

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", metavar="DIR", help="an output directory of 'open-rag-eval eval'")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.report import write_report

    log.info("report written to %s", write_report(Path(args.directory)))
    return 0
