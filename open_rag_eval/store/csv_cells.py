"""The one way we write CSV: text cells that a spreadsheet would run as a formula are neutralised.

A cell is *text that starts a formula* when it begins with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
(after any number of apostrophes) and is not a plain decimal number. Such a cell is written with one leading
apostrophe (``=HYPERLINK(…)`` becomes ``'=HYPERLINK(…)``), which spreadsheets show as text. Numbers stay numbers:
``-0.25``, ``-3`` and ``1e-05`` are written unchanged, so a negative score is still a number in a spreadsheet.

The rule is reversible: ``read_cell`` removes the apostrophe again when we read our own files back (``report``,
``compare``), and a text cell that genuinely started with apostrophes before a formula character gets one more, so
reading returns exactly what was written.
"""

from __future__ import annotations

import csv
import io
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TextIO

__all__ = ["csv_text", "read_cell", "safe_cell", "write_csv"]

_FORMULA = re.compile(r"'*[=+\-@\t\r]")
_ESCAPED = re.compile(r"'+[=+\-@\t\r]")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def safe_cell(value: Any) -> Any:
    """The value as it goes into a CSV cell: formula-starting text gets a leading apostrophe, anything else as is."""
    if isinstance(value, str) and _FORMULA.match(value) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def read_cell(text: str) -> str:
    """The inverse of ``safe_cell`` for a cell read back from one of our CSV files."""
    return text[1:] if _ESCAPED.match(text) else text


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> str:
    """A whole CSV file (``\\n`` line ends, minimal quoting; a row with a carriage return in a cell is quoted
    whole) with every cell passed through ``safe_cell``. A row may be a mapping: its values in ``header`` order
    (a missing key is an empty cell)."""
    buffer = io.StringIO()
    write_csv(buffer, header, rows)
    return buffer.getvalue()


def write_csv(handle: TextIO, header: Sequence[str], rows: Iterable[Sequence[Any] | Mapping[str, Any]]) -> None:
    """``csv_text`` written to ``handle`` row by row (memory holds a row, not the file)."""
    writer = csv.writer(handle, lineterminator="\n")
    quoted = csv.writer(handle, lineterminator="\n", quoting=csv.QUOTE_ALL)
    for row in itertools.chain((header,), rows):
        values = [row.get(name, "") for name in header] if isinstance(row, Mapping) else row
        cells = [safe_cell(cell) for cell in values]
        # the minimal writer quotes only cells holding its line terminator: a lone \r would split the row
        (quoted if any(isinstance(cell, str) and "\r" in cell for cell in cells) else writer).writerow(cells)
