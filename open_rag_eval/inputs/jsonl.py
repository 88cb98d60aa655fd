"""JSONL files of RAG outputs: one JSON object a line, validated field by field."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.contexts import RunNumbers, from_context_layout
from open_rag_eval.inputs.labels import LABEL_FIELDS, QueryBook
from open_rag_eval.inputs.validate import NO_PASSAGE_TEXT, Tap, check_input_file, check_output
from open_rag_eval.inputs.text import (
    LONE_SURROGATE,
    MAX_WHOLE,
    Where,
    check_text,
    has_undecodable,
    parse_number,
    printable,
    read_text,
    segment,
    type_name,
    undecodable,
    undecodable_error,
    warn_unknown,
)
from open_rag_eval.core.segment import normalize_id
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput

JSONL_FIELDS = ("query_id", "query", "run", "passages", "answer", "answer_text", "latency_ms", "error", "refused",
                *LABEL_FIELDS)
_PASSAGE_FIELDS = ("id", "text", "title", "score")
_PART_FIELDS = ("text", "citations")


def read_jsonl_outputs(path: Path) -> list[RAGOutput]:
    """The outputs of a JSONL file in line order, each with the labels of its query_id."""
    text, offset = read_text(path)
    lines = ((Where(str(path), number), raw) for number, raw in enumerate(text.split("\n"), 1) if raw.strip())
    outputs = outputs_from_objects(((where, _json_object(raw, where, offset)) for where, raw in lines), offset)
    if offset is not None:
        raise undecodable_error(path, text, offset)
    if not outputs:
        raise InputError("empty file (only blank lines)", file=str(path))
    return outputs


def jsonl_query_groups(path: Path, tap: Tap | None = None) -> Iterator[list[RAGOutput]]:
    """The outputs of a JSONL file as ``read_jsonl_outputs`` reads them, one query's contiguous lines at a time, the
    file read line by line: memory holds a query, not the file. The labels of a query are those of its contiguous
    lines (when its lines are not contiguous, ``read_jsonl_outputs`` gives each output the labels of all of them).
    A file ``read_jsonl_outputs`` refuses as a whole (empty, binary, not UTF-8) is refused with its error.
    ``tap``: takes the digest of the bytes read."""
    path = Path(path)
    check_input_file(path)  # a regular file of bounded size: a device would be read for ever
    group, group_id = _Outputs(), None
    try:
        for where, obj in _objects(path, tap):
            if group.outputs and obj.get("query_id") != group_id:
                yield group.labelled()
                group = _Outputs()
            group_id = obj.get("query_id")
            group.add(where, obj)  # checked as it comes: errors in line order, as the whole-file reader's
    except (UnicodeError, OSError):
        read_jsonl_outputs(path)  # raises the whole-file reader's error, naming what is wrong
        raise
    if not group.outputs:
        read_jsonl_outputs(path)  # raises its error: an empty file
    else:
        yield group.labelled()


def jsonl_query_sizes(path: Path, tap: Tap | None = None) -> Iterator[tuple[str, int, int]]:
    """For each group of ``jsonl_query_groups``: the query_id of its first output, its number of outputs and of
    those without an error, from each line parsed as JSON alone (no output is built: a twentieth of the cost of
    reading the outputs). A line this reading finds wrong (not UTF-8, not a JSON object, no usable query_id) is
    refused as ``jsonl_query_groups`` refuses the file: with its first error in line order. Other problems of a
    line (a field of the wrong type...) are found when its outputs are read."""
    path = Path(path)
    check_input_file(path)
    group_id, key, size, answered, runs = None, "", 0, 0, RunNumbers()
    try:
        for where, obj in _objects(path, tap):
            if size and obj.get("query_id") != group_id:
                yield key, size, answered
                size, answered, runs = 0, 0, RunNumbers()
            group_id = obj.get("query_id")
            obj = from_context_layout(obj, where, None, runs)
            key = key if size else _query_key(obj.get("query_id"), where)
            size += 1
            answered += obj.get("error") is None
    except (UnicodeError, OSError, InputError):
        for _ in jsonl_query_groups(path):  # the file's first error in line order, as when it is read
            pass
        raise
    if not size:
        read_jsonl_outputs(path)  # raises its error: an empty file
    else:
        yield key, size, answered


def _objects(path: Path, tap: Tap | None = None) -> Iterator[tuple[Where, dict[str, Any]]]:
    """Each non-blank line of a JSONL file parsed as a JSON object, the file read line by line."""
    with (tap or Tap()).open(path) as handle:
        for number, data in enumerate(handle, 1):
            if number == 1 and data.startswith(b"\xef\xbb\xbf"):
                data = data[3:]
            if b"\x00" in data:
                raise UnicodeError("NUL")
            raw = data.decode("utf-8").removesuffix("\n")  # the line as the whole-file reader splits it
            if raw.strip():
                where = Where(str(path), number)
                yield where, _json_object(raw, where, None)


def _query_key(value: Any, where: Where) -> str:
    """The query_id an output of a line gets (``_JsonOutput._id``), or the error of a value that is none."""
    if value is None or isinstance(value, bool) or not isinstance(value, (str, int)):
        raise where.error("missing query_id" if value is None else "not a query_id", "query_id")
    key = normalize_id(str(value))
    if not key:
        raise where.error("missing query_id", "query_id")
    return key


def outputs_from_objects(objects: Iterable[tuple[Where, dict[str, Any]]], offset: int | None = None) -> list[RAGOutput]:
    """Outputs from objects in the JSONL schema (or the list-of-contexts layout), each with its location, validated
    as JSONL lines are; each output gets the labels of its query_id."""
    built = _Outputs(offset)
    for where, raw_obj in objects:
        built.add(where, raw_obj)
    return built.labelled()


class _Outputs:
    """Outputs built object by object (each checked as it comes); ``labelled`` gives them their query's labels."""

    def __init__(self, offset: int | None = None) -> None:
        self.offset = offset
        self.outputs: list[RAGOutput] = []
        self.first_line: dict[tuple[str, int], int] = {}
        self.queries, self.runs = QueryBook(), RunNumbers()

    def add(self, where: Where, raw_obj: dict[str, Any]) -> None:
        number = where.line or 0
        obj = from_context_layout(raw_obj, where, self.offset, self.runs)
        output = check_output(_JsonOutput(obj, where, self.offset).build())
        self.queries.add(output.query_id, output.query, where, {name: obj[name] for name in LABEL_FIELDS if name in obj})
        if output.key in self.first_line:
            raise where.error(f"duplicate output for query_id '{output.query_id}' run {output.run} "
                              f"(first at line {self.first_line[output.key]})", "run")
        self.first_line[output.key] = number
        self.outputs.append(output)

    def labelled(self) -> list[RAGOutput]:
        return [output.model_copy(update={"labels": self.queries.labels(output.query_id)}) for output in self.outputs]


