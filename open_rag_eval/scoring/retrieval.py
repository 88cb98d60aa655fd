"""Ranked-list measures over relevance labels in rank order (trec_eval definitions, docs/methods.md).

``rels`` are binary relevance labels (bool or 0/1) in rank order; ``gains`` are graded gains in rank order.
A ranking shorter than k is padded with non-relevant documents.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["MAX_K", "average_precision", "ndcg_at_k", "precision_at_k", "reciprocal_rank"]

MAX_K = 1000  # the deepest rank cutoff (k_values) trec_eval reports


def precision_at_k(rels: Sequence[int | bool], k: int, pad: bool = True) -> float | None:
    """#relevant in the top k / k. With ``pad=False`` a ranking shorter than k has no P@k (None)."""
    if k <= 0:
        raise ValueError("k must be positive")
    if not pad and k > len(rels):
        return None
    return sum(1 for rel in rels[:k] if rel) / k


def reciprocal_rank(rels: Sequence[int | bool]) -> float:
    """1 / rank of the first relevant document over the whole ranking; 0 when there is none."""
    for rank, rel in enumerate(rels, start=1):
        if rel:
            return 1.0 / rank
    return 0.0


def average_precision(rels: Sequence[int | bool], n_relevant: int, k: int | None = None) -> float:
    """Sum over relevant ranks i (<= k) of precision@i, divided by ``n_relevant`` (R); 0 when R = 0."""
    if n_relevant <= 0:
        return 0.0
    found, total = 0, 0.0
    for rank, rel in enumerate(rels[:k] if k is not None else rels, start=1):
        if rel:
            found += 1
            total += found / rank
    return total / n_relevant


def dcg(gains: Sequence[float], k: int) -> float:
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains[:k], start=1) if gain > 0)


def ndcg_at_k(gains: Sequence[float], ideal_gains: Sequence[float], k: int) -> float:
    """DCG@k / IDCG@k with linear gains; the ideal ranking sorts ``ideal_gains`` (all judged gains) descending."""
    ideal = dcg(sorted((g for g in ideal_gains if g > 0), reverse=True), k)
    return dcg(gains, k) / ideal if ideal > 0 else 0.0
