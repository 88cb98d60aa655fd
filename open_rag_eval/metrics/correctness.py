"""Answer correctness against the query's ``reference_answer`` (docs/generation.md).

The answer's claims are verified against the reference (supported: TP, not: FP) and the reference's claims against
the answer (not supported: FN), two batched calls -- ragas's factual correctness, whose F1 with beta 1 equals its
answer correctness's ``tp / (tp + (fp + fn) / 2)``.

``correctness.f1`` (ragas's formula), ``correctness.precision`` tp/(tp+fp) over the answer's claims,
``correctness.recall`` covered/(covered+fn) over the reference's claims (ragas's factual correctness divides tp by
tp+fn, mixing the two sides), counts ``correctness.tp/fp/fn``; ``correctness.score`` only with ``blend: true``: ``weights`` (ragas's default
[0.75, 0.25]) over the F1 and the answer's semantic similarity to the reference, computed by the evaluator once both
are known (``open_rag_eval.evaluators.generation.SIMILARITY``).

A refusal or an answer without claims: tp = fp = 0, so F1 = 0 and recall = 0 when the reference has claims;
precision is undefined. Neither side with a claim: every value is undefined (ragas gives 1.0 there).

A query labelled unanswerable (``expected_refusal: true``) expects a refusal, whatever its ``reference_answer``
says (none is needed): a refusal is the correct answer (F1 1, recall 1, precision undefined: it claims nothing); an
answer's claims are all false positives (tp = fn = 0: F1 0, precision 0, recall undefined); docs/generation.md,
"Refusals".
"""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from open_rag_eval.metrics._generation import NO_REFERENCE, claims_detail, expects_refusal, is_refusal, missing, \
    reference_of
from open_rag_eval.metrics.claims import Claim, ClaimSession, Extracted, Verified
from open_rag_eval.scoring.generation import ClaimCounts, claim_f1
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["AnswerCorrectness", "CorrectnessOptions", "correctness_values"]

VALUES = ("correctness.f1", "correctness.precision", "correctness.recall")
COUNTS = ("correctness.tp", "correctness.fp", "correctness.fn")
UNDEFINED = {"correctness.f1": "is undefined: neither the answer nor the reference makes a factual claim",
             "correctness.precision": "is undefined: the answer makes no factual claim",
             "correctness.recall": "is undefined: the reference answer makes no factual claim"}
EXPECTED_REFUSAL = {"correctness.recall": "is undefined: a refusal is expected (expected_refusal: true), which "
                                          "claims nothing to cover"}


class CorrectnessOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    blend: bool = False  # True: also correctness.score, the weighted mean of F1 and semantic similarity
    weights: tuple[float, float] = (0.75, 0.25)  # factuality, similarity (ragas's defaults)

    @field_validator("weights")
    @classmethod
    def _weights(cls, value: tuple[float, float]) -> tuple[float, float]:
        if min(value) < 0 or sum(value) <= 0:
            raise ValueError("weights are two non-negative numbers, not both 0 (factuality, similarity)")
        return value


class AnswerCorrectness:
    def __init__(self, options: CorrectnessOptions | None = None) -> None:
        self.options = options or CorrectnessOptions()

    def names(self) -> list[str]:
        return [*VALUES, *COUNTS, *(["correctness.score"] if self.options.blend else [])]

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        if expects_refusal(output):
            return await _against_refusal(session, output)
        reference = reference_of(output)
        if reference is None:
            return missing(output, [*VALUES, *COUNTS], NO_REFERENCE), []
        answer, ref = await asyncio.gather(session.answer_claims(output), session.text_claims(output.query, reference))
        failed = next((e.reason or "claim extraction failed" for e in (answer, ref) if e.status == "failed"), None)
        detail: dict[str, Any] = {"answer": claims_detail(answer), "reference": claims_detail(ref)}
        if failed is not None:
            return missing(output, [*VALUES, *COUNTS], failed), [self._detail(output, detail)]
        to_ref, to_answer = await asyncio.gather(_verify(session, answer.claims, reference),
                                                 _verify(session, ref.claims, output.plain_answer))
        failed = next((v.reason or "claim verification failed" for v in (to_ref, to_answer)
                       if v is not None and v.status == "failed"), None)
        if failed is not None:
            return missing(output, [*VALUES, *COUNTS], failed), [self._detail(output, detail)]
        detail["answer"]["claims"] = _rows(answer, to_ref)
        detail["reference"]["claims"] = _rows(ref, to_answer)
        counts = _counts(to_ref, to_answer)
        detail |= {"tp": counts.tp, "fp": counts.fp, "fn": counts.fn}
        return correctness_values(output, counts), [self._detail(output, detail)]

    @staticmethod
    def _detail(output: RAGOutput, data: dict[str, Any]) -> Detail:
        return Detail(query_id=output.query_id, run=output.run, section="correctness", data=data)


async def _verify(session: ClaimSession, claims: tuple[Claim, ...], against: str) -> Verified | None:
    """The claims verified against one text; None without claims (nothing to ask)."""
    return await session.verify(claims, [against]) if claims else None


def _counts(to_ref: Verified | None, to_answer: Verified | None) -> ClaimCounts:
    answer = [v.supported for v in to_ref.verdicts] if to_ref else []
    reference = [v.supported for v in to_answer.verdicts] if to_answer else []
    return ClaimCounts(tp=sum(answer), fp=len(answer) - sum(answer), fn=len(reference) - sum(reference),
                       covered=sum(reference))


def _rows(extracted: Extracted, verified: Verified | None) -> list[dict[str, Any]]:
    verdicts = verified.verdicts if verified else ()
    return [{"claim": c.text, "supported": v.supported} for c, v in zip(extracted.claims, verdicts, strict=True)]


async def _against_refusal(session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
    """Correctness where the expected answer is a refusal: a refusal is right, every claim is a false positive."""
    answer = await session.answer_claims(output)
    detail: dict[str, Any] = {"answer": claims_detail(answer), "expected": "refusal (expected_refusal: true)"}
    if answer.status == "failed":
        scores = missing(output, [*VALUES, *COUNTS], answer.reason or "claim extraction failed")
    elif is_refusal(answer):
        detail["correct_refusal"] = True
        scores = [Score.ok(output, "correctness.f1", 1.0), Score.ok(output, "correctness.recall", 1.0),
                  Score.failed(output, "correctness.precision", UNDEFINED["correctness.precision"])]
        scores += [Score.ok(output, f"correctness.{k}", 0) for k in ("tp", "fp", "fn")]
    else:
        detail |= {"correct_refusal": False, "tp": 0, "fp": len(answer.claims), "fn": 0}
        detail["answer"]["claims"] = [{"claim": c.text, "supported": False} for c in answer.claims]
        scores = correctness_values(output, ClaimCounts(tp=0, fp=len(answer.claims), fn=0), EXPECTED_REFUSAL)
    return scores, [AnswerCorrectness._detail(output, detail)]


def correctness_values(output: RAGOutput, counts: ClaimCounts,
                       reasons: dict[str, str] | None = None) -> list[Score]:
    """The scores from the counts: a value where it is defined, else the reason (``reasons`` first)."""
    values = claim_f1(counts)
    why = UNDEFINED | (reasons or {})
    scores = []
    for name in VALUES:
        value = values[name.split(".", 1)[1]]
        scores.append(Score.ok(output, name, value) if value is not None else Score.failed(output, name, why[name]))
    return scores + [Score.ok(output, f"correctness.{k}", getattr(counts, k)) for k in ("tp", "fp", "fn")]
