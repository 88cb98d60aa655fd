"""Rubric judges of the ``generation`` evaluator (docs/generation.md): faithfulness, relevance, completeness,
coherence and citation accuracy, each scored 0-10 by the judge with a reason and reported as ``rubric.<name>`` on
0-1.

One call per rubric and output (task ``rubric``, priority LEAF): each criterion is judged on its own, so one
score cannot colour another, a failed reply costs one criterion only, and each prompt carries only what its
criterion reads (coherence does not send the passages). The reply is one JSON object ``{"reason": "...", "score":
N}`` with N a whole number 0..10; anything else -- no JSON, no score, a fraction, a score outside 0..10 -- does not
parse, is asked once more at temperature 0.2, and then the value is missing with its reason (counted in judge
health). Never a default such as 0.5.

Undefined values (nothing asked): an empty answer (every rubric); no passages retrieved (faithfulness, citation
accuracy); an answer that cites no retrieved passage (citation accuracy).

A refusal (the shared claim extraction finds the answer declines and makes no claim) is not graded as an answer
(docs/generation.md, "Refusals"): faithfulness, relevance and citation accuracy are undefined (nothing is claimed,
like ``faithfulness.score`` and ``answer_relevance``); completeness is 0 -- nothing the question asked is given --
unless the query is labelled unanswerable (``expected_refusal: true``), where declining is the complete answer: 1;
coherence is judged as usual. If the extraction failed, whether the answer is a refusal is unknown and every rubric
is judged as usual (the detail says so).
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import CLEAN, INVALID, Parsed
from open_rag_eval.judge.base import JudgeRequest, Priority
from open_rag_eval.metrics._generation import EMPTY_ANSWER, NO_PASSAGES, REFUSAL, expects_refusal, is_refusal
from open_rag_eval.metrics._judging import Asked, ask
from open_rag_eval.metrics.claims import TEMPERATURES, TRIALS, ClaimSession, source_text
from open_rag_eval.core.families import rubric
from open_rag_eval.core.parsing import parse_json_object
from open_rag_eval.prompts import load
from open_rag_eval.scoring.rubric import RUBRIC_MAX, normalise_rubric
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["RUBRICS", "Rubric", "RubricOptions", "cited_answer", "parse_rubric"]

RUBRICS = ("faithfulness", "relevance", "completeness", "coherence", "citation_accuracy")
WITH_SOURCES = frozenset({"faithfulness", "citation_accuracy"})
NO_CITATION = "is undefined: the answer cites no retrieved passage"
REFUSAL_JUDGED = frozenset({"coherence"})  # the rubrics a refusal is judged on like any answer
PARAMS = {"max_tokens": 300}


class RubricOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rubrics: list[str] = Field(default_factory=lambda: list(RUBRICS))

    @field_validator("rubrics")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in RUBRICS]
        if unknown or not value:
            raise ValueError(f"rubrics are one or more of {', '.join(RUBRICS)}"
                             + (f"; unknown: {', '.join(unknown)}" if unknown else ""))
        return list(dict.fromkeys(value))


def parse_rubric(text: str) -> Parsed[tuple[int, str]]:
    """(score, reason) from ``{"reason": "...", "score": N}``, N a whole number 0..10; anything else is invalid."""
    try:
        value = parse_json_object(text)
    except ValueError:
        return Parsed(None, INVALID, "not one JSON object")
    score: Any = value.get("score")
    reason = value.get("reason", "")
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    if not isinstance(reason, str):
        return Parsed(None, INVALID, "the reason is not text")
    try:
        normalise_rubric(score)
    except ValueError:
        return Parsed(None, INVALID, f"the score {score!r} is not a whole number from 0 to 10")
    return Parsed((score, " ".join(reason.split())), CLEAN)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def cited_answer(output: RAGOutput, numbers: dict[str, int]) -> str:
    """The answer with each sentence's citations as the bracketed numbers of the sources shown, before the
    sentence's final punctuation (``Alpha is one [1].``)."""
    parts = []
    for part in output.answer:
        text = _one_line(part.text)
        marks = "".join(f"[{numbers[c]}]" for c in part.citations if c in numbers)
        if marks:  # a statement may be only its citations (empty text): then the marks alone
            body, end = (text[:-1], text[-1]) if text and text[-1] in ".!?" else (text, "")
            text = f"{body} {marks}{end}" if body else f"{marks}{end}"
        parts.append(text)
    return " ".join(parts)


