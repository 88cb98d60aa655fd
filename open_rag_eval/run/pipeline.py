"""One evaluation run: outputs -> evaluators (sharing one judge) -> result files.

``arun`` is the async core; ``run`` is the one ``asyncio.run`` for the CLI and notebooks. A run writes one
complete generation of result files into a fresh folder beside the output folder and swaps it in at the end
(``store.generation``); until then the previous results stay as they were, and a second run on the same folder is
refused (a lock). Judged work lives in the judge's cache as soon as it is judged, and a connector's outputs in the
fresh folder as soon as they are fetched, so a run that stops (crash, outage, Ctrl-C) resumes by running it again.

``arun`` composes the run's parts, each in its own module: its outputs (``run.outputs``), its judge
(``run.session``), the one loop every way of running goes through (``run.loop``: evaluated here by
``run.evaluation``, with the start-up work of ``run.start``), the plan of a dry run (``run.planning``), memory
(``run.memory``) and what the run gives back (``run.outcome``). Their public names are importable from here too.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.progress import Progress
from open_rag_eval.core.types import RAGOutput
from open_rag_eval.evaluators.base import needs_judge
from open_rag_eval.judge.base import Judge
from open_rag_eval.run import start
from open_rag_eval.run.checks import check_inputs_outside, output_folder
from open_rag_eval.run.corrected import run_labels
from open_rag_eval.run.evaluation import evaluate_all, or_empty, own_rows, windowed
from open_rag_eval.run.generation import Generation
from open_rag_eval.run.journal import IDENTITY_FILE, RESUME_FILES
from open_rag_eval.run.loop import Evaluated, Executor, WindowedExecutor, check_rows, run_loop
from open_rag_eval.run.manifest import build_manifest
from open_rag_eval.run.memory import fewer_collections, release_memory
from open_rag_eval.run.outcome import RunReport, read_result
from open_rag_eval.run.outputs import FETCHED_FILE, fetch_source, given_source, load_outputs, open_source
from open_rag_eval.run.planning import context_notes, plan
from open_rag_eval.run.session import judge_for, judge_session, run_info
from open_rag_eval.run.source import ListSource, OutputSource, SpooledSource, check_limit

__all__ = ["Evaluated", "Executor", "WindowedExecutor", "Progress", "RunReport", "arun", "context_notes",
           "check_rows", "evaluate_all", "judge_session", "load_outputs", "open_source", "or_empty", "own_rows",
           "plan", "read_result", "run", "run_info", "windowed"]

log = logging.getLogger(__name__)


def run(loaded: LoadedConfig, **kwargs: Any) -> RunReport:
    return asyncio.run(arun(loaded, **kwargs))


async def arun(
    loaded: LoadedConfig,
    *,
    output_dir: Path | None = None,
    limit: int | None = None,
    outputs: list[RAGOutput] | None = None,
    source: OutputSource | None = None,
    progress: Progress | None = None,
    executor: Executor | WindowedExecutor | None = None,
    wrap_judge: Callable[[Judge], Judge] | None = None,
    write_report: Callable[[Path], object] | None = None,
) -> RunReport:
    """``wrap_judge``: wraps the run's judge before any metric sees it (the service shares a judge profile fairly
    across its running jobs); the run's results do not depend on it. ``write_report``: draws the report into the new
    results folder before it replaces the previous one (the caller hands it down, e.g. ``report.write_report``;
    None: no report). ``source``: the outputs read elsewhere (merged shards), instead of ``outputs``."""
    started = time.monotonic()
    check_limit(limit)
    out = output_folder(loaded, output_dir)
    evaluators = [spec.build() for spec in loaded.evaluators]
    check_inputs_outside(loaded, out)  # the new results must not replace an input
    labels = run_labels([loaded.resolve_path(p) for p in loaded.config.labels or ()])  # bad labels: before any call
    progress = progress or Progress()
    fetch = outputs is None and source is None and loaded.config.connector is not None
    progress.stages = list(dict.fromkeys([*progress.stages, "read", *(["fetch"] if fetch else []),
                                          *(e.name for e in evaluators), "write"]))
    progress.begin("read", "input")
    source = given_source(loaded, evaluators, outputs, source, limit)  # bad input fails before anything is opened
    progress.steps["read"] = "opening the judge"
    with Generation(out, keep=RESUME_FILES if fetch else ()) as generation, fewer_collections():  # usable, ours
        # a missing API key fails before anything is written; the run's judge asks the controls, and evaluates
        # unless an executor's processes do (they open their own)
        async with judge_for(loaded, needs_judge(evaluators)) as judge:
            if judge is not None and wrap_judge is not None:
                judge = wrap_judge(judge)
            if source is None:
                progress.begin("fetch", "asking the system")
                source = await fetch_source(loaded, limit, generation.path)
                progress.outputs_total = progress.done["fetch"] = source.n_outputs
            progress.outputs_total = source.n_outputs
            progress.judge = judge
            criteria = [row for e in evaluators for row in e.contract().criteria]  # the loop lets go of evaluators
            ended = await run_loop(loaded, evaluators, source, judge, executor, generation, progress, labels)
            manifest = build_manifest(loaded, (source.n_outputs, source.n_queries), ended.judge, ended.info,
                                      wall_time_s=time.monotonic() - started, input_sha256=source.input_sha256,
                                      criteria=criteria)
            manifest["health"] = ended.health.snapshot() if ended.health is not None else None
        manifest.update(ended.status.manifest_fields())
        given = source.all() if isinstance(source, ListSource) or (
            isinstance(source, SpooledSource) and source.n_outputs <= start.CONTROL_OUTPUTS) else None
        _publish(generation, manifest, write_report, progress)
    progress.end("write")
    return RunReport(None, ended.summary, out, manifest, ended.info, given, list(ended.status.incomplete),
                     ended.health, ended.reasons)


def _publish(generation: Generation, manifest: dict[str, Any], write_report: Callable[[Path], object] | None,
             progress: Progress) -> None:
    """The manifest and the report written into the new results folder, which then replaces the previous one."""
    with generation.writing():
        generation.write_json("manifest.json", manifest)
        generation.remove(IDENTITY_FILE)
        generation.remove(FETCHED_FILE)
        if write_report is not None:
            progress.steps["write"] = "report.html"
            release_memory()  # what evaluating and writing freed, before the report takes its own
            _write_report(write_report, generation.path)
    generation.commit()  # the new results replace the previous ones, all at once


def _write_report(write_report: Callable[[Path], object], out: Path) -> None:
    try:
        write_report(out)
    except OSError:
        raise  # a file problem (disk full...) fails the whole generation: the previous one stays
    except Exception as error:  # the report is a view; its failure must not lose the results
        log.warning("report.html was not written: %s", error)
