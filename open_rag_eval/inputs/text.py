"""Reading and decoding input files, locations for error messages, checks of single cells and values."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.core.segment import split_answer
from open_rag_eval.core.types import AnswerPart
from open_rag_eval.core.notices import note
from open_rag_eval.core.segment import UNKNOWN_CITATIONS
from open_rag_eval.inputs.validate import read_input_bytes

MAX_CELL_CHARS = 1_000_000
MAX_WHOLE = 1_000_000_000  # run numbers, relevance grades, citation counts: anything larger is a broken file
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # left alone after decoding: not writable as UTF-8
_TYPE_NAMES = {bool: "a boolean", int: "a number", float: "a number", str: "a string", list: "a list",
               dict: "an object", type(None): "null"}


@dataclass
class Where:
    """A location in an input file, for error messages."""

    file: str
    line: int | None = None

    def error(self, problem: str, field: str = "") -> InputError:
        return InputError(problem, file=self.file, line=self.line, field=field)


# ---------------------------------------------------------------- files and decoding


def read_text(path: Path) -> tuple[str, int | None]:
    """The decoded text (BOM removed) and the byte offset of the first undecodable byte, if any.

    Undecodable bytes are kept as surrogate escapes so that the caller can name the field holding them.
    """
    where = Where(str(path))
    data = read_input_bytes(path)
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


def undecodable(offset: int) -> str:
    """The problem of a file that is not UTF-8."""
    return f"undecodable bytes (not UTF-8) at byte offset {offset}"


def undecodable_error(path: Path, text: str, offset: int) -> InputError:
    """The error for a file whose undecodable bytes no single field holds: it names the line."""
    line = text[: _surrogate_index(text)].count("\n") + 1
    return InputError(undecodable(offset), file=str(path), line=line)


def has_undecodable(text: str) -> bool:
    """Whether ``text`` holds bytes kept as surrogate escapes by ``read_text``."""
    return _surrogate_index(text) < len(text)


def _surrogate_index(text: str) -> int:
    return next((i for i, char in enumerate(text) if "\udc80" <= char <= "\udcff"), len(text))


# ---------------------------------------------------------------- single values


def check_text(value: str, where: Where, field: str, offset: int | None) -> str:
    """``value`` unchanged if it is within ``MAX_CELL_CHARS`` and decodable."""
    if len(value) > MAX_CELL_CHARS:
        raise where.error(f"value of {len(value):,} characters exceeds the limit of {MAX_CELL_CHARS:,}", field)
    if offset is not None and has_undecodable(value):
        raise where.error(undecodable(offset), field)
    return value


def required_text(value: str, where: Where, field: str, problem: str) -> str:
    """``value`` stripped; ``problem`` if that leaves nothing."""
    if not value.strip():
        raise where.error(problem, field)
    return value.strip()


def parse_int(text: str, where: Where, field: str) -> int:
    """A whole number >= 0 (``2.0`` counts)."""
    number = _float(text, where, field, "a whole number")
    if not math.isfinite(number) or not number.is_integer() or number < 0:
        raise where.error(f"expected a whole number >= 0, got {text.strip()!r}", field)
    if number > MAX_WHOLE:
        raise where.error(f"expected a whole number of at most {MAX_WHOLE:,}, got {text.strip()!r}", field)
    return int(number)


def parse_number(text: str, where: Where, field: str, minimum: float | None = None) -> float:
    """A finite number, at least ``minimum`` if given."""
    number = _float(text, where, field, "a number")
    if not math.isfinite(number) or (minimum is not None and number < minimum):
        raise where.error(f"expected a finite number{f' >= {minimum:g}' if minimum is not None else ''}, "
                          f"got {text.strip()!r}", field)
    return number


def _float(text: str, where: Where, field: str, expected: str) -> float:
    try:
        return float(text.strip())
    except ValueError:
        raise where.error(f"expected {expected}, got {text.strip()!r}", field) from None


def printable(text: str) -> str:
    """``text`` with lone surrogates written as ``\\udXXX`` escapes (so a message naming it can be printed)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def type_name(value: Any) -> str:
    """How an error message names the JSON type of ``value``."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


# ---------------------------------------------------------------- answers


def segment(answer_text: str, passage_ids: list[str], source: str) -> tuple[AnswerPart, ...]:
    """The statements of a plain answer; warns of citations naming no passage (an empty answer is refused by
    ``validate``)."""
    if not answer_text:
        return ()
    parts, unknown = split_answer(answer_text, passage_ids)
    warn_unknown(unknown, source)
    return parts


def warn_unknown(unknown: list[str], source: str) -> None:
    """Warns of citations that name no retrieved passage."""
    if unknown:
        file, _, line = source.rpartition(":")
        where = (file, f"line {line}") if file and line.isdigit() else ("", source)
        note(f"unknown citation {where[0]}", f"{UNKNOWN_CITATIONS} in {where[0] or 'the input'}",
             f"{where[1]} ({', '.join(unknown)})", "open_rag_eval.inputs")
