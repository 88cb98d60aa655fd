"""Warnings about many items, tallied: one line per kind with a count and the first few items, however many there are.

Inside ``tallied()`` (a door reading its input, an evaluator at work) ``note(kind, message, item)`` counts; when the
block ends, one warning per kind: ``2000 output(s): citations that name no retrieved passage (kept, counted as
fabricated); first: in.jsonl:2 (7); in.jsonl:3 (7); in.jsonl:4 (7) and 1997 more``. Outside it a note is logged
at once. Nested blocks share the outermost tally. Inside ``quiet()`` notes are dropped (items read twice, noted
the other time). No dependencies beyond logging.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

__all__ = ["SHOWN", "note", "quiet", "tallied"]

SHOWN = 3  # items named in a tallied line


@dataclass
class _Kind:
    message: str
    logger: str
    unit: str
    items: list[str] = field(default_factory=list)
    count: int = 0

    def line(self) -> str:
        more = f" and {self.count - len(self.items)} more" if self.count > len(self.items) else ""
        return f"{self.count} {self.unit}: {self.message}; first: {'; '.join(self.items)}{more}"


_TALLY: ContextVar[dict[str, _Kind] | None] = ContextVar("open_rag_eval_notices", default=None)


def note(kind: str, message: str, item: str, logger: str = "open_rag_eval", unit: str = "output(s)") -> None:
    """A warning of ``kind`` (``message`` says what it is and what happens to it) about ``item``, one of the
    ``unit`` the tallied line counts."""
    tally = _TALLY.get()
    if tally is None:
        logging.getLogger(logger).warning("%s: %s", item, message)
        return
    entry = tally.setdefault(kind, _Kind(message, logger, unit))
    entry.count += 1
    if len(entry.items) < SHOWN:
        entry.items.append(item)


@contextmanager
def tallied() -> Iterator[None]:
    """Tally the notes of this block; when it ends without an error, log one warning per kind."""
    if _TALLY.get() is not None:
        yield
        return
    tally: dict[str, _Kind] = {}
    token = _TALLY.set(tally)
    try:
        yield
    finally:
        _TALLY.reset(token)
    for entry in tally.values():
        logging.getLogger(entry.logger).warning("%s", entry.line())


@contextmanager
def quiet() -> Iterator[None]:
    """Drop the notes of this block: its items are read again elsewhere, where they are noted."""
    token = _TALLY.set({})
    try:
        yield
    finally:
        _TALLY.reset(token)
