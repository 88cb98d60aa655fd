"""Read RAG outputs (CSV in open-rag-eval's layout, or JSONL) and query lists; write the JSONL schema.

CSV layout (one row per retrieved passage, in retrieval order; a UTF-8 BOM, CRLF line ends and quoted multi-line
cells work):

    query_id, query, [query_run], passage_id, passage, generated_answer, [optional columns]

- Rows of one (query_id, query_run) are contiguous; ``query_run`` defaults to 1. The answer sits in the first row of
  the group (repeating it in later rows is fine, a different one is an error). A row with empty ``passage_id`` and
  ``passage`` carries no passage (a query that retrieved nothing). Ids are text: ``[1]`` and ``1`` are the same id.
- ``NO_ANSWER`` as the answer is a real refusal: ``answer_text`` ``"NO_ANSWER"``, one statement ``NO_ANSWER``
  without citations (judges read "NO_ANSWER", not an empty string, which some APIs reject).
- Optional per-passage columns: ``passage_title``, ``passage_score`` (the retriever's score). Per-output:
  ``latency_ms``. Per-query labels, read from any row of the query (different values are an error):
  ``relevant_ids`` (``id`` or ``id:grade`` separated by ``;``, or a JSON list / object id -> grade),
  ``expected_keywords`` (``;``), ``expected_refusal`` (true/false/1/0/yes/no), ``required_citations`` (int),
  ``reference_answer``, ``grounding_ids`` (``;``). Other columns are ignored with a warning.

JSONL (one output per line, blank lines skipped; what ``output_to_json`` writes):

    {"query_id": str|int, "query": str, "run": int = 1,
     "passages": [{"id": str|int, "text": str, "title"?: str, "score"?: number}],
     "answer": [{"text": str, "citations": [id, ...]}] | "plain text with [n] markers",
     "answer_text"?: str, "latency_ms"?: number, "error"?: str,
     "relevant_ids"?: {id: grade} | [id] | str, "expected_keywords"?: [str] | str, "expected_refusal"?: bool | str,
     "required_citations"?: int, "reference_answer"?: str, "grounding_ids"?: [id] | str}

Citations in a structured answer are passage ids; a plain answer is segmented by ``segment.segment_answer``.
Unknown fields are errors. Any text value is limited to ``MAX_CELL_CHARS`` characters.

Every problem raises ``InputError`` naming file, line and field, in one line.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.errors import InputError
from open_rag_eval.segment import normalize_id, split_answer
from open_rag_eval.types import AnswerPart, Labels, Passage, RAGOutput

__all__ = ["LABEL_FIELDS", "MAX_CELL_CHARS", "output_to_json", "read_outputs", "read_queries"]

log = logging.getLogger(__name__)

MAX_CELL_CHARS = 1_000_000
LABEL_FIELDS = ("relevant_ids", "expected_keywords", "expected_refusal", "required_citations", "reference_answer",
                "grounding_ids")
CSV_REQUIRED = ("query_id", "query", "passage_id", "passage", "generated_answer")
CSV_OPTIONAL = ("query_run", "passage_title", "passage_score", "latency_ms", *LABEL_FIELDS)
JSONL_FIELDS = ("query_id", "query", "run", "passages", "answer", "answer_text", "latency_ms", "error", *LABEL_FIELDS)
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


@dataclass
class _Where:
    """A location in an input file, for error messages."""

    file: str
    line: int | None = None

    def error(self, problem: str, field: str = "") -> InputError:
        return InputError(problem, file=self.file, line=self.line, field=field)


# ---------------------------------------------------------------- public API


def read_outputs(path: Path) -> list[RAGOutput]:
    """The RAG outputs of a ``.csv`` or ``.jsonl`` file, in file order."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return _read_csv_outputs(path)
    if suffix == ".jsonl":
        return _read_jsonl_outputs(path)
    raise InputError(f"unsupported input format '{suffix or path.name}': expected .csv or .jsonl", file=str(path))


