"""Paired comparison of two systems over the same queries: bootstrap CI, permutation test, Holm correction."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PairedResult", "holm", "paired_test"]


@dataclass(frozen=True)
class PairedResult:
    n: int
    mean_a: float
    mean_b: float
    diff: float  # mean of (b - a)
    ci95_low: float
    ci95_high: float
    p_value: float  # two-sided paired permutation (sign-flip) test


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def paired_test(a: Sequence[float], b: Sequence[float], *, seed: int = 0, resamples: int = 10_000) -> PairedResult:
    """Compare paired values ``a[i]``, ``b[i]``: diff = mean(b - a), 95% percentile-bootstrap CI, sign-flip p-value."""
    if len(a) != len(b) or not a:
        raise ValueError("paired_test needs two non-empty sequences of equal length")
    diffs = [y - x for x, y in zip(a, b)]
    n, observed = len(diffs), _mean(diffs)
    rng = random.Random(seed)
    boots = sorted(_mean([diffs[rng.randrange(n)] for _ in range(n)]) for _ in range(resamples))
    low, high = boots[int(0.025 * resamples)], boots[min(resamples - 1, int(0.975 * resamples))]
    extreme = 0
    for _ in range(resamples):
        flipped = _mean([d if rng.random() < 0.5 else -d for d in diffs])
        if abs(flipped) >= abs(observed) - 1e-12:
            extreme += 1
    p_value = (extreme + 1) / (resamples + 1)
    return PairedResult(n, _mean(a), _mean(b), observed, low, high, p_value)


def holm(p_values: Sequence[float], alpha: float = 0.05) -> list[bool]:
    """Holm-Bonferroni: which hypotheses are rejected at family-wise level ``alpha``."""
    order = sorted(range(len(p_values)), key=lambda i: p_values[i])
    rejected = [False] * len(p_values)
    for rank, index in enumerate(order):
        if p_values[index] > alpha / (len(p_values) - rank):
            break
        rejected[index] = True
    return rejected
