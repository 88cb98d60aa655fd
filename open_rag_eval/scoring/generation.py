"""Pure scores of the generation metrics (docs/generation.md): verdicts in, numbers out, no judge and no I/O.

``None`` means "not defined for these verdicts" (nothing to divide by); the caller turns it into a missing value
with its reason, never into a number. Each formula is the one ragas documents, with the departures listed in
docs/generation.md (what an empty input gives).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ClaimCounts", "answer_relevance", "average_precision", "blend", "claim_f1", "cosine", "relevance",
           "supported_share"]


def supported_share(supported: Sequence[bool]) -> float | None:
    """Supported claims / claims (faithfulness, cited-passage faithfulness, context recall); None without claims."""
    return sum(1 for verdict in supported if verdict) / len(supported) if supported else None


def average_precision(useful: Sequence[bool]) -> float | None:
    """Context precision: the mean of precision@k over the ranks k of the useful passages,
    ``sum_k (useful in top k / k) * v_k / (number useful)``; 0.0 when no passage is useful, None without passages."""
    if not useful:
        return None
    found, total = 0, 0.0
    for rank, verdict in enumerate(useful, start=1):
        if verdict:
            found += 1
            total += found / rank
    return total / found if found else 0.0


@dataclass(frozen=True)
class ClaimCounts:
    """Answer correctness counts: answer claims the reference supports (tp) or not (fp); reference claims the answer
    covers (covered) or not (fn)."""

    tp: int
    fp: int
    fn: int
    covered: int = 0


def claim_f1(counts: ClaimCounts) -> dict[str, float | None]:
    """f1 = tp / (tp + (fp + fn) / 2) as ragas defines it (0 when tp = 0 and there is something to count);
    precision tp / (tp + fp) over the answer's claims; recall covered / (covered + fn) over the reference's claims.
    None where a denominator is 0."""
    tp, fp, fn, covered = counts.tp, counts.fp, counts.fn, counts.covered
    return {
        "precision": tp / (tp + fp) if tp + fp else None,
        "recall": covered / (covered + fn) if covered + fn else None,
        "f1": tp / (tp + 0.5 * (fp + fn)) if tp + fp + fn else None,
    }


def blend(factuality: float, similarity: float, weights: Sequence[float]) -> float:
    """The weighted mean of factuality (claim F1) and semantic similarity (weights need not sum to 1)."""
    w_fact, w_sim = weights
    return (w_fact * factuality + w_sim * similarity) / (w_fact + w_sim)


def relevance(ratings: Sequence[int | None], scale: int = 2) -> float | None:
    """Context relevance: the mean of the judges' ratings (0..scale) that exist, divided by ``scale``; None when no
    judge gave a rating."""
    known = [r for r in ratings if r is not None]
    return sum(known) / len(known) / scale if known else None


def cosine(first: Sequence[float], second: Sequence[float]) -> float | None:
    """Cosine similarity of two vectors (in [-1, 1]); None when either is all zeros."""
    dot = sum(a * b for a, b in zip(first, second, strict=True))
    norms = sum(a * a for a in first) ** 0.5 * sum(b * b for b in second) ** 0.5
    return dot / norms if norms else None


def answer_relevance(question: Sequence[float], generated: Sequence[Sequence[float]],
                     noncommittal: bool) -> float | None:
    """ragas's answer relevancy: the mean cosine of the generated questions' embeddings to the question's, 0 when
    the answer is noncommittal; None without a generated question (or only zero vectors)."""
    if noncommittal:
        return 0.0
    similarities = [c for c in (cosine(question, g) for g in generated) if c is not None]
    return sum(similarities) / len(similarities) if similarities else None
