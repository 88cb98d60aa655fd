"""Answer segmentation: split an answer into statements (sentences) with the citations that belong to each.

TREC 2024 RAG answers are lists of sentences, each with its citations. Free-text answers are brought to that
shape here:

- A citation marker is ``[id]`` or a bracketed list ``[id, id]`` / ``[id; id]``; runs such as ``[1][2]`` and
  ``[1], [2]`` are one group. An id is a token with at least one digit (``1``, ``12``, ``doc_3#2``), so ``[sic]``
  or ``[citation needed]`` are plain text; a bracket followed by ``(`` (a markdown link) is not a marker.
- A sentence owns the markers inside it and those right after its end (``... end. [1][2] Next ...``).
- A sentence ends at ``.``, ``!``, ``?`` (plus closing quotes/parentheses and trailing markers) followed by
  whitespace and a sentence start (a capital letter, digit, quote, or the end of the text); at ``。！？``; at a
  blank line, a list item or heading line; and after a marker group followed by a capital letter
  (``dense [1] They are ...``, the style of the peer's examples). Decimals (``3.5``), initials and dotted
  abbreviations (``U.S.``, ``e.g.``) and common titles (``Dr.``, ``No.``, ``Fig.``) do not end a sentence;
  the price is that a sentence really ending in ``U.S.`` is joined with the next one.
- A trailing ``Sources:`` / ``References:`` block (a line starting with that word, or the word followed only by
  markers at the end of the answer) is not a claim and is dropped, with its markers.
- Markdown headings (``# ...``) are not claims and are dropped; list markers (``-``, ``*``, ``1.``) are removed.
- Citation ids are normalised (surrounding brackets and spaces stripped) and resolved against the passage ids,
  also normalised. A positive integer ``n`` that names no passage resolves to the ``n``-th passage (1-based)
  when no passage id is an integer (answers that number the passages they were shown). A citation that resolves
  to nothing is KEPT -- the citation metric counts it as fabricated -- and reported by a log warning.
- A sentence's citations are distinct, in order of appearance. The statement text has the markers removed.
- The literal refusal ``NO_ANSWER`` becomes one statement ``NO_ANSWER`` without citations.

``between_markers`` is vectara's open-rag-eval's segmentation instead (``statements: between_markers``, its
profile): a statement is everything between two citation groups, cited by the group that ends it (``[1, 2]`` and
``[1], [2]`` read as ``[1][2]``; an id is digits only); text after the last group is a statement without citations
when it is longer than one character (so ``... [2].`` leaves no ``.`` statement); an answer without markers is one
statement, unstripped.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from open_rag_eval.core.notices import note
from open_rag_eval.core.types import AnswerPart

__all__ = ["NO_ANSWER", "UNKNOWN_CITATIONS", "between_markers", "find_citations", "normalize_id", "resolve_citations", "segment_answer", "split_answer"]

log = logging.getLogger(__name__)
UNKNOWN_CITATIONS = "citations that name no retrieved passage (kept, counted as fabricated)"

NO_ANSWER = "NO_ANSWER"

_ID = r"[\w.#:/-]*[0-9][\w.#:/-]*"
_MARKER = rf"\[\s*{_ID}(?:\s*[,;]\s*{_ID})*\s*\](?!\()"
_MARKER_RE = re.compile(_MARKER)
_RUN_RE = re.compile(rf"{_MARKER}(?:[ \t]*[,;]?[ \t]*{_MARKER})*")
_TERMINATOR_RE = re.compile(r"[.!?]+[\"'\u201d\u2019)]*|[\u3002\uff01\uff1f]")
_SOURCES_LINE_RE = re.compile(
    r"(?im)^[ \t>]*[#*_]*[ \t]*(?:sources|references|citations|bibliography)[ \t]*[*_]*[ \t]*(?::|$)"
)
_SOURCES_INLINE_RE = re.compile(r"(?i)(?<=[.!?\]])[ \t]+[*_]*(?:sources|references|citations)[*_]*[ \t]*:")
_LIST_ITEM_RE = re.compile(r"^\s*(?:[-*\u2022+]|[0-9]{1,3}[.)])\s+")
_BLANKS_RE = re.compile(r"[ \t]*")
_NEXT_CHAR_RE = re.compile(r"\s*(\S)")
_HEADING_RE = re.compile(r"^\s*#{1,6}\s")
_ABBREVIATIONS = frozenset(  # case-sensitive: "No. 5" does not end a sentence, "the answer is no." does
    "Mr Mrs Ms Dr Prof Sr Jr St Mt No Nos Fig Figs Vol Vols Gen Col Capt Lt Sgt Rev Hon Dept Approx Jan Feb Mar "
    "Apr Jun Jul Aug Sep Sept Oct Nov Dec vs pp approx ca cf al fig figs vol vols".split()
)
_DOTTED_RE = re.compile(r"^(?:[A-Za-z]\.)+[A-Za-z]$|^[A-Za-z]$")
_SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([.,;:!?)\]}\u3002])")
_DUPLICATE_PUNCT_RE = re.compile(r"([,;:])\s*(?=[.,;:!?])")


def normalize_id(value: object) -> str:
    """A passage or citation id as compared: text with surrounding spaces and brackets stripped."""
    text = str(value).strip()
    while len(text) >= 2 and text[0] == "[" and text[-1] == "]":
        text = text[1:-1].strip()
    return text


def find_citations(text: str) -> list[str]:
    """The distinct citation ids of the markers in ``text``, normalised, in order of appearance."""
    seen: dict[str, None] = {}
    for marker in _MARKER_RE.finditer(text):
        for token in re.split(r"[,;]", marker.group()[1:-1]):
            seen.setdefault(normalize_id(token), None)
    return list(seen)


def resolve_citations(citations: Sequence[str], passage_ids: Sequence[str]) -> tuple[tuple[str, ...], list[str]]:
    """Map citation ids onto passage ids (see the module doc); return (resolved ids, ids naming no passage)."""
    return _Resolver(passage_ids).resolve(citations)


class _Resolver:
    def __init__(self, passage_ids: Sequence[str]) -> None:
        self.ids = [normalize_id(pid) for pid in passage_ids]
        self.known = set(self.ids)
        self.positional = not any(_is_number(pid) for pid in self.ids)

    def resolve(self, citations: Sequence[str]) -> tuple[tuple[str, ...], list[str]]:
        resolved: dict[str, None] = {}
        unknown: list[str] = []
        for citation in citations:
            cid = normalize_id(citation)
            if cid not in self.known and self.positional and _is_number(cid) and 1 <= int(cid) <= len(self.ids):
                cid = self.ids[int(cid) - 1]
            elif cid not in self.known:
                unknown.append(cid)
            resolved.setdefault(cid, None)
        return tuple(resolved), unknown


def _is_number(text: str) -> bool:
    """ASCII digits only: ``str.isdigit`` is also true of ``'¹'`` or ``'٣'``, which ``int`` rejects or misreads."""
    return text.isascii() and text.isdigit()


def split_answer(text: str, passage_ids: Sequence[str]) -> tuple[tuple[AnswerPart, ...], list[str]]:
    """Segment ``text`` without logging; return the parts and the citations that name no passage."""
    resolver = _Resolver(passage_ids)
    parts: list[AnswerPart] = []
    unknown: list[str] = []
    for sentence in _sentences(_drop_sources_block(text)):
        citations, missing = resolver.resolve(find_citations(sentence))
        statement = _clean(sentence)
        if not re.search(r"\w", statement):
            if parts and citations:  # stray markers: they belong to the statement before them
                merged = tuple(dict.fromkeys(parts[-1].citations + citations))
                parts[-1] = AnswerPart(text=parts[-1].text, citations=merged)
                unknown.extend(missing)
            continue
        parts.append(AnswerPart(text=statement, citations=citations))
        unknown.extend(missing)
    return tuple(parts), list(dict.fromkeys(unknown))


_PEER_LIST_RE = re.compile(r"\[\d+(?:,\s*\d+)+\]")
_PEER_COMMA_RE = re.compile(r"\]\s*,\s*\[")
_PEER_GROUP_RE = re.compile(r"(?:\[\d+\])+")


def between_markers(text: str, passage_ids: Sequence[str]) -> tuple[AnswerPart, ...]:
    """vectara's statements (see the module doc): the text between two citation groups, cited by the group after
    it. A citation's id is resolved against the passage ids as in ``split_answer`` (an unknown one is kept)."""
    text = _PEER_LIST_RE.sub(lambda m: "".join(f"[{n}]" for n in re.findall(r"\d+", m.group())), text)
    text = _PEER_COMMA_RE.sub("][", text)
    groups = list(_PEER_GROUP_RE.finditer(text))
    if not groups:
        return (AnswerPart(text=text),)
    resolver = _Resolver(passage_ids)
    parts: list[AnswerPart] = []
    start = 0
    for group in groups:
        statement = text[start:group.start()].strip()
        if statement:
            parts.append(AnswerPart(text=statement, citations=resolver.resolve(re.findall(r"\d+", group.group()))[0]))
        start = group.end()
    rest = text[start:].strip()
    if len(rest) > 1:
        parts.append(AnswerPart(text=rest))
    return tuple(parts)


