"""A run's results on disk while it runs: each window of whole queries, as it finishes, is appended to one file.

``Spill.add(outputs, result)`` appends a window's outputs, scores and details (three pickles) and each metric's
values as a column of floats (8 bytes a value, one block per metric and window). What the summary needs besides is
kept in memory and grows with the number of metrics, not of outputs: every metric name, which ones have a missing
value, each metric's count of missing values and their kinds, and the reasons of a metric while it has no value yet
(an incomplete run names the commonest); the index of the blocks is a few numbers per window and metric, kept
in typed arrays (8 bytes a number; as tuples and dicts it grew by about 4.7 KB a window, measured with tracemalloc
over 6 windows of a 12,000-output run). The writers then read the windows back one at a time (``windows``) and
each metric's values one metric at a time (``values``): memory holds a window, or a column.

An append-only file with its index in memory, rather than SQLite or Arrow/Parquet: the run only ever appends a
window and reads back a window or a metric's column, in order, which needs no query engine and no dependency; and a
failed write is the operating system's own error naming its cause (a full disk, a file-size limit), which an
output folder's writes must report (exit 5) -- SQLite reports both as "disk I/O error". The file is scratch (no
fsync) in the fresh result folder (``.open-rag-eval-spill``), so a failed run's generation removes it with the
rest, and it is removed once the results are written.
"""

from __future__ import annotations

import io
import math
import pickle
from array import array
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from open_rag_eval.core.missing import kind
from open_rag_eval.core.types import EvalResult, RAGOutput, Score

__all__ = ["SPILL_FILE", "Spill", "finite"]

SPILL_FILE = ".open-rag-eval-spill"
PARTS = ("outputs", "scores", "details", "sizes")  # sizes: each evaluator's numbers of scores and details
Bucket = tuple[int, int]  # where a query's entry first appears in a whole run: (0 scores | 1 details, evaluator)
Block = tuple[int, int]  # offset, length
_NO_BUCKETS: frozenset[Bucket] = frozenset()  # a window whose queries have no results as a whole (most)


def finite(score: Score) -> Score:
    """A non-finite value is not a number: a missing value with that reason."""
    if score.value is not None and not math.isfinite(score.value):
        return Score(query_id=score.query_id, run=score.run, metric=score.metric, error="not a finite number")
    return score


