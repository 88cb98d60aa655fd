"""`open-rag-eval validate --config FILE`: check a config (and its input file) without doing any work."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path


HELP = "validate a config and its input file; judge nothing"

log = logging.getLogger("open_rag_eval")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="YAML config")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval import pipeline
    from open_rag_eval.config import load_config

    loaded = load_config(args.config)
    outputs = pipeline.load_outputs(loaded)
    queries = len({o.query_id for o in outputs})
    kinds = ", ".join(spec.type for spec in loaded.evaluators)
    source = f"{len(outputs)} outputs of {queries} queries" if loaded.config.input else "outputs from the connector"
    log.info("%s: valid (%s; evaluators: %s)", args.config, source, kinds)
    return 0