def read_queries(path: Path) -> list[tuple[str, str]]:
    """(query_id, query) pairs of a CSV with a ``query`` column and an optional ``query_id`` column.

    Without ``query_id``, ids are ``q_`` + the first 12 hex digits of the SHA-256 of the query text: stable when the
    file is reordered or extended.
    """
    path = Path(path)
    header, rows = _read_csv(path, required=("query",))
    result: list[tuple[str, str]] = []
    first_line: dict[str, int] = {}
    for line, row in rows:
        where = _Where(str(path), line)
        query = _required_text(row["query"], where, "query", "empty query")
        if "query_id" in header:
            query_id = _required_text(row["query_id"], where, "query_id", "missing query_id")
        else:
            query_id = "q_" + hashlib.sha256(query.encode()).hexdigest()[:12]
        if query_id in first_line and "query_id" in header:
            raise where.error(f"duplicate query_id '{query_id}' (first at line {first_line[query_id]})", "query_id")
        if query_id in first_line:
            raise where.error(f"duplicate query (same text as line {first_line[query_id]})", "query")
        first_line[query_id] = line
        result.append((query_id, query))
    return result


def output_to_json(output: RAGOutput) -> dict[str, Any]:
    """One output in the JSONL schema (``source`` is not part of it)."""
    data: dict[str, Any] = {
        "query_id": output.query_id,
        "query": output.query,
        "run": output.run,
        "passages": [passage.model_dump(exclude_none=True) for passage in output.passages],
        "answer": [{"text": part.text, "citations": list(part.citations)} for part in output.answer],
        "answer_text": output.answer_text,
    }
    if output.latency_ms is not None:
        data["latency_ms"] = output.latency_ms
    if output.error is not None:
        data["error"] = output.error
    for name, value in output.labels.model_dump(exclude_none=True).items():
        data[name] = list(value) if isinstance(value, tuple) else value
    return data


# ---------------------------------------------------------------- file access and checks


def _read_text(path: Path) -> tuple[str, int | None]:
    """The decoded text (BOM removed) and the byte offset of the first undecodable byte, if any.

    Undecodable bytes are kept as surrogate escapes so that the caller can name the field holding them.
    """
    where = _Where(str(path))
    try:
        data = path.read_bytes()
    except OSError as error:
        raise where.error(f"cannot read the file: {error.strerror or error}") from None
    bom = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    if not data[bom:].strip():
        raise where.error("empty file")
    nul = data.find(b"\x00")
    if nul >= 0:
        where.line = data.count(b"\n", 0, nul) + 1
        raise where.error(f"binary content (NUL byte at byte offset {nul}), not a text file")
    try:
        return data[bom:].decode("utf-8"), None
    except UnicodeDecodeError as error:
        return data[bom:].decode("utf-8", errors="surrogateescape"), bom + error.start


def _undecodable_error(path: Path, text: str, offset: int) -> InputError:
    line = text[: _surrogate_index(text)].count("\n") + 1
    return InputError(f"undecodable bytes (not UTF-8) at byte offset {offset}", file=str(path), line=line)


def _surrogate_index(text: str) -> int:
    return next((i for i, char in enumerate(text) if "\udc80" <= char <= "\udcff"), len(text))


def _check_text(value: str, where: _Where, field: str, offset: int | None) -> str:
    if offset is None and len(value) <= MAX_CELL_CHARS:
        return value
    if len(value) > MAX_CELL_CHARS:
        raise where.error(f"value of {len(value):,} characters exceeds the limit of {MAX_CELL_CHARS:,}", field)
    if offset is not None and _surrogate_index(value) < len(value):
        raise where.error(f"undecodable bytes (not UTF-8) at byte offset {offset}", field)
    return value


def _required_text(value: str, where: _Where, field: str, problem: str) -> str:
    if not value.strip():
        raise where.error(problem, field)
    return value.strip()


# ---------------------------------------------------------------- CSV


