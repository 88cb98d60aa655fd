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
  ``latency_ms``, ``refused`` (the system's own flag that it declined; true/false). Per-query labels, read from
  any row of the query (different values are an error):
  ``relevant_ids`` (``id`` or ``id:grade`` separated by ``;``, or a JSON list / object id -> grade),
  ``expected_keywords`` (``;``), ``expected_refusal`` (true/false/1/0/yes/no), ``required_citations`` (int),
  ``reference_answer``, ``grounding_ids`` (``;``). Other columns are ignored with a warning.

JSONL (one output per line, blank lines skipped; what ``output_to_json`` writes):

    {"query_id": str|int, "query": str, "run": int = 1,
     "passages": [{"id": str|int, "text": str, "title"?: str, "score"?: number}],
     "answer": [{"text": str, "citations": [id, ...]}] | "plain text with [n] markers",
     "answer_text"?: str, "latency_ms"?: number, "error"?: str, "refused"?: bool (the system's own flag),
     "relevant_ids"?: {id: grade} | [id] | str, "expected_keywords"?: [str] | str, "expected_refusal"?: bool | str,
     "required_citations"?: int, "reference_answer"?: str, "grounding_ids"?: [id] | str}

The list-of-contexts layout (one row or line per answer, its passages as a list; ragas' ``question, answer,
contexts`` / ``user_input, response, retrieved_contexts``) is read by ``contexts``: a CSV with a ``contexts`` column,
a JSONL line with ``contexts`` / ``retrieved_contexts`` instead of ``passages``.

Citations in a structured answer are passage ids; a plain answer is segmented by ``segment.segment_answer``.
Unknown fields are errors. Any text value is limited to ``MAX_CELL_CHARS`` characters.

Every problem raises ``InputError`` naming file, line and field, in one line.

Modules: ``text`` (reading and decoding files, locations, checks of single values), ``csv_layout`` (CSV files and
the layout above), ``jsonl`` (JSONL outputs, also read as a stream), ``csv_stream`` (a CSV of outputs read as a stream), ``contexts``
(the list-of-contexts layout), ``labels`` (per-query text and labels).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.csv_layout import read_csv_outputs
from open_rag_eval.inputs.datasets import LabelledQuery, read_query_set
from open_rag_eval.inputs.jsonl import read_jsonl_outputs
from open_rag_eval.inputs.labels import LABEL_FIELDS
from open_rag_eval.inputs.text import MAX_CELL_CHARS
from open_rag_eval.inputs.validate import tallied
from open_rag_eval.core.types import RAGOutput

__all__ = ["LABEL_FIELDS", "MAX_CELL_CHARS", "LabelledQuery", "output_to_json", "read_outputs", "read_queries",
           "read_query_set"]


def read_outputs(path: Path) -> list[RAGOutput]:
    """The RAG outputs of a ``.csv`` or ``.jsonl`` file, in file order."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix in (".csv", ".jsonl"):
        with tallied():
            return read_csv_outputs(path) if suffix == ".csv" else read_jsonl_outputs(path)
    raise InputError(f"unsupported input format '{suffix or path.name}': expected .csv or .jsonl", file=str(path))


def read_queries(path: Path) -> list[tuple[str, str]]:
    """(query_id, query) pairs of a query set (``datasets.read_query_set``: a CSV with a ``query`` column, an
    optional ``query_id`` column and label columns, or another tool's format).

    Without ``query_id``, ids are ``q_`` + the first 12 hex digits of the SHA-256 of the query text: stable when the
    file is reordered or extended.
    """
    return [(query.query_id, query.query) for query in read_query_set(path)]


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
    if output.refused is not None:
        data["refused"] = output.refused
    for name, value in output.labels.model_dump(exclude_none=True).items():
        data[name] = list(value) if isinstance(value, tuple) else value
    return data
