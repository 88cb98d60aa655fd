"""The RAG evaluation & optimisation guide's formulas (``metrics: [rag_guide]``), as pure functions.

Each takes the judge's parsed replies and returns the score, or None when it is undefined (a missing reply is never
replaced by a number: the caller reports the value as missing with its reason).
"""

from __future__ import annotations

from collections.abc import Sequence

from open_rag_eval.scoring.generation import average_precision

__all__ = ["GUIDE_SCALE", "guide_context_precision", "guide_context_relevance", "guide_faithfulness", "guide_overall",
           "guide_scaled"]

GUIDE_SCALE = 10.0  # its judges score 0-10


def guide_scaled(score: float) -> float:
    """A 0-10 judge score on 0-1 (answer relevance, answer correctness)."""
    return score / GUIDE_SCALE


def guide_context_relevance(scores: Sequence[float]) -> float | None:
    """The mean over the contexts of each context's 0-10 score / 10; None without contexts."""
    return sum(guide_scaled(s) for s in scores) / len(scores) if scores else None


def guide_context_precision(relevant: Sequence[int]) -> float | None:
    """``sum_i precision@i * rel_i / sum_i rel_i`` over the contexts' binary relevance (0 or 1) in rank order; 0.0
    when no context is relevant; None without contexts."""
    return average_precision([bool(r) for r in relevant])


def guide_faithfulness(supported: Sequence[bool]) -> float:
    """Supported claims / claims; **1.0 when the answer has no claim**, as the guide defines it."""
    return sum(1 for s in supported if s) / len(supported) if supported else 1.0


def guide_overall(context_relevance: float | None, faithfulness: float | None,
                  answer_relevance: float | None) -> float | None:
    """The mean of context relevance, faithfulness and answer relevance; None when any of them is missing."""
    parts = (context_relevance, faithfulness, answer_relevance)
    return None if any(p is None for p in parts) else sum(parts) / 3  # type: ignore[arg-type,misc]