def segment_answer(text: str, passage_ids: Sequence[str]) -> tuple[AnswerPart, ...]:
    """Split an answer into statements with their citations; warn about citations naming no passage."""
    parts, unknown = split_answer(text, passage_ids)
    if unknown:
        note("unknown citation", UNKNOWN_CITATIONS, _cited_in(unknown, text), log.name)
    return parts


def _cited_in(unknown: Sequence[str], text: str) -> str:
    """Which unknown ids an answer cites, with the start of the answer (to find it)."""
    start = " ".join(text.split())
    return f"{', '.join(unknown)} in '{start[:40]}{'…' if len(start) > 40 else ''}'"


def _drop_sources_block(text: str) -> str:
    """The answer without its trailing sources/references block."""
    for match in _SOURCES_LINE_RE.finditer(text):
        if re.search(r"\w", text[: match.start()]):
            return text[: match.start()]
    for match in _SOURCES_INLINE_RE.finditer(text):
        rest = text[match.end():]
        if not _MARKER_RE.sub("", rest).strip(" \t\r\n,;.") and re.search(r"\w", text[: match.start()]):
            return text[: match.start()]
    return text


def _blocks(text: str) -> list[str]:
    """Paragraphs and list items, headings dropped, each joined into one line."""
    blocks: list[list[str]] = [[]]
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if not line.strip():
            blocks.append([])
        elif _HEADING_RE.match(line):
            blocks.append([])
        elif _LIST_ITEM_RE.match(line):
            blocks.append([_LIST_ITEM_RE.sub("", line, count=1)])
        else:
            blocks[-1].append(line.strip())
    return [" ".join(block) for block in blocks if block]


