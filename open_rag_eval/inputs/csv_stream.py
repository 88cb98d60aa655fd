"""A CSV of RAG outputs read as a stream: memory holds a query's rows, not the file.

``csv_query_sizes`` reads the run's shape: the file is decoded and parsed record by record (a UTF-8 BOM, CRLF line
ends and quoted multi-line cells as ``read_csv`` reads them), the header and every cell checked, and of each row
only what places it: its query_id and (one row per passage) its run. Every problem ``read_csv`` finds (bytes that
are not UTF-8, a NUL byte, malformed CSV, a missing column, a row of the wrong length, a cell too long, no data
rows) and every problem of a query_id or a run is found there, before anything is asked. A file with any of them is
then read whole (``read_csv_outputs``) to raise the error that reader raises, its first in the reader's order (a NUL
byte or malformed CSV anywhere before a cell's problem): the same message, file, line and field as before. An
output without an answer is read as one (whether the run may score it is its evaluators' call:
``evaluators.base.check_answers``).

``csv_query_groups`` builds each query's outputs from its rows (``outputs_from_rows``) when its window is read. A
problem found only there (a passage score that is not a number, a label that differs from an earlier row's, ...)
is the file's first in the reader's order, since every earlier row was built without one: it fails the run with
the error the whole-file reader raises, when its window is read.
"""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from open_rag_eval.core.errors import InputError
from open_rag_eval.core.types import RAGOutput
from open_rag_eval.inputs.contexts import CONTEXT_FIELDS, context_columns, derived_query_id
from open_rag_eval.inputs.csv_layout import (
    Rows,
    _check_header,
    _required_columns,
    layout_hint,
    outputs_from_rows,
    read_csv_outputs,
    warn_ignored,
)
from open_rag_eval.inputs.text import Where, check_text, parse_int, required_text
from open_rag_eval.core.segment import normalize_id
from open_rag_eval.inputs.validate import NumberColumns, Tap, check_input_file

__all__ = ["csv_query_groups", "csv_query_sizes"]

Row = tuple[int, dict[str, str]]
_FAILS = (InputError, UnicodeError, OSError, csv.Error)


def csv_query_sizes(path: Path, tap: Tap | None = None) -> Iterator[tuple[str, int, int]]:
    """For each group of ``csv_query_groups``: its query_id, its number of outputs and of those without an error
    (a CSV has no error column: all of them). A file with a problem this reading finds raises the whole-file
    reader's error. ``tap``: takes the digest of the bytes read."""
    path = Path(path)
    try:
        header, rows = _stream(path, tap)
        place, numbers = _placer(path, header), NumberColumns(header, str(path))
        query_id, outputs, first_line = None, _Outputs(path), 0
        for line, row in rows:
            first_line = first_line or line
            key, run, answered = place(line, row)
            numbers.see(line, row)
            if outputs.size and key != query_id:
                yield str(query_id), *outputs.counted()
                outputs = _Outputs(path)
            query_id = key
            outputs.add(line, run, answered)
        if not outputs.size:
            raise InputError("no data rows after the header", file=str(path))
        numbers.check()
        yield str(query_id), *outputs.counted()
    except _FAILS:
        read_csv_outputs(path)  # raises the error the file is refused with when it is read at once
        raise
    warn_ignored(str(path), header, first_line)


def csv_query_groups(path: Path, tap: Tap | None = None) -> Iterator[list[RAGOutput]]:
    """The outputs of a CSV as ``read_csv_outputs`` reads them, one query's contiguous rows at a time (the labels of
    a query are those of its contiguous rows)."""
    path = Path(path)
    header, rows = _stream(path, tap)
    place = _placer(path, header)
    block: Rows = []
    query_id = None
    try:
        for line, row in rows:
            key = place(line, row)[0]
            if block and key != query_id:
                yield outputs_from_rows(str(path), header, block, warn=False, whole=False)
                block = []
            query_id = key
            block.append((line, row))
    except (UnicodeError, OSError, csv.Error):  # (a file changed since its shape was read)
        read_csv_outputs(path)  # raises the error the file is refused with when it is read at once
        raise
    if block:
        yield outputs_from_rows(str(path), header, block, warn=False, whole=False)


