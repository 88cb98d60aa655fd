"""Bounds on what a client sends, checked in one linear pass before any parsing: the longest line, a CSV's columns
and cells. Past a bound the answer comes at once (413 for size, 422 for shape) instead of a parse that runs for
minutes; both the inline inputs of a job and uploads go through here (in a worker thread, never on the event loop).
"""

from __future__ import annotations

import csv
from pathlib import Path

from open_rag_eval.core.errors import InputError
from open_rag_eval.service.settings import Limits

__all__ = ["OverBound", "check_bounds"]


class OverBound(InputError):
    """An input larger than the server takes: HTTP 413."""

    status = 413


def check_bounds(path: Path, fmt: str, limits: Limits, field: str) -> int:
    """Check the file at ``path``; returns its number of lines. Raises ``OverBound`` (413) for a line or a number of
    cells past the bound, ``InputError`` (422) for a CSV with more columns than ``limits.max_columns``."""
    max_line_bytes, max_columns = int(limits.max_line_mb * 1_000_000), limits.max_columns
    max_cells = limits.max_cells
    lines = columns = 0
    with path.open("rb") as handle:
        while True:
            line = handle.readline(max_line_bytes + 1)
            if not line:
                break
            lines += 1
            if len(line) > max_line_bytes:
                raise OverBound(f"line {lines} is longer than {max_line_bytes:,} bytes (limits.max_line_mb)",
                                file=path.name, field=field, line=lines)
            if fmt == "csv" and lines == 1:
                columns = _columns(line, max_columns, field, path.name)
            if columns and lines * columns > max_cells:
                raise OverBound(f"more than {max_cells:,} cells ({columns} columns; limits.max_cells): split it",
                                file=path.name, field=field, line=lines)
    return lines


def _columns(header: bytes, max_columns: int, field: str, file: str) -> int:
    count = len(next(csv.reader([header.decode("utf-8-sig", errors="replace")]), []))
    if count > max_columns:
        raise InputError(f"the CSV has {count:,} columns, more than the {max_columns:,} this server takes "
                         "(limits.max_columns)", file=file, field=field, line=1)
    return count