def _sentences(text: str) -> list[str]:
    sentences: list[str] = []
    for block in _blocks(text):
        start = 0
        for end in _boundaries(block):
            if block[start:end].strip():
                sentences.append(block[start:end].strip())
            start = end
        if block[start:].strip():
            sentences.append(block[start:].strip())
    return sentences


def _boundaries(block: str) -> list[int]:
    """Positions where a sentence ends (after its trailing markers), in order."""
    ends: set[int] = set()
    for term in _TERMINATOR_RE.finditer(block):
        if term.group() in "\u3002\uff01\uff1f":
            ends.add(_after_markers(block, term.end()))
        elif not _is_abbreviation(block, term.start(), term.group()):
            end = _after_markers(block, term.end())
            if _starts_sentence(block, end):
                ends.add(end)
    for run in _RUN_RE.finditer(block):
        before = _previous_char(block, run.start())
        if before and not _TERMINATOR_RE.match(before) and _capital_follows(block, run.end()):
            ends.add(run.end())
    return sorted(ends)


def _after_markers(block: str, position: int) -> int:
    run = _RUN_RE.match(block, _BLANKS_RE.match(block, position).end())  # type: ignore[union-attr]
    return run.end() if run else position


def _next_char(block: str, position: int) -> str:
    """The first non-space character at or after ``position`` ("" at the end)."""
    found = _NEXT_CHAR_RE.match(block, position)
    return found.group(1) if found else ""


def _previous_char(block: str, position: int) -> str:
    """The last non-space character before ``position`` ("" at the start)."""
    index = position - 1
    while index >= 0 and block[index].isspace():
        index -= 1
    return block[index] if index >= 0 else ""


def _starts_sentence(block: str, position: int) -> bool:
    first = _next_char(block, position)
    if not first:
        return True
    if not block[position].isspace():
        return False
    return first.isupper() or first.isdigit() or first in "\"'\u201c\u2018(" or (first.isalpha() and not first.islower())


def _capital_follows(block: str, position: int) -> bool:
    return position < len(block) and block[position].isspace() and _next_char(block, position).isupper()


def _is_abbreviation(block: str, start: int, terminator: str) -> bool:
    if terminator != "." or start == 0 or block[start - 1].isspace():
        return False
    word = block[block.rfind(" ", 0, start) + 1: start].lstrip("([{\"'\u201c\u2018")
    return word in _ABBREVIATIONS or bool(_DOTTED_RE.match(word))


def _clean(sentence: str) -> str:
    text = _RUN_RE.sub(" ", sentence)
    text = re.sub(r"\s+", " ", text).strip()
    text = _SPACE_BEFORE_PUNCT_RE.sub(r"\1", text)
    text = _DUPLICATE_PUNCT_RE.sub("", text)
    return text.lstrip(",;: ").strip()
