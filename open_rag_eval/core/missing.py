"""Why a value is missing, in four kinds counted apart everywhere (summary.csv, results.json, the report, the
console) and never added up as "failed":

- failed: something went wrong for this item (a judge reply that could not be used, an inference error);
- undefined: the statistic does not exist for these values (alpha with no variation, a spread over one run,
  recall with no relevant document) -- nothing went wrong;
- unavailable: the metric cannot be computed in this environment at all (model weights or a key missing);
  said once for the run, not once per output;
- skipped: the query was left out on purpose (too few answered runs for a cross-run metric: ``min_runs``).

The kind is read from the reason text the evaluators write; a reason we do not recognise is a failure.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["FAILED", "KINDS", "SKIPPED", "UNAVAILABLE", "UNDEFINED", "Missing", "item_counts", "kind", "majority",
           "scrub_paths"]

FAILED, UNDEFINED, UNAVAILABLE, SKIPPED = "failed", "undefined", "unavailable", "skipped"
KINDS = (FAILED, UNDEFINED, UNAVAILABLE, SKIPPED)

_UNDEFINED = ("is undefined", "judgments for this query", "no item has two or more labels",
              "fewer than k documents", "no relevant documents", " runs have a value of ")
_UNAVAILABLE = ("unavailable", "is not installed", "none is configured", "is not set")
_JUDGE_FAILED = ("judge call failed", "nugget creation failed", "nugget importance failed", "nugget assignment failed",
                 "have no grade (", "reply outside its schema")
_DISTINCT_REASONS = 32  # distinct reasons counted per metric; the rest counted together (memory of a large run)
_OTHER = "other reasons"
_ABSOLUTE = re.compile(r"(?<![\w.~:/])(?:/[\w.@+-]+){2,}/?|\b[A-Za-z]:\\(?:[\w.@+ -]+\\)*[\w.@+-]*")


def kind(reason: str) -> str:
    """failed, undefined, unavailable or skipped, from an error reason."""
    text = reason.lower()
    if text.startswith("skipped:"):
        return SKIPPED
    if any(marker in text for marker in _JUDGE_FAILED):  # a judge's words ("503 Service Unavailable") are a failure
        return FAILED
    if any(marker in text for marker in _UNAVAILABLE):
        return UNAVAILABLE
    if any(marker in text for marker in _UNDEFINED):
        return UNDEFINED
    return FAILED


def scrub_paths(text: str) -> str:
    """Absolute file paths in a message cut to their last part: a shared report names no machine's folders."""
    return _ABSOLUTE.sub(lambda m: ".../" + re.split(r"[\\/]", m.group(0).rstrip("/\\"))[-1], text)


class Missing:
    """Missing values of a set of items (outputs and per-query rows), by kind and by metric."""

    def __init__(self, items: Iterable[Mapping[str, Any]]) -> None:
        self.by_metric: dict[str, dict[str, int]] = {}
        self.reasons: dict[str, Counter[str]] = {}  # metric -> its reasons counted (unavailable: the majority's)
        self.why: dict[str, dict[str, tuple[int, str]]] = {k: {} for k in KINDS}  # kind -> family -> (n, a reason)
        for item in items:
            self.add(item)

    def add(self, item: Mapping[str, Any]) -> None:
        """Count one more item's missing values (items may so be read one at a time)."""
        from open_rag_eval.core.catalogue import family  # noqa: PLC0415

        for metric, reason in (item.get("errors") or {}).items():
            counts = self.by_metric.setdefault(metric, dict.fromkeys(KINDS, 0))
            which = kind(str(reason))
            counts[which] += 1
            seen = self.reasons.setdefault(metric, Counter())
            seen[str(reason) if str(reason) in seen or len(seen) < _DISTINCT_REASONS else _OTHER] += 1
            n, first = self.why[which].get(family(metric), (0, str(reason)))
            self.why[which][family(metric)] = (n + 1, first)

    def count(self, metric: str, which: str) -> int:
        return self.by_metric.get(metric, {}).get(which, 0)

    def total(self, which: str) -> int:
        return sum(counts[which] for counts in self.by_metric.values())

    def explain(self, which: str, top: int = 3) -> list[tuple[str, int, str]]:
        """(family, count, one reason) of the ``which`` missing values, the largest families first."""
        ranked = sorted(self.why[which].items(), key=lambda item: (-item[1][0], item[0]))
        return [(name, n, reason) for name, (n, reason) in ranked[:top]]

    @property
    def unavailable(self) -> dict[str, str]:
        """metric -> why, for metrics unavailable in this run: the reason of the majority of its missing values, with
        its count (``bert-score is not installed (5 of 6 rows; 1 other: skipped: min_runs is 2)``)."""
        return {m: majority(self.reasons[m]) for m, c in self.by_metric.items() if c[UNAVAILABLE]}


def majority(reasons: Counter[str]) -> str:
    """The commonest of ``reasons`` with its count out of all, and the next one's when there are others."""
    ranked = sorted(reasons.items(), key=lambda item: (-item[1], item[0] == _OTHER, item[0]))
    top, n = ranked[0]
    total = sum(reasons.values())
    if n == total:
        return top if total == 1 else f"{top} ({n} of {n} rows)"
    second, m = ranked[1]
    others = f"{m} other{'s' * (m > 1)}: {second}" if m == total - n else f"{total - n} others, e.g. {second}"
    return f"{top} ({n} of {total} rows; {others})"


def item_counts(item: Mapping[str, Any] | None) -> dict[str, int]:
    """One output's (or per-query row's) missing values by kind."""
    counts = dict.fromkeys(KINDS, 0)
    for reason in ((item or {}).get("errors") or {}).values():
        counts[kind(str(reason))] += 1
    return counts
