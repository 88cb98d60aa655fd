"""`open-rag-eval compare`: not built yet (its issue is open)."""

from __future__ import annotations

import argparse

from open_rag_eval.errors import OpenRagEvalError

HELP = "(not built yet)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs="*")


def run(args: argparse.Namespace) -> int:
    raise OpenRagEvalError("'compare' is not built yet")
