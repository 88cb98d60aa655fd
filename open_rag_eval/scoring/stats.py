"""Aggregates of a metric across queries: mean, std, 95% confidence interval, n, n_failed.

The 95% CI is Student's t interval from 30 values up; below that, where a t interval of a bounded score often
leaves the possible range, it is the percentile bootstrap (2,000 resamples, seed 0: the same values give the same CI).
Given the metric's range (``bounds``, the catalogue's ``value_bounds``), the interval is clipped to it: a mean of
scores in [0, 1] never gets an interval reaching past 1.
"""

from __future__ import annotations

import importlib
import math
import sys
import threading
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TypedDict

__all__ = ["Aggregate", "aggregate", "bootstrap_ci", "clip_interval", "preload", "quantile", "t_critical_95", "wilson"]

BOOTSTRAP_BELOW = 30

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
    min: float | None = None
    median: float | None = None
    p95: float | None = None
    max: float | None = None
    # missing values apart from the failed ones (core.missing): undefined, unavailable, skipped on purpose
    n_undefined: int = 0
    n_unavailable: int = 0
    n_skipped: int = 0

    def as_dict(self) -> dict[str, float | int | str | None]:
        return asdict(self)


def preload() -> None:
    """Import numpy (for ``bootstrap_ci``) in a background thread, so its import overlaps the wait for the judge
    instead of delaying the writing of results at the end of a run; one small bootstrap there too, since numpy
    imports the parts it needs (its random generator, ``numpy.ma`` for ``quantile``) at their first use."""
    if "numpy" not in sys.modules:
        threading.Thread(target=_warm_numpy, name="preload-numpy", daemon=True).start()


def _warm_numpy() -> None:
    importlib.import_module("numpy")
    bootstrap_ci([0.0, 1.0], resamples=2)


def t_critical_95(df: int) -> float:
    return _T95[df - 1] if df <= len(_T95) else 1.96


def quantile(ordered: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, interpolating linearly between order statistics (numpy's default)."""
    if len(ordered) == 0:
        raise ValueError("quantile of no values")
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def clip_interval(low: float, high: float, bounds: tuple[float, float] | None) -> tuple[float, float]:
    """(low, high) kept within ``bounds`` (None: unchanged)."""
    if bounds is None:
        return low, high
    return min(max(low, bounds[0]), bounds[1]), max(min(high, bounds[1]), bounds[0])


class _Spread(TypedDict):
    min: float
    median: float
    p95: float
    max: float


def aggregate(metric: str, values: Sequence[float], n_failed: int = 0,
              bounds: tuple[float, float] | None = None) -> Aggregate:
    """Mean, 95% CI (within ``bounds``, the metric's range, when given) and quantiles over the values that exist;
    failures are counted, never averaged in."""
    n = len(values)
    if n == 0:
        return Aggregate(metric, None, None, None, None, 0, n_failed)
    ordered = _ordered(values)
    spread = _Spread(min=float(ordered[0]), median=float(quantile(ordered, 0.5)),
                     p95=float(quantile(ordered, 0.95)), max=float(ordered[-1]))
    mean = math.fsum(values) / n
    if n == 1:
        return Aggregate(metric, mean, None, None, None, 1, n_failed, **spread)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    if n < BOOTSTRAP_BELOW:
        low, high = bootstrap_ci(values)
    else:
        half = t_critical_95(n - 1) * std / math.sqrt(n)
        low, high = mean - half, mean + half
    low, high = clip_interval(low, high, bounds)
    return Aggregate(metric, mean, std, low, high, n, n_failed, **spread)


def _ordered(values: Sequence[float]) -> Sequence[float]:
    """``sorted(values)``; a typed array of floats (a run's column of values, 8 bytes each) sorted as a typed array,
    without a float object per value: numpy's stable sort puts the values in the order ``sorted`` does."""
    if isinstance(values, array) and values.typecode == "d":
        import numpy as np

        return np.sort(np.frombuffer(values, dtype=np.float64), kind="stable")  # type: ignore[return-value]
    return sorted(values)


def bootstrap_ci(values: Sequence[float], resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap 95% interval of the mean."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(resamples, len(data)))].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(low), float(high)


def wilson(successes: int, n: int, z: float = 1.959963984540054) -> tuple[float | None, float | None, float | None]:
    """The share and its Wilson score interval; (None, None, None) for n = 0."""
    if n == 0:
        return None, None, None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return p, max(0.0, centre - half), min(1.0, centre + half)
