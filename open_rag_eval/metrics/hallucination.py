"""HHEM factual-consistency scores (``hhem.score``, ``hhem.hallucinated``) -- interface; the HHEM issue builds it.

The TREC evaluator constructs ``HallucinationMetric(options)`` once and awaits ``score(outputs)`` with every
output of the run, so inference can batch across outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from open_rag_eval.types import EvalResult, RAGOutput, Score

__all__ = ["HallucinationMetric", "HallucinationOptions"]


class HallucinationOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backend: Literal["hhem", "vectara_api"] = "hhem"
    threshold: float = Field(0.5, ge=0, le=1)


class HallucinationMetric:
    def __init__(self, options: HallucinationOptions) -> None:
        self.options = options

    async def score(self, outputs: Sequence[RAGOutput]) -> EvalResult:
        reason = "the HHEM metric is not built yet"
        return EvalResult(scores=[Score.failed(o, m, reason) for o in outputs for m in ("hhem.score", "hhem.hallucinated")])
