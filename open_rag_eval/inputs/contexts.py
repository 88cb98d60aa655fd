"""The list-of-contexts layout: one row (CSV) or line (JSONL) per answer, its passages as a list.

This is how most people hold RAG outputs (ragas' ``question, answer, contexts`` and ``user_input, response,
retrieved_contexts``). Column / field names, first match wins:

    query            query | question | user_input
    answer           generated_answer | answer | response
    passages         contexts | retrieved_contexts
    passage ids      context_ids | retrieved_context_ids (optional; default 1, 2, 3... in list order)
    reference answer reference_answer | ground_truth | reference (optional)
    query_id         optional: default ``q_`` + 12 hex digits of the SHA-256 of the query text
    run              query_run (CSV) / run (JSONL), optional: default 1, 2, ... for repeated rows of one query

A CSV ``contexts`` cell holds a JSON list -- of strings, or of objects ``{"id", "text", "title"?, "score"?}`` -- or
the Python list literal pandas writes for a list column (``['first passage', "it's the second"]``). ``;`` is not a
separator: passages contain semicolons. ``context_ids`` is a JSON list or ``;``-separated ids, one per context.
Citation markers ``[n]`` in the answer name passage ids, so with default ids ``[1]`` cites the first context.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import math
from pathlib import Path
from typing import Any

from open_rag_eval.inputs.labels import LABEL_FIELDS, QueryBook
from open_rag_eval.inputs.validate import NO_PASSAGE_TEXT, check_output
from open_rag_eval.inputs.text import Where, check_text, parse_int, parse_number, required_text, segment, type_name
from open_rag_eval.core.segment import normalize_id
from open_rag_eval.core.types import Passage, RAGOutput

__all__ = [
    "ALIASES",
    "CONTEXT_FIELDS",
    "CONTEXT_REQUIRED",
    "RunNumbers",
    "context_columns",
    "derived_query_id",
    "from_context_layout",
    "parse_context_ids",
    "parse_contexts",
    "pick",
    "read_context_rows",
    "warn_ignored_contexts",
]

log = logging.getLogger(__name__)

CONTEXT_FIELDS = ("contexts", "retrieved_contexts")
# canonical name -> accepted names, in order of preference
ALIASES: dict[str, tuple[str, ...]] = {
    "query": ("query", "question", "user_input"),
    "answer": ("generated_answer", "answer", "response"),
    "contexts": CONTEXT_FIELDS,
    "context_ids": ("context_ids", "retrieved_context_ids"),
    "reference_answer": ("reference_answer", "ground_truth", "reference"),
}
CONTEXT_REQUIRED = (ALIASES["query"], ALIASES["answer"], CONTEXT_FIELDS)
_OBJECT_FIELDS = ("id", "text", "title", "score")
_ALL_ALIASES = {name for names in ALIASES.values() for name in names}
# names that only the list-of-contexts layout uses in JSONL (the others are also fields of the JSONL schema)
_JSONL_ONLY = _ALL_ALIASES - {"query", "answer", "reference_answer"}


def derived_query_id(query: str) -> str:
    """A stable id for a query without one: ``q_`` + the first 12 hex digits of the SHA-256 of its text."""
    return "q_" + hashlib.sha256(query.encode()).hexdigest()[:12]


def pick(names: Any, canonical: str, where: Where) -> str | None:
    """The one name of ``names`` (a header or a JSON object's keys) standing for ``canonical``; two is an error."""
    present = [name for name in ALIASES[canonical] if name in names]
    if len(present) > 1:
        raise where.error(f"both {present[0]} and {present[1]} are given; keep one", present[1])
    return present[0] if present else None


def parse_contexts(value: Any, where: Where, field: str, offset: int | None = None, cell: bool = False) -> list[Passage]:
    """Passages from a list (JSONL) or, with ``cell``, from a CSV cell holding a JSON list / Python list literal."""
    if value is None or (cell and isinstance(value, str) and not value.strip()):
        raise where.error("missing contexts: the passages of the answer are unknown (give [] for an answer "
                          "with no retrieved passages)", field)
    items = _cell_list(value, where, field) if cell and isinstance(value, str) else value
    if not isinstance(items, list):
        raise where.error(f"expected a list of passages, got {type_name(items)}", field)
    passages: list[Passage] = []
    for index, item in enumerate(items):
        path = f"{field}[{index}]"
        if isinstance(item, str):
            if not item.strip():
                raise where.error(NO_PASSAGE_TEXT, path)
            passages.append(Passage(id=str(index + 1), text=check_text(item, where, path, offset)))
        elif isinstance(item, dict):
            passages.append(_passage_object(item, where, path, offset))
        else:
            raise where.error(f"expected a passage text or an object {{id, text}}, got {type_name(item)}", path)
        if any(earlier.id == passages[-1].id for earlier in passages[:-1]):
            raise where.error(f"duplicate passage id '{passages[-1].id}'", f"{path}.id")
    return passages


def with_ids(passages: list[Passage], value: Any, where: Where, field: str) -> list[Passage]:
    """``passages`` renamed by the ids of ``value`` (a ``context_ids`` cell or list), one per passage."""
    if isinstance(value, str) and not value.strip():
        return passages
    ids = parse_context_ids(value, len(passages), where, field)
    return [passage.model_copy(update={"id": new}) for passage, new in zip(passages, ids, strict=True)]


def parse_context_ids(value: Any, count: int, where: Where, field: str) -> list[str]:
    """``count`` passage ids from a JSON list, a ``;``-separated cell or a list."""
    if isinstance(value, str):
        text = value.strip()
        items: Any = _cell_list(text, where, field) if text.startswith("[") else [p for p in text.split(";")]
    else:
        items = value
    if not isinstance(items, list):
        raise where.error(f"expected a list of ids, got {type_name(items)}", field)
    ids = []
    for index, item in enumerate(items):
        if isinstance(item, bool) or not isinstance(item, (str, int)) or not normalize_id(str(item)):
            raise where.error(f"expected a non-empty id, got {item!r}", f"{field}[{index}]")
        ids.append(normalize_id(str(item)))
    if len(ids) != count:
        raise where.error(f"{len(ids)} id(s) for {count} context(s); give one id per context", field)
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        raise where.error(f"duplicate passage id '{duplicate}'", field)
    return ids


def _cell_list(text: str, where: Where, field: str) -> Any:
    """A CSV cell's list: JSON first, then a Python literal (what pandas writes for a list column)."""
    stripped = text.strip()
    if not stripped:
        return []
    try:
        return json.loads(stripped, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        pass
    try:
        return ast.literal_eval(stripped)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise where.error("expected a JSON list of passages (e.g. [\"first passage\", \"second passage\"]) or a "
                          "Python list literal; ';' is not a separator for passages", field) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number in strict JSON")


def _passage_object(item: dict[str, Any], where: Where, path: str, offset: int | None) -> Passage:
    for key in item:
        if key not in _OBJECT_FIELDS:
            raise where.error(f"unknown field; valid fields: {', '.join(_OBJECT_FIELDS)}", f"{path}.{key}")
    text, title, score = item.get("text"), item.get("title"), item.get("score")
    if not isinstance(text, str):
        raise where.error(f"expected a string, got {type_name(text)}", f"{path}.text")
    if not text.strip():
        raise where.error(NO_PASSAGE_TEXT, f"{path}.text")
    raw_id = item.get("id")
    if isinstance(raw_id, bool) or not isinstance(raw_id, (str, int)) or not normalize_id(str(raw_id)):
        raise where.error(f"expected a non-empty id, got {raw_id!r}", f"{path}.id")
    if title is not None and not isinstance(title, str):
        raise where.error(f"expected a string, got {type_name(title)}", f"{path}.title")
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                              or not math.isfinite(score)):
        raise where.error(f"expected a finite number, got {score!r}", f"{path}.score")
    return Passage(id=normalize_id(str(raw_id)), text=check_text(text, where, f"{path}.text", offset),
                   title=title, score=None if score is None else float(score))


# ---------------------------------------------------------------- CSV: one row per answer


class RunNumbers:
    """Run numbers of repeated rows: the given one, or 1, 2, ... in file order for a query without them."""

    def __init__(self) -> None:
        self._first: dict[tuple[str, int], int] = {}

    def take(self, query_id: str, given: int | None, where: Where, field: str) -> int:
        run = given if given is not None else 1 + sum(1 for qid, _ in self._first if qid == query_id)
        if (query_id, run) in self._first:
            raise where.error(f"duplicate output for query_id '{query_id}' run {run} "
                              f"(first at line {self._first[(query_id, run)]})", field)
        self._first[(query_id, run)] = where.line or 0
        return run


def read_context_rows(path: Path, header: list[str], rows: list[tuple[int, dict[str, str]]], *,
                      warn: bool = True) -> list[RAGOutput]:
    """The outputs of a CSV in the list-of-contexts layout (see the module docstring), one per row (``warn``: of
    the columns it ignores; a file read query by query warns once)."""
    columns = context_columns(header, Where(str(path), max(1, rows[0][0] - 1)))
    if warn:
        warn_ignored_contexts(path, header, columns)
    queries, runs, built = QueryBook(), RunNumbers(), []
    for line, row in rows:
        where = Where(str(path), line)
        query = required_text(row[columns["query"] or "query"], where, columns["query"] or "query", "empty query")
        query_id = (required_text(row["query_id"], where, "query_id", "missing query_id") if "query_id" in row
                    else derived_query_id(query))
        run_text = row.get("query_run", "").strip()
        run = runs.take(query_id, parse_int(run_text, where, "query_run") if run_text else None, where,
                        "query_run" if run_text else columns["query"] or "query")
        contexts = columns["contexts"] or "contexts"
        passages = parse_contexts(row[contexts], where, contexts, cell=True)
        if columns["context_ids"]:
            passages = with_ids(passages, row[columns["context_ids"]], where, columns["context_ids"])
        labels = {name: row[name] for name in LABEL_FIELDS if name in row}
        if columns["reference_answer"]:
            labels["reference_answer"] = row[columns["reference_answer"]]
        queries.add(query_id, query, where, labels)
        answer = row[columns["answer"] or "answer"].strip()
        latency = row.get("latency_ms", "").strip()
        source = f"{path}:{line}"
        built.append(check_output(RAGOutput(
            query_id=query_id, query=query, run=run, passages=tuple(passages),
            answer=segment(answer, [p.id for p in passages], source), answer_text=answer, source=source,
            latency_ms=parse_number(latency, where, "latency_ms", minimum=0.0) if latency else None),
            {"answer": columns["answer"] or "answer"}))
    return [output.model_copy(update={"labels": queries.labels(output.query_id)}) for output in built]


def context_columns(header: list[str], where: Where) -> dict[str, str | None]:
    """The column of the header standing for each name of ``ALIASES`` (None: absent)."""
    return {name: pick(header, name, where) for name in ALIASES}


def warn_ignored_contexts(path: Path | str, header: list[str], columns: dict[str, str | None]) -> None:
    known = {"query_id", "query_run", "latency_ms", *LABEL_FIELDS, *(c for c in columns.values() if c)}
    ignored = [name for name in header if name not in known]
    if ignored:
        log.warning("%s: ignoring unknown column(s): %s", path, ", ".join(ignored))


# ---------------------------------------------------------------- JSONL: a line in the list-of-contexts layout


def from_context_layout(obj: dict[str, Any], where: Where, offset: int | None, runs: RunNumbers) -> dict[str, Any]:
    """A JSONL object in the list-of-contexts layout rewritten in the JSONL schema; other objects unchanged."""
    if not any(name in obj for name in _JSONL_ONLY):
        return obj
    contexts = pick(obj, "contexts", where)
    if contexts and "passages" in obj:
        raise where.error(f"both passages and {contexts} are given; keep one", contexts)
    out = {key: value for key, value in obj.items() if key not in _ALL_ALIASES}
    for name in ("query", "answer", "reference_answer"):
        chosen = pick(obj, name, where)
        if chosen is not None:
            if chosen != name and not isinstance(obj[chosen], (str, list) if name == "answer" else str):
                raise where.error(f"expected a string, got {type_name(obj[chosen])}", chosen)
            out[name] = obj[chosen]
    if contexts is not None:
        passages = parse_contexts(obj[contexts], where, contexts, offset)
        ids = pick(obj, "context_ids", where)
        if ids is not None:
            passages = with_ids(passages, obj[ids], where, ids)
        out["passages"] = [passage.model_dump(exclude_none=True) for passage in passages]
    if "query_id" not in out and isinstance(out.get("query"), str) and out["query"].strip():
        out["query_id"] = derived_query_id(out["query"].strip())
    if "query_id" in out and "run" not in out:
        query_id = normalize_id(str(out["query_id"]))
        out["run"] = runs.take(query_id, None, where, "run")
    return out
