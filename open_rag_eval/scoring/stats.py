"""Aggregates of a metric across queries: mean, std, 95% confidence interval, n, n_failed."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

__all__ = ["Aggregate", "aggregate", "t_critical_95"]

# two-sided 95% Student t critical values by degrees of freedom (1..30); the normal value beyond
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)


@dataclass(frozen=True)
class Aggregate:
    metric: str
    mean: float | None
    std: float | None
    ci95_low: float | None
    ci95_high: float | None
    n: int
    n_failed: int

    def as_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def t_critical_95(df: int) -> float:
    return _T95[df - 1] if df <= len(_T95) else 1.96


def aggregate(metric: str, values: Sequence[float], n_failed: int = 0) -> Aggregate:
    """Mean with a t-based 95% CI over the values that exist; failures are counted, never averaged in."""
    n = len(values)
    if n == 0:
        return Aggregate(metric, None, None, None, None, 0, n_failed)
    mean = math.fsum(values) / n
    if n == 1:
        return Aggregate(metric, mean, None, None, None, 1, n_failed)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = t_critical_95(n - 1) * std / math.sqrt(n)
    return Aggregate(metric, mean, std, mean - half, mean + half, n, n_failed)
