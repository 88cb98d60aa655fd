"""`open-rag-eval validate --config FILE`: check a config (and its input file) without doing any work."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from open_rag_eval.config import LoadedConfig
    from open_rag_eval.run.checks import DatabaseAt


HELP = "validate a config, its input file and the paths a run writes (output folder, cache, history); judge nothing"

log = logging.getLogger("open_rag_eval")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, type=Path, help="YAML config")


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.run import pipeline
    from open_rag_eval.config import load_config

    loaded = load_config(args.config)
    outputs = pipeline.load_outputs(loaded)
    if loaded.config.ablate is not None:  # every variant of the grid is a config of its own: check them all
        from open_rag_eval.ablation.variants import build_variants

        log.info("%s: ablate: %d variants valid", args.config, len(build_variants(loaded)))
    code = _path_problems(loaded)
    if code:
        return code
    queries = len({o.query_id for o in outputs})
    kinds = ", ".join(spec.type for spec in loaded.evaluators)
    source = f"{len(outputs)} outputs of {queries} queries" if loaded.config.input else "outputs from the connector"
    log.info("%s: valid (%s; evaluators: %s)", args.config, source, kinds)
    for warning in _warnings(loaded):
        log.warning("%s: %s", args.config, warning)
    return 0


def _warnings(loaded: LoadedConfig) -> list[str]:
    """What is valid but will not work as meant: an unset judge key variable, sweep thresholds that never trip."""
    from open_rag_eval.evaluators.base import needs_judge

    warnings: list[str] = []
    judge = loaded.judge
    if judge.simulated is None and needs_judge(spec.build() for spec in loaded.evaluators):
        from open_rag_eval.judge.client import DEFAULT_BASE_URL, is_local_url

        urls = [url for url, _ in judge.endpoints()] or [
            judge.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL]
        if not all(map(is_local_url, urls)) and not os.environ.get(judge.api_key_env, "").strip():
            warnings.append(f"judge.api_key_env: the environment variable {judge.api_key_env} is not set; `eval` "
                            "will stop before judging (exit 2) until it holds the judge's API key")
    if judge.context_tokens is not None:  # the requests are rehearsed (no call) to name the tasks that cannot fit
        from open_rag_eval.run.pipeline import context_notes, load_outputs, plan

        warnings += context_notes(plan(loaded, load_outputs(loaded)), judge.context_tokens)
    sweep, connector = loaded.config.sweep, loaded.config.connector
    if sweep is not None and connector is not None:
        from open_rag_eval.inputs import read_queries
        from open_rag_eval.sweeps.run import never_trips

        warnings += never_trips(sweep, len(read_queries(loaded.resolve_path(connector.queries))))
    return warnings


def _path_problems(loaded: LoadedConfig) -> int:
    """Report every path a run could not use (output folder, judge cache, sweep history); the worst exit code."""
    from open_rag_eval.cli import error_line
    from open_rag_eval.core.errors import exit_code
    from open_rag_eval.run.checks import path_problems

    problems = path_problems(loaded, databases=_history(loaded))
    for problem in problems:
        log.error("%s", error_line(problem))
    return max((exit_code(problem) for problem in problems), default=0)


def _history(loaded: LoadedConfig) -> list[DatabaseAt]:
    """The sweep history a ``sweep:`` section names: validate checks it like the judge cache."""
    sweep = loaded.config.sweep
    if sweep is None:
        return []
    from open_rag_eval.store.sqlite import db_path
    from open_rag_eval.sweeps.history import HISTORY_DB

    return [lambda: (db_path(sweep.history, loaded.base_dir, HISTORY_DB), HISTORY_DB)]
