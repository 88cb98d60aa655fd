"""Pure parsers of judge completions (docs/methods.md: UMBRELA, AutoNuggetizer, citation support, no-answer).

The parsers reproduce the reference behaviour, quirks included (documented in docs/methods.md):
UMBRELA's ``[:-=]`` is a character range, pattern 3 fires on words ending in "o" followed by a digit, and the
last match of the first matching pattern wins; the support parser checks "full support" before "no support".
They only ever read the completion, never the prompt, so passage content cannot steer them.

Parse classes (the second half of this module): what kind of reply each judgment rests on
(docs/judge-health.md).

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

import ast
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

__all__ = [
    "CLASSES",
    "CLEAN",
    "ECHO",
    "FAILED",
    "FALLBACK",
    "INVALID",
    "Parsed",
    "UMBRELA_PATTERNS",
    "classify_labels",
    "classify_no_answer",
    "classify_nugget_list",
    "classify_support",
    "classify_umbrela",
    "is_catch_all",
    "match_umbrela",
    "parse_json_object",
    "parse_labels",
    "parse_list",
    "parse_no_answer",
    "parse_support",
    "parse_umbrela",
    "strip_reasoning",
    "worst",
]

_G = r"(0|1|2|3)"

# castorini/umbrela as it stood for TREC 2024 (fb5629a), verbatim and in order ("relevance category" twice).
_TREC2024_HEAD = (
    rf'"o"\s*[:-=]?\s*{_G}',
    rf"\'o\'\s*[:-=]?\s*{_G}",
    rf"o\s*[:-=]?\s*{_G}",
    rf'"overall_score"\s*[:-=]?\s*{_G}',
    rf'"overall"\s*[:-=]?\s*{_G}',
    rf'"overall score"\s*[:-=]?\s*{_G}',
    rf'"final score"\s*[:-=]?\s*{_G}',
    rf"final score\s*[:-=]?\s*{_G}",
    rf"final score is {_G}",
    rf'"final_score"\s*[:-=]?\s*{_G}',
    rf'"score"\s*[:-=]?\s*{_G}',
    rf'"o_score"\s*[:-=]?\s*{_G}',
    rf"output score is {_G}",
    rf"score is {_G}",
)
_TREC2024_TAIL = (
    rf"[a-zA-Z]+\s+is\s+{_G}\s",
    rf"relevance category\s*[:-=]?\s*{_G}",
    rf"relevance category\s*[:-=]?\s*{_G}",
    rf"relevance category is {_G}",
    rf"it falls into the category {_G}",
    rf"category\s*{_G}",
    rf"relevance category {_G}",
    rf"relevance category for this passage would be {_G}",
    rf"the relevance category would be {_G}",
    rf"\n*{_G}",
)
# castorini/umbrela HEAD (e2c4e41) inserts these between "score is" and the "<word> is <digit>" pattern.
_HEAD_EXTRA = (
    rf"score of\s+{_G}",
    rf"assign(?:ing)?\s+(?:it\s+)?(?:a\s+)?score of\s+{_G}",
    rf"conclude(?:s|d)?\s+with\s+(?:a\s+)?score of\s+{_G}",
    rf"give(?:n)?\s+(?:it\s+)?(?:a\s+)?score of\s+{_G}",
    rf"i (?:would )?(?:give|assign)\s+(?:it\s+)?(?:a\s+)?score of\s+{_G}",
    rf"score:\s*{_G}",
)
UMBRELA_PATTERNS: dict[str, tuple[str, ...]] = {
    "trec2024": _TREC2024_HEAD + _TREC2024_TAIL,
    "head": _TREC2024_HEAD + _HEAD_EXTRA + _TREC2024_TAIL,
}
_FLAGS = re.IGNORECASE | re.MULTILINE | re.DOTALL
_COMPILED = {name: tuple(re.compile(p, _FLAGS) for p in patterns) for name, patterns in UMBRELA_PATTERNS.items()}
_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)


def strip_reasoning(text: str) -> str:
    """Remove ``<think>...</think>`` blocks some reasoning models put before their answer."""
    return _THINK.sub("", text)


def match_umbrela(text: str, profile: str = "trec2024") -> re.Match[str] | None:
    """The reference's match: the last match of the first pattern that matches at all (None: nothing matches).

    ``match.re`` tells which pattern won (the last one, ``\\n*(0|1|2|3)``, is the "last digit anywhere" catch-all);
    positions refer to ``text.strip().lower()``.
    """
    response = text.strip().lower()
    for pattern in _COMPILED[profile]:
        last = None
        for last in pattern.finditer(response):
            pass
        if last is not None:
            return last
    return None


def is_catch_all(match: re.Match[str]) -> bool:
    """Whether the UMBRELA match came from the final "last digit 0-3 anywhere" pattern."""
    return match.re.pattern == UMBRELA_PATTERNS["trec2024"][-1]


def parse_umbrela(text: str, profile: str = "trec2024") -> tuple[int, bool]:
    """(grade, valid): the last match of the first matching pattern; nothing matches -> (0, False)."""
    match = match_umbrela(text, profile)
    return (int(match.group(1)), True) if match is not None else (0, False)


def parse_list(text: str) -> list[str] | None:
    """The nuggetizer parser: drop code fences, ``ast.literal_eval``; anything but a list of strings -> None.

    Requiring ``list[str]`` is a documented deviation: castorini accepts any literal (docs/methods.md, AutoNuggetizer).
    """
    cleaned = text.replace("```python", "").replace("```", "").strip()
    try:
        value = ast.literal_eval(cleaned)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return None
    return value


def parse_labels(text: str, expected: int) -> list[str] | None:
    """A list of exactly ``expected`` labels, lower-cased (scorer and assigner); otherwise None."""
    labels = parse_list(text)
    if labels is None or len(labels) != expected:
        return None
    return [label.lower() for label in labels]


def parse_support(text: str) -> str | None:
    """'FS' / 'PS' / 'NS' by substring, in that order (the organisers' script); otherwise None."""
    lower = text.lower()
    for phrase, label in (("full support", "FS"), ("partial support", "PS"), ("no support", "NS")):
        if phrase in lower:
            return label
    return None


def parse_no_answer(text: str) -> str | None:
    """'yes' / 'no' once quotes, backticks and trailing punctuation are stripped; otherwise None."""
    label = text.strip().lower().strip("\"'`*").rstrip(".!").strip("\"'`* ")
    return label if label in ("yes", "no") else None


_FENCE = re.compile(r"\A```(?:json)?\s*\n(.*)\n```\Z", re.DOTALL)


def parse_json_object(text: str) -> dict[str, Any]:
    """The one JSON object a reply is (optionally in one ```json fence); ``ValueError`` otherwise."""
    body = text.strip()
    fenced = _FENCE.match(body)
    try:
        value = json.loads(fenced.group(1) if fenced else body)
    except (json.JSONDecodeError, RecursionError):
        raise ValueError("the reply is not one JSON object") from None
    if not isinstance(value, dict):
        raise ValueError("the reply is not one JSON object")
    return value


# --- parse classes: what kind of reply each judgment rests on (docs/judge-health.md) ---

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
    """A parsed reply: its value (None: not accepted), its class, and what was wrong with it (for a failure
    reason: "2 labels for 4 nuggets", "no support label in the reply", ...)."""

    value: T | None
    klass: str
    problem: str | None = None


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
        return Parsed(None if profile == "strict" else (0, False), INVALID, "no grade 0-3 in the reply")
    response = text.strip().lower()
    klass = CLEAN
    if is_catch_all(match) and not _bare_last_line(response, match):
        klass = ECHO if _is_list_number(response, match) else FALLBACK
    if len({m.group(1) for m in _SCALE_LINE.finditer(response)}) >= 3:
        klass = ECHO
    if profile == "strict" and klass != CLEAN:
        what = "restates the grade scale" if klass == ECHO else "has a grade only outside the method's format"
        return Parsed(None, klass, f"the reply {what} (strict profile)")
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
    if named == 0:
        return Parsed(None, klass, "no support label (Full Support, Partial Support or No Support) in the reply")
    if profile == "strict" and klass != CLEAN:
        return Parsed(None, klass, f"the reply names {named} support labels, not one (strict profile)")
    return Parsed(parse_support(text), klass)


def classify_no_answer(text: str) -> Parsed[str]:
    """yes / no; a reply that is neither is invalid, or echo when it names both ("yes or no")."""
    value = parse_no_answer(text)
    if value is not None:
        return Parsed(value, CLEAN)
    words = set(re.findall(r"[a-z]+", text.lower()))
    if {"yes", "no"} <= words:
        return Parsed(None, ECHO, "the reply names both yes and no")
    return Parsed(None, INVALID, f"the reply is neither yes nor no ({_quoted(text)})")


def classify_nugget_list(text: str) -> Parsed[list[str]]:
    """The creator's list; echo when it is the prompt's own format example (["a", "b", ...])."""
    value = parse_list(text)
    if value is None:
        return Parsed(None, INVALID, "not a list of strings")
    if value and set(value) <= _FORMAT_EXAMPLE:
        return Parsed(value, ECHO)
    return Parsed(value, CLEAN)


def classify_labels(text: str, expected: int, allowed: Collection[str], profile: str = "reference") -> Parsed[list[str]]:
    """A list of ``expected`` labels (lower-cased); fallback when some label is outside ``allowed`` (the reference
    keeps it: it earns no credit, or counts as okay). ``strict`` accepts labels from ``allowed`` only."""
    labels = parse_labels(text, expected)
    if labels is None:
        found = parse_list(text)
        if found is None:
            return Parsed(None, INVALID, "not a list of labels")
        return Parsed(None, INVALID, f"{len(found)} labels for {expected} nuggets")
    outside = [label for label in labels if label not in allowed]
    klass = FALLBACK if outside else CLEAN
    if profile == "strict" and klass != CLEAN:
        return Parsed(None, klass, f"label {outside[0]!r} outside the set ({', '.join(sorted(allowed))})")
    return Parsed(labels, klass)


def _quoted(text: str, limit: int = 40) -> str:
    """The start of a reply, quoted, for a failure reason."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
