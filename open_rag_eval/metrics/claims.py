"""Claims: the judge splits a text into atomic claims, then verifies every claim of a text in ONE call
(docs/generation.md). Shared by the claim-based generation metrics (faithfulness, context recall, answer correctness).

* Extraction (task ``claim_extract``, priority CHAIN_START: verification waits for it) reads the text's numbered
  sentences -- the answer's own statements from our segmentation, so each claim keeps its sentence and that
  sentence's citations -- and replies ``{"refusal": bool, "claims": [{"sentence": n, "claim": "..."}]}``.
* Verification (task ``claim_verify``, priority CHAIN) reads numbered sources and numbered claims and replies one
  verdict per claim with the numbers of every source that supports it. Batched per text, as ragas does.

Replies are parsed strictly (one JSON object, optionally in one ```json fence; every field typed; one verdict per
claim, in order). A reply that does not parse is asked once more at temperature 0.2 (a distinct sample, never a
cached copy), then the judgment fails with its reason. Failed judgments are missing values downstream, never 0.

``ClaimSession`` holds one evaluation's shared judgments as tasks: the claims of a text are extracted once however
many metrics (and runs with the same answer) need them, and a (claims, sources) pair is verified once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import CLEAN, INVALID, Parsed
from open_rag_eval.judge.base import Judge, JudgeRequest, Priority
from open_rag_eval.metrics._judging import ask
from open_rag_eval.core.parsing import parse_json_object
from open_rag_eval.prompts import load
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput

__all__ = ["Claim", "ClaimSession", "Extracted", "Verified", "Verdict", "parse_claims",
           "parse_verdicts", "source_text"]

T = TypeVar("T")
TRIALS = 2  # a reply that does not parse is asked once more
TEMPERATURES = (0.0, 0.2)
MAX_TOKENS = 2048


@dataclass(frozen=True)
class Claim:
    text: str
    sentence: int  # 1-based index of the sentence it came from
    citations: tuple[str, ...] = ()  # that sentence's citations (passage ids)


@dataclass(frozen=True)
class Extracted:
    """The claims of one text, or why there are none."""

    claims: tuple[Claim, ...] = ()
    refusal: bool = False
    status: str = "ok"  # ok | empty (no text, no call) | failed
    reason: str | None = None
    parse: str = CLEAN


@dataclass(frozen=True)
class Verdict:
    supported: bool
    sources: tuple[int, ...] = ()  # 1-based numbers of the sources named as supporting the claim


@dataclass(frozen=True)
class Verified:
    """One verdict per claim, in order, or why there are none."""

    verdicts: tuple[Verdict, ...] = ()
    status: str = "ok"  # ok | failed
    reason: str | None = None
    parse: str = CLEAN


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_claims(text: str, n_sentences: int) -> Parsed[tuple[bool, tuple[tuple[int, str], ...]]]:
    """(refusal, ((sentence, claim), ...)) from an extraction reply; None (invalid) when anything is off: not one
    object, ``refusal`` not a boolean, a claim without text or naming a sentence that does not exist."""
    try:
        value = parse_json_object(text)
    except ValueError:
        return Parsed(None, INVALID, "not one JSON object")
    refusal, claims = value.get("refusal"), value.get("claims")
    if not isinstance(refusal, bool) or not isinstance(claims, list):
        return Parsed(None, INVALID, "the object lacks a boolean 'refusal' and a list 'claims'")
    found: list[tuple[int, str]] = []
    for item in claims:
        if not isinstance(item, dict):
            return Parsed(None, INVALID, "a claim that is not an object")
        sentence, claim = _int(item.get("sentence")), item.get("claim")
        if not isinstance(claim, str) or not claim.strip():
            return Parsed(None, INVALID, "a claim without text")
        if sentence is None or not 1 <= sentence <= n_sentences:
            return Parsed(None, INVALID, f"a claim names sentence {item.get('sentence')!r} of {n_sentences}")
        found.append((sentence, " ".join(claim.split())))
    return Parsed((refusal, tuple(found)), CLEAN)


def parse_verdicts(text: str, n_claims: int, n_sources: int) -> Parsed[tuple[Verdict, ...]]:
    """One ``Verdict`` per claim from a verification reply; None (invalid) unless there is exactly one entry per
    claim, numbered 1..n in order, with a boolean ``supported`` and a list of source numbers. Source numbers outside
    1..n_sources are dropped (the judge named a source that was not shown); a claim not supported names none."""
    try:
        value = parse_json_object(text)
    except ValueError:
        return Parsed(None, INVALID, "not one JSON object")
    items = value.get("verdicts")
    if not isinstance(items, list):
        return Parsed(None, INVALID, "the object has no list 'verdicts'")
    if len(items) != n_claims:
        return Parsed(None, INVALID, f"{len(items)} verdicts for {n_claims} claims")
    verdicts = []
    for number, item in enumerate(items, start=1):
        if not isinstance(item, dict) or _int(item.get("claim")) != number:
            return Parsed(None, INVALID, f"verdict {number} is not numbered {number}")
        supported, sources = item.get("supported"), item.get("sources", [])
        if not isinstance(supported, bool) or not isinstance(sources, list):
            return Parsed(None, INVALID, f"verdict {number} lacks a boolean 'supported' and a list 'sources'")
        shown = tuple(dict.fromkeys(s for s in map(_int, sources) if s is not None and 1 <= s <= n_sources))
        verdicts.append(Verdict(supported, shown if supported else ()))
    return Parsed(tuple(verdicts), CLEAN)


def source_text(passage: Passage) -> str:
    """``title: text`` when the passage has a title, else its text."""
    return f"{passage.title}: {passage.text}" if passage.title else passage.text


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class ClaimSession:
    """The shared claim judgments of one evaluation (see the module docstring)."""

    judge: Judge
    sample: int = 0
    tasks: dict[Any, asyncio.Future[Any]] = field(default_factory=dict)
    # the sample index of claim extraction when it differs from ``sample``: judge test-retest re-judges everything
    # else (verification too) on the claims of sample 0, so every sample judges the same items
    extract_sample: int | None = None

    def shared(self, key: Any, make: Coroutine[Any, Any, T]) -> Awaitable[T]:
        """One task per key: the first caller's coroutine runs, later ones await it (their coroutine is closed)."""
        if key in self.tasks:
            make.close()
        else:
            self.tasks[key] = asyncio.ensure_future(make)
        return self.tasks[key]

    def answer_claims(self, output: RAGOutput) -> Awaitable[Extracted]:
        parts = tuple(output.answer)
        return self.shared(("claims", output.query, parts), self._extract(output.query, parts))

    def text_claims(self, question: str, text: str) -> Awaitable[Extracted]:
        """Claims of a text given whole (a reference answer), split into sentences by our segmentation."""
        from open_rag_eval.core.segment import segment_answer  # noqa: PLC0415

        parts = tuple(AnswerPart(text=part.text) for part in segment_answer(text.strip(), []))
        return self.shared(("claims", question, parts), self._extract(question, parts))

    def verify(self, claims: Sequence[Claim], sources: Sequence[str]) -> Awaitable[Verified]:
        texts, shown = tuple(c.text for c in claims), tuple(sources)
        return self.shared(("verify", texts, shown), self._verify(texts, shown))

    def cancel(self) -> None:
        for task in self.tasks.values():
            task.cancel()

    async def _extract(self, question: str, parts: tuple[AnswerPart, ...]) -> Extracted:
        if not parts:
            return Extracted(status="empty", reason="the text is empty")
        template = load("generation.claim_extract")
        sentences = "\n".join(f"[{i}] {_one_line(part.text)}" for i, part in enumerate(parts, start=1))
        user = template.render(question=_one_line(question), sentences=sentences)
        reply = await ask(self.judge, lambda t, s: _request(Tasks.CLAIM_EXTRACT, user, template.sha256, t, s,
                                                           Priority.CHAIN_START),
                          lambda text: parse_claims(text, len(parts)), trials=TRIALS, temperatures=TEMPERATURES,
                          sample=self.sample if self.extract_sample is None else self.extract_sample)
        if reply.value is None:
            return Extracted(status="failed", reason=f"claim extraction failed: {reply.reason}", parse=reply.parse)
        refusal, found = reply.value
        claims = tuple(Claim(text, n, parts[n - 1].citations) for n, text in found)
        return Extracted(claims, refusal, "ok", None, reply.parse)

    async def _verify(self, claims: tuple[str, ...], sources: tuple[str, ...]) -> Verified:
        template = load("generation.claim_verify")
        user = template.render(sources="\n".join(f"[{i}] {_one_line(s)}" for i, s in enumerate(sources, start=1)),
                               claims="\n".join(f"({i}) {c}" for i, c in enumerate(claims, start=1)))
        reply = await ask(self.judge, lambda t, s: _request(Tasks.CLAIM_VERIFY, user, template.sha256, t, s,
                                                           Priority.CHAIN),
                          lambda text: parse_verdicts(text, len(claims), len(sources)), trials=TRIALS,
                          temperatures=TEMPERATURES, sample=self.sample)
        if reply.value is None:
            return Verified(status="failed", reason=f"claim verification failed: {reply.reason}", parse=reply.parse)
        return Verified(reply.value, "ok", None, reply.parse)


def _request(task: str, user: str, version: str, temperature: float, sample: int, priority: int) -> JudgeRequest:
    return JudgeRequest.chat(task, user, params={"temperature": temperature, "max_tokens": MAX_TOKENS},
                             prompt_version=version, sample=sample, priority=priority)