def _read_csv(path: Path, required: tuple[str, ...]) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and rows (line of the row's start, column -> cell); every cell checked."""
    text, offset = _read_text(path)
    records = _csv_records(text, str(path))
    line, header = records[0]
    header = [name.strip() for name in header]
    where = _Where(str(path), line)
    for index, name in enumerate(header):
        if not name:
            raise where.error(f"empty column name (column {index + 1})")
        if header.index(name) != index:
            raise where.error("duplicate column", name)
    for name in required:
        if name not in header:
            raise where.error(f"missing column; the header has: {', '.join(header)}", name)
    rows: list[tuple[int, dict[str, str]]] = []
    for line, cells in records[1:]:
        if len(cells) != len(header):
            raise InputError(f"row has {len(cells)} cells, the header has {len(header)}", file=str(path), line=line)
        row_where = _Where(str(path), line)
        rows.append((line, {name: _check_text(cell.replace("\r\n", "\n") if "\r" in cell else cell, row_where, name, offset)
                            for name, cell in zip(header, cells)}))
    if offset is not None:
        raise _undecodable_error(path, text, offset)
    if not rows:
        raise where.error("no data rows after the header")
    return header, rows


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


def _read_csv_outputs(path: Path) -> list[RAGOutput]:
    header, rows = _read_csv(path, required=CSV_REQUIRED)
    ignored = [name for name in header if name not in CSV_REQUIRED + CSV_OPTIONAL]
    if ignored:
        log.warning("%s: ignoring unknown column(s): %s", path, ", ".join(ignored))
    groups: list[_Group] = []
    seen: dict[tuple[str, int], int] = {}
    queries = _QueryBook()
    for line, row in rows:
        where = _Where(str(path), line)
        query_id = _required_text(row["query_id"], where, "query_id", "missing query_id")
        query = _required_text(row["query"], where, "query", "empty query")
        run = _parse_int(row.get("query_run", "").strip() or "1", where, "query_run")
        queries.add(query_id, query, where, {name: row[name] for name in LABEL_FIELDS if name in row})
        key = (query_id, run)
        if not groups or groups[-1].key != key:
            if key in seen:
                raise where.error(f"rows of query_id '{query_id}' run {run} are not contiguous "
                                  f"(the group started at line {seen[key]})", "query_id")
            seen[key] = line
            groups.append(_Group(key, query, line))
        groups[-1].add(row, where)
    return [group.output(str(path), queries.labels(group.key[0])) for group in groups]


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

    def add(self, row: dict[str, str], where: _Where) -> None:
        self._add_passage(row, where)
        answer = row["generated_answer"].strip()
        if answer:
            if self.answer is not None and self.answer[0] != answer:
                raise where.error(f"a different answer than line {self.answer[1]} for the same query_id and run",
                                  "generated_answer")
            self.answer = self.answer or (answer, where.line or 0)
        if row.get("latency_ms", "").strip():
            latency = _parse_number(row["latency_ms"], where, "latency_ms", minimum=0.0)
            if self.latency is not None and self.latency[0] != latency:
                raise where.error(f"a different latency than line {self.latency[1]}", "latency_ms")
            self.latency = self.latency or (latency, where.line or 0)

    def _add_passage(self, row: dict[str, str], where: _Where) -> None:
        passage_id, text = normalize_id(row["passage_id"]), row["passage"]
        if not passage_id:
            if text.strip():
                raise where.error("missing passage_id for a passage", "passage_id")
            return
        if passage_id in self.passage_ids:
            raise where.error(f"duplicate passage id '{passage_id}' in query_id '{self.key[0]}' run {self.key[1]}",
                              "passage_id")
        title = row.get("passage_title", "").strip() or None
        score_text = row.get("passage_score", "").strip()
        score = _parse_number(score_text, where, "passage_score") if score_text else None
        self.passages.append(Passage(id=passage_id, text=text, title=title, score=score))
        self.passage_ids.add(passage_id)

    def output(self, file: str, labels: Labels) -> RAGOutput:
        answer_text = self.answer[0] if self.answer else ""
        source = f"{file}:{self.line}"
        parts = _segment(answer_text, [passage.id for passage in self.passages], source)
        return RAGOutput(query_id=self.key[0], query=self.query, run=self.key[1], passages=tuple(self.passages),
                         answer=parts, answer_text=answer_text, labels=labels,
                         latency_ms=self.latency[0] if self.latency else None, source=source)


def _segment(answer_text: str, passage_ids: list[str], source: str) -> tuple[AnswerPart, ...]:
    if not answer_text:
        log.warning("%s: empty answer (kept; answer-based metrics will report it)", source)
        return ()
    parts, unknown = split_answer(answer_text, passage_ids)
    _warn_unknown(unknown, source)
    return parts


def _warn_unknown(unknown: list[str], source: str) -> None:
    if unknown:
        log.warning("%s: %d citation(s) name no retrieved passage (kept, counted as fabricated): %s",
                    source, len(unknown), ", ".join(unknown))


# ---------------------------------------------------------------- per-query text and labels


class _QueryBook:
    """One query text and one set of labels per query_id, whichever row or line gives them."""

    def __init__(self) -> None:
        self._queries: dict[str, tuple[str, int | None]] = {}
        self._labels: dict[str, dict[str, tuple[Any, int | None]]] = {}

    def add(self, query_id: str, query: str, where: _Where, raw_labels: dict[str, Any]) -> None:
        first = self._queries.setdefault(query_id, (query, where.line))
        if first[0] != query:
            raise where.error(f"query text differs from line {first[1]} for query_id '{query_id}'", "query")
        labels = self._labels.setdefault(query_id, {})
        for name, raw in raw_labels.items():
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                continue
            value = _parse_label(name, raw, where)
            previous = labels.setdefault(name, (value, where.line))
            if previous[0] != value:
                raise where.error(f"differs from line {previous[1]} for query_id '{query_id}'", name)

    def labels(self, query_id: str) -> Labels:
        return Labels(**{name: value for name, (value, _) in self._labels.get(query_id, {}).items()})


def _parse_label(name: str, raw: Any, where: _Where) -> Any:
    if name == "relevant_ids":
        return _parse_relevant(raw, where)
    if name in ("expected_keywords", "grounding_ids"):
        items = _parse_list(raw, where, name)
        return tuple(normalize_id(item) for item in items) if name == "grounding_ids" else items
    if name == "expected_refusal":
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, (str, int)) and str(raw).strip().lower() in _BOOLEANS:
            return _BOOLEANS[str(raw).strip().lower()]
        raise where.error(f"expected true/false/1/0/yes/no, got {raw!r}", name)
    if name == "required_citations":
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise where.error(f"expected a whole number, got {_type_name(raw)}", name)
        return _parse_int(str(raw), where, name)
    if not isinstance(raw, str):
        raise where.error(f"expected a string, got {_type_name(raw)}", name)
    return raw.strip()


