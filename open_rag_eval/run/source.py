"""A run's outputs in windows of whole queries: what one window of evaluation holds in memory.

A window is what the trec and generation evaluators already judge together (``query_chunks`` with
``CHUNK_OUTPUTS``): whole queries, about ``WINDOW_OUTPUTS`` outputs. Windows follow the outputs' order, so a run
evaluated window by window gives the results (and the model batches: HHEM scores a chunk) of one run evaluated at
once, provided each query's outputs are contiguous in the input. When they are not (a query's runs interleaved
with other queries'), the run is one window: every output in memory, as before.

``ListSource`` windows outputs already in memory (a caller's). ``SpooledSource`` windows a connector's outputs
from the file they were spooled to as they were fetched (``Spool``), each query's outputs together.

``JsonlSource`` streams a JSONL input file: it is read twice, once as JSON alone (the run's shape: counts,
contiguous queries; a line that is not a JSON object fails the run before anything is asked or written, naming file
and line), once window by window, building and checking each output. A line that is JSON but not a valid output (a
missing field...) fails the run when its window is read, with the same error: the windows before it were evaluated
(their judgments are in the judge's cache) but nothing is published, since a run's files replace the previous ones
only when it succeeds. ``CsvSource`` streams a CSV input the same way (``inputs.csv_stream``: its shape pass checks
the file's bytes, records, header and cells, and each row's query_id and run).

A file source takes the SHA-256 of the bytes its shape pass reads, as it reads them (``inputs.validate.Tap``): the
manifest's ``input.sha256`` names them. A file that changes after that pass (its size or mtime when a window is
read, or the digest of the bytes the windows read) fails the run (``InputError`` naming it: exit 3, nothing
published): its results would mix two files.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from open_rag_eval.core.errors import ConfigError, InputError, StorageError
from open_rag_eval.core.types import RAGOutput
from open_rag_eval.evaluators.trec import CHUNK_OUTPUTS
from open_rag_eval.inputs.validate import Tap, file_stamp

__all__ = ["CsvSource", "FileSource", "JsonlSource", "ListSource", "OutputSource", "Spool", "SpooledSource",
           "WINDOW_OUTPUTS", "check_limit", "check_unchanged", "contiguous", "limit_queries", "query_groups",
           "windows"]

WINDOW_OUTPUTS = CHUNK_OUTPUTS


def limit_queries(outputs: list[RAGOutput], limit: int | None) -> list[RAGOutput]:
    """The outputs of the first ``limit`` queries (all of them when ``limit`` is None)."""
    if check_limit(limit) is None:
        return outputs
    kept = set(list(dict.fromkeys(o.query_id for o in outputs))[:limit])
    return [o for o in outputs if o.query_id in kept]


def check_limit(limit: int | None) -> int | None:
    """``limit`` (``--limit``), refused unless None or a whole number of at least 1."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit must be a whole number of at least 1, got {limit!r}", path="--limit")
    return limit


class OutputSource(Protocol):
    n_outputs: int
    n_queries: int
    fewest_answered: int  # the fewest outputs without an error of any query (0 without outputs)
    input_sha256: str | None  # the digest of the input file's bytes as read (None: not read from a file here)

    def windows(self, size: int = WINDOW_OUTPUTS) -> Iterator[list[RAGOutput]]: ...

    def all(self) -> list[RAGOutput]: ...


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


def query_groups(outputs: Iterable[RAGOutput]) -> Iterator[list[RAGOutput]]:
    """Each run of consecutive outputs of one query, in order."""
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
        self.input_sha256: str | None = None
        self.n_outputs = len(outputs)
        self.n_queries = len({o.query_id for o in outputs})
        self.fewest_answered = fewest_answered(outputs)

    def windows(self, size: int = WINDOW_OUTPUTS) -> Iterator[list[RAGOutput]]:
        if not contiguous(self.outputs):
            yield self.outputs
            return
        yield from windows(query_groups(self.outputs), size)

    def all(self) -> list[RAGOutput]:
        return self.outputs


Sizes = Callable[[Path, Tap | None], Iterator[tuple[str, int, int]]]
Groups = Callable[[Path, Tap | None], Iterator[list[RAGOutput]]]


def check_unchanged(path: Path, shape: Tap, read: Tap | None = None) -> None:
    """``path`` is the file whose shape ``shape`` read: the same size and mtime now, and (``read``: a later
    complete reading of it) the same bytes; else an ``InputError`` naming it."""
    what = ""
    if file_stamp(path) != shape.stamp:
        what = "its size or modification time"
    elif read is not None and (read.stamp != shape.stamp or read.sha256 != shape.sha256):
        what = "the digest of its bytes"
    if what:
        raise InputError(f"the input changed while the run read it ({what} differs from when it was first read): "
                         "its results would mix two files, so nothing is published; run again", file=str(path))