class Spill:
    """The windows of one run in the file ``path`` (``None``: in memory, for a result that is already in memory)."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        self._file: IO[bytes] = io.BytesIO() if path is None else path.open("w+b", buffering=0)
        self._end = 0
        self._blocks = array("q")  # each window's blocks of PARTS, in order: offset, length, offset, length...
        self._buckets: list[frozenset[Bucket]] = []  # each window's queries' buckets
        self._columns: dict[str, array[int]] = defaultdict(lambda: array("q"))  # each metric's blocks, as above
        self.metrics: dict[str, None] = {}  # every metric seen, in first-seen order
        self.errored: set[str] = set()  # metrics with at least one missing value
        self.n_values: Counter[str] = Counter()
        self.n_failed: Counter[str] = Counter()
        self.kinds: dict[str, Counter[str]] = defaultdict(Counter)  # kinds of missing values, per metric
        self.reasons: dict[str, Counter[str]] = defaultdict(Counter)  # while a metric has no value yet

    def add(self, outputs: Sequence[RAGOutput], parts: Sequence[EvalResult]) -> None:
        """One window: its outputs (whole queries) and each evaluator's result on them, in the run's order."""
        scores = [finite(score) for part in parts for score in part.scores]
        details = [detail for part in parts for detail in part.details]
        sizes = [(len(part.scores), len(part.details)) for part in parts]
        columns: dict[str, array[float]] = {}
        for score in scores:
            metric = score.metric
            self.metrics.setdefault(metric, None)
            if score.value is None:
                self._missing(metric, score.error or "")
            else:
                columns.setdefault(metric, array("d")).append(score.value)
        keys = {output.key for output in outputs}
        buckets = _buckets(keys, scores, details, sizes)
        blobs: tuple[list[Any], ...] = (list(outputs), scores, details, sizes)
        for blob in blobs:
            self._blocks.extend(self._put(_pack(blob)))
        self._buckets.append(frozenset(buckets) if buckets else _NO_BUCKETS)
        for metric, column in columns.items():
            self._columns[metric].extend(self._put(column.tobytes()))
            self.n_values[metric] += len(column)
            self.reasons.pop(metric, None)

    def _missing(self, metric: str, error: str) -> None:
        self.n_failed[metric] += 1
        self.errored.add(metric)
        self.kinds[metric][kind(error)] += 1
        if not self.n_values[metric]:
            self.reasons[metric][error] += 1

    def _put(self, data: bytes) -> Block:
        self._file.seek(self._end)
        view = memoryview(data)
        while view:  # unbuffered: a failed write fails here, inside the run's writes, naming its cause
            view = view[self._file.write(view) or 0:]
        block = (self._end, len(data))
        self._end += len(data)
        return block

    def _get(self, block: Block) -> bytes:
        self._file.seek(block[0])
        return self._file.read(block[1])

    @property
    def n_windows(self) -> int:
        return len(self._buckets)

    def windows(self, parts: Sequence[str] = PARTS, *, bucket: Bucket | None = None) -> Iterator[tuple[Any, ...]]:
        """Each window's ``parts`` (of ``PARTS``), in order, one window in memory; ``bucket``: only the windows
        with results of a query as a whole (or of outputs not in the window) that first appear there."""
        where = [2 * PARTS.index(name) for name in parts]
        for index, buckets in enumerate(self._buckets):
            if bucket is None or bucket in buckets:
                start = 2 * len(PARTS) * index
                yield tuple(pickle.loads(self._get((self._blocks[start + at], self._blocks[start + at + 1])))
                            for at in where)

    def buckets(self) -> list[Bucket]:
        """Every bucket of the run's per-query results, in a whole run's order."""
        return sorted(set().union(*self._buckets))

    def values(self, metric: str) -> list[float]:
        """Every value of ``metric`` in the order the run gave them."""
        return self.column(metric).tolist()

    def column(self, metric: str) -> array[float]:
        """``values`` as a typed array: 8 bytes a value, not a float object each (a run's summary reads its
        metrics' columns this way)."""
        column: array[float] = array("d")
        blocks = self._columns.get(metric, array("q"))
        for at in range(0, len(blocks), 2):
            column.frombytes(self._get((blocks[at], blocks[at + 1])))
        return column

    def close(self) -> None:
        try:
            self._file.close()
        finally:
            if self.path is not None:
                self.path.unlink(missing_ok=True)

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _buckets(keys: set[tuple[str, int]], scores: Sequence[Score], details: Sequence[Any],
             sizes: Sequence[tuple[int, int]]) -> set[Bucket]:
    """The buckets of the queries of a window with results of their own (``query_buckets``)."""
    return set(query_buckets(keys, scores, details, sizes).values())


def query_buckets(keys: set[tuple[str, int]], scores: Sequence[Score], details: Sequence[Any],
                  sizes: Sequence[tuple[int, int]]) -> dict[str, Bucket]:
    """Each query with results as a whole (``run`` None, or a run without an output in ``keys``) -> where its first
    one is in the scores, then the details, of the evaluators in turn. A whole run lists such queries in that order
    (every evaluator's scores, then every evaluator's details); within a bucket, in the order of the windows."""
    found: dict[str, Bucket] = {}
    for phase, items in enumerate((scores, details)):
        start = 0
        for evaluator, size in enumerate(sizes):
            for item in items[start:start + size[phase]]:
                if (item.run is None or (item.query_id, item.run) not in keys) and item.query_id not in found:
                    found[item.query_id] = (phase, evaluator)
            start += size[phase]
    return found


def _pack(items: list[Any]) -> bytes:
    return pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)
