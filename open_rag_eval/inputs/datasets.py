"""Query sets with their labels, and the text of the documents they name, in the formats other tools keep them in.

``read_query_set(path)`` reads any of these into ``LabelledQuery(query_id, query, labels)``:

- a CSV (``.csv``): ``query``, optional ``query_id`` (default: ``q_`` + a hash of the query), and the label columns
  of the inputs (``relevant_ids``, ``expected_keywords``, ``expected_refusal``, ``required_citations``,
  ``reference_answer``, ``grounding_ids``); any other column is an error;
- an Open RAG Benchmark folder: ``queries.json`` (``{id: {"query", "type", "source"}}``), ``qrels.json``
  (``{id: {"doc_id", "section_id"}}``), optional ``answers.json`` (``{id: answer}``) and ``corpus/<doc_id>.json``
  (``{"title", "sections": [{"text", "tables", "images"}]}``); the relevant unit is the section, named
  ``<doc_id>_<section_id>`` (``relevant_ids`` and ``grounding_ids``), the answer is ``reference_answer``;
- a JSON list of questions (``.json``): ``[{"id", "question", "expected_keywords", "must_be_grounded_in"}]``;
  ``must_be_grounded_in`` (document file names) gives ``grounding_ids`` and ``relevant_ids``;
- a JSONL evaluation set (``.jsonl``), one query a line: ``{"id", "query", "expected_file_ids", "must_cite",
  "required_citations_count", "is_out_of_scope", "must_refuse", "intent", "answer_style", "max_entities",
  "no_external_knowledge", "allowed_uncertainty"}``; ``expected_file_ids`` gives ``relevant_ids`` (an empty list is
  an empty set: a query nothing should be retrieved for), ``must_refuse`` or ``is_out_of_scope`` gives
  ``expected_refusal``, ``required_citations_count`` gives ``required_citations``. The other fields are read and
  checked but not used.

JSON and JSONL objects may also use our own names (``query_id``, ``query`` and the label fields). An unknown field
or column is an error naming the file, the line (or the list index) and the field.

``read_documents(path)`` gives document id -> text for context overlap: an Open RAG Benchmark folder (or its
``corpus`` folder: ``<doc_id>`` is the whole paper, ``<doc_id>_<section_id>`` one section), a folder of ``.txt`` /
``.md`` files (id = the file's path in the folder, e.g. ``doc1.txt``) or a CSV ``id,text[,title]``.
``read_id_map(path)`` reads a JSON object id -> name (a file-id mapping).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.contexts import derived_query_id
from open_rag_eval.inputs.csv_layout import read_csv, shown
from open_rag_eval.inputs.jsonl import json_object_lines
from open_rag_eval.inputs.labels import LABEL_FIELDS, parse_label
from open_rag_eval.inputs.text import Where, read_text, required_text, type_name, undecodable_error
from open_rag_eval.core.segment import normalize_id
from open_rag_eval.core.types import Labels

__all__ = ["LabelledQuery", "names_to_ids", "read_documents", "read_id_map", "read_query_set"]

QUERY_COLUMNS = ("query_id", "query", *LABEL_FIELDS)
_QUESTION_FIELDS = ("id", "question", "expected_keywords", "must_be_grounded_in")
_ASSISTANT_FIELDS = ("id", "query", "intent", "expected_file_ids", "must_cite", "required_citations_count",
                     "answer_style", "max_entities", "is_out_of_scope", "must_refuse", "no_external_knowledge",
                     "allowed_uncertainty")
_BOOL_FIELDS = ("must_cite", "is_out_of_scope", "must_refuse", "no_external_knowledge", "allowed_uncertainty")


@dataclass(frozen=True)
class LabelledQuery:
    query_id: str
    query: str
    labels: Labels = Labels()


def read_query_set(path: Path) -> list[LabelledQuery]:
    """The queries of ``path`` (any format of the module doc), in file order; ids are unique."""
    path = Path(path)
    if path.is_dir():
        queries = _open_rag_bench(path)
    elif path.suffix.lower() == ".json":
        queries = _json_list(path)
    elif path.suffix.lower() == ".jsonl":
        queries = _jsonl(path)
    else:
        queries = _csv(path)
    if not queries:
        raise InputError("no queries in the file", file=str(path))
    return queries


# ---------------------------------------------------------------- CSV


def _csv(path: Path) -> list[LabelledQuery]:
    header, rows = read_csv(path, required=("query",))
    where = Where(str(path), 1)
    for name in header:
        if name not in QUERY_COLUMNS:
            raise where.error(f"unknown column; a queries file has query, query_id and the label columns "
                              f"{', '.join(LABEL_FIELDS)}", shown(name))
    book = _Book()
    for line, row in rows:
        row_where = Where(str(path), line)
        query = required_text(row["query"], row_where, "query", "empty query")
        query_id = required_text(row["query_id"], row_where, "query_id", "missing query_id") \
            if "query_id" in header else None
        labels = {name: row[name] for name in LABEL_FIELDS if name in row and row[name].strip()}
        book.add(query_id, query, row_where, labels)
    return book.queries


# ---------------------------------------------------------------- JSON list and JSONL


def _json_list(path: Path) -> list[LabelledQuery]:
    data = _load_json(path)
    if not isinstance(data, list):
        raise InputError(f"expected a JSON list of questions, got {type_name(data)}", file=str(path))
    book = _Book()
    for index, item in enumerate(data):
        where = Where(f"{path}[{index}]")
        if not isinstance(item, dict):
            raise where.error(f"expected an object, got {type_name(item)}")
        book.add_object(item, where)
    return book.queries


def _jsonl(path: Path) -> list[LabelledQuery]:
    text, offset = read_text(path)
    if offset is not None:
        raise undecodable_error(path, text, offset)
    book = _Book()
    for line, item in json_object_lines(text, str(path)):
        book.add_object(item, Where(str(path), line))
    return book.queries


class _Book:
    """Queries in order, ids unique, labels parsed."""

    def __init__(self) -> None:
        self.queries: list[LabelledQuery] = []
        self._first: dict[str, str] = {}

    def add(self, query_id: str | None, query: str, where: Where, raw_labels: dict[str, Any]) -> None:
        """Ids derived from the text (no ``query_id``) make a repeated text a duplicate."""
        qid = query_id if query_id is not None else derived_query_id(query)
        if qid in self._first and query_id is not None:
            raise where.error(f"duplicate query_id '{qid}' (first at {self._first[qid]})", "query_id")
        if qid in self._first:
            raise where.error(f"duplicate query (same text as {self._first[qid]})", "query")
        self._first[qid] = f"line {where.line}" if where.line else where.file
        labels = {name: parse_label(name, raw, where) for name, raw in raw_labels.items() if raw is not None}
        self.queries.append(LabelledQuery(qid, query, Labels(**labels)))

    def add_object(self, item: dict[str, Any], where: Where) -> None:
        for key in item:
            if key not in (*QUERY_COLUMNS, *_QUESTION_FIELDS, *_ASSISTANT_FIELDS):
                raise where.error("unknown field", key)
        qid = _text(item, ("query_id", "id"), where, required=False)
        query = _text(item, ("query", "question"), where, required=True)
        assert query is not None
        labels = {name: item[name] for name in LABEL_FIELDS if item.get(name) is not None}
        labels.update(_foreign_labels(item, where))
        self.add(normalize_id(qid) if qid is not None else None, query, where, labels)


def _text(item: dict[str, Any], names: tuple[str, ...], where: Where, required: bool) -> str | None:
    given = [name for name in names if item.get(name) is not None]
    if len(given) > 1:
        raise where.error(f"give one of {' or '.join(names)}, not both", given[1])
    if not given:
        if required:
            raise where.error(f"missing field (one of {', '.join(names)})", names[0])
        return None
    value = item[given[0]]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise where.error(f"expected a string, got {type_name(value)}", given[0])
    return required_text(str(value), where, given[0], "empty value")


def _foreign_labels(item: dict[str, Any], where: Where) -> dict[str, Any]:
    """Labels from the fields of the question-list and JSONL-set formats (module doc)."""
    for name in _BOOL_FIELDS:
        if name in item and not isinstance(item[name], bool):
            raise where.error(f"expected true or false, got {type_name(item[name])}", name)
    labels: dict[str, Any] = {}
    if "expected_keywords" in item:
        labels["expected_keywords"] = item["expected_keywords"]
    if "must_be_grounded_in" in item:
        docs = _id_list(item["must_be_grounded_in"], where, "must_be_grounded_in")
        labels["grounding_ids"] = docs
        labels.setdefault("relevant_ids", {doc: 1 for doc in docs})
    if "expected_file_ids" in item:
        labels["relevant_ids"] = {doc: 1 for doc in _id_list(item["expected_file_ids"], where, "expected_file_ids")}
    if "must_refuse" in item or "is_out_of_scope" in item:
        labels["expected_refusal"] = bool(item.get("must_refuse")) or bool(item.get("is_out_of_scope"))
    if "required_citations_count" in item:
        labels["required_citations"] = item["required_citations_count"]
    clash = [name for name in labels if name in item and name in LABEL_FIELDS and name != "expected_keywords"]
    if clash:
        raise where.error("given both as a label and through the set's own field", clash[0])
    return labels


def _id_list(value: Any, where: Where, field: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise where.error(f"expected a list of non-empty strings, got {type_name(value)}", field)
    return [v.strip() for v in value]


# ---------------------------------------------------------------- Open RAG Benchmark


def _open_rag_bench(folder: Path) -> list[LabelledQuery]:
    queries = _json_object_file(folder / "queries.json")
    qrels = _json_object_file(folder / "qrels.json")
    answers = _json_object_file(folder / "answers.json") if (folder / "answers.json").exists() else {}
    for name, table in (("qrels.json", qrels), ("answers.json", answers)):
        extra = [qid for qid in table if qid not in queries]
        if extra:
            raise InputError(f"query id '{extra[0]}' is not in queries.json", file=str(folder / name), field=extra[0])
    result: list[LabelledQuery] = []
    for qid, entry in queries.items():
        where = Where(str(folder / "queries.json"))
        if not isinstance(entry, dict) or not isinstance(entry.get("query"), str) or not entry["query"].strip():
            raise where.error("expected an object with a non-empty \"query\"", qid)
        labels: dict[str, Any] = {}
        if qid in qrels:
            section = _section_id(qrels[qid], Where(str(folder / "qrels.json")), qid)
            labels.update(relevant_ids={section: 1}, grounding_ids=(section,))
        if qid in answers:
            answer = answers[qid]
            if not isinstance(answer, str):
                raise InputError(f"expected a string, got {type_name(answer)}", file=str(folder / "answers.json"),
                                 field=qid)
            labels["reference_answer"] = answer.strip()
        result.append(LabelledQuery(qid, entry["query"].strip(), Labels(**labels)))
    return result


def _section_id(qrel: Any, where: Where, qid: str) -> str:
    if not isinstance(qrel, dict) or not isinstance(qrel.get("doc_id"), str) or \
            isinstance(qrel.get("section_id"), bool) or not isinstance(qrel.get("section_id"), (int, str)):
        raise where.error("expected {\"doc_id\": str, \"section_id\": int}", qid)
    return f"{qrel['doc_id'].strip()}_{qrel['section_id']}"


def _load_json(path: Path) -> Any:
    text, offset = read_text(path)
    if offset is not None:
        raise undecodable_error(path, text, offset)
    try:
        return json.loads(text)
    except ValueError as error:
        line = getattr(error, "lineno", None)
        raise InputError(f"invalid JSON: {getattr(error, 'msg', error)}", file=str(path), line=line) from None


def _json_object_file(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise InputError("missing file of the Open RAG Benchmark layout", file=str(path))
    data = _load_json(path)
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object, got {type_name(data)}", file=str(path))
    return data


# ---------------------------------------------------------------- documents and id maps


def read_documents(path: Path) -> dict[str, str]:
    """Document id -> text (module doc)."""
    path = Path(path)
    corpus = path / "corpus" if (path / "corpus").is_dir() else path
    if corpus.is_dir() and any(corpus.glob("*.json")):
        return _bench_documents(corpus)
    if path.is_dir():
        return _text_documents(path)
    if not path.exists():
        raise InputError("no such corpus file or folder", file=str(path))
    _, rows = read_csv(path, required=("id", "text"), hint=" (a corpus CSV has columns id,text[,title])")
    return {normalize_id(row["id"]): row["text"] for _, row in rows if normalize_id(row["id"])}


def _text_documents(folder: Path) -> dict[str, str]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in (".txt", ".md"))
    if not files:
        raise InputError("no .txt, .md or .json documents in the corpus folder", file=str(folder))
    documents: dict[str, str] = {}
    for file in files:
        text, offset = read_text(file)
        if offset is not None:
            raise undecodable_error(file, text, offset)
        documents[file.relative_to(folder).as_posix()] = text.strip()
    return documents


def _bench_documents(corpus: Path) -> dict[str, str]:
    documents: dict[str, str] = {}
    for file in sorted(corpus.glob("*.json")):
        data = _load_json(file)
        sections = data.get("sections") if isinstance(data, dict) else None
        if not isinstance(sections, list):
            raise InputError("expected an object with a \"sections\" list", file=str(file), field="sections")
        texts = []
        for index, section in enumerate(sections):
            if not isinstance(section, dict) or not isinstance(section.get("text", ""), str):
                raise InputError("expected an object with a \"text\" string", file=str(file),
                                 field=f"sections[{index}]")
            number = section.get("section_id", index)
            documents[f"{file.stem}_{number}"] = section.get("text", "")
            texts.append(section.get("text", ""))
        documents[file.stem] = "\n\n".join(texts)
    return documents


def read_id_map(path: Path) -> dict[str, str]:
    """A JSON object id -> name, both non-empty strings."""
    data = _load_json(Path(path))
    if not isinstance(data, dict):
        raise InputError(f"expected a JSON object id -> name, got {type_name(data)}", file=str(path))
    for key, value in data.items():
        if not isinstance(value, str) or not value.strip() or not key.strip():
            raise InputError(f"expected a non-empty name, got {type_name(value)}", file=str(path), field=key)
    return {key.strip(): value.strip() for key, value in data.items()}


def names_to_ids(id_map: dict[str, str]) -> dict[str, str]:
    """name -> id for ``id_map`` (id -> name); a name given to two ids is ambiguous and left out."""
    counts: dict[str, int] = {}
    for name in id_map.values():
        counts[name] = counts.get(name, 0) + 1
    return {name: key for key, name in id_map.items() if counts[name] == 1}

