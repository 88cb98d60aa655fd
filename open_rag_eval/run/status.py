"""One run status: complete, or incomplete with its reasons -- computed here, read by every door.

A run is **incomplete** when a judged metric (the metric catalogue's ``judged`` families) failed for every output:
its values are missing for a reason that is a failure (not undefined, not unavailable), so the run cannot speak
for it; or when no metric has a single value (``no_value``: why, with the commonest reason), whatever the kind. Each reason names the metric, how many values failed and the commonest failure. The CLI exits 6 on it
(``EXIT_INCOMPLETE``), ``Results.status`` / ``Results.complete`` say it in Python, the service's job ends in its
``incomplete`` state (error code ``incomplete``), tracking tags the run with it, and the report opens with it.
manifest.json keeps it as ``complete`` and ``incomplete: [{metric, n_failed, reason}]``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from open_rag_eval.core.catalogue import is_judged
from open_rag_eval.core.missing import FAILED, kind
from open_rag_eval.core.types import Score
from open_rag_eval.health.check import HEALTH_PREFIX
from open_rag_eval.scoring.stats import Aggregate

__all__ = ["COMPLETE", "ERROR_CODE", "EXIT_INCOMPLETE", "INCOMPLETE", "RunStatus", "metric_status", "metric_status_of",
           "run_status", "run_status_of"]

COMPLETE, INCOMPLETE = "complete", "incomplete"
EXIT_INCOMPLETE = 6
ERROR_CODE = "incomplete"  # the service's error code of an incomplete job


@dataclass(frozen=True)
class RunStatus:
    incomplete: tuple[dict[str, Any], ...] = ()  # {metric, n_failed, reason}: judged metrics failed everywhere
    no_value: str | None = None  # why the run produced no value at all (every metric missing everywhere)

    @property
    def complete(self) -> bool:
        return not self.incomplete and self.no_value is None

    @property
    def state(self) -> str:
        return COMPLETE if self.complete else INCOMPLETE

    @property
    def metrics(self) -> list[str]:
        return [str(item["metric"]) for item in self.incomplete]

    def manifest_fields(self) -> dict[str, Any]:
        fields = {"complete": self.complete, "incomplete": [dict(item) for item in self.incomplete]}
        return fields if self.no_value is None else {**fields, "no_value": self.no_value}

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> RunStatus:
        items = manifest.get("incomplete") or []
        no_value = manifest.get("no_value")
        return cls(tuple(dict(item) for item in items if isinstance(item, Mapping)),
                   str(no_value) if no_value is not None else None)

    def summary(self) -> str:
        """Which judged metrics failed for every output (headline metrics first) and the commonest reason; first,
        when no metric has a value at all, that it has none."""
        if self.complete:
            return "complete"
        if not self.incomplete:
            return f"no metric has a value for any output: {self.no_value}"
        failed = self._failed()
        return failed if self.no_value is None else f"no metric has a value for any output: {failed}"

    def _failed(self) -> str:
        """The judged metrics that failed for every output (headline metrics first) and their commonest reason."""
        from open_rag_eval.core.catalogue import headline_columns  # noqa: PLC0415

        order = [c.pattern for c in headline_columns()]
        headline = [m for m in order if m in self.metrics]
        named = headline or [self.metrics[0]]
        rest = len(self.incomplete) - len(named)
        more = f" and {rest} more judged metric{'s' * (rest > 1)}" if rest else ""
        reasons = Counter(str(item["reason"]) for item in self.incomplete if item.get("reason"))
        reason = f"; commonest reason: {reasons.most_common(1)[0][0]}" if reasons else ""
        return f"{', '.join(named)}{more} failed for every output{reason}"

    def line(self, output_dir: Path | str) -> str:
        """The CLI's error line for an incomplete run."""
        return f"error: incomplete run: {self.summary()} (results written to {output_dir}, marked incomplete)"


def metric_status(summary: Sequence[Aggregate], scores: Sequence[Score]) -> dict[str, str]:
    """``ok`` for a metric with at least one value; for a metric with none, the kind of its missing values:
    ``failed`` (every judgment or model call for it went wrong), ``undefined``, ``skipped`` or ``unavailable``."""
    kinds: dict[str, Counter[str]] = defaultdict(Counter)
    for score in scores:
        if score.value is None:
            kinds[score.metric][kind(score.error or "")] += 1
    return metric_status_of(summary, kinds)


def metric_status_of(summary: Sequence[Aggregate], kinds: Mapping[str, Counter[str]]) -> dict[str, str]:
    """``metric_status`` from each metric's kinds of missing values, counted (e.g. window by window)."""
    return {a.metric: "ok" if a.n else (kinds[a.metric].most_common(1)[0][0] if kinds.get(a.metric) else FAILED)
            for a in summary}


def run_status(summary: Sequence[Aggregate], scores: Sequence[Score]) -> RunStatus:
    """Complete, or incomplete with the judged metrics that failed for every output."""
    status = metric_status(summary, scores)
    empty = {a.metric for a in summary if not a.n}
    reasons: dict[str, Counter[str]] = defaultdict(Counter)
    for score in scores:
        if score.metric in empty and score.error:
            reasons[score.metric][score.error] += 1
    return _status(summary, status, reasons)


def run_status_of(summary: Sequence[Aggregate], kinds: Mapping[str, Counter[str]],
                  reasons: Mapping[str, Counter[str]]) -> RunStatus:
    """``run_status`` from each metric's kinds of missing values and, for the metrics without any value, their
    reasons, counted (e.g. window by window)."""
    return _status(summary, metric_status_of(summary, kinds), reasons)


def _status(summary: Sequence[Aggregate], status: Mapping[str, str], reasons: Mapping[str, Counter[str]]) -> RunStatus:
    failed = {a.metric: a.n_failed for a in summary if status[a.metric] == FAILED and is_judged(a.metric)}
    named = {m: reasons.get(m) or Counter() for m in failed}
    return RunStatus(tuple({"metric": m, "n_failed": n, "reason": named[m].most_common(1)[0][0] if named[m]
                            else None} for m, n in failed.items()), _no_value(summary, reasons))


def _no_value(summary: Sequence[Aggregate], reasons: Mapping[str, Counter[str]]) -> str | None:
    """Why a run without a single value has none (its commonest reason over every metric); None when it has one.
    The judge-health rows of the summary are not the run's values."""
    own = [a for a in summary if not a.metric.startswith(HEALTH_PREFIX)]
    if any(a.n for a in own):
        return None
    found: Counter[str] = Counter()
    for metric in (a.metric for a in own):
        found.update(reasons.get(metric) or Counter())
    if not found:
        return ("no evaluator computed a metric on these outputs (do they hold what the metrics read, e.g. "
                "relevance labels?)")
    reason, count = found.most_common(1)[0]
    return f"commonest reason: {reason} ({count} of {sum(found.values())} missing values)"
