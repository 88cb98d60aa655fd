"""Human labels and the judge's labels, as comparable items.

Human label files:

- **TREC qrels** (``qid iter docid grade``, whitespace-separated): UMBRELA grades 0-3 per (query, passage).
- **TSV** with a header row, or **JSONL** objects, with the columns ``task, query_id, run, passage_id, nugget,
  statement, label`` (unused ones empty or absent):

  ===================  ==========================================  ==========================================
  task                 identifies the item by                      label
  ===================  ==========================================  ==========================================
  umbrela              query_id, passage_id                        0, 1, 2, 3
  nugget_importance    query_id, nugget (the judge's nugget text)  vital, okay
  nugget_support       query_id, run, nugget                       support, partial_support, not_support
  citation_support     query_id, run, statement (1-based), passage FS, PS, NS (or full/partial/no support)
  ===================  ==========================================  ==========================================

The judge's labels come from a run's ``results.json``: a grade the metric used (a defaulted UMBRELA grade is the 0
the scores used), a nugget importance, an assignment or a citation label. A failed judgment has no label: such
items are counted, never compared.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.inputs.jsonl import json_object_lines
from open_rag_eval.inputs.trec_files import read_qrels

__all__ = ["LABELS", "ORDINAL", "SCORE", "Item", "judged_items", "nugget_key", "read_label_files", "read_labels"]

# each task's labels in order (ordinal tasks low to high)
LABELS: dict[str, tuple[Hashable, ...]] = {
    Tasks.UMBRELA: (0, 1, 2, 3),
    Tasks.NUGGET_IMPORTANCE: ("okay", "vital"),
    "nugget_support": ("not_support", "partial_support", "support"),
    "citation_support": ("NS", "PS", "FS"),
}
ORDINAL = frozenset({Tasks.UMBRELA, "nugget_support", "citation_support"})
# a label's value when ranking systems (the methods' own credit for each label)
SCORE: dict[str, Mapping[Hashable, float]] = {
    Tasks.UMBRELA: {0: 0.0, 1: 1.0, 2: 2.0, 3: 3.0},
    "nugget_support": {"not_support": 0.0, "partial_support": 0.5, "support": 1.0},
    "citation_support": {"NS": 0.0, "PS": 0.5, "FS": 1.0},
}
_PER_RUN = frozenset({"nugget_support", "citation_support"})
_CITATION = {"full support": "FS", "partial support": "PS", "no support": "NS"}
_COLUMNS = ("task", "query_id", "run", "passage_id", "nugget", "statement", "label")


@dataclass(frozen=True)
class Item:
    """One labelled thing: ``key`` identifies it across the judge's and the people's files."""

    task: str
    query_id: str
    run: int | None
    what: str  # passage id, nugget text, or "statement:passage"

    @property
    def key(self) -> tuple[str, str, int | None, str]:
        return (self.task, self.query_id, self.run, self.what)


def nugget_key(text: str) -> str:
    """A nugget's text as labels name it: spaces collapsed, case folded."""
    return " ".join(text.split()).casefold()


def _item(task: str, query_id: str, run: int | None, *, passage_id: str = "", nugget: str = "",
          statement: int | None = None) -> Item:
    if task == Tasks.UMBRELA:
        return Item(task, query_id, None, passage_id)
    if task == Tasks.NUGGET_IMPORTANCE:
        return Item(task, query_id, None, nugget_key(nugget))
    if task == "nugget_support":
        return Item(task, query_id, run, nugget_key(nugget))
    return Item(task, query_id, run, f"{statement}:{passage_id}")


# -- human labels ------------------------------------------------------------------------------------------------

