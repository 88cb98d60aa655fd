"""What the plots, the comparison and the report know about metric names: label, axis range, direction."""

from __future__ import annotations

__all__ = ["DEFAULT_CONSISTENCY", "DEFAULT_TREC", "axis_range", "display_name", "is_count", "is_dispersion",
           "lower_is_better"]

DEFAULT_TREC = ("umbrela.mean", "nuggets.vital", "hhem.score", "citation.f1")
DEFAULT_CONSISTENCY = ("umbrela.mean", "nuggets.vital", "citation.f1", "hhem.score",
                       "consistency.bertscore_f1", "consistency.rougeL")

_LABELS = {
    "umbrela.mean": "UMBRELA mean grade (0-3)",
    "nuggets.vital": "Vital nugget recall",
    "nuggets.all": "Nugget recall (all)",
    "nuggets.weighted": "Weighted nugget score",
    "hhem.score": "HHEM factual consistency",
    "hhem.hallucinated": "Hallucinated (HHEM)",
    "citation.f1": "Citation support F1",
    "citation.precision": "Citation support precision",
    "citation.recall": "Citation support recall",
    "citation.fabricated": "Fabricated citations",
    "no_answer.answered": "Answered",
    "consistency.bertscore_f1": "BERTScore F1 across runs",
    "consistency.rougeL": "ROUGE-L across runs",
}
_LOWER_BETTER_SUFFIXES = (".std", ".cv", ".iqr", ".n_invalid", ".n_failed", ".n_defaulted", ".n_unparsed",
                          ".fabricated", ".hallucinated", ".ungrounded", ".flip_rate", ".crossing")
_LOWER_BETTER = {"latency.ms"}
_COUNTS = (".n_invalid", ".n_failed", ".n_defaulted", ".n_unparsed", "citation.fabricated", "latency.ms")


def is_dispersion(metric: str) -> bool:
    """``consistency.<metric>.<stat>``: the spread of another metric across the runs of a query."""
    return metric.startswith("consistency.") and metric.count(".") >= 2 and not metric.startswith("consistency.judge.")


def display_name(metric: str) -> str:
    return _LABELS.get(metric, metric)


def lower_is_better(metric: str) -> bool:
    return metric in _LOWER_BETTER or metric.endswith(_LOWER_BETTER_SUFFIXES)


def is_count(metric: str) -> bool:
    """Counts and times have no fixed upper bound."""
    return metric.endswith(_COUNTS) or metric in _COUNTS


def axis_range(metric: str) -> tuple[float, float] | None:
    """The fixed y range of a metric: UMBRELA grades 0-3, scores 0-1; None for counts (autoscale)."""
    if is_count(metric) or metric.endswith((".std", ".cv", ".iqr", ".cai")):
        return None
    if metric.startswith(("umbrela.mean", "consistency.umbrela.mean")):
        return (0.0, 3.0)
    return (0.0, 1.0)
