"""Readers for TREC qrels and run files (the formats trec_eval reads).

qrels: one judgment per line, ``qid iter docid rel`` (``iter`` is ignored, ``rel`` an integer, negative allowed).
run:   one retrieved document per line, ``qid Q0 docid rank score tag`` (``Q0`` and ``tag`` are kept only for
       validation; trec_eval ignores ``rank`` and orders by ``score``, see ``open_rag_eval.scoring.golden``).

Fields are separated by any whitespace; blank lines are skipped. Anything else that is malformed -- a wrong number
of fields, a non-integer grade or rank, a non-finite score, a docid listed twice for one query -- raises
``InputError`` naming the file, the line and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.validate import read_input_bytes

__all__ = ["Qrels", "Run", "RunEntry", "check_overlap", "read_qrels", "read_run"]

Qrels = dict[str, dict[str, int]]  # qid -> {docid: grade}, in file order


@dataclass(frozen=True)
class RunEntry:
    docid: str
    rank: int
    score: float


Run = dict[str, list[RunEntry]]  # qid -> entries in file order

_QRELS_FIELDS = ("qid", "iter", "docid", "rel")
_RUN_FIELDS = ("qid", "Q0", "docid", "rank", "score", "tag")


def _lines(path: Path, fields: tuple[str, ...]) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of each non-blank line; wrong field counts raise."""
    name = str(path)
    if not path.exists():
        raise InputError("file not found", file=name)
    data = read_input_bytes(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        bad_line = data[: error.start].count(b"\n") + 1
        raise InputError("not valid UTF-8", file=name, line=bad_line) from None
    found = False
    for number, raw in enumerate(text.splitlines(), start=1):
        parts = raw.split()
        if not parts:
            continue
        if len(parts) != len(fields):
            expected = " ".join(fields)
            raise InputError(f"expected {len(fields)} fields '{expected}', found {len(parts)}", file=name,
                             line=number, field=fields[min(len(parts), len(fields) - 1)])
        found = True
        yield number, parts
    if not found:
        raise InputError("the file has no entries", file=name)


def _int(value: str, *, file: str, line: int, field: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise InputError(f"'{value}' is not an integer", file=file, line=line, field=field) from None


def read_qrels(path: str | Path) -> Qrels:
    """``{qid: {docid: grade}}``; a docid judged twice for one query is an error."""
    path = Path(path)
    qrels: Qrels = {}
    for number, (qid, _iter, docid, rel) in _lines(path, _QRELS_FIELDS):
        grade = _int(rel, file=str(path), line=number, field="rel")
        judged = qrels.setdefault(qid, {})
        if docid in judged:
            raise InputError(f"docid '{docid}' is judged twice for query '{qid}'", file=str(path), line=number,
                             field="docid")
        judged[docid] = grade
    return qrels


def _score(value: str, *, file: str, line: int) -> float:
    try:
        score = float(value)
    except ValueError:
        raise InputError(f"'{value}' is not a number", file=file, line=line, field="score") from None
    if not math.isfinite(score):
        raise InputError(f"'{value}' is not a finite number", file=file, line=line, field="score")
    return score


def read_run(path: str | Path) -> Run:
    """``{qid: [RunEntry, ...]}`` in file order; a docid retrieved twice for one query is an error."""
    path = Path(path)
    name = str(path)
    run: Run = {}
    seen: dict[str, set[str]] = {}
    for number, (qid, _q0, docid, rank, score, _tag) in _lines(path, _RUN_FIELDS):
        entry = RunEntry(docid, _int(rank, file=name, line=number, field="rank"), _score(score, file=name, line=number))
        docids = seen.setdefault(qid, set())
        if docid in docids:
            raise InputError(f"docid '{docid}' is retrieved twice for query '{qid}'", file=name, line=number,
                             field="docid")
        docids.add(docid)
        run.setdefault(qid, []).append(entry)
    return run


def check_overlap(run: Run, qrels: Qrels, run_file: str) -> list[str]:
    """The run's queries without judgments in the qrels; none judged at all is an error (every measure would be
    empty), a few are the caller's warning."""
    unjudged = [qid for qid in run if qid not in qrels]
    if run and len(unjudged) == len(run):
        shown = ", ".join(list(run)[:3])
        judged = ", ".join(list(qrels)[:3])
        raise InputError(f"the run shares no query with the qrels (run: {shown}{', ...' if len(run) > 3 else ''}; "
                         f"qrels: {judged}{', ...' if len(qrels) > 3 else ''}): check that both use the same "
                         "query ids", file=run_file)
    return unjudged