def json_object_lines(text: str, file: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSONL text, parsed strictly (no NaN/Infinity, no lone
    surrogates, bounded nesting); any other line is an InputError naming the file and line."""
    for number, raw in enumerate(text.split("\n"), 1):
        if raw.strip():
            yield number, _json_object(raw, Where(file, number), None)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number in strict JSON")


def _json_object(raw: str, where: Where, offset: int | None) -> dict[str, Any]:
    try:
        obj = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        if offset is not None and has_undecodable(raw):
            raise where.error(undecodable(offset)) from None
        detail = (f"{error.msg} (column {error.colno})" if isinstance(error, json.JSONDecodeError)
                  else "nested too deeply" if isinstance(error, RecursionError) else str(error))
        raise where.error(f"not valid JSON: {detail}") from None
    if not isinstance(obj, dict):
        raise where.error(f"a line must be a JSON object, got {type_name(obj)}")
    if "\\ud" in raw.lower() and offset is None:  # a \uXXXX escape of a UTF-16 surrogate: valid in pairs only
        _check_surrogates(obj, where)
    return obj


def _check_surrogates(obj: dict[str, Any], where: Where) -> None:
    """A lone surrogate (``"\\ud800"``) decodes to a string no file or terminal can write: name its field."""
    stack: list[tuple[Any, str]] = [(obj, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, str):
            found = LONE_SURROGATE.search(value)
            if found:
                raise where.error(f"not valid Unicode text: a lone surrogate \\u{ord(found.group()):04x} at "
                                  f"character {found.start()}", path)
        elif isinstance(value, dict):
            for key, item in value.items():
                name = printable(key)
                if name != key:
                    raise where.error("not valid Unicode text: a field name with a lone surrogate",
                                      f"{path}.{name}" if path else name)
                stack.append((item, f"{path}.{key}" if path else key))
        elif isinstance(value, list):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(value))


class _JsonOutput:
    """Validates one JSONL object field by field, naming the field path of the first problem."""

    def __init__(self, obj: dict[str, Any], where: Where, offset: int | None) -> None:
        self.obj, self.where, self.offset = obj, where, offset

    def build(self) -> RAGOutput:
        self._known_fields(self.obj, JSONL_FIELDS, "")
        query_id = self._id(self.obj.get("query_id"), "query_id", "missing query_id")
        query = self._text(self.obj.get("query"), "query", required="empty query")
        run = self.obj.get("run", 1)
        if isinstance(run, bool) or not isinstance(run, int) or run < 0:
            raise self.where.error(f"expected a whole number >= 0, got {run!r}", "run")
        if run > MAX_WHOLE:
            raise self.where.error(f"expected a whole number of at most {MAX_WHOLE:,}, got {run!r}", "run")
        passages = self._passages(self.obj.get("passages", []))
        answer_text, parts = self._answer([passage.id for passage in passages])
        latency = self.obj.get("latency_ms")
        error = self.obj.get("error")
        refused = self.obj.get("refused")
        if refused is not None and not isinstance(refused, bool):
            raise self.where.error(f"expected true, false or null, got {type_name(refused)}", "refused")
        return RAGOutput(query_id=query_id, query=query, run=run, passages=passages, answer=parts,
                         answer_text=answer_text, latency_ms=self._number(latency, "latency_ms", minimum=0.0),
                         error=None if error is None else self._text(error, "error"), refused=refused,
                         source=self._source)

    @property
    def _source(self) -> str:
        return f"{self.where.file}:{self.where.line}"

    def _known_fields(self, obj: dict[str, Any], valid: tuple[str, ...], path: str) -> None:
        """An unknown key of ``obj`` (at field path ``path``, empty at the top) is an error."""
        for key in obj:
            if key not in valid:
                raise self.where.error(f"unknown field; valid fields: {', '.join(valid)}",
                                       f"{path}.{key}" if path else key)

    def _text(self, value: Any, field: str, required: str = "") -> str:
        if not isinstance(value, str):
            raise self.where.error(f"missing {field}" if value is None and required
                                   else f"expected a string, got {type_name(value)}", field)
        check_text(value, self.where, field, self.offset)
        if required and not value.strip():
            raise self.where.error(required, field)
        return value.strip() if required else value

    def _id(self, value: Any, field: str, missing: str = "missing id") -> str:
        if value is None:
            raise self.where.error(missing, field)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise self.where.error(f"expected a string or integer id, got {type_name(value)}", field)
        text = normalize_id(self._text(str(value), field))
        if not text:
            raise self.where.error(missing, field)
        return text

    def _number(self, value: Any, field: str, minimum: float | None = None) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.where.error(f"expected a number, got {type_name(value)}", field)
        return parse_number(str(value) if isinstance(value, int) else repr(value), self.where, field, minimum)

    def _passages(self, value: Any) -> tuple[Passage, ...]:
        if not isinstance(value, list):
            raise self.where.error(f"expected a list, got {type_name(value)}", "passages")
        passages: list[Passage] = []
        for index, item in enumerate(value):
            passages.append(self._passage(item, f"passages[{index}]", passages))
        return tuple(passages)

    def _passage(self, item: Any, path: str, before: list[Passage]) -> Passage:
        if not isinstance(item, dict):
            raise self.where.error(f"expected an object, got {type_name(item)}", path)
        self._known_fields(item, _PASSAGE_FIELDS, path)
        passage_id = self._id(item.get("id"), f"{path}.id", "missing passage id")
        if any(passage.id == passage_id for passage in before):
            raise self.where.error(f"duplicate passage id '{passage_id}'", f"{path}.id")
        title = item.get("title")
        if isinstance(item.get("text"), str) and not item["text"].strip():
            raise self.where.error(NO_PASSAGE_TEXT, f"{path}.text")
        return Passage(id=passage_id, text=self._text(item.get("text"), f"{path}.text"),
                       title=None if title is None else self._text(title, f"{path}.title"),
                       score=self._number(item.get("score"), f"{path}.score"))

    def _answer(self, passage_ids: list[str]) -> tuple[str, tuple[AnswerPart, ...]]:
        answer, given = self.obj.get("answer"), self.obj.get("answer_text")
        text = None if given is None else self._text(given, "answer_text")
        if answer is None or isinstance(answer, str):
            plain = self._text(answer, "answer") if answer is not None else (text or "")
            return (text if text is not None else plain.strip()), segment(plain.strip(), passage_ids, self._source)
        if not isinstance(answer, list):
            raise self.where.error(f"expected a list of statements or a string, got {type_name(answer)}", "answer")
        parts = tuple(self._part(item, f"answer[{index}]") for index, item in enumerate(answer))
        known = set(passage_ids)
        warn_unknown(list(dict.fromkeys(c for part in parts for c in part.citations if c not in known)), self._source)
        if text is None:
            text = " ".join(part.text + "".join(f" [{c}]" for c in part.citations) for part in parts)
        return text, parts

    def _part(self, item: Any, path: str) -> AnswerPart:
        if not isinstance(item, dict):
            raise self.where.error(f"expected an object {{text, citations}}, got {type_name(item)}", path)
        self._known_fields(item, _PART_FIELDS, path)
        citations = item.get("citations", [])
        if not isinstance(citations, list):
            raise self.where.error(f"expected a list of passage ids, got {type_name(citations)}", f"{path}.citations")
        ids = tuple(dict.fromkeys(self._id(c, f"{path}.citations[{i}]") for i, c in enumerate(citations)))
        return AnswerPart(text=self._text(item.get("text"), f"{path}.text"), citations=ids)
