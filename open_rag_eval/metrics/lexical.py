"""Lexical answer checks: pure functions over text, no model and no judge.

Tokens are lower-cased (casefolded) runs of word characters (``\\w+``); *content tokens* are tokens that are not
stopwords (``english_stopwords()``: 153 English function words and contraction pieces, bundled as the versioned,
hash-checked data file ``prompts/stopwords_en.txt``; replaceable). The ``alnum`` tokenizer is the one of small
answer-evaluation demos: the text lower-cased and split on whitespace, every character that is not a letter or digit
removed from each piece, no stopwords (``don't`` -> ``dont``, ``RAG-based`` -> ``ragbased``).

- groundedness: share of the answer's content tokens (counted with repetition) that occur among the context's tokens;
  missing when the answer has no content token.
- keyword coverage: share of expected keywords found in the answer, case-insensitive, as whole words/phrases
  (``"rag"`` does not match ``"fragment"``), or (``match="substring"``) anywhere in the lower-cased answer;
  missing when there are no keywords.
- context overlap: groundedness computed against the passages of the ``grounding_ids`` documents only.
- keyword score: ``alpha * coverage + (1 - alpha) * overlap``.
- citation compliance: 0.5 for a sources section (a line starting with the header, e.g. ``Sources:`` or
  ``**Sources**``) + 0.5 for at least ``required`` citations: distinct cited passages, or the entries listed under
  the sources section (``sources_entries``) when there are more of those.
- refusal: the lexical detector ``is_refusal`` (used when no no-answer judgment is available): an empty answer,
  ``NO_ANSWER``, or a first sentence that declines ("I don't know", "the provided context does not contain
  information", "cannot be answered", ...). It reads only the first sentence, so an answer that declines one part
  and answers the rest counts as answered.
- latency: `latency.ms` per output; summary.csv gives its mean, median, p95 and max like every metric's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import cache

from open_rag_eval.prompts import load

__all__ = [
    "TOKENIZERS",
    "alnum_tokens",
    "citation_compliance",
    "content_tokens",
    "english_stopwords",
    "has_sources_section",
    "is_refusal",
    "keyword_coverage",
    "keyword_score",
    "refusal_confusion",
    "sources_entries",
    "token_support",
]


@cache
def english_stopwords() -> frozenset[str]:
    """The bundled English stopword list (``prompts/stopwords_en.txt``, versioned and hash-checked like a prompt):
    every word after the label of each category line."""
    text = load("lexical.stopwords_en").text
    return frozenset(word for line in text.splitlines() if ":" in line for word in line.split(":", 1)[1].split())


_WORD = re.compile(r"\w+")


def content_tokens(text: str, stopwords: frozenset[str] | None = None) -> list[str]:
    """Lower-cased word tokens of ``text`` without stopwords (default: ``english_stopwords()``), in order, repeats
    kept."""
    dropped = english_stopwords() if stopwords is None else stopwords
    return [token for token in _WORD.findall(text.casefold()) if token not in dropped]


def alnum_tokens(text: str) -> list[str]:
    """Lower-cased whitespace-separated pieces with every non-alphanumeric character removed; empty pieces dropped."""
    pieces = ("".join(char for char in piece if char.isalnum()) for piece in text.lower().split())
    return [piece for piece in pieces if piece]


TOKENIZERS = ("content", "alnum")


def token_support(answer: str, context: Iterable[str], stopwords: frozenset[str] | None = None,
                  tokenizer: str = "content") -> float | None:
    """Share of the answer's tokens found in the context (groundedness / context overlap), repeats counted.

    ``content``: the answer's content tokens against every word token of the context; ``alnum``: ``alnum_tokens``
    on both sides. None when the answer has no token; 0.0 when the context is empty.
    """
    if tokenizer == "alnum":
        tokens = alnum_tokens(answer)
        vocabulary = {token for text in context for token in alnum_tokens(text)}
    elif tokenizer == "content":
        tokens = content_tokens(answer, stopwords)
        vocabulary = {token for text in context for token in _WORD.findall(text.casefold())}
    else:
        raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}")
    if not tokens:
        return None
    return sum(1 for token in tokens if token in vocabulary) / len(tokens)


def _keyword_found(keyword: str, text: str) -> bool:
    words = _WORD.findall(keyword.casefold())
    if not words:
        return keyword.strip().casefold() in text.casefold() if keyword.strip() else False
    pattern = r"(?<!\w)" + r"\W+".join(re.escape(word) for word in words) + r"(?!\w)"
    return re.search(pattern, text.casefold()) is not None


def keyword_coverage(answer: str, keywords: Sequence[str], match: str = "word") -> tuple[float | None, list[str]]:
    """(share of keywords found in the answer, the keywords found); share None when there are no keywords.

    ``match="word"``: whole words/phrases, case-insensitive; ``"substring"``: ``keyword.lower() in answer.lower()``.
    """
    if match not in ("word", "substring"):
        raise ValueError("match must be 'word' or 'substring'")
    if not keywords:
        return None, []
    if match == "substring":
        found = [keyword for keyword in keywords if keyword.lower() in answer.lower()]
    else:
        found = [keyword for keyword in keywords if _keyword_found(keyword, answer)]
    return len(found) / len(keywords), found


def keyword_score(coverage: float, overlap: float, alpha: float = 0.5) -> float:
    return alpha * coverage + (1 - alpha) * overlap


def has_sources_section(answer_text: str, header: str = "Sources") -> bool:
    """A line that starts (after markdown marks) with ``header`` followed by ``:`` or the end of the line."""
    pattern = rf"^[ \t>#*_]*{re.escape(header)}[ \t*_]*(?::|$)"
    return re.search(pattern, answer_text, flags=re.IGNORECASE | re.MULTILINE) is not None


_BULLET = re.compile(r"^\s*(?:[-*\u2022+]|[0-9]{1,3}[.)])\s+(.*\S)")


def sources_entries(answer_text: str, header: str = "Sources") -> list[str]:
    """The entries listed under the answer's sources section (to the end of the answer): its bullet or numbered
    items, else its non-empty lines (a section of one line, ``Sources: a.pdf, b.pdf``, is split at commas and
    semicolons); distinct, in order. Empty when there is no sources section."""
    pattern = rf"^[ \t>#*_]*{re.escape(header)}[ \t*_]*(?::|$)"
    match = re.search(pattern, answer_text, flags=re.IGNORECASE | re.MULTILINE)
    if match is None:
        return []
    first, _, rest = answer_text[match.end():].partition("\n")
    lines = [first.strip(" \t*_")] + rest.splitlines()
    items = [bullet.group(1).strip() for line in lines if (bullet := _BULLET.match(line))]
    if not items:
        items = [line for line in lines if line.strip(" \t*_")]
        if len(items) == 1:
            items = re.split(r"[,;]", items[0])
    return list(dict.fromkeys(item.strip(" \t*_") for item in items if item.strip(" \t*_")))


def citation_compliance(has_sources: bool, n_citations: int, required: int) -> float:
    """0.5 for a sources section + 0.5 for at least ``required`` citations."""
    return 0.5 * has_sources + 0.5 * (n_citations >= required)


_REFUSAL = re.compile(
    r"""\b(?:
      i(?:\s+am|'m)?\s+(?:do\s+not|don't|cannot|can't|can\s+not|could\s+not|couldn't|unable\s+to|not\s+able\s+to)
        \s+(?:know|answer|find|provide|determine|say|tell|help)
    | (?:no|not\s+enough|insufficient)\s+(?:relevant\s+|sufficient\s+|specific\s+)?information
    | (?:does|do|did)\s+not\s+(?:contain|provide|include|mention|have)\s+(?:any\s+|enough\s+)?
        (?:relevant\s+|specific\s+)?(?:information|details|data)
    | cannot\s+be\s+(?:answered|determined)
    | (?:unable|not\s+able)\s+to\s+(?:answer|find|determine)
    | not\s+(?:mentioned|covered|addressed|discussed)\s+in\s+the\s+(?:provided\s+|given\s+|available\s+)?
        (?:context|sources|passages|documents|search\s+results)
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_FIRST_SENTENCE = re.compile(r"^.*?(?:[.!?](?=\s)|\n|$)", re.DOTALL)


def is_refusal(answer_text: str) -> bool:
    """The lexical refusal detector (see the module docstring)."""
    text = answer_text.replace("\u2019", "'").strip()
    if not text or text.upper() == "NO_ANSWER":
        return True
    first = _FIRST_SENTENCE.match(text)
    return _REFUSAL.search(first.group(0) if first else text) is not None


def refusal_confusion(pairs: Iterable[tuple[bool, bool]]) -> dict[str, int]:
    """Counts over (expected_refusal, refused) pairs: ``refused_expected`` (correct refusal), ``answered_expected``
    (correct answer), ``refused_answerable`` (false refusal), ``answered_unanswerable`` (should have refused)."""
    counts = {"refused_expected": 0, "answered_expected": 0, "refused_answerable": 0, "answered_unanswerable": 0}
    for expected, refused in pairs:
        key = ("refused_expected" if refused else "answered_unanswerable") if expected else (
            "refused_answerable" if refused else "answered_expected")
        counts[key] += 1
    return counts


