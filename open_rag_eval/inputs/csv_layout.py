"""CSV files: generic reading with checked cells, and RAG outputs in open-rag-eval's layout (one row per passage)."""

from __future__ import annotations

import csv
import io
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.contexts import (
    CONTEXT_FIELDS,
    CONTEXT_REQUIRED,
    context_columns,
    read_context_rows,
    warn_ignored_contexts,
)
from open_rag_eval.inputs.labels import LABEL_FIELDS, QueryBook, parse_bool
from open_rag_eval.inputs.validate import NO_PASSAGE_TEXT, NumberColumns, check_outputs
from open_rag_eval.inputs.text import (
    Where,
    check_text,
    parse_int,
    parse_number,
    read_text,
    required_text,
    segment,
    undecodable_error,
)
from open_rag_eval.core.segment import normalize_id
from open_rag_eval.core.types import Labels, Passage, RAGOutput

log = logging.getLogger(__name__)

CSV_REQUIRED = ("query_id", "query", "passage_id", "passage", "generated_answer")
CSV_OPTIONAL = ("query_run", "passage_title", "passage_score", "latency_ms", "refused", *LABEL_FIELDS)
Rows = list[tuple[int, dict[str, str]]]


# ---------------------------------------------------------------- generic CSV


Required = Sequence[str | tuple[str, ...]]  # a column, or a tuple of alternative names (any one of them)


def read_csv(path: Path, required: Required | Callable[[list[str]], Required],
             hint: str | Callable[[list[str]], str] = "") -> tuple[list[str], Rows]:
    """Header and rows (line of the row's start, column -> cell); every cell checked.

    ``required`` may depend on the header (a function of it); ``hint`` (also) is added to a missing-column error.
    """
    text, offset = read_text(path)
    records = _csv_records(text, str(path))
    line, header = records[0]
    header = [name.strip() for name in header]
    where = Where(str(path), line)
    _check_header(header, required(header) if callable(required) else required, where,
                  hint(header) if callable(hint) else hint)
    rows: Rows = []
    for line, cells in records[1:]:
        if len(cells) != len(header):
            raise InputError(f"row has {len(cells)} cells, the header has {len(header)}", file=str(path), line=line)
        row_where = Where(str(path), line)
        rows.append((line, {name: check_text(cell.replace("\r\n", "\n"), row_where, name, offset)
                            for name, cell in zip(header, cells)}))
    if offset is not None:
        raise undecodable_error(path, text, offset)
    if not rows:
        raise where.error("no data rows after the header")
    return header, rows


def _check_header(header: list[str], required: Required, where: Where, hint: str = "") -> None:
    for index, name in enumerate(header):
        if not name:
            raise where.error(f"empty column name (column {index + 1})")
        if header.index(name) != index:
            raise where.error("duplicate column", shown(name))
    for entry in required:
        names = (entry,) if isinstance(entry, str) else entry
        if not any(name in header for name in names):
            either = f" (accepted names: {', '.join(names)})" if len(names) > 1 else ""
            raise where.error(f"missing column{either}{hint}; the header has: {', '.join(map(shown, header))}",
                              names[0])


def shown(name: str) -> str:
    """A column name as an error message shows it: line breaks escaped, so that the message stays one line."""
    return name.replace("\r", "\\r").replace("\n", "\\n")


def _csv_records(text: str, file: str) -> list[tuple[int, list[str]]]:
    """Non-blank CSV records with the line each starts on."""
    old_limit = csv.field_size_limit()
    csv.field_size_limit(max(old_limit, len(text) + 1))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    records: list[tuple[int, list[str]]] = []
    try:
        while True:
            start = reader.line_num + 1
            try:
                cells = next(reader)
            except StopIteration:
                break
            except csv.Error as error:
                raise _csv_error(text, file, start, str(error)) from None
            if any(cell.strip() for cell in cells):
                records.append((start, cells))
    finally:
        csv.field_size_limit(old_limit)
    if not records:
        raise InputError("empty file", file=file)
    return records


def _csv_error(text: str, file: str, start: int, message: str) -> InputError:
    if "unexpected end of data" in message:
        return InputError("unclosed quote: the quoted cell never ends", file=file, line=start,
                          field=_header_name(text, _open_quote_column(text, start)))
    return InputError(f"malformed CSV: {message}", file=file, line=start)


