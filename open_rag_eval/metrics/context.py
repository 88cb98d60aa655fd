"""Context metrics of the ``generation`` evaluator (docs/generation.md).

``context.precision_answer``     ranked: each retrieved passage judged useful for arriving at the system's answer
                                 (one call per passage), average precision over the ranks of the useful ones --
                                 ragas's context precision "without reference" (formerly context utilization).
``context.precision_reference``  the same, judged against the query's ``reference_answer`` (ragas's context
                                 precision "with reference"); the judgments are shared by every run of the query.
``context.recall``               reference claims supported by the retrieved passages / reference claims (the claims
                                 of the ``reference_answer``, verified in one batched call).
``context.relevance``            two judge prompts rate the retrieved passages together 0-2 for answering the
                                 question; the mean rating / 2 (ragas's dual-judge context relevance).

A passage whose usefulness could not be judged leaves the precision undefined for that output (AP depends on every
rank); a refusal leaves the answer variant undefined (there is no answer to judge passages against).
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import CLEAN, INVALID, Parsed
from open_rag_eval.judge.base import JudgeRequest, Priority
from open_rag_eval.metrics._generation import NO_PASSAGES, NO_REFERENCE, claims_detail, missing, no_claims_reason, \
    reference_of
from open_rag_eval.metrics._judging import Asked, ask
from open_rag_eval.metrics.claims import TEMPERATURES, TRIALS, ClaimSession, source_text
from open_rag_eval.core.families import CONTEXT_RELEVANCE, context_precision
from open_rag_eval.core.parsing import parse_json_object
from open_rag_eval.prompts import load
from open_rag_eval.scoring.generation import average_precision, relevance, supported_share
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["ContextPrecision", "ContextPrecisionOptions", "ContextRecall", "ContextRelevance", "parse_rating",
           "parse_useful"]

PARAMS = {"max_tokens": 50}
NO_REFERENCE_CLAIMS = "is undefined: the reference answer makes no factual claim"
RELEVANCE_TEMPLATES = ("generation.context_relevance_1", "generation.context_relevance_2")


def _one_line(text: str) -> str:
    return " ".join(text.split())


def parse_useful(text: str) -> Parsed[bool]:
    """``{"useful": 1}`` / ``{"useful": 0}`` (true/false accepted); anything else is invalid."""
    return _parse_field(text, "useful", (0, 1), bool)


def parse_rating(text: str) -> Parsed[int]:
    """``{"rating": 0|1|2}``; anything else is invalid."""
    return _parse_field(text, "rating", (0, 1, 2), int)


def _parse_field(text: str, name: str, allowed: tuple[int, ...], kind: type) -> Parsed[Any]:
    try:
        value = parse_json_object(text).get(name)
    except ValueError:
        return Parsed(None, INVALID)
    if isinstance(value, bool):
        value = int(value)
    if not isinstance(value, int) or value not in allowed:
        return Parsed(None, INVALID)
    return Parsed(kind(value), CLEAN)


class ContextPrecisionOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    against: list[Literal["answer", "reference"]] = Field(
        default_factory=lambda: list[Literal["answer", "reference"]](["answer", "reference"]))

    @field_validator("against")
    @classmethod
    def _some(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("give at least one of: answer, reference")
        return list(dict.fromkeys(value))


class ContextPrecision:
    def __init__(self, options: ContextPrecisionOptions | None = None) -> None:
        self.options = options or ContextPrecisionOptions()

    def names(self) -> list[str]:
        return [context_precision(variant) for variant in self.options.against]

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        parts = await asyncio.gather(*(self._variant(session, output, v) for v in self.options.against))
        data: dict[str, Any] = {variant: row for (_, row), variant in zip(parts, self.options.against)}
        return [score for score, _ in parts], [Detail(query_id=output.query_id, run=output.run,
                                                      section="context_precision", data=data)]

    async def _variant(self, session: ClaimSession, output: RAGOutput, variant: str) -> tuple[Score, dict[str, Any]]:
        name = context_precision(variant)
        if variant == "reference":
            target = reference_of(output)
            if target is None:
                return Score.failed(output, name, NO_REFERENCE), {"reason": NO_REFERENCE}
        else:
            extracted = await session.answer_claims(output)
            reason = no_claims_reason(extracted) if extracted.refusal or extracted.status != "ok" else None
            if reason is not None:
                return Score.failed(output, name, reason), {"reason": reason, **claims_detail(extracted)}
            target = output.plain_answer
        if not output.passages:
            return Score.failed(output, name, NO_PASSAGES), {"reason": NO_PASSAGES}
        replies = await asyncio.gather(*(session.shared(("useful", output.query, target, source_text(p)),
                                                        self.useful(session, output.query, target, source_text(p)))
                                         for p in output.passages))  # keyed by what is sent: title and text
        rows = [{"passage_id": p.id, "useful": r.value, "status": r.status, "parse": r.parse,
                 **({"reason": r.reason} if r.reason else {})} for p, r in zip(output.passages, replies)]
        failed = next((i for i, r in enumerate(replies) if r.value is None), None)
        if failed is not None:
            reason = f"usefulness of passage {output.passages[failed].id} failed: {replies[failed].reason}"
            return Score.failed(output, name, reason), {"passages": rows}
        value = average_precision([bool(r.value) for r in replies])
        return Score.ok(output, name, value or 0.0), {"passages": rows}

    async def useful(self, session: ClaimSession, question: str, target: str, passage: str) -> Asked[bool]:
        template = load("generation.context_useful")
        user = template.render(question=_one_line(question), answer=_one_line(target), passage=_one_line(passage))
        return await ask(session.judge, lambda t, s: JudgeRequest.chat(
            Tasks.CONTEXT_USEFUL, user, params={"temperature": t, **PARAMS}, prompt_version=template.sha256, sample=s,
            priority=Priority.LEAF), parse_useful, trials=TRIALS, temperatures=TEMPERATURES, sample=session.sample)


class ContextRecall:
    def __init__(self, options: BaseModel | None = None) -> None:
        self.options = options

    def names(self) -> list[str]:
        return ["context.recall", "context.n_reference_claims"]

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        reference = reference_of(output)
        if reference is None:
            return missing(output, self.names(), NO_REFERENCE), []
        extracted = await session.text_claims(output.query, reference)
        data = claims_detail(extracted)
        if extracted.status == "failed":
            return missing(output, self.names(), extracted.reason or "claim extraction failed"), \
                [self._detail(output, data)]
        claims = extracted.claims
        count = Score.ok(output, "context.n_reference_claims", len(claims))
        if not claims:
            return [Score.failed(output, "context.recall", NO_REFERENCE_CLAIMS), count], [self._detail(output, data)]
        if not output.passages:
            data |= {"claims": [{"claim": c.text, "supported": False, "supporting": []} for c in claims],
                     "note": "no passages were retrieved: no claim can be attributed"}
            return [Score.ok(output, "context.recall", 0.0), count], [self._detail(output, data)]
        verified = await session.verify(claims, [source_text(p) for p in output.passages])
        if verified.status == "failed":
            data["claims"] = [{"claim": c.text, "supported": None} for c in claims]
            return [Score.failed(output, "context.recall", verified.reason or "claim verification failed"), count], \
                [self._detail(output, data)]
        ids = [p.id for p in output.passages]
        data |= {"verification_parse": verified.parse,
                 "claims": [{"claim": c.text, "supported": v.supported, "supporting": [ids[n - 1] for n in v.sources]}
                            for c, v in zip(claims, verified.verdicts, strict=True)]}
        value = supported_share([v.supported for v in verified.verdicts])
        return [Score.ok(output, "context.recall", value or 0.0), count], [self._detail(output, data)]

    @staticmethod
    def _detail(output: RAGOutput, data: dict[str, Any]) -> Detail:
        return Detail(query_id=output.query_id, run=output.run, section="context_recall", data=data)


class ContextRelevance:
    def __init__(self, options: BaseModel | None = None) -> None:
        self.options = options

    def names(self) -> list[str]:
        return [CONTEXT_RELEVANCE]

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        if not output.passages:
            return [Score.failed(output, CONTEXT_RELEVANCE, NO_PASSAGES)], []
        context = "\n".join(_one_line(source_text(p)) for p in output.passages)
        replies = await asyncio.gather(*(session.shared(("relevance", template, output.query, context),
                                                        self._rate(session, template, output.query, context))
                                         for template in RELEVANCE_TEMPLATES))
        judges = [{"prompt": t, "rating": r.value, "status": r.status, "parse": r.parse,
                   **({"reason": r.reason} if r.reason else {})} for t, r in zip(RELEVANCE_TEMPLATES, replies)]
        detail = Detail(query_id=output.query_id, run=output.run, section="context_relevance", data={"judges": judges})
        value = relevance([r.value for r in replies])
        if value is None:
            return [Score.failed(output, CONTEXT_RELEVANCE, f"context relevance failed: {replies[0].reason}")], [detail]
        return [Score.ok(output, CONTEXT_RELEVANCE, value)], [detail]

    async def _rate(self, session: ClaimSession, template_id: str, question: str, context: str) -> Asked[int]:
        template = load(template_id)
        user = template.render(question=_one_line(question), context=context)
        return await ask(session.judge, lambda t, s: JudgeRequest.chat(
            Tasks.CONTEXT_RELEVANCE, user, params={"temperature": t, **PARAMS}, prompt_version=template.sha256,
            sample=s, priority=Priority.LEAF), parse_rating, trials=TRIALS, temperatures=TEMPERATURES,
            sample=session.sample)
