"""A run's outputs in windows of whole queries: what one window of evaluation holds in memory.

A window is what the trec and generation evaluators already judge together (``query_chunks`` with
``CHUNK_OUTPUTS``): whole queries, about ``WINDOW_OUTPUTS`` outputs. Windows follow the outputs' order, so a run
evaluated window by window gives the results (and the model batches: HHEM scores a chunk) of one run evaluated at
once, provided each query's outputs are contiguous in the input. When they are not (a query's runs interleaved
with other queries'), the run is one window: every output in memory, as before.

``ListSource`` windows outputs already in memory (a connector's, a caller's). ``JsonlSource`` streams a JSONL input
file: it is read twice, once to check every line (bad input fails before anything is asked or written, naming file
and line) and count, once window by window while evaluating.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, islice
from pathlib import Path
from typing import Protocol

from open_rag_eval.core.types import RAGOutput
from open_rag_eval.evaluators.trec import CHUNK_OUTPUTS

__all__ = ["JsonlSource", "ListSource", "OutputSource", "WINDOW_OUTPUTS", "contiguous", "windows"]

WINDOW_OUTPUTS = CHUNK_OUTPUTS


class OutputSource(Protocol):
    n_outputs: int
    n_queries: int
    fewest_answered: int  # the fewest outputs without an error of any query (0 without outputs)

    def windows(self, size: int = WINDOW_OUTPUTS) -> Iterator[list[RAGOutput]]: ...

    def all(self) -> list[RAGOutput]: ...

    def first(self, n: int) -> list[RAGOutput]: ...


def windows(groups: Iterable[list[RAGOutput]], size: int) -> Iterator[list[RAGOutput]]:
    """Groups of whole queries (each query's outputs, in order) cut into windows as ``query_chunks`` cuts them."""
    window: list[RAGOutput] = []
    for runs in groups:
        if window and len(window) + len(runs) > size:
            yield window
            window = []
        window.extend(runs)
    if window:
        yield window


def contiguous(outputs: Sequence[RAGOutput]) -> bool:
    """Whether each query's outputs follow one another."""
    seen: set[str] = set()
    last = None
    for output in outputs:
        if output.query_id != last:
            if output.query_id in seen:
                return False
            seen.add(output.query_id)
            last = output.query_id
    return True


def fewest_answered(outputs: Iterable[RAGOutput]) -> int:
    answered: dict[str, int] = {}
    for output in outputs:
        answered[output.query_id] = answered.get(output.query_id, 0) + (output.error is None)
    return min(answered.values(), default=0)


def _groups(outputs: Sequence[RAGOutput]) -> Iterator[list[RAGOutput]]:
    group: list[RAGOutput] = []
    for output in outputs:
        if group and output.query_id != group[0].query_id:
            yield group
            group = []
        group.append(output)
    if group:
        yield group


class ListSource:
    """Outputs in memory."""

    def __init__(self, outputs: list[RAGOutput]) -> None:
        self.outputs = outputs
        self.n_outputs = len(outputs)
        self.n_queries = len({o.query_id for o in outputs})
        self.fewest_answered = fewest_answered(outputs)

    def windows(self, size: int = WINDOW_OUTPUTS) -> Iterator[list[RAGOutput]]:
        if not contiguous(self.outputs):
            yield self.outputs
            return
        yield from windows(_groups(self.outputs), size)

    def all(self) -> list[RAGOutput]:
        return self.outputs

    def first(self, n: int) -> list[RAGOutput]:
        return self.outputs[:n]


class JsonlSource:
    """A JSONL input file, streamed (``limit``: its first queries); checked line by line when opened."""

    def __init__(self, path: Path, limit: int | None = None) -> None:
        from open_rag_eval.inputs.jsonl import jsonl_query_groups

        self.path, self.limit = path, limit
        self._read = jsonl_query_groups
        seen: set[int] = set()
        self.n_outputs = self.n_queries = 0
        self.contiguous = True
        fewest: int | None = None
        for group in self._read(path):  # the whole file is checked, as when it is read at once
            if limit is None or len(seen) < limit:
                answered = sum(output.error is None for output in group)
                fewest = answered if fewest is None else min(fewest, answered)
            key = hash(group[0].query_id)
            if key in seen:  # (or a hash collision: then one window too, which is always right)
                self.contiguous = False
            seen.add(key)
            if limit is None or len(seen) <= limit:
                self.n_outputs += len(group)
        self.n_queries = len(seen) if limit is None else min(limit, len(seen))
        self.fewest_answered = fewest or 0
        if not self.contiguous:
            everything = self.all()
            self.n_outputs, self.n_queries = len(everything), len({o.query_id for o in everything})
            self.fewest_answered = fewest_answered(everything)

    def _groups(self) -> Iterator[list[RAGOutput]]:
        for index, group in enumerate(self._read(self.path)):
            if self.limit is not None and index >= self.limit:
                return
            yield group

    def windows(self, size: int = WINDOW_OUTPUTS) -> Iterator[list[RAGOutput]]:
        if not self.contiguous:
            yield self.all()
            return
        yield from windows(self._groups(), size)

    def first(self, n: int) -> list[RAGOutput]:
        """The first ``n`` outputs of the run (in the order the run evaluates them)."""
        if not self.contiguous:
            return self.all()[:n]
        return list(islice(chain.from_iterable(self._groups()), n))

    def all(self) -> list[RAGOutput]:
        from open_rag_eval.inputs import read_outputs
        from open_rag_eval.run.pipeline import _limit

        return _limit(read_outputs(self.path), self.limit)