def _parse_list(raw: Any, where: _Where, name: str) -> tuple[str, ...]:
    """A ``;``-separated string, a JSON list in a string, or a list of strings/numbers."""
    if isinstance(raw, str) and raw.strip().startswith("["):
        try:
            raw = json.loads(raw)
        except ValueError:
            pass
    if isinstance(raw, str):
        return tuple(item.strip() for item in raw.split(";") if item.strip())
    if isinstance(raw, list) and all(isinstance(item, (str, int)) and not isinstance(item, bool) for item in raw):
        return tuple(str(item).strip() for item in raw if str(item).strip())
    raise where.error(f"expected a list of strings or a ';'-separated string, got {_type_name(raw)}", name)


def _parse_relevant(raw: Any, where: _Where) -> dict[str, int]:
    """``id`` / ``id:grade`` items separated by ``;``, a JSON list of ids, or a JSON object id -> grade."""
    if isinstance(raw, str) and raw.strip()[:1] in ("[", "{"):
        try:
            raw = json.loads(raw)
        except ValueError:
            if raw.strip().startswith("{"):
                raise where.error("invalid JSON object", "relevant_ids") from None
    pairs: list[tuple[Any, Any]]
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list):
        pairs = [(item, 1) for item in raw]
    elif isinstance(raw, str):
        pairs = [_split_grade(item) for item in raw.split(";") if item.strip()]
    else:
        raise where.error(f"expected ids, got {_type_name(raw)}", "relevant_ids")
    grades: dict[str, int] = {}
    for key, grade in pairs:
        if isinstance(key, bool) or not isinstance(key, (str, int)) or not normalize_id(key):
            raise where.error(f"invalid id {key!r}", "relevant_ids")
        if isinstance(grade, bool) or not isinstance(grade, (int, str)):
            raise where.error(f"invalid grade {grade!r} for id {key!r}", "relevant_ids")
        value = _parse_int(str(grade), where, "relevant_ids")
        if grades.setdefault(normalize_id(key), value) != value:
            raise where.error(f"id {key!r} is given two different grades", "relevant_ids")
    return grades


