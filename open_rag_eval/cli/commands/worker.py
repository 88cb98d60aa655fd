"""`open-rag-eval worker`: run queued jobs from the service's PostgreSQL database (scale out beside `serve`)."""

from __future__ import annotations

import argparse
from pathlib import Path

HELP = "run jobs from the service's shared PostgreSQL queue (database_url: postgresql+asyncpg://...)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, required=True, help="server config YAML (the same as serve's)")
    parser.add_argument("--jobs", type=int, default=None, help="jobs at once (default: runner.jobs of the config)")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.service.serve import work
    from open_rag_eval.service.settings import load_settings

    return work(load_settings(args.config), args.jobs)
