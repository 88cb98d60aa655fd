"""Spread of repeated measurements: dispersion statistics, flip rates and Krippendorff's alpha. Pure, no I/O.

``dispersion(values, ddof)`` mean, median, std, cv, iqr, min, max -- and variance, range (max - min) and cai
                            (vectara's consistency-adjusted index, mean / (1 + std)) -- of one metric across the
                            runs of one query; std and variance divide by n - ddof (1: sample, 0: population).
``flip_rate(items)``        share of items whose repeated labels are not all the same.
``crossing_rate(items, p)`` share of items whose repeated labels fall on both sides of a threshold ``p``.
``krippendorff_alpha(items, level)``  Krippendorff's alpha ("nominal" or "ordinal") with the coincidence-matrix
                            method; an item is one unit, its repeated judgments are its values.

Missing labels (``None``) are left out; an item keeps counting while it has two or more labels. A statistic that
is undefined for its input (no pairable item, no variation at all for alpha, a zero mean for cv) is ``None``, with
the reason available from the ``*_reason`` helpers: never a made-up number.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Literal

from open_rag_eval.scoring.stats import quantile

__all__ = [
    "ALL_STATS",
    "STATS",
    "crossing_rate",
    "dispersion",
    "flip_rate",
    "krippendorff_alpha",
    "pairable",
]

STATS = ("mean", "median", "std", "cv", "iqr", "min", "max")  # reported by default
ALL_STATS = (*STATS, "variance", "range", "cai")


Label = Hashable
Items = Mapping[Hashable, Sequence[Label | None]]


def dispersion(values: Sequence[float], ddof: int = 1) -> dict[str, float | None]:
    """Statistics of one metric's values across runs (every name of ``ALL_STATS``); cv = std / |mean|.

    std and variance divide by n - ddof: ddof 1 (default) gives the sample statistics, 0 the population ones. With
    no more values than ddof they are None, and so are cv and cai; iqr needs two values; cv is None when the mean is 0.
    """
    if not values:
        raise ValueError("dispersion needs at least one value")
    ordered = sorted(float(v) for v in values)
    n = len(ordered)
    mean = math.fsum(ordered) / n
    variance = math.fsum((v - mean) ** 2 for v in ordered) / (n - ddof) if n > ddof else None
    std = math.sqrt(variance) if variance is not None else None
    cv = std / abs(mean) if std is not None and mean != 0 else None
    return {
        "mean": mean,
        "median": quantile(ordered, 0.5),
        "std": std,
        "cv": cv,
        "iqr": quantile(ordered, 0.75) - quantile(ordered, 0.25) if n > 1 else None,
        "min": ordered[0],
        "max": ordered[-1],
        "variance": variance,
        "range": ordered[-1] - ordered[0],
        "cai": mean / (1 + std) if std is not None else None,
    }


def pairable(items: Items) -> dict[Hashable, list[Label]]:
    """Items with at least two non-missing labels, missing labels removed."""
    kept = {key: [label for label in labels if label is not None] for key, labels in items.items()}
    return {key: labels for key, labels in kept.items() if len(labels) >= 2}


def flip_rate(items: Items) -> float | None:
    """Share of items (with two or more labels) whose labels are not all identical; None without such items."""
    usable = pairable(items)
    if not usable:
        return None
    return sum(len(set(labels)) > 1 for labels in usable.values()) / len(usable)


def crossing_rate(items: Items, positive: Callable[[Label], bool]) -> float | None:
    """Share of items whose labels land on both sides of the threshold ``positive`` (e.g. grade >= 2)."""
    usable = pairable(items)
    if not usable:
        return None
    return sum(len({positive(label) for label in labels}) > 1 for labels in usable.values()) / len(usable)


def _coincidences(units: Sequence[Sequence[Label]], values: Sequence[Label]) -> list[list[float]]:
    index = {value: i for i, value in enumerate(values)}
    matrix = [[0.0] * len(values) for _ in values]
    for labels in units:
        weight = 1.0 / (len(labels) - 1)
        for i, first in enumerate(labels):
            for j, second in enumerate(labels):
                if i != j:
                    matrix[index[first]][index[second]] += weight
    return matrix


def _ordinal_delta(totals: Sequence[float]) -> list[list[float]]:
    """Krippendorff's ordinal metric: (sum of n_g for g from c to k, minus (n_c + n_k) / 2) squared."""
    size = len(totals)
    delta = [[0.0] * size for _ in range(size)]
    for c in range(size):
        for k in range(c + 1, size):
            value = (math.fsum(totals[c : k + 1]) - (totals[c] + totals[k]) / 2) ** 2
            delta[c][k] = delta[k][c] = value
    return delta


def krippendorff_alpha(items: Items, level: Literal["nominal", "ordinal"] = "nominal") -> float | None:
    """Krippendorff's alpha over items judged several times. Ordinal labels must be orderable (e.g. grades).

    None when undefined: fewer than two pairable values, or a single value observed overall (no expected
    disagreement).
    """
    units = list(pairable(items).values())
    values = sorted({label for labels in units for label in labels}, key=_order_key(level))
    if len(values) < 2:
        return None
    matrix = _coincidences(units, values)
    totals = [math.fsum(row) for row in matrix]
    n = math.fsum(totals)
    size = len(values)
    if level == "ordinal":
        delta = _ordinal_delta(totals)
    elif level == "nominal":
        delta = [[0.0 if c == k else 1.0 for k in range(size)] for c in range(size)]
    else:
        raise ValueError(f"unknown level of measurement '{level}'; valid: nominal, ordinal")
    observed = math.fsum(matrix[c][k] * delta[c][k] for c in range(size) for k in range(size))
    expected = math.fsum(totals[c] * totals[k] * delta[c][k] for c in range(size) for k in range(size))
    return 1.0 - (n - 1) * observed / expected


def _order_key(level: str) -> Callable[[Label], Any]:
    if level == "ordinal":
        return lambda label: label  # grades: their natural order
    return lambda label: (type(label).__name__, str(label))  # any stable order will do
