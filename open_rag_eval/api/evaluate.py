"""``evaluate`` / ``aevaluate``: the CLI's run (``pipeline.arun``) on data held in Python.

``aevaluate`` is the async core; ``evaluate`` is its one synchronous edge: ``asyncio.run`` when no event loop is
running, else (a notebook, an async web app) the same coroutine in a worker thread with its own loop -- the caller's
loop is never re-entered or patched.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import tempfile
from pathlib import Path
from typing import Any

from open_rag_eval.api.config import api_config
from open_rag_eval.api.data import EMPTY_DATA, to_outputs
from open_rag_eval.core.errors import InputError
from open_rag_eval.api.results import FolderFiles, Results

__all__ = ["aevaluate", "evaluate"]

Data = Any  # pandas.DataFrame | Sequence[dict | RAGOutput] | str | os.PathLike
ConfigArg = str | os.PathLike[str] | dict[str, Any] | None


def evaluate(data: Data, config: ConfigArg = None, *, output_dir: str | os.PathLike[str] | None = None,
             **options: Any) -> Results:
    """Evaluate ``data`` (a DataFrame, a list of dicts / RAGOutputs, or a .csv/.jsonl path) and return its
    ``Results``. ``config``: None (the trec evaluator), a YAML path or a dict; ``options`` replace its top-level
    sections (``judge=...``, ``evaluators=[...]``, ``tracking=...``). ``output_dir``: also keep the result files
    there (as ``open-rag-eval eval`` writes them); without it nothing is left on disk but the judge cache.
    A ``tracking`` section (the config's, or ``tracking="mlflow"`` / ``{"backend": "opik", ...}``) logs the run
    once its files are written (``Results.tracked_run``); a tracking failure raises ``TrackingError`` whose
    ``results`` holds the results."""
    work = lambda: asyncio.run(aevaluate(data, config, output_dir=output_dir, **options))  # noqa: E731
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return work()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="open-rag-eval") as pool:
        return pool.submit(work).result()


async def aevaluate(data: Data, config: ConfigArg = None, *, output_dir: str | os.PathLike[str] | None = None,
                    **options: Any) -> Results:
    """``evaluate`` for async code: ``results = await aevaluate(df, judge={...})``."""
    from open_rag_eval.report import write_report
    from open_rag_eval.run import pipeline
    from open_rag_eval.tracking.options import TrackingOptions

    outputs = to_outputs(data, empty=True)  # bad data fails before the config or the judge is touched
    loaded = api_config(config, options)
    if not outputs and not pipeline.own_rows([spec.build() for spec in loaded.evaluators]):
        raise InputError(EMPTY_DATA, file="data")  # only a config with rows of its own (a TREC run file) needs none
    tracking = _tracking(loaded.section("tracking", TrackingOptions), output_dir)
    if output_dir is not None:
        report = await pipeline.arun(loaded, output_dir=Path(output_dir), outputs=outputs,
                                     write_report=write_report)
        return await _tracked(_held(report.output_dir), report.output_dir, tracking)
    with tempfile.TemporaryDirectory(prefix="open-rag-eval-") as tmp:
        report = await pipeline.arun(loaded, output_dir=Path(tmp) / "results", outputs=outputs,
                                     write_report=write_report)
        return await _tracked(_held(report.output_dir), report.output_dir, tracking)


def _held(folder: Path) -> Results:
    """The run's results with the text of its files held, as ``evaluate`` always gave them: they outlive a
    temporary folder and a later run into the same one (``Results.from_folder`` reads a folder when asked)."""
    return Results(dict(FolderFiles(folder)))


def _tracking(options: Any, output_dir: str | os.PathLike[str] | None) -> Any:
    """The run's tracking options, checked before any work (a missing backend package: MissingDependency). Without
    an output folder the run has no name of its own: ``evaluate-<UTC time>``."""
    if options is None:
        return None
    from datetime import UTC, datetime

    from open_rag_eval.tracking import check_available

    check_available(options)
    if options.run_name is None and output_dir is None:
        options = options.model_copy(update={"run_name": f"evaluate-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"})
    return options


async def _tracked(results: Results, folder: Path, options: Any) -> Results:
    """Log the written run (in a worker thread: the backends' clients are synchronous). A failure raises
    ``TrackingError`` carrying the results, so nothing judged is lost."""
    if options is None:
        return results
    from open_rag_eval.tracking import TrackingError, track

    try:
        results.tracked_run = await asyncio.to_thread(track, folder, options)
    except TrackingError as error:
        error.results = results
        raise
    return results
