"""The one rule for RAG outputs, applied at every door: the CSV and JSONL readers, ``evaluate()``'s DataFrame and
list, the outputs a connector fetches, and so the service's uploads and inline inputs (which are files).

- An input file must be a regular file of at most ``MAX_INPUT_BYTES`` (a device, a FIFO or a folder is refused
  before anything is read: ``/dev/zero`` is an error, not an endless read).
- A value in a text field (``TEXT_FIELDS``: the query, the answer, a passage's text and title, the reference
  answer) must be text: ``42`` or ``True`` where an answer belongs is an error naming the row and field, never
  judged as the text "42".
- A CSV column of a text field whose every value is a number (or every value a boolean) is a column of numbers,
  as pandas reads it, and is refused like the number in a DataFrame or a JSONL line: ``42`` as one answer among
  sentences is text, a file whose answers are all numbers has its columns wrong (or is not answers). A JSONL
  string ``"42"`` is text.
- The passages of an answer must be given: a missing value (NaN, None, null, an empty CSV cell) is unknown, not
  "retrieved nothing" (that is ``[]``), so it is an error; otherwise every citation of the answer would count as
  fabricated. So must each passage's text: an empty, NaN or None passage cell (one row per passage), an empty
  context in a list or a passage object with empty text is an error, never judged as a passage reading ``""``.
- Passage ids are unique; passage scores are finite numbers.
- An output may come without an answer (a retriever's output: passages and relevance labels, before any
  generation). Whether that is allowed is not decided here but by the run's evaluators, each declaring the metrics
  that read an answer (``evaluators.base.Contract.answer_metrics``): the run refuses such an output, naming the
  metric and the output's file and line (``evaluators.base.check_answers``), only when a configured metric reads
  one; a connector's such output becomes a failed output (``checked_fetch`` with ``needs_answer``).

At a file or ``evaluate()`` a broken output is an ``InputError`` naming the file (or item), line (or row) and
field: the CLI's exit 3, the service's 422. A connector's output breaking the rule is kept as a failed output whose
``error`` says what was wrong (a live system's reply is not the user's input), so the ``outputs.jsonl`` the run
saves always reads back.

Warnings about kept values (citations naming no retrieved passage) are tallied while a door reads
(``core.notices.tallied``): one line per kind with a count and the first few rows, however many rows have it.
"""

from __future__ import annotations

import hashlib
import io
import logging
import math
import os
import re
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, BinaryIO

from open_rag_eval.core.errors import InputError
from open_rag_eval.core.notices import note, tallied
from open_rag_eval.core.types import RAGOutput

__all__ = ["MAX_INPUT_BYTES", "NO_ANSWER", "NO_PASSAGE_TEXT", "TEXT_FIELDS", "NumberColumns", "check_input_file",
           "Tap", "check_output", "check_outputs", "check_text_value", "checked_fetch", "file_stamp", "note",
           "read_input_bytes", "tallied", "where_of"]

log = logging.getLogger("open_rag_eval.inputs")

MAX_INPUT_BYTES = 4 * 1024**3  # 4 GiB: a larger input is a mistake (or a device); split it
TEXT_FIELDS = frozenset({"query", "question", "user_input", "generated_answer", "answer", "response", "passage",
                         "passage_title", "reference_answer", "ground_truth", "reference", "answer_text", "text",
                         "title"})
NO_ANSWER = ("no answer: {reader} reads the answer (give the answer text, 'NO_ANSWER' for a refusal, or an error "
             "field (JSONL) when the system gave no output; metrics that read no answer, such as golden's retrieval "
             "metrics, score outputs without one)")

NO_PASSAGE_TEXT = "missing passage text: a passage without text is unknown, not an empty passage, and is not judged"
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_BOOLEAN = ("true", "false")


# ---------------------------------------------------------------- files


def check_input_file(path: Path, limit: int = MAX_INPUT_BYTES) -> None:
    """An input file is a regular file of at most ``limit`` bytes (a device such as /dev/zero would never end)."""
    try:
        info = path.stat()
    except OSError as error:
        raise InputError(f"cannot read the file: {error.strerror or error}", file=str(path)) from None
    if not stat.S_ISREG(info.st_mode):
        kind = "a folder" if stat.S_ISDIR(info.st_mode) else "a device, FIFO or socket"
        raise InputError(f"not a regular file ({kind}): give a .csv or .jsonl file", file=str(path))
    if info.st_size > limit:
        raise InputError(f"the file has {info.st_size:,} bytes, more than the limit of {limit:,}: split it",
                         file=str(path))