class FileSource:
    """An input file, streamed (``limit``: its first queries). Opening it reads its shape (queries, outputs, whether
    they are contiguous: ``readers()[0]``, each group's query_id, outputs and answered outputs); each query's
    outputs are built and checked when their window is read (``readers()[1]``)."""

    @staticmethod
    def readers() -> tuple[Sizes, Groups]:
        raise NotImplementedError

    def __init__(self, path: Path, limit: int | None = None) -> None:
        sizes, self._read = self.readers()
        self.path, self.limit = path, limit
        seen: set[int] = set()
        self.n_outputs = self.n_queries = 0
        self.contiguous = True
        fewest: int | None = None
        self._shape = Tap()
        for query_id, size, answered in sizes(path, self._shape):  # every line, as when the file is read at once
            if limit is None or len(seen) < limit:
                fewest = answered if fewest is None else min(fewest, answered)
            key = hash(query_id)
            if key in seen:  # (or a hash collision: then one window too, which is always right)
                self.contiguous = False
            seen.add(key)
            if limit is None or len(seen) <= limit:
                self.n_outputs += size
        self.n_queries = len(seen) if limit is None else min(limit, len(seen))
        self.fewest_answered = fewest or 0
        self.input_sha256: str | None = self._shape.sha256
        self._everything: list[RAGOutput] | None = None
        if not self.contiguous:  # one window: every output, read once
            self._everything = everything = self.all()
            check_unchanged(path, self._shape)
            self.n_outputs, self.n_queries = len(everything), len({o.query_id for o in everything})
            self.fewest_answered = fewest_answered(everything)

    def _groups(self) -> Iterator[list[RAGOutput]]:
        read = Tap()
        for index, group in enumerate(self._read(self.path, read)):
            check_unchanged(self.path, self._shape)
            if self.limit is None or index < self.limit:  # the rest is checked too, as when read at once
                yield group
        check_unchanged(self.path, self._shape, read)

    def windows(self, size: int = WINDOW_OUTPUTS) -> Iterator[list[RAGOutput]]:
        if not self.contiguous:
            yield self.all()
            return
        yield from windows(self._groups(), size)

    def all(self) -> list[RAGOutput]:
        if self._everything is not None:
            return self._everything
        from open_rag_eval.inputs import read_outputs

        return limit_queries(read_outputs(self.path), self.limit)


class JsonlSource(FileSource):
    """A JSONL input file: its shape is each line read as JSON alone (``inputs.jsonl``)."""

    @staticmethod
    def readers() -> tuple[Sizes, Groups]:
        from open_rag_eval.inputs.jsonl import jsonl_query_groups, jsonl_query_sizes

        return jsonl_query_sizes, jsonl_query_groups


class CsvSource(FileSource):
    """A CSV input file (either layout): its shape is each row's query_id, run and answer (``inputs.csv_stream``)."""

    @staticmethod
    def readers() -> tuple[Sizes, Groups]:
        from open_rag_eval.inputs.csv_stream import csv_query_groups, csv_query_sizes

        return csv_query_sizes, csv_query_groups


class Spool:
    """Outputs written to ``path`` as they come (a connector's, as it fetches them), each as its model's JSON (read
    back equal to it); memory keeps a few numbers an output and each query's id once."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offsets = array("q")  # where each output's line starts
        self.slots = array("l")  # each output's query, as an index into ``queries``
        self.answered = array("l")  # outputs without an error, per query
        self.queries: dict[str, int] = {}
        self._end = 0
        try:
            self._handle = path.open("wb")
        except OSError as error:
            raise StorageError(f"cannot spool the fetched outputs: {error.strerror}", path=path) from None

    def add(self, outputs: Iterable[RAGOutput]) -> None:
        try:
            for output in outputs:
                slot = self.queries.setdefault(output.query_id, len(self.queries))
                if slot == len(self.answered):
                    self.answered.append(0)
                self.answered[slot] += output.error is None
                line = output.model_dump_json().encode("utf-8") + b"\n"
                self.offsets.append(self._end)
                self.slots.append(slot)
                self._handle.write(line)
                self._end += len(line)
        except OSError as error:
            raise StorageError(f"cannot spool the fetched outputs: {error.strerror}", path=self.path) from None

    def close(self) -> None:
        self._handle.close()

    def source(self, order: dict[str, int]) -> SpooledSource:
        """The spooled outputs (the file closed), each query's together in the order of ``order``."""
        self.close()
        return SpooledSource(self, order)


class SpooledSource:
    """A ``Spool``'s outputs, stably sorted by their query's position in ``order`` (so each query's outputs are
    contiguous, in the order they came); read back from its file window by window."""

    def __init__(self, spool: Spool, order: dict[str, int]) -> None:
        self.path, self.offsets = spool.path, spool.offsets
        rank = array("l", [0] * len(spool.queries))
        for query_id, slot in spool.queries.items():
            rank[slot] = order[query_id]
        keys = [rank[slot] for slot in spool.slots]
        if all(a <= b for a, b in zip(keys, keys[1:])):
            self._order: array[int] | None = None  # the spool's own order (a run not resumed): read straight
        else:
            self._order = array("q", sorted(range(len(keys)), key=keys.__getitem__))
        del keys
        self.n_outputs, self.n_queries = len(spool.offsets), len(spool.queries)
        self.fewest_answered = min(spool.answered, default=0)
        self.input_sha256: str | None = None

    def _outputs(self) -> Iterator[RAGOutput]:
        with self.path.open("rb") as handle:
            if self._order is None:
                for line in handle:
                    yield RAGOutput.model_validate_json(line)
                return
            for index in self._order:
                handle.seek(self.offsets[index])
                yield RAGOutput.model_validate_json(handle.readline())

    def windows(self, size: int = WINDOW_OUTPUTS) -> Iterator[list[RAGOutput]]:
        yield from windows(query_groups(self._outputs()), size)

    def all(self) -> list[RAGOutput]:
        return list(self._outputs())
