"""Claim-level faithfulness (docs/generation.md): the answer's atomic claims, each verified against the retrieved
passages in one batched judge call.

``faithfulness.score``  supported claims / claims (whole retrieved context; ragas's faithfulness).
``faithfulness.cited``  claims supported by a passage their sentence cites / claims: a claim whose sentence cites
                        nothing, or cites only passages that were not retrieved, or that is supported only by passages
                        it does not cite, counts as not supported. Read from the same verification: the judge names
                        every source that supports a claim.
``faithfulness.n_claims``, ``faithfulness.n_uncited`` (claims whose sentence cites no retrieved passage).

A refusal or an answer without claims: the scores are undefined (missing with the reason); ``n_claims`` is 0.
No passages: every claim is unsupported (0.0, no judge call).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from open_rag_eval.metrics._generation import claims_detail, missing, no_claims_reason
from open_rag_eval.metrics.claims import ClaimSession, Extracted, Verdict, Verified, source_text
from open_rag_eval.core.families import FAITHFULNESS, FAITHFULNESS_CITED
from open_rag_eval.scoring.generation import supported_share
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["Faithfulness", "FaithfulnessOptions", "faithfulness_result"]

SCORES = (FAITHFULNESS, FAITHFULNESS_CITED)
COUNTS = ("faithfulness.n_claims", "faithfulness.n_uncited")


class FaithfulnessOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Faithfulness:
    def __init__(self, options: FaithfulnessOptions | None = None) -> None:
        self.options = options or FaithfulnessOptions()

    def names(self) -> list[str]:
        return [*SCORES, *COUNTS]

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        extracted = await session.answer_claims(output)
        verified = None
        if extracted.claims and output.passages:
            verified = await session.verify(extracted.claims, [source_text(p) for p in output.passages])
        scores, detail = faithfulness_result(output, extracted, verified)
        return scores, [detail]


def faithfulness_result(output: RAGOutput, extracted: Extracted,
                        verified: Verified | None) -> tuple[list[Score], Detail]:
    """Scores and detail of one output from its claims and their verification (None: not verified -- no claims, or
    no passages, in which case every claim is unsupported)."""
    ids = [p.id for p in output.passages]
    data: dict[str, Any] = claims_detail(extracted)
    reason = no_claims_reason(extracted)
    if reason is not None:
        counts = [] if extracted.status == "failed" else [Score.ok(output, name, 0) for name in COUNTS]
        scores = missing(output, SCORES if counts else [*SCORES, *COUNTS], reason) + counts
        return scores, Detail(query_id=output.query_id, run=output.run, section="faithfulness", data=data | {"claims": []})
    claims = extracted.claims
    uncited = sum(1 for c in claims if not set(c.citations) & set(ids))
    counts = [Score.ok(output, "faithfulness.n_claims", len(claims)), Score.ok(output, "faithfulness.n_uncited", uncited)]
    if verified is not None and verified.status == "failed":
        data |= {"verification_status": "failed", "verification_reason": verified.reason,
                 "verification_parse": verified.parse, "claims": [_claim_row(c, None, ids) for c in claims]}
        return missing(output, SCORES, verified.reason or "claim verification failed") + counts, \
            Detail(query_id=output.query_id, run=output.run, section="faithfulness", data=data)
    verdicts = verified.verdicts if verified is not None else tuple(Verdict(False) for _ in claims)
    rows = [_claim_row(c, v, ids) for c, v in zip(claims, verdicts, strict=True)]
    whole = supported_share([v.supported for v in verdicts])
    cited = supported_share([row["cited_supported"] for row in rows])
    data |= {"verification_status": "ok" if verified is not None else "no passages",
             "verification_parse": verified.parse if verified is not None else None, "claims": rows}
    scores = [Score.ok(output, FAITHFULNESS, whole or 0.0), Score.ok(output, FAITHFULNESS_CITED, cited or 0.0)]
    return scores + counts, Detail(query_id=output.query_id, run=output.run, section="faithfulness", data=data)


def _claim_row(claim: Any, verdict: Verdict | None, ids: list[str]) -> dict[str, Any]:
    supporting = [ids[n - 1] for n in verdict.sources] if verdict is not None else []
    return {"claim": claim.text, "sentence": claim.sentence, "citations": list(claim.citations),
            "supported": None if verdict is None else verdict.supported, "supporting": supporting,
            "cited_supported": bool(verdict and verdict.supported and set(claim.citations) & set(supporting))}
