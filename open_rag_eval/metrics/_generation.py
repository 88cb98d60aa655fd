"""What every metric of the ``generation`` evaluator is (docs/generation.md), and the reasons a value is missing.

A generation metric is a small class built from the evaluator's options::

    names() -> list[str]                                  # every score name it produces, e.g. "faithfulness.score"
    async score(session, output) -> (scores, details)     # one output; ``session`` shares judgments between metrics

and is listed in ``open_rag_eval.evaluators.generation_options.METRICS`` under the name configs select it by. A
value that cannot be known is ``Score.failed(output, name, reason)``: the reasons below say "is undefined" (nothing
went wrong: the report counts them apart from failures); a failed judgment's reason names the failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from open_rag_eval.metrics.claims import ClaimSession, Extracted
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["EMPTY_ANSWER", "GenerationMetric", "NO_CLAIMS", "NO_PASSAGES", "NO_REFERENCE", "REFUSAL", "expects_refusal",
           "is_refusal", "missing", "no_claims_reason", "reference_of"]

NO_REFERENCE = "is undefined without a reference_answer (none is given for this query)"
REFUSAL = "is undefined for a refusal: the answer declines to answer and makes no claim (see no_answer.answered)"
NO_CLAIMS = "is undefined: the answer makes no factual claim"
EMPTY_ANSWER = "is undefined: the answer is empty"
NO_PASSAGES = "is undefined: no passages were retrieved"


class GenerationMetric(Protocol):
    def names(self) -> list[str]: ...

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]: ...


PLANNED = "is not computed in a dry run (no judge call)"


def planning(session: ClaimSession) -> bool:
    """Whether this is a dry run's rehearsal: work without judge calls (embeddings) is skipped."""
    return bool(getattr(session.judge, "planning", False))


def missing(output: RAGOutput, names: Sequence[str], reason: str) -> list[Score]:
    return [Score.failed(output, name, reason) for name in names]


def reference_of(output: RAGOutput) -> str | None:
    reference = output.labels.reference_answer
    return reference if reference and reference.strip() else None


def is_refusal(extracted: Extracted) -> bool:
    """Whether the judge found the answer a refusal: it declines as a whole and makes no claim (an answer that
    declines in part but states facts is judged on those facts)."""
    return extracted.status == "ok" and extracted.refusal and not extracted.claims


def expects_refusal(output: RAGOutput) -> bool:
    """Whether the query is labelled unanswerable (``expected_refusal: true``): declining is its right answer. A
    query without the label is taken to be answerable (docs/generation.md, "Refusals")."""
    return output.labels.expected_refusal is True


def no_claims_reason(extracted: Extracted) -> str | None:
    """Why an answer's claims cannot be scored: a failed extraction, an empty answer, a refusal, no claims."""
    if extracted.status == "failed":
        return extracted.reason or "claim extraction failed"
    if extracted.status == "empty":
        return EMPTY_ANSWER
    if not extracted.claims:
        return REFUSAL if extracted.refusal else NO_CLAIMS
    return None


def claims_detail(extracted: Extracted) -> dict[str, object]:
    data: dict[str, object] = {"extraction_status": extracted.status, "extraction_parse": extracted.parse,
                               "refusal": extracted.refusal}
    if extracted.reason:
        data["extraction_reason"] = extracted.reason
    return data
