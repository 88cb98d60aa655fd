"""The values each metric can take, so that an interval of its mean never claims values it cannot have.

``metric_range(name)`` is (low, high) for metrics whose range is known, else None (unknown, unbounded or able to go
negative, such as rescaled BERTScore or Krippendorff's alpha): an interval is clipped only where the bound is certain.
"""

from __future__ import annotations

import math
import re

__all__ = ["metric_range"]

UNIT = (0.0, 1.0)
GRADES = (0.0, 3.0)
NON_NEGATIVE = (0.0, math.inf)

_UNIT = re.compile(
    r"^(umbrela\.(p|ap|map|ndcg)@\d+|umbrela\.mrr"
    r"|nuggets\.(all|vital|weighted)(_strict)?"
    r"|citation\.(precision|recall|f1)(_strict)?"
    r"|hhem\.(score|hallucinated)|no_answer\.answered"
    r"|consistency\.rouge(1|2|L|Lsum)(_precision|_recall)?"
    r"|consistency\.judge\.[a-z_]+\.(flip_rate|crossing)"
    r"|golden\.(ndcg|recall|precision|p|hit|success|mrr|map|rr)[a-z_]*(@\d+)?"
    r"|faithfulness\.(score|cited)|context\.(precision_[a-z]+|recall|relevance)"
    r"|correctness\.(precision|recall|f1|score))$"
)
_LOCATION = ("mean", "median", "min", "max")  # a spread statistic in the metric's own units
_SPREAD = ("std", "variance", "iqr", "range", "cv")  # never negative


def metric_range(metric: str) -> tuple[float, float] | None:
    if metric == "umbrela.mean":
        return GRADES
    if _UNIT.match(metric):
        return UNIT
    if metric.startswith("consistency.") and not metric.startswith("consistency.judge.") and metric.count(".") >= 2:
        base, stat = metric[len("consistency."):].rsplit(".", 1)
        if stat in _LOCATION:
            return metric_range(base)
        if stat in _SPREAD:
            return NON_NEGATIVE
    return None
