"""The run's outputs: given in memory, read from ``input:`` (streamed window by window when a JSONL or CSV file),
or fetched from the live system through the configured connector. Bad input fails here, before anything is
opened or written."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from open_rag_eval.config import LoadedConfig
from open_rag_eval.core.types import RAGOutput
from open_rag_eval.evaluators.base import Evaluator, check_answers
from open_rag_eval.run.source import (
    CsvSource,
    JsonlSource,
    ListSource,
    OutputSource,
    Spool,
    SpooledSource,
    check_limit,
    limit_queries,
)

__all__ = ["FETCHED_FILE", "fetch_source", "given_source", "load_outputs", "open_source"]


def load_outputs(loaded: LoadedConfig, limit: int | None = None) -> list[RAGOutput]:
    """The outputs named by ``input:`` (connector outputs are fetched in ``arun``), cut to the first ``limit``
    queries."""
    from open_rag_eval.inputs import read_outputs

    if loaded.config.input is None:
        return []
    return limit_queries(read_outputs(loaded.resolve_path(loaded.config.input)), limit)


def given_source(loaded: LoadedConfig, evaluators: Sequence[Evaluator], outputs: list[RAGOutput] | None,
           source: OutputSource | None, limit: int | None) -> OutputSource | None:
    """The run's outputs unless a connector fetches them (None): given, or opened from ``input:``. Bad input fails
    here, before anything is opened or written; outputs in memory without an answer a metric reads, too."""
    if source is None and outputs is not None:
        source = ListSource(outputs)
    if isinstance(source, ListSource):
        check_answers(evaluators, source.outputs)
    if source is None and loaded.config.connector is None:
        source = open_source(loaded, limit)
    return source


def open_source(loaded: LoadedConfig, limit: int | None = None) -> OutputSource:
    """The outputs named by ``input:``: a JSONL or CSV file streamed window by window, any other input read at once."""
    check_limit(limit)
    if loaded.config.input is None:
        return ListSource([])
    path = loaded.resolve_path(loaded.config.input)
    streamed = {".jsonl": JsonlSource, ".csv": CsvSource}.get(path.suffix.lower())
    if streamed is not None:
        return streamed(path, limit)
    return ListSource(load_outputs(loaded, limit))


FETCHED_FILE = ".open-rag-eval-fetched"  # a connector's outputs spooled as they come, read back window by window


async def fetch_source(loaded: LoadedConfig, limit: int | None, folder: Path) -> SpooledSource:
    """Query the live system through the configured connector (the first ``limit`` queries), saving them to the
    journal in ``folder`` and spooling them there, for the run to read back window by window."""
    from open_rag_eval.run.fetch import fetch_into

    assert loaded.config.connector is not None
    spool = Spool(folder / FETCHED_FILE)
    try:
        order = await fetch_into(spool.add, loaded, loaded.config.connector, limit=limit, journal=folder)
    finally:
        spool.close()
    assert order is not None
    return spool.source(order)