def _open_quote_column(text: str, start: int) -> int:
    """0-based column of the quoted cell left open in the record starting at line ``start``."""
    record = "".join(re.split(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)", text)[start - 1:])
    column, open_column, state = 0, 0, "start"  # state of the current cell: start, plain, quoted, closed
    for char in record:
        if state == "quoted":
            state = "closed" if char == '"' else "quoted"
        elif state == "closed" and char == '"':
            state = "quoted"  # "" inside a quoted cell
        elif char == ",":
            column, state = column + 1, "start"
        elif state == "start" and char == '"':
            state, open_column = "quoted", column
        elif state == "start":
            state = "plain"
    return open_column


def _header_name(text: str, column: int) -> str:
    names = next(csv.reader(io.StringIO(text.splitlines()[0] if text else "")), [])
    return names[column].strip() if column < len(names) else ""


# ---------------------------------------------------------------- RAG outputs

_PASSAGE_LAYOUT = f"one row per passage: {', '.join(CSV_REQUIRED)}"
_CONTEXT_LAYOUT = ("one row per answer, its passages listed in a contexts column: "
                   + ", ".join("/".join(names) for names in CONTEXT_REQUIRED))
_RAGAS_NAMES = {"question", "user_input", "answer", "response"}  # only the list-of-contexts layout has these


def _contexts_meant(header: list[str]) -> bool:
    """Whether the header announces one row per answer: a contexts column, or (no passage column) a column only
    that layout names (``question``, ``answer``...)."""
    if any(name in header for name in CONTEXT_FIELDS):
        return True
    return "passage" not in header and bool(_RAGAS_NAMES & set(header))


def _required_columns(header: list[str]) -> Required:
    """The columns of the layout the header announces (``_contexts_meant``)."""
    return CONTEXT_REQUIRED if _contexts_meant(header) else CSV_REQUIRED


def layout_hint(header: list[str]) -> str:
    """What a missing-column error adds: the layout looked for and its columns, and a column of the header that
    looks like the list of passages under another name (``context``, ``retrieved_passages``)."""
    if not _contexts_meant(header):
        return (f" for the layout {_PASSAGE_LAYOUT} (or {_CONTEXT_LAYOUT})")
    import difflib

    known = {name for names in CONTEXT_REQUIRED for name in names}
    near = [name for name in header if name not in known and
            difflib.get_close_matches(name, [*CONTEXT_FIELDS, "passages"], n=1, cutoff=0.6)]
    guess = f" (is '{near[0]}' the passages? name it contexts)" if near else ""
    return f" for the layout {_CONTEXT_LAYOUT}{guess}"



def read_csv_outputs(path: Path) -> list[RAGOutput]:
    """The outputs of a CSV: one row per passage (open-rag-eval's layout, one output per contiguous
    (query_id, query_run) group), or one row per answer with its passages as a list (a ``contexts`` column)."""
    header, rows = read_csv(path, required=_required_columns, hint=layout_hint)
    return outputs_from_rows(str(path), header, rows)


def outputs_from_rows(file: str, header: list[str], rows: Rows, *, warn: bool = True,
                      whole: bool = True) -> list[RAGOutput]:
    """The outputs of checked CSV rows (either layout); ``file`` names them in errors. The header is checked
    here too (for rows that did not come from ``read_csv``, e.g. a DataFrame's). ``warn``: of the columns it
    ignores (a file read query by query warns once, ``warn_ignored``); ``whole``: the rows are the whole input, so
    a text column of numbers only is refused here (a file read query by query checks that in its shape pass)."""
    _check_header(header, _required_columns(header), Where(file), layout_hint(header))
    outputs = _outputs_from_rows(file, header, rows, warn)
    if whole:
        numbers = NumberColumns(header, file)
        for line, row in rows:
            numbers.see(line, row)
        numbers.check()
    return outputs


def _outputs_from_rows(file: str, header: list[str], rows: Rows, warn: bool) -> list[RAGOutput]:
    path = file
    if any(name in header for name in CONTEXT_FIELDS):
        return read_context_rows(Path(path), header, rows, warn=warn)
    if warn:
        warn_ignored(file, header, rows[0][0] if rows else 2)
    groups: list[_Group] = []
    seen: dict[tuple[str, int], int] = {}
    queries = QueryBook()
    for line, row in rows:
        where = Where(str(path), line)
        query_id = required_text(row["query_id"], where, "query_id", "missing query_id")
        query = required_text(row["query"], where, "query", "empty query")
        run = parse_int(row.get("query_run", "").strip() or "1", where, "query_run")
        queries.add(query_id, query, where, {name: row[name] for name in LABEL_FIELDS if name in row})
        if not groups or groups[-1].key != (query_id, run):
            groups.append(_new_group((query_id, run), query, where, seen))
        groups[-1].add(row, where)
    return check_outputs([group.output(str(path), queries.labels(group.key[0])) for group in groups],
                         {"answer": "generated_answer"})


def warn_ignored(file: str, header: list[str], first_line: int) -> None:
    """The warning of ``outputs_from_rows`` about the columns of ``header`` it ignores (either layout)."""
    if any(name in header for name in CONTEXT_FIELDS):
        warn_ignored_contexts(file, header, context_columns(header, Where(file, max(1, first_line - 1))))
        return
    ignored = [name for name in header if name not in CSV_REQUIRED + CSV_OPTIONAL]
    if ignored:
        log.warning("%s: ignoring unknown column(s): %s", file, ", ".join(ignored))


def _new_group(key: tuple[str, int], query: str, where: Where, seen: dict[tuple[str, int], int]) -> _Group:
    """The group starting at ``where``; a key seen before means its rows are not contiguous."""
    if key in seen:
        raise where.error(f"rows of query_id '{key[0]}' run {key[1]} are not contiguous "
                          f"(the group started at line {seen[key]})", "query_id")
    seen[key] = where.line or 0
    return _Group(key, query, where.line or 0)


@dataclass
class _Group:
    """The rows of one (query_id, run) of a CSV."""

    key: tuple[str, int]
    query: str
    line: int
    passages: list[Passage] = field(default_factory=list)
    passage_ids: set[str] = field(default_factory=set)
    answer: tuple[str, int] | None = None
    latency: tuple[float, int] | None = None
    refused: tuple[bool, int] | None = None

    def add(self, row: dict[str, str], where: Where) -> None:
        self._add_passage(row, where)
        answer = row["generated_answer"].strip()
        if answer:
            if self.answer is not None and self.answer[0] != answer:
                raise where.error(f"a different answer than line {self.answer[1]} for the same query_id and run",
                                  "generated_answer")
            self.answer = self.answer or (answer, where.line or 0)
        if row.get("latency_ms", "").strip():
            latency = parse_number(row["latency_ms"], where, "latency_ms", minimum=0.0)
            if self.latency is not None and self.latency[0] != latency:
                raise where.error(f"a different latency than line {self.latency[1]}", "latency_ms")
            self.latency = self.latency or (latency, where.line or 0)
        if row.get("refused", "").strip():
            refused = parse_bool(row["refused"], where, "refused")
            if self.refused is not None and self.refused[0] != refused:
                raise where.error(f"a different value than line {self.refused[1]}", "refused")
            self.refused = self.refused or (refused, where.line or 0)

    def _add_passage(self, row: dict[str, str], where: Where) -> None:
        passage_id, text = normalize_id(row["passage_id"]), row["passage"]
        if not passage_id:
            if text.strip():
                raise where.error("missing passage_id for a passage", "passage_id")
            return
        if not text.strip():
            raise where.error(f"{NO_PASSAGE_TEXT} (a row that carries no passage leaves passage_id empty too)",
                              "passage")
        if passage_id in self.passage_ids:
            raise where.error(f"duplicate passage id '{passage_id}' in query_id '{self.key[0]}' run {self.key[1]}",
                              "passage_id")
        title = row.get("passage_title", "").strip() or None
        score_text = row.get("passage_score", "").strip()
        score = parse_number(score_text, where, "passage_score") if score_text else None
        self.passages.append(Passage(id=passage_id, text=text, title=title, score=score))
        self.passage_ids.add(passage_id)

    def output(self, file: str, labels: Labels) -> RAGOutput:
        answer_text = self.answer[0] if self.answer else ""
        source = f"{file}:{self.line}"
        parts = segment(answer_text, [passage.id for passage in self.passages], source)
        return RAGOutput(query_id=self.key[0], query=self.query, run=self.key[1], passages=tuple(self.passages),
                         answer=parts, answer_text=answer_text, labels=labels,
                         latency_ms=self.latency[0] if self.latency else None,
                         refused=self.refused[0] if self.refused else None, source=source)
