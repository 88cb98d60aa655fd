"""Parse classes: what kind of reply each judgment rests on (docs/judge-health.md).

Every reply a metric parses gets one class:

``clean``     the method's own format, read by its primary rule;
``fallback``  read only through a fallback of the reference parser (UMBRELA's "last digit 0-3 anywhere", a support
              reply naming two labels where the reference's order decides, labels outside the method's set);
``echo``      the reply repeats the prompt's label set or rubric instead of judging (every support label, the
              UMBRELA grade scale, the rubric's own list numbers);
``invalid``   nothing the parser accepts.

``failed`` (no reply at all) is decided by the caller. The ``reference`` profile keeps the reference parsers' values
(marked with their class); the ``strict`` profile accepts clean replies only: a fallback or echo is treated like an
invalid reply (re-asked where the method re-asks, otherwise the reference's invalid handling).
Every function here is pure and reads only the completion, never the prompt.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Generic, TypeVar

from open_rag_eval.core.parsing import is_catch_all, match_umbrela, parse_labels, parse_list, parse_no_answer, parse_support

__all__ = [
    "CLASSES",
    "CLEAN",
    "ECHO",
    "FAILED",
    "FALLBACK",
    "INVALID",
    "Parsed",
    "classify_labels",
    "classify_no_answer",
    "classify_nugget_list",
    "classify_support",
    "classify_umbrela",
    "worst",
]

T = TypeVar("T")
CLEAN, FALLBACK, ECHO, INVALID, FAILED = "clean", "fallback", "echo", "invalid", "failed"
CLASSES = (CLEAN, FALLBACK, ECHO, INVALID, FAILED)  # from best to worst

# a line that defines a grade of the scale: "0 = represent that ...", "2: the passage has ..."
_SCALE_LINE = re.compile(r"^\W*([0-3])\s*[=:]\s*[a-z]", re.MULTILINE)
# a digit used as a list number: "1. Determine ...", "2) ..."
_LIST_NUMBER = re.compile(r"^\W*([0-3])\s*[.)]\s+\S", re.MULTILINE)
_LAST_LINE_DIGIT = re.compile(r"^[^\w]*([0-3])[^\w]*$")
_SUPPORT_LABELS = ("full support", "partial support", "no support")
_FORMAT_EXAMPLE = {"a", "b", "..."}  # the creator prompt's own example: List in the form ["a", "b", ...]


@dataclass(frozen=True)
class Parsed(Generic[T]):
    """A parsed reply: its value (None: not accepted) and its class."""

    value: T | None
    klass: str


def worst(classes: Collection[str]) -> str:
    """The worst class among several (samples of one judgment); clean when there are none."""
    return max(classes, key=CLASSES.index, default=CLEAN)


def classify_umbrela(text: str, profile: str = "trec2024") -> Parsed[tuple[int, bool]]:
    """(grade, valid) as the reference profile reads it, and the reply's class.

    fallback: only the catch-all matched, and the digit is not a bare grade on the last line (which is the
    basic prompt's own format). echo: the reply restates the grade scale (3 or more grade definitions), or the
    catch-all took a list number of the rubric ("1. ... 2. ..."). ``strict`` uses the 2024 pattern list without
    accepting fallback or echo replies (grade 0, invalid).
    """
    reference = "trec2024" if profile == "strict" else profile
    match = match_umbrela(text, reference)
    if match is None:
        return Parsed(None if profile == "strict" else (0, False), INVALID)
    response = text.strip().lower()
    klass = CLEAN
    if is_catch_all(match) and not _bare_last_line(response, match):
        klass = ECHO if _is_list_number(response, match) else FALLBACK
    if len({m.group(1) for m in _SCALE_LINE.finditer(response)}) >= 3:
        klass = ECHO
    if profile == "strict" and klass != CLEAN:
        return Parsed(None, klass)
    return Parsed((int(match.group(1)), True), klass)


def _bare_last_line(response: str, match: re.Match[str]) -> bool:
    lines = [line for line in response.splitlines() if line.strip()]
    if not lines:
        return False
    last = _LAST_LINE_DIGIT.match(lines[-1].strip())
    return last is not None and match.start(1) >= len(response) - len(lines[-1]) - 1


def _is_list_number(response: str, match: re.Match[str]) -> bool:
    return any(m.start(1) == match.start(1) for m in _LIST_NUMBER.finditer(response))


def classify_support(text: str, profile: str = "reference") -> Parsed[str]:
    """FS / PS / NS as the organisers' script reads it, and the class: one label named is clean, two is
    fallback (the script's order decides), all three is echo (the label set repeated), none is invalid.
    ``strict`` accepts exactly one label."""
    lower = text.lower()
    named = sum(1 for phrase in _SUPPORT_LABELS if phrase in lower)
    klass = {0: INVALID, 1: CLEAN, 2: FALLBACK}.get(named, ECHO)
    if profile == "strict" and klass != CLEAN:
        return Parsed(None, klass)
    return Parsed(parse_support(text), klass)


def classify_no_answer(text: str) -> Parsed[str]:
    """yes / no; a reply that is neither is invalid, or echo when it names both ("yes or no")."""
    value = parse_no_answer(text)
    if value is not None:
        return Parsed(value, CLEAN)
    words = set(re.findall(r"[a-z]+", text.lower()))
    return Parsed(None, ECHO if {"yes", "no"} <= words else INVALID)


def classify_nugget_list(text: str) -> Parsed[list[str]]:
    """The creator's list; echo when it is the prompt's own format example (["a", "b", ...])."""
    value = parse_list(text)
    if value is None:
        return Parsed(None, INVALID)
    if value and set(value) <= _FORMAT_EXAMPLE:
        return Parsed(value, ECHO)
    return Parsed(value, CLEAN)


def classify_labels(text: str, expected: int, allowed: Collection[str], profile: str = "reference") -> Parsed[list[str]]:
    """A list of ``expected`` labels (lower-cased); fallback when some label is outside ``allowed`` (the reference
    keeps it: it earns no credit, or counts as okay). ``strict`` accepts labels from ``allowed`` only."""
    labels = parse_labels(text, expected)
    if labels is None:
        return Parsed(None, INVALID)
    klass = CLEAN if all(label in allowed for label in labels) else FALLBACK
    if profile == "strict" and klass != CLEAN:
        return Parsed(None, klass)
    return Parsed(labels, klass)
