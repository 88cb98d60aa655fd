"""The judge-health report of a run: per task the share of judgments in each parse class, checked against thresholds.

Rates are over judgments (one judgment = one ``ask``: a reply, plus its re-asks). ``clean + fallback + echo + invalid +
failed = 1`` per task; ``reasked`` is the share of judgments that needed more than one reply. Citation rows add a
check per output: precision and recall that rest on less than ``min_labelled_share`` of the cited statements (the
rest had no parsed label) are flagged. Names are stable (docs/RESULTS.md, docs/judge-health.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from open_rag_eval.core.parsing import CLASSES, ECHO, FAILED, FALLBACK, INVALID
from open_rag_eval.core.recording import HealthRecorder
from open_rag_eval.judge.thresholds import HealthThresholds
from open_rag_eval.scoring.stats import Aggregate
from open_rag_eval.core.types import Score

__all__ = ["HEALTH_PREFIX", "HealthReport", "HealthThresholds", "assess", "is_health"]

HEALTH_PREFIX = "health."
RATES = (*CLASSES, "reasked")  # clean, fallback, echo, invalid, failed, reasked
TASK_ORDER = ("umbrela", "nugget_create", "nugget_importance", "nugget_assign", "support", "no_answer")


_LIMITS = {FALLBACK: "max_fallback_rate", INVALID: "max_invalid_rate", ECHO: "max_echo_rate",
           FAILED: "max_failed_rate"}


def is_health(metric: str) -> bool:
    return metric.startswith(HEALTH_PREFIX)


@dataclass
class HealthReport:
    tasks: dict[str, dict[str, Any]]  # task -> judgments, replies, counts per class, rates
    thresholds: HealthThresholds
    low_labelled: list[dict[str, Any]] = field(default_factory=list)  # outputs whose citation scores rest on few
    n_cited_outputs: int = 0

    @property
    def problems(self) -> list[str]:
        """One line per threshold crossed, worst first within a task."""
        lines = []
        for task, row in self.tasks.items():
            for klass, limit_name in _LIMITS.items():
                limit = getattr(self.thresholds, limit_name)
                if row["rates"][klass] > limit:
                    lines.append(f"{task}: {row['counts'][klass]} of {row['judgments']} judgments {_WHAT[klass]} "
                                 f"({row['rates'][klass]:.0%} > {limit_name} {limit:.0%})")
        if self.low_labelled:
            shown = ", ".join(f"{o['query_id']}/{o['run']} ({o['n_labelled']} of {o['n_cited']})"
                              for o in self.low_labelled[:5])
            more = f" and {len(self.low_labelled) - 5} more" if len(self.low_labelled) > 5 else ""
            lines.append(f"support: {len(self.low_labelled)} output(s) have citation precision/recall resting on "
                         f"less than {self.thresholds.min_labelled_share:.0%} of their cited statements "
                         f"(labelled of cited): {shown}{more}")
        return lines

    @property
    def healthy(self) -> bool:
        return not self.problems

    def unhealthy_tasks(self) -> list[str]:
        flagged = [task for task, row in self.tasks.items()
                   if any(row["rates"][k] > getattr(self.thresholds, n) for k, n in _LIMITS.items())]
        if self.low_labelled and "support" not in flagged:
            flagged.append("support")
        return flagged

    def snapshot(self) -> dict[str, Any]:
        """manifest.json's ``health`` section."""
        return {"healthy": self.healthy, "problems": self.problems, "thresholds": self.thresholds.model_dump(),
                "tasks": self.tasks, "citation_low_labelled": self.low_labelled,
                "n_cited_outputs": self.n_cited_outputs}

    def summary_rows(self) -> list[Aggregate]:
        """summary.csv rows ``health.<task>.<class>_rate`` (mean = the rate, n = judgments)."""
        rows = []
        for task, row in self.tasks.items():
            for name in RATES:
                rows.append(Aggregate(f"{HEALTH_PREFIX}{task}.{name}_rate", row["rates"][name], None, None, None,
                                      row["judgments"], 0))
        if self.n_cited_outputs:
            share = len(self.low_labelled) / self.n_cited_outputs
            rows.append(Aggregate(f"{HEALTH_PREFIX}support.low_labelled_output_rate", share, None, None, None,
                                  self.n_cited_outputs, 0))
        return rows


_WHAT = {FALLBACK: "were read only through a parser fallback", INVALID: "never parsed",
         ECHO: "echoed the prompt's labels or rubric", FAILED: "got no reply"}


def assess(recorder: HealthRecorder, scores: Sequence[Score], thresholds: HealthThresholds) -> HealthReport:
    """The health report from the run's recorded judgments and its citation counts."""
    tasks = {task: _task_row(recorder.tasks[task]) for task in _ordered(recorder.tasks)}
    cited, unlabelled = _per_output(scores, "citation.n_cited"), _per_output(scores, "citation.n_unlabelled")
    low = []
    for key, n_cited in cited.items():
        if n_cited <= 0:
            continue
        n_labelled = int(n_cited - unlabelled.get(key, 0))
        if n_labelled / n_cited < thresholds.min_labelled_share:
            low.append({"query_id": key[0], "run": key[1], "n_cited": int(n_cited), "n_labelled": n_labelled})
    n_cited_outputs = sum(1 for value in cited.values() if value > 0)
    return HealthReport(tasks, thresholds, low, n_cited_outputs)


def _ordered(tasks: Iterable[str]) -> list[str]:
    known = [t for t in TASK_ORDER if t in tasks]
    return known + sorted(t for t in tasks if t not in TASK_ORDER)


def _task_row(counts: Any) -> dict[str, Any]:
    n = counts.judgments
    classes = {klass: counts.classes.get(klass, 0) for klass in CLASSES}
    rates = {klass: (value / n if n else 0.0) for klass, value in classes.items()}
    rates["reasked"] = counts.reasked / n if n else 0.0
    return {"judgments": n, "replies": counts.replies, "counts": {**classes, "reasked": counts.reasked},
            "rates": rates}


def _per_output(scores: Sequence[Score], metric: str) -> Mapping[tuple[str, int | None], float]:
    return {(s.query_id, s.run): s.value for s in scores if s.metric == metric and s.value is not None}