class _Outputs:
    """The outputs of one query's contiguous rows, counted: (query_id, run) groups one row per passage, or one
    per row."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = 0
        self.runs: set[int] = set()
        self.run: int | None = None
        self.answered = True

    def add(self, line: int, run: int | None, answered: bool) -> None:
        if run is None:  # one row per answer: each row is an output
            self.size += 1
            return
        if self.size and run == self.run:
            self.answered = self.answered or answered
            return
        if run in self.runs:  # a run's rows not contiguous
            raise InputError("refused", file=str(self.path), line=line)  # named by the whole-file reader
        self.runs.add(run)
        self.run, self.answered, self.size = run, answered, self.size + 1

    def counted(self) -> tuple[int, int]:
        return self.size, self.size


def _placer(path: Path, header: list[str]) -> Callable[[int, dict[str, str]], tuple[str, int | None, bool]]:
    """A row's query_id, run (None: one row per answer) and whether it gives an answer, checked as the whole-file
    reader checks them."""
    file = str(path)
    if any(name in header for name in CONTEXT_FIELDS):
        query = context_columns(header, Where(file))["query"] or "query"

        def place_answer(line: int, row: dict[str, str]) -> tuple[str, int | None, bool]:
            where = Where(file, line)
            text = required_text(row[query], where, query, "empty query")
            if "query_id" in row:
                return required_text(row["query_id"], where, "query_id", "missing query_id"), None, True
            return derived_query_id(text), None, True

        return place_answer

    def place_passage(line: int, row: dict[str, str]) -> tuple[str, int | None, bool]:
        where = Where(file, line)
        query_id = required_text(row["query_id"], where, "query_id", "missing query_id")
        run = parse_int(row.get("query_run", "").strip() or "1", where, "query_run")
        if normalize_id(row["passage_id"]) and not row["passage"].strip():
            raise where.error("missing passage text", "passage")  # named by the whole-file reader
        return query_id, run, bool(row["generated_answer"].strip())

    return place_passage


def _stream(path: Path, tap: Tap | None = None) -> tuple[list[str], Iterator[Row]]:
    """The checked header and rows of a CSV of outputs, as ``read_csv`` checks them (a problem of the file raises
    an error, though not always the one ``read_csv`` names: the callers ask it for that)."""
    check_input_file(path)
    records = _records(path, tap or Tap())
    first = next(records, None)
    if first is None:
        raise InputError("empty file", file=str(path))
    line, names = first
    header = [name.strip() for name in names]
    _check_header(header, _required_columns(header), Where(str(path), line), layout_hint(header))
    return header, _rows(path, header, records)


def _rows(path: Path, header: list[str], records: Iterable[tuple[int, list[str]]]) -> Iterator[Row]:
    for line, cells in records:
        if len(cells) != len(header):
            raise InputError(f"row has {len(cells)} cells, the header has {len(header)}", file=str(path), line=line)
        where = Where(str(path), line)
        yield line, {name: check_text(cell.replace("\r\n", "\n"), where, name, None)
                     for name, cell in zip(header, cells)}


def _records(path: Path, tap: Tap) -> Iterator[tuple[int, list[str]]]:
    """Non-blank CSV records with the line each starts on, the file decoded as strict UTF-8 a block at a time."""
    most = max(csv.field_size_limit(), path.stat().st_size + 1)  # as read_csv: a cell's length is checked later
    with tap.open(path) as raw, io.TextIOWrapper(raw, encoding="utf-8-sig", newline="") as text:
        reader = csv.reader(_text_lines(text), strict=True)
        while True:
            start = reader.line_num + 1
            with _field_limit(most):  # the csv module's one limit, set only while this reader reads
                cells = next(reader, None)
            if cells is None:
                return
            if any(cell.strip() for cell in cells):
                yield start, cells


def _text_lines(text: Iterable[str]) -> Iterator[str]:
    for line in text:
        if "\x00" in line:
            raise UnicodeError("NUL")  # binary content: named by the whole-file reader
        yield line


@contextlib.contextmanager
def _field_limit(most: int) -> Iterator[None]:
    old = csv.field_size_limit(most)
    try:
        yield
    finally:
        csv.field_size_limit(old)
