"""What reaches the terminal: ``printable`` escapes control characters, ``echo`` is the one way text is printed.

Ids, queries, answers and error bodies come from outside; printed raw, an escape sequence in one of them could move
the cursor, clear the screen, retitle the window or hide text (``\\x1b[2J``, ``\\x1b]0;…\\x07``, ``\\r``, a
right-to-left override). Every control character except a line break and a tab is shown as its escape (``\\x1b``,
``\\r``, ``\\u202e``). Log records get the same treatment through ``ConsoleFilter`` on the CLI's log handler.
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from types import TracebackType
from typing import TextIO

from open_rag_eval.core.redaction import RedactingFilter, redact

__all__ = ["ConsoleFilter", "echo", "excepthook", "printable"]

# C0 controls but \t and \n, DEL, C1 controls, and the invisible bidi / line-separator characters
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\r": "\\r", "\x0b": "\\v", "\x0c": "\\f", "\x08": "\\b", "\x07": "\\a", "\x00": "\\0"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """``text`` with every terminal control character (but line breaks and tabs) written as its escape."""
    return _CONTROL.sub(_escape, text)


def echo(text: str = "", *, end: str = "\n", stream: TextIO | None = None) -> None:
    """Print ``text`` (redacted, control characters escaped) and ``end`` to stdout (or ``stream``)."""
    (stream or sys.stdout).write(printable(redact(text)) + end)


def excepthook(kind: type[BaseException], error: BaseException, trace: TracebackType | None) -> None:
    """``sys.excepthook`` for the CLI: an unexpected traceback is still shown, redacted and printable."""
    text = "".join(traceback.format_exception(kind, error, trace))
    sys.stderr.write(printable(redact(text)))


class ConsoleFilter(RedactingFilter):
    """Redacts a log record and escapes its control characters: the filter on the CLI's console handler."""

    def filter(self, record: logging.LogRecord) -> bool:
        super().filter(record)
        record.msg = printable(str(record.msg))
        if record.exc_text:
            record.exc_text = printable(record.exc_text)
        return True