class Rubric:
    def __init__(self, options: RubricOptions | None = None) -> None:
        self.options = options or RubricOptions()

    def names(self) -> list[str]:
        return [rubric(name) for name in self.options.rubrics]

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        if not output.plain_answer.strip():
            return [Score.failed(output, n, EMPTY_ANSWER) for n in self.names()], []
        numbers = {p.id: i for i, p in enumerate(output.passages, start=1)}
        sources = "\n".join(f"[{i}] {_one_line(source_text(p))}" for i, p in enumerate(output.passages, start=1))
        answer = cited_answer(output, numbers)
        cites = any(c in numbers for part in output.answer for c in part.citations)
        names = self.options.rubrics
        refusal = await self._refusal(session, output, names)
        replies = await asyncio.gather(*(self._judge(session, name, output.query, answer, sources, cites)
                                         if refusal is not True or name in REFUSAL_JUDGED
                                         else _refusal_grade(name, output) for name in names))
        scores, rows = [], []
        for name, reply in zip(names, replies, strict=True):
            metric = rubric(name)
            if isinstance(reply, str):
                scores.append(Score.failed(output, metric, reply))
                continue
            if isinstance(reply, int):  # a refusal's rule-given grade (no judge call)
                rows.append({"rubric": name, "status": "refusal", "score": reply, "reason": _refusal_reason(output)})
                scores.append(Score.ok(output, metric, normalise_rubric(reply)))
                continue
            row: dict[str, Any] = {"rubric": name, "status": reply.status, "parse": reply.parse}
            if reply.value is None:
                row["error"] = reply.reason
                scores.append(Score.failed(output, metric, f"rubric {name} failed: {reply.reason}"))
            else:
                row |= {"score": reply.value[0], "reason": reply.value[1]}
                scores.append(Score.ok(output, metric, normalise_rubric(reply.value[0])))
            rows.append(row)
        data: dict[str, Any] = {"rubrics": rows, "refusal": refusal}
        detail = Detail(query_id=output.query_id, run=output.run, section="rubric", data=data)
        return scores, [detail] if rows else []

    @staticmethod
    async def _refusal(session: ClaimSession, output: RAGOutput, names: list[str]) -> bool | None:
        """Whether the answer is a refusal (the shared claim extraction); None when not known: the extraction
        failed, or it is not asked because only rubrics judged alike for refusals are selected."""
        if all(name in REFUSAL_JUDGED for name in names):
            return None
        extracted = await session.answer_claims(output)
        return None if extracted.status == "failed" else is_refusal(extracted)

    async def _judge(self, session: ClaimSession, name: str, question: str, answer: str, sources: str,
                     cites: bool) -> Asked[tuple[int, str]] | str:
        """The judge's reply for one rubric, or the reason it is undefined (nothing asked)."""
        if name in WITH_SOURCES and not sources:
            return NO_PASSAGES
        if name == "citation_accuracy" and not cites:
            return NO_CITATION
        template = load(f"generation.rubric_{name}")
        fields = {"question": _one_line(question), "answer": answer}
        user = template.render(**fields, **({"sources": sources} if name in WITH_SOURCES else {}))
        return await session.shared((Tasks.RUBRIC, name, user), ask(
            session.judge, lambda t, s: JudgeRequest.chat(Tasks.RUBRIC, user, params={"temperature": t, **PARAMS},
                                                          prompt_version=template.sha256, sample=s,
                                                          priority=Priority.LEAF),
            parse_rubric, trials=TRIALS, temperatures=TEMPERATURES, sample=session.sample))


async def _refusal_grade(name: str, output: RAGOutput) -> int | str:
    """A refusal's rubric: completeness 0 (10 where a refusal is expected); the others undefined (the reason)."""
    if name == "completeness":
        return RUBRIC_MAX if expects_refusal(output) else 0
    return REFUSAL


def _refusal_reason(output: RAGOutput) -> str:
    if expects_refusal(output):
        return "a refusal where one is expected (expected_refusal: true): declining is the complete answer"
    return "a refusal on a query taken to be answerable: it gives nothing the question asks for"