def _split_grade(item: str) -> tuple[str, str | int]:
    head, sep, tail = item.strip().rpartition(":")
    return (head, tail.strip()) if sep and tail.strip().lstrip("-").isdigit() else (item.strip(), 1)


def _parse_int(text: str, where: _Where, field: str) -> int:
    try:
        number = float(text.strip())
    except ValueError:
        raise where.error(f"expected a whole number, got {text.strip()!r}", field) from None
    if not number.is_integer() or number < 0:
        raise where.error(f"expected a whole number >= 0, got {text.strip()!r}", field)
    return int(number)


def _parse_number(text: str, where: _Where, field: str, minimum: float | None = None) -> float:
    try:
        number = float(text.strip())
    except ValueError:
        raise where.error(f"expected a number, got {text.strip()!r}", field) from None
    if not math.isfinite(number) or (minimum is not None and number < minimum):
        raise where.error(f"expected a finite number{f' >= {minimum:g}' if minimum is not None else ''}, "
                          f"got {text.strip()!r}", field)
    return number


def _type_name(value: Any) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
             dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


# ---------------------------------------------------------------- JSONL


def _read_jsonl_outputs(path: Path) -> list[RAGOutput]:
    text, offset = _read_text(path)
    outputs: list[RAGOutput] = []
    first_line: dict[tuple[str, int], int] = {}
    queries = _QueryBook()
    for number, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        where = _Where(str(path), number)
        obj = _json_object(raw, where, offset)
        output = _JsonOutput(obj, where, offset).build()
        queries.add(output.query_id, output.query, where, {name: obj[name] for name in LABEL_FIELDS if name in obj})
        if output.key in first_line:
            raise where.error(f"duplicate output for query_id '{output.query_id}' run {output.run} "
                              f"(first at line {first_line[output.key]})", "run")
        first_line[output.key] = number
        outputs.append(output)
    if offset is not None:
        raise _undecodable_error(path, text, offset)
    if not outputs:
        raise InputError("empty file (only blank lines)", file=str(path))
    return [output.model_copy(update={"labels": queries.labels(output.query_id)}) for output in outputs]


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number in strict JSON")


def _json_object(raw: str, where: _Where, offset: int | None) -> dict[str, Any]:
    try:
        obj = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        if offset is not None and _surrogate_index(raw) < len(raw):
            raise where.error(f"undecodable bytes (not UTF-8) at byte offset {offset}") from None
        detail = (f"{error.msg} (column {error.colno})" if isinstance(error, json.JSONDecodeError)
                  else "nested too deeply" if isinstance(error, RecursionError) else str(error))
        raise where.error(f"not valid JSON: {detail}") from None
    if not isinstance(obj, dict):
        raise where.error(f"a line must be a JSON object, got {_type_name(obj)}")
    return obj


