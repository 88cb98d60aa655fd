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
from open_rag_eval.api.data import to_outputs
from open_rag_eval.api.results import Results

__all__ = ["aevaluate", "evaluate"]

Data = Any  # pandas.DataFrame | Sequence[dict | RAGOutput] | str | os.PathLike
ConfigArg = str | os.PathLike[str] | dict[str, Any] | None


def evaluate(data: Data, config: ConfigArg = None, *, output_dir: str | os.PathLike[str] | None = None,
             **options: Any) -> Results:
    """Evaluate ``data`` (a DataFrame, a list of dicts / RAGOutputs, or a .csv/.jsonl path) and return its
    ``Results``. ``config``: None (the trec evaluator), a YAML path or a dict; ``options`` replace its top-level
    sections (``judge=...``, ``evaluators=[...]``). ``output_dir``: also keep the result files there (as
    ``open-rag-eval eval`` writes them); without it nothing is left on disk but the judge cache."""
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
    from open_rag_eval import pipeline

    outputs = to_outputs(data)  # bad data fails before the config or the judge is touched
    loaded = api_config(config, options)
    if output_dir is not None:
        report = await pipeline.arun(loaded, output_dir=Path(output_dir), outputs=outputs)
        return Results.from_folder(report.output_dir)
    with tempfile.TemporaryDirectory(prefix="open-rag-eval-") as tmp:
        report = await pipeline.arun(loaded, output_dir=Path(tmp) / "results", outputs=outputs)
        return Results.from_folder(report.output_dir)
