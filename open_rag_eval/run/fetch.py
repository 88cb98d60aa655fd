"""Connectors produce RAG outputs by querying a live RAG system.

A connector class (named in YAML as ``type: http`` or ``type: "module:Class"``) defines an ``Options`` pydantic
model, is constructed as ``Class(options)`` and has ``async fetch(queries, repeats) -> list[RAGOutput]``. It
returns one output per (query, run), in query order then run order; an output whose query failed carries ``error``
(it is reported, never silently dropped). The pipeline saves what a connector returns to ``outputs.jsonl`` before
any judging, so re-evaluating never re-queries. The labels of the queries file (``relevant_ids``,
``expected_keywords``, ``expected_refusal``, ``required_citations``, ``reference_answer``, ``grounding_ids``, or the
fields of another tool's query set, ``inputs.datasets``) go with every output of their query.

    connector = build_connector(config.connector)          # validated options; errors name connector.options.*
    outputs = await fetch_outputs(loaded, config.connector)  # reads the queries CSV, fetches, logs a summary
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Protocol

from pydantic import BaseModel

from open_rag_eval.config.connector import ConnectorConfig, connector_spec
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.core.types import RAGOutput

if TYPE_CHECKING:
    from open_rag_eval.config import LoadedConfig

__all__ = ["Connector", "build_connector", "fetch_into", "fetch_outputs"]

log = logging.getLogger(__name__)


class Connector(Protocol):
    Options: ClassVar[type[BaseModel]]

    async def fetch(self, queries: Sequence[tuple[str, str]], repeats: int) -> list[RAGOutput]: ...


def build_connector(config: ConnectorConfig, *, file: str = "", base_dir: Path | None = None) -> Connector:
    """Resolve ``config.type`` and construct it with its validated options; options the class names in
    ``PATH_OPTIONS`` (files, folders) resolve against ``base_dir``, the config's folder."""
    from open_rag_eval.config import absolute_paths

    cls, options = connector_spec(config, file=file)
    if base_dir is not None:
        options = absolute_paths(options, getattr(cls, "PATH_OPTIONS", ()), base_dir)
    try:
        return cls(options)  # type: ignore[no-any-return]
    except ConfigError as error:  # a connector's own check of its options: name the config file
        raise ConfigError(error.problem, path=error.path, file=error.file or file) from None


async def fetch_outputs(loaded: LoadedConfig, config: ConnectorConfig, limit: int | None = None,
                        journal: Path | None = None) -> list[RAGOutput]:
    """Query the system for the (first ``limit``) queries of ``config.queries``, ``repeats`` times each.

    With ``journal`` (a folder), outputs are saved there as they arrive, and queries whose outputs an unfinished
    run of the same connector saved there are not asked again (``store.journal``); they are returned in the order
    of the queries."""
    kept: list[RAGOutput] = []
    order = await fetch_into(kept.extend, loaded, config, limit=limit, journal=journal)
    return kept if order is None else sorted(kept, key=lambda output: order[output.query_id])


async def fetch_into(emit: Callable[[list[RAGOutput]], None], loaded: LoadedConfig, config: ConnectorConfig,
                     limit: int | None = None, journal: Path | None = None) -> dict[str, int] | None:
    """``fetch_outputs`` handing each batch of outputs (with their queries' labels) to ``emit`` as it arrives,
    instead of returning them all. With ``journal``, returns each query's position: the run takes the outputs in
    that order, stably sorted by it (a query's outputs in the order they came); without, they come in the run's
    order (None)."""
    from open_rag_eval.evaluators.base import answer_reader
    from open_rag_eval.inputs import read_query_set
    from open_rag_eval.inputs.validate import checked_fetch, tallied

    file = str(loaded.path or "")
    connector = build_connector(config, file=file, base_dir=loaded.base_dir)
    query_set = read_query_set(loaded.resolve_path(config.queries))[:limit]
    queries = [(query.query_id, query.query) for query in query_set]
    labels = {query.query_id: query.labels for query in query_set}
    order = None if journal is None else {query_id: index for index, (query_id, _) in enumerate(queries)}
    failed = _Failed(order)
    needs_answer = answer_reader(spec.build() for spec in loaded.evaluators)

    def labelled(outputs: Sequence[RAGOutput]) -> None:
        given = [output.model_copy(update={"labels": labels[output.query_id]}) if output.query_id in labels
                 else output for output in outputs]
        failed.count(given)
        emit(given)

    if journal is None:
        log.info("querying %d queries x %d runs through the %s connector", len(queries), config.repeats, config.type)
        with tallied():
            labelled(checked_fetch(await connector.fetch(queries, config.repeats), config.type, needs_answer))
    else:
        with tallied():
            await _fetch_resumable(connector, config, queries, journal, labelled, needs_answer)
    failed.warn()
    return order


class _Failed:
    """The outputs whose system call failed, counted as they come; the warning names the first in the run's order."""

    def __init__(self, order: dict[str, int] | None) -> None:
        self.order, self.n, self.n_failed = order, 0, 0
        self.first: tuple[int, RAGOutput] | None = None

    def count(self, outputs: Sequence[RAGOutput]) -> None:
        for output in outputs:
            self.n += 1
            if output.error is None:
                continue
            self.n_failed += 1
            rank = self.order[output.query_id] if self.order is not None else self.n
            if self.first is None or rank < self.first[0]:
                self.first = (rank, output)

    def warn(self) -> None:
        if self.first is not None:
            first = self.first[1]
            log.warning("%d of %d system calls failed (kept as failed outputs); first: %s %s run %d: %s",
                        self.n_failed, self.n, "query", first.query_id, first.run, first.error)


async def _fetch_resumable(connector: Connector, config: ConnectorConfig, queries: Sequence[tuple[str, str]],
                           folder: Path, emit: Callable[[list[RAGOutput]], None], needs_answer: str | None) -> None:
    """Reuse what the journal in ``folder`` holds; fetch the rest in batches, saving each batch as it arrives; each
    query's outputs go to ``emit`` (the saved ones first)."""
    from open_rag_eval.inputs.validate import checked_fetch
    from open_rag_eval.run.journal import OutputJournal, connector_identity

    journal = OutputJournal(folder, connector_identity(config.type, config.options, config.repeats))
    saved = journal.reuse(queries, config.repeats, emit)
    missing = [q for q in queries if q[0] not in saved]
    asked = {query_id for query_id, _ in missing}  # (an output of a query not asked is saved, not evaluated)
    if saved:
        log.info("reusing the saved outputs of %d queries from the unfinished run; querying the other %d",
                 len(saved), len(missing))
    del saved
    log.info("querying %d queries x %d runs through the %s connector", len(missing), config.repeats, config.type)
    size = max(1, int(getattr(getattr(connector, "options", None), "concurrency", 8) or 8))
    for start in range(0, len(missing), size):
        batch = checked_fetch(await connector.fetch(missing[start:start + size], config.repeats), config.type,
                              needs_answer)
        journal.append(batch)
        emit([output for output in batch if output.query_id in asked])