class _JsonOutput:
    """Validates one JSONL object field by field, naming the field path of the first problem."""

    def __init__(self, obj: dict[str, Any], where: _Where, offset: int | None) -> None:
        self.obj, self.where, self.offset = obj, where, offset

    def build(self) -> RAGOutput:
        for key in self.obj:
            if key not in JSONL_FIELDS:
                raise self.where.error(f"unknown field; valid fields: {', '.join(JSONL_FIELDS)}", key)
        query_id = self._id(self.obj.get("query_id"), "query_id", "missing query_id")
        query = self._text(self.obj.get("query"), "query", required="empty query")
        run = self.obj.get("run", 1)
        if isinstance(run, bool) or not isinstance(run, int) or run < 0:
            raise self.where.error(f"expected a whole number >= 0, got {run!r}", "run")
        passages = self._passages(self.obj.get("passages", []))
        answer_text, parts = self._answer([passage.id for passage in passages])
        latency = self.obj.get("latency_ms")
        error = self.obj.get("error")
        return RAGOutput(query_id=query_id, query=query, run=run, passages=passages, answer=parts,
                         answer_text=answer_text, latency_ms=self._number(latency, "latency_ms", minimum=0.0),
                         error=None if error is None else self._text(error, "error"), source=self._source)

    @property
    def _source(self) -> str:
        return f"{self.where.file}:{self.where.line}"

    def _text(self, value: Any, field: str, required: str = "") -> str:
        if not isinstance(value, str):
            raise self.where.error(f"missing {field}" if value is None and required
                                   else f"expected a string, got {_type_name(value)}", field)
        _check_text(value, self.where, field, self.offset)
        if required and not value.strip():
            raise self.where.error(required, field)
        return value.strip() if required else value

    def _id(self, value: Any, field: str, missing: str = "missing id") -> str:
        if value is None:
            raise self.where.error(missing, field)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.where.error(f"expected a string or integer id, got {_type_name(value)}", field)
        text = normalize_id(self._text(str(value), field))
        if not text:
            raise self.where.error(missing, field)
        return text

    def _number(self, value: Any, field: str, minimum: float | None = None) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.where.error(f"expected a number, got {_type_name(value)}", field)
        return _parse_number(str(value) if isinstance(value, int) else repr(value), self.where, field, minimum)

    def _passages(self, value: Any) -> tuple[Passage, ...]:
        if not isinstance(value, list):
            raise self.where.error(f"expected a list, got {_type_name(value)}", "passages")
        passages: list[Passage] = []
        for index, item in enumerate(value):
            path = f"passages[{index}]"
            if not isinstance(item, dict):
                raise self.where.error(f"expected an object, got {_type_name(item)}", path)
            for key in item:
                if key not in ("id", "text", "title", "score"):
                    raise self.where.error("unknown field; valid fields: id, text, title, score", f"{path}.{key}")
            passage_id = self._id(item.get("id"), f"{path}.id", "missing passage id")
            if any(passage.id == passage_id for passage in passages):
                raise self.where.error(f"duplicate passage id '{passage_id}'", f"{path}.id")
            title = item.get("title")
            passages.append(Passage(id=passage_id, text=self._text(item.get("text"), f"{path}.text"),
                                    title=None if title is None else self._text(title, f"{path}.title"),
                                    score=self._number(item.get("score"), f"{path}.score")))
        return tuple(passages)

    def _answer(self, passage_ids: list[str]) -> tuple[str, tuple[AnswerPart, ...]]:
        answer, given = self.obj.get("answer"), self.obj.get("answer_text")
        text = None if given is None else self._text(given, "answer_text")
        if answer is None or isinstance(answer, str):
            plain = self._text(answer, "answer") if answer is not None else (text or "")
            return (text if text is not None else plain.strip()), _segment(plain.strip(), passage_ids, self._source)
        if not isinstance(answer, list):
            raise self.where.error(f"expected a list of statements or a string, got {_type_name(answer)}", "answer")
        parts = tuple(self._part(item, f"answer[{index}]") for index, item in enumerate(answer))
        known = set(passage_ids)
        _warn_unknown(list(dict.fromkeys(c for part in parts for c in part.citations if c not in known)), self._source)
        if text is None:
            text = " ".join(part.text + "".join(f" [{c}]" for c in part.citations) for part in parts)
        return text, parts

    def _part(self, item: Any, path: str) -> AnswerPart:
        if not isinstance(item, dict):
            raise self.where.error(f"expected an object {{text, citations}}, got {_type_name(item)}", path)
        for key in item:
            if key not in ("text", "citations"):
                raise self.where.error("unknown field; valid fields: text, citations", f"{path}.{key}")
        citations = item.get("citations", [])
        if not isinstance(citations, list):
            raise self.where.error(f"expected a list of passage ids, got {_type_name(citations)}", f"{path}.citations")
        ids = tuple(dict.fromkeys(self._id(c, f"{path}.citations[{i}]") for i, c in enumerate(citations)))
        return AnswerPart(text=self._text(item.get("text"), f"{path}.text"), citations=ids)
