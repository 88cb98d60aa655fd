"""A corpus to generate questions from: a folder of ``.txt``/``.md`` files or a CSV with ``id,text[,title]``.

In a folder, each file is cut into paragraphs (blocks separated by blank lines) with ids ``<file>#<k>`` (the file's
path relative to the folder, ``/``-separated; ``k`` counts the file's non-empty paragraphs from 1), or kept whole
(``chunk="file"``, id ``<file>``). Ids depend only on the files' names and contents, so they are stable across runs
and usable as golden labels (the golden evaluator's ``doc_id_separator: "#"`` maps ``notes.md#3`` to ``notes.md``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.csv_layout import read_csv
from open_rag_eval.inputs.text import Where, read_text, required_text, undecodable_error

__all__ = ["CorpusPassage", "SUFFIXES", "read_corpus"]

SUFFIXES = (".txt", ".md")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")

Chunking = Literal["paragraph", "file"]


@dataclass(frozen=True)
class CorpusPassage:
    id: str
    text: str
    title: str = ""


def read_corpus(path: Path, chunk: Chunking = "paragraph") -> list[CorpusPassage]:
    """The passages of ``path`` in a stable order; ``InputError`` (file, line, field) for anything unusable."""
    path = Path(path)
    if path.is_dir():
        return _folder(path, chunk)
    if not path.exists():
        raise InputError("no such corpus file or folder", file=str(path))
    if path.suffix.lower() != ".csv":
        raise InputError(f"unsupported corpus '{path.name}': expected a folder of .txt/.md files or a .csv with "
                         "columns id,text[,title]", file=str(path))
    return _csv(path)


def _folder(folder: Path, chunk: Chunking) -> list[CorpusPassage]:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)
    if not files:
        raise InputError("no .txt or .md files in the corpus folder", file=str(folder))
    passages: list[CorpusPassage] = []
    for file in files:
        text, offset = read_text(file)
        if offset is not None:
            raise undecodable_error(file, text, offset)
        name = file.relative_to(folder).as_posix()
        if chunk == "file":
            if text.strip():
                passages.append(CorpusPassage(name, text.strip(), name))
            continue
        blocks = [block.strip() for block in _BLANK_LINE.split(text.replace("\r\n", "\n"))]
        passages += [CorpusPassage(f"{name}#{k}", block, name)
                     for k, block in enumerate((b for b in blocks if b), start=1)]
    if not passages:
        raise InputError("every .txt/.md file in the corpus folder is empty", file=str(folder))
    return passages


def _csv(path: Path) -> list[CorpusPassage]:
    header, rows = read_csv(path, required=("id", "text"), hint=" (a corpus CSV has columns id,text[,title])")
    passages: list[CorpusPassage] = []
    first: dict[str, int] = {}
    for line, row in rows:
        where = Where(str(path), line)
        passage_id = required_text(row["id"], where, "id", "empty passage id")
        if passage_id in first:
            raise where.error(f"duplicate passage id '{passage_id}' (first at line {first[passage_id]})", "id")
        first[passage_id] = line
        text = required_text(row["text"], where, "text", "empty passage text")
        passages.append(CorpusPassage(passage_id, text, row.get("title", "") if "title" in header else ""))
    return passages
