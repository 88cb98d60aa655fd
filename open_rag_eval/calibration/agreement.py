"""Agreement between two raters (the judge and people): pure functions, no I/O.

- ``cohen_kappa``: Cohen's kappa over a fixed ordered label set; ``weights`` "linear" or "quadratic" for ordinal
  labels, with disagreement weights ``|i - j|`` or ``(i - j)**2`` over the labels' positions (as scikit-learn's
  ``cohen_kappa_score``). Undefined (``None``) when chance agreement is total (both raters used one same label).
- ``kendall_tau``: Kendall's tau-b (ties handled as scipy's ``kendalltau`` default). ``None`` under 2 items or
  when one side is constant.
- ``confusion``: the counts matrix, rows the first rater, columns the second.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from typing import Literal

__all__ = ["Weights", "cohen_kappa", "confusion", "kendall_tau"]

Weights = Literal["linear", "quadratic"] | None


def confusion(first: Sequence[Hashable], second: Sequence[Hashable], labels: Sequence[Hashable]) -> list[list[int]]:
    if len(first) != len(second):
        raise ValueError("the two raters must label the same items")
    index = {label: i for i, label in enumerate(labels)}
    matrix = [[0] * len(labels) for _ in labels]
    for a, b in zip(first, second):
        if a not in index or b not in index:
            raise ValueError(f"label {a if a not in index else b!r} is not one of {list(labels)}")
        matrix[index[a]][index[b]] += 1
    return matrix


def cohen_kappa(first: Sequence[Hashable], second: Sequence[Hashable], labels: Sequence[Hashable],
                weights: Weights = None) -> float | None:
    """1 - sum(w * observed) / sum(w * expected); expected from the two raters' marginals."""
    matrix = confusion(first, second, labels)
    n = sum(map(sum, matrix))
    if n == 0:
        return None
    k = len(labels)
    rows = [sum(row) for row in matrix]
    cols = [sum(matrix[i][j] for i in range(k)) for j in range(k)]
    observed = expected = 0.0
    for i in range(k):
        for j in range(k):
            w = _weight(i, j, weights)
            observed += w * matrix[i][j] / n
            expected += w * rows[i] * cols[j] / (n * n)
    if expected == 0:
        return None
    return 1.0 - observed / expected


def _weight(i: int, j: int, weights: Weights) -> float:
    if weights is None:
        return 0.0 if i == j else 1.0
    if weights == "linear":
        return float(abs(i - j))
    if weights == "quadratic":
        return float((i - j) ** 2)
    raise ValueError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Kendall's tau-b: (concordant - discordant) / sqrt((n0 - ties_x) * (n0 - ties_y))."""
    if len(x) != len(y):
        raise ValueError("the two rankings must have the same items")
    n = len(x)
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                ties_x += 1
                ties_y += 1
            elif dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    pairs = n * (n - 1) // 2
    denominator = math.sqrt((pairs - ties_x) * (pairs - ties_y))
    if denominator == 0:
        return None
    return (concordant - discordant) / denominator