def read_input_bytes(path: Path, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of an input file: a regular file of at most ``limit`` bytes, read with that bound."""
    check_input_file(path, limit)
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as error:
        raise InputError(f"cannot read the file: {error.strerror or error}", file=str(path)) from None
    if len(data) > limit:  # grew while read
        raise InputError(f"the file has more than {limit:,} bytes: split it", file=str(path))
    return data


class Tap:
    """What a streamed reader reads of an input file: the SHA-256 of the bytes as they are read, and the file's
    (size, mtime) when it was opened (``file_stamp``). A run's manifest names the digest of the bytes it read, and
    a file that changes while a run reads it is caught (``run.source``)."""

    def __init__(self) -> None:
        self._sha = hashlib.sha256()
        self.stamp: tuple[int, int] | None = None

    def open(self, path: Path) -> BinaryIO:
        handle = path.open("rb")
        info = os.fstat(handle.fileno())
        self.stamp = (info.st_size, info.st_mtime_ns)
        return io.BufferedReader(_Tapped(handle, self._sha))

    @property
    def sha256(self) -> str:
        return self._sha.hexdigest()


class _Tapped(io.RawIOBase):
    """A binary file whose bytes update a digest as they are read."""

    def __init__(self, handle: BinaryIO, sha: Any) -> None:
        self._handle, self._sha = handle, sha

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        n = self._handle.readinto(buffer)  # type: ignore[attr-defined]
        self._sha.update(memoryview(buffer)[:n])
        return int(n)

    def close(self) -> None:
        self._handle.close()
        super().close()


def file_stamp(path: Path) -> tuple[int, int] | None:
    """(size, mtime in ns) of a file, None when it cannot be read."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns


# ---------------------------------------------------------------- values


def check_text_value(name: str, value: Any, file: str, line: int | None) -> None:
    """A non-missing value of a text field that is not text (a number, a boolean) is an error."""
    if name in TEXT_FIELDS and not isinstance(value, str):
        shown = "a boolean" if isinstance(value, bool) else "a number" if isinstance(value, (int, float)) \
            else type(value).__name__
        raise InputError(f"expected text, got {shown} ({value!r}): a value that is not text is not judged",
                         file=file, line=line, field=name)


class NumberColumns:
    """The text columns of a CSV (``TEXT_FIELDS``) holding only numbers, or only booleans, so far: fed every row
    (``see``), ``check`` refuses such a column at its first value (the module doc's rule)."""

    def __init__(self, header: Sequence[str], file: str) -> None:
        self.file = file
        self.first: dict[str, tuple[int, str, str] | None] = {name: None for name in header if name in TEXT_FIELDS}

    def see(self, line: int, row: dict[str, str]) -> None:
        for name in list(self.first):
            cell = row.get(name, "").strip()
            if not cell:
                continue
            kind = "a number" if _NUMBER.fullmatch(cell) else "a boolean" if cell.lower() in _BOOLEAN else ""
            first = self.first[name]
            if not kind or (first is not None and first[2] != kind):
                del self.first[name]
            elif first is None:
                self.first[name] = (line, cell, kind)

    def check(self) -> None:
        for name, first in self.first.items():
            if first is not None:
                line, cell, kind = first
                raise InputError(f"every value of this text column is {kind} (this one {cell!r}): a column of "
                                 f"{'numbers' if kind == 'a number' else 'booleans'} is not text and is not judged "
                                 f"(are the columns shifted?); write text, or give a JSONL file where \"{cell}\" is "
                                 f"a string", file=self.file, line=line, field=name)


# ---------------------------------------------------------------- outputs


def where_of(output: RAGOutput) -> tuple[str, int | None]:
    """The file (or item) and line an output was read from, as an error names them."""
    file, _, line = (output.source or "").rpartition(":")
    if file and line.isascii() and line.isdigit():
        return file, int(line)
    return output.source or f"query_id '{output.query_id}' run {output.run}", None


def problem_of(output: RAGOutput) -> tuple[str, str] | None:
    """(field, problem) of the first way ``output`` breaks the rule, or None."""
    seen: set[str] = set()
    for index, passage in enumerate(output.passages):
        if not passage.id.strip():
            return f"passages[{index}].id", "missing passage id"
        if passage.id in seen:
            return f"passages[{index}].id", f"duplicate passage id '{passage.id}'"
        seen.add(passage.id)
        if passage.score is not None and not math.isfinite(passage.score):
            return f"passages[{index}].score", f"expected a finite number, got {passage.score!r}"
    return None


def check_output(output: RAGOutput, field_names: dict[str, str] | None = None) -> RAGOutput:
    """``output`` if it keeps the rule; else an ``InputError`` naming its file, line and field (``field_names``
    renames a field for a layout, e.g. ``answer`` -> ``generated_answer``)."""
    found = problem_of(output)
    if found is None:
        return output
    name, problem = found
    file, line = where_of(output)
    raise InputError(problem, file=file, line=line, field=(field_names or {}).get(name, name))


def check_outputs(outputs: Sequence[RAGOutput], field_names: dict[str, str] | None = None) -> list[RAGOutput]:
    return [check_output(output, field_names) for output in outputs]


def checked_fetch(outputs: Sequence[RAGOutput], connector: str, needs_answer: str | None = None) -> list[RAGOutput]:
    """A connector's outputs, each one breaking the rule replaced by a failed output that says why; with
    ``needs_answer`` (the run's first metric that reads an answer, in words) one without an answer too."""
    kept = []
    for output in outputs:
        found = problem_of(output)
        if found is None and needs_answer is not None and output.error is None and not output.answer_text.strip():
            found = "answer", NO_ANSWER.format(reader=needs_answer)
        if found is None:
            kept.append(output)
            continue
        name, problem = found
        reason = f"the {connector} connector's output is invalid: field '{name}': {problem.split(' (')[0]}"
        kept.append(RAGOutput(query_id=output.query_id, query=output.query, run=output.run, error=reason,
                              latency_ms=output.latency_ms, labels=output.labels, source=output.source))
    return kept
