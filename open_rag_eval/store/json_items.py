"""results.json read as a stream: one output (or per-query row) at a time, never the whole file in memory.

``read_items(path, on_item)`` calls ``on_item(section, item)`` for each element of the ``outputs`` and ``queries``
arrays, in file order, and returns the other top-level members (``simulated``, ``summary``...). The strictness is
``report.data.read_json``'s: a broken file or a non-finite number is an ``InputError`` naming the file. The report,
``consistency``'s ``results_dir`` and ``RunReport.result`` read results.json with it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from open_rag_eval.core.errors import InputError

__all__ = ["ITEM_SECTIONS", "read_items"]

ITEM_SECTIONS = ("outputs", "queries")
_CHUNK = 1 << 20
_SPACE = " \t\r\n"


class _Reader:
    def __init__(self, handle: TextIO, decoder: json.JSONDecoder) -> None:
        self._handle, self._decoder = handle, decoder
        self._buffer, self._pos, self._eof = "", 0, False

    def _more(self) -> None:
        chunk = self._handle.read(_CHUNK)
        if not chunk:
            self._eof = True
            return
        self._buffer, self._pos = self._buffer[self._pos:] + chunk, 0

    def peek(self) -> str:
        while True:
            while self._pos < len(self._buffer) and self._buffer[self._pos] in _SPACE:
                self._pos += 1
            if self._pos < len(self._buffer) or self._eof:
                return self._buffer[self._pos] if self._pos < len(self._buffer) else ""
            self._more()

    def take(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"expected {char!r} at character {self._pos}")
        self._pos += 1

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = self._decoder.raw_decode(self._buffer, self._pos)
            except json.JSONDecodeError:
                if self._eof:
                    raise
                self._more()
                continue
            if end == len(self._buffer) and not self._eof:  # a number may go on in the next chunk
                self._more()
                continue
            self._pos = end
            return value


def read_items(path: Path, on_item: Callable[[str, dict[str, Any]], None],
               sections: set[str] | None = None) -> dict[str, Any]:
    """Stream ``path``; an absent file is an empty object (no items). ``sections`` gets the item sections found,
    an empty one too."""
    if not path.is_file():
        return {}

    def non_finite(name: str) -> None:  # our writers never write NaN or an infinity: the file was altered
        raise InputError(f"not a finite number: {name} (a missing value is null)", file=str(path))

    members: dict[str, Any] = {}
    try:
        with path.open(encoding="utf-8") as handle:
            reader = _Reader(handle, json.JSONDecoder(parse_constant=non_finite))
            if reader.peek() != "{":
                raise InputError("expected a JSON object", file=str(path))
            reader.take("{")
            while reader.peek() != "}":
                key = reader.value()
                reader.take(":")
                if key in ITEM_SECTIONS and reader.peek() == "[":
                    _items(reader, str(key), on_item, path)
                    if sections is not None:
                        sections.add(str(key))
                else:
                    members[str(key)] = reader.value()
                if reader.peek() == ",":
                    reader.take(",")
            reader.take("}")
            if reader.peek():
                raise ValueError("extra data after the object")
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise InputError(f"cannot read JSON: {error}", file=str(path)) from error
    return members


def _items(reader: _Reader, section: str, on_item: Callable[[str, dict[str, Any]], None], path: Path) -> None:
    reader.take("[")
    while reader.peek() != "]":
        item = reader.value()
        if not isinstance(item, dict):
            raise InputError(f"an element of {section} is not an object", file=str(path))
        on_item(section, item)
        if reader.peek() == ",":
            reader.take(",")
    reader.take("]")