def read_labels(path: Path) -> dict[Item, Hashable]:
    """Human labels from qrels, TSV or JSONL (chosen by content: a header row with ``task`` is TSV, ``{`` JSONL)."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as error:
        raise InputError(f"cannot read the labels ({error.strerror or error})", file=str(path)) from None
    except UnicodeDecodeError:
        raise InputError("not valid UTF-8", file=str(path)) from None
    first = next((line for line in text.splitlines() if line.strip()), "")
    if not first:
        raise InputError("the file has no labels", file=str(path))
    if first.lstrip().startswith("{"):
        rows: Iterator[tuple[int, dict[str, Any]]] = json_object_lines(text, str(path))
    elif "task" in first.split("\t"):
        rows = _tsv_rows(text, str(path))
    else:
        return _from_qrels(path)
    labels: dict[Item, Hashable] = {}
    for number, row in rows:
        item, label = _labelled(row, str(path), number)
        if item in labels:
            raise InputError(f"this {item.task} item is labelled twice", file=str(path), line=number)
        labels[item] = label
    return labels


def read_label_files(paths: Sequence[Path]) -> dict[Item, Hashable]:
    """The labels of several files; an item labelled differently in two of them is an error naming the later."""
    human: dict[Item, Hashable] = {}
    for path in paths:
        for item, label in read_labels(path).items():
            if item in human and human[item] != label:
                raise InputError(f"this {item.task} item has another label in an earlier labels file",
                                 file=str(path))
            human[item] = label
    return human


def _from_qrels(path: Path) -> dict[Item, Hashable]:
    labels: dict[Item, Hashable] = {}
    for qid, grades in read_qrels(path).items():
        for docid, grade in grades.items():
            if grade not in LABELS[Tasks.UMBRELA]:
                raise InputError(f"grade {grade} is not an UMBRELA grade 0-3 (query '{qid}', passage '{docid}')",
                                 file=str(path))
            labels[Item(Tasks.UMBRELA, qid, None, docid)] = grade
    return labels


def _tsv_rows(text: str, file: str) -> Iterator[tuple[int, dict[str, Any]]]:
    reader = csv.DictReader(io.StringIO(text), delimiter="\t")
    unknown = [name for name in reader.fieldnames or () if name not in _COLUMNS]
    if unknown:
        raise InputError(f"unknown column(s) {', '.join(unknown)}; expected {', '.join(_COLUMNS)}", file=file,
                         line=1)
    for row in reader:
        yield reader.line_num, {name: value for name, value in row.items() if value not in (None, "")}


def _labelled(row: Mapping[str, Any], file: str, line: int) -> tuple[Item, Hashable]:
    def text(name: str, required: bool = True) -> str:
        value = row.get(name)
        if value is None or str(value).strip() == "":
            if required:
                raise InputError("missing", file=file, line=line, field=name)
            return ""
        return str(value).strip()

    task = text("task")
    if task not in LABELS:
        raise InputError(f"unknown task '{task}'; expected one of {', '.join(LABELS)}", file=file, line=line,
                         field="task")
    query_id = text("query_id")
    run = _int(text("run", required=False) or "1", file, line, "run") if task in _PER_RUN else None
    statement = _int(text("statement"), file, line, "statement") if task == "citation_support" else None
    item = _item(task, query_id, run, passage_id=text("passage_id") if task in (Tasks.UMBRELA, "citation_support")
                 else "", nugget=text("nugget") if task.startswith("nugget") else "", statement=statement)
    return item, _label(task, text("label"), file, line)


def _label(task: str, raw: str, file: str, line: int) -> Hashable:
    if task == Tasks.UMBRELA:
        value: Hashable = _int(raw, file, line, "label")
    else:
        words = " ".join(raw.replace("_", " ").split()).casefold()
        value = _CITATION.get(words, raw.upper()) if task == "citation_support" else words.replace(" ", "_")
    if value not in LABELS[task]:
        raise InputError(f"'{raw}' is not a {task} label; expected one of "
                         f"{', '.join(map(str, LABELS[task]))}", file=file, line=line, field="label")
    return value


def _int(raw: str, file: str, line: int, field: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise InputError(f"'{raw}' is not an integer", file=file, line=line, field=field) from None


# -- the judge's labels ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Judged:
    """The judge's label of an item in one output (None: the judgment failed)."""

    item: Item
    label: Hashable | None
    system: str  # which run (and results folder) the output belongs to


def judged_items(results: Mapping[str, Any], source: str = "") -> Iterator[Judged]:
    """Every judge label in a ``results.json``, output by output."""
    for output in results.get("outputs", []):
        query_id, run = str(output["query_id"]), int(output.get("run") or 1)
        system = f"{source}#run{run}" if source else f"run{run}"
        details = output.get("details") or {}
        for grade in (details.get("umbrela") or {}).get("grades", []):
            yield Judged(_item(Tasks.UMBRELA, query_id, run, passage_id=str(grade["passage_id"])),
                         grade.get("grade"), system)
        for nugget in (details.get("nuggets") or {}).get("nuggets", []):
            yield Judged(_item(Tasks.NUGGET_IMPORTANCE, query_id, run, nugget=nugget["text"]),
                         nugget.get("importance"), system)
            assignment = nugget.get("assignment") if nugget.get("assignment_status", "ok") == "ok" else None
            yield Judged(_item("nugget_support", query_id, run, nugget=nugget["text"]), assignment, system)
        for number, statement in enumerate((details.get("citation") or {}).get("statements", []), 1):
            for judgment in statement.get("judgments", []):
                if judgment.get("fabricated"):
                    continue  # no passage to judge against: not a judge label
                yield Judged(_item("citation_support", query_id, run, passage_id=str(judgment["passage_id"]),
                                   statement=number), judgment.get("label"), system)
