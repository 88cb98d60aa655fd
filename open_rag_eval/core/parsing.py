"""Pure parsers of judge completions (docs/methods.md: UMBRELA, AutoNuggetizer, citation support, no-answer).

The parsers reproduce the reference behaviour, quirks included (documented in docs/methods.md):
UMBRELA's ``[:-=]`` is a character range, pattern 3 fires on words ending in "o" followed by a digit, and the
last match of the first matching pattern wins; the support parser checks "full support" before "no support".
They only ever read the completion, never the prompt, so passage content cannot steer them.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any
__all__ = [
    "UMBRELA_PATTERNS",
    "is_catch_all",
    "match_umbrela",
    "parse_json_object",
    "parse_labels",
    "parse_list",
    "parse_no_answer",
    "parse_support",
    "parse_umbrela",
    "strip_reasoning",
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
