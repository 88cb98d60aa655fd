"""Per-query text and golden labels, whichever CSV row or JSONL line gives them."""

from __future__ import annotations

import json
from typing import Any

from open_rag_eval.inputs.text import Where, parse_int, type_name
from open_rag_eval.core.segment import normalize_id
from open_rag_eval.core.types import Labels

LABEL_FIELDS = ("relevant_ids", "expected_keywords", "expected_refusal", "required_citations", "reference_answer",
                "grounding_ids")
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class QueryBook:
    """One query text and one set of labels per query_id, whichever row or line gives them."""

    def __init__(self) -> None:
        self._queries: dict[str, tuple[str, int | None]] = {}
        self._labels: dict[str, dict[str, tuple[Any, int | None]]] = {}

    def add(self, query_id: str, query: str, where: Where, raw_labels: dict[str, Any]) -> None:
        """Records the query and labels of one row or line; a different text or label for the id is an error."""
        first = self._queries.setdefault(query_id, (query, where.line))
        if first[0] != query:
            raise where.error(f"query text differs from line {first[1]} for query_id '{query_id}'", "query")
        labels = self._labels.setdefault(query_id, {})
        for name, raw in raw_labels.items():
            if raw is None or (isinstance(raw, str) and not raw.strip()):
                continue
            value = parse_label(name, raw, where)
            previous = labels.setdefault(name, (value, where.line))
            if previous[0] != value:
                raise where.error(f"differs from line {previous[1]} for query_id '{query_id}'", name)

    def labels(self, query_id: str) -> Labels:
        return Labels(**{name: value for name, (value, _) in self._labels.get(query_id, {}).items()})


def parse_label(name: str, raw: Any, where: Where) -> Any:
    """The value of label ``name`` (one of ``LABEL_FIELDS``) from a CSV cell or a JSON value."""
    if name == "relevant_ids":
        return _parse_relevant(raw, where)
    if name == "expected_keywords":
        return _parse_list(raw, where, name)
    if name == "grounding_ids":
        return tuple(normalize_id(item) for item in _parse_list(raw, where, name))
    if name == "expected_refusal":
        return parse_bool(raw, where, name)
    if name == "required_citations":
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise where.error(f"expected a whole number, got {type_name(raw)}", name)
        return parse_int(str(raw), where, name)
    if not isinstance(raw, str):
        raise where.error(f"expected a string, got {type_name(raw)}", name)
    return raw.strip()


def parse_bool(raw: Any, where: Where, name: str) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, (str, int)) and str(raw).strip().lower() in _BOOLEANS:
        return _BOOLEANS[str(raw).strip().lower()]
    raise where.error(f"expected true/false/1/0/yes/no, got {raw!r}", name)


def _parse_list(raw: Any, where: Where, name: str) -> tuple[str, ...]:
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
    raise where.error(f"expected a list of strings or a ';'-separated string, got {type_name(raw)}", name)


def _parse_relevant(raw: Any, where: Where) -> dict[str, int]:
    """``id`` / ``id:grade`` items separated by ``;``, a JSON list of ids, or a JSON object id -> grade."""
    grades: dict[str, int] = {}
    for key, grade in _relevant_pairs(raw, where):
        if isinstance(key, bool) or not isinstance(key, (str, int)) or not normalize_id(key):
            raise where.error(f"invalid id {key!r}", "relevant_ids")
        if isinstance(grade, bool) or not isinstance(grade, (int, str)):
            raise where.error(f"invalid grade {grade!r} for id {key!r}", "relevant_ids")
        value = parse_int(str(grade), where, "relevant_ids")
        if grades.setdefault(normalize_id(key), value) != value:
            raise where.error(f"id {key!r} is given two different grades", "relevant_ids")
    return grades


def _relevant_pairs(raw: Any, where: Where) -> list[tuple[Any, Any]]:
    """(id, grade) pairs, not yet checked, of any form ``relevant_ids`` takes."""
    if isinstance(raw, str) and raw.strip()[:1] in ("[", "{"):
        try:
            raw = json.loads(raw)
        except ValueError:
            if raw.strip().startswith("{"):
                raise where.error("invalid JSON object", "relevant_ids") from None
    if isinstance(raw, dict):
        return list(raw.items())
    if isinstance(raw, list):
        return [(item, 1) for item in raw]
    if isinstance(raw, str):
        return [_split_grade(item) for item in raw.split(";") if item.strip()]
    raise where.error(f"expected ids, got {type_name(raw)}", "relevant_ids")


def _split_grade(item: str) -> tuple[str, str | int]:
    head, sep, tail = item.strip().rpartition(":")
    digits = tail.strip().lstrip("-")
    return (head, tail.strip()) if sep and digits.isascii() and digits.isdigit() else (item.strip(), 1)
