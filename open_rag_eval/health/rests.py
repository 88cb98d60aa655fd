"""Which judge tasks a metric rests on, and which of a run's metrics rest on an unhealthy one.

A metric whose judge task is unhealthy (its controls failed, one label for everything, too many replies that did not
parse or never came) is never shown as meeting its target: the report's card, the console's headline row and
``plot`` say "judge unhealthy" in place of the verdict, and the report's coverage line counts the outputs holding
such values apart (docs/judge-health.md). Pure functions over metric names and manifest.json's ``health`` section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["UNHEALTHY", "on_unhealthy", "tasks_of", "unhealthy_metrics", "unhealthy_tasks"]

UNHEALTHY = "judge unhealthy"  # the words said in place of a target verdict

_CLAIMS = ("claim_extract", "claim_verify")
# a metric family (the name before the first dot) -> the judge tasks its values come from
_FAMILY_TASKS: dict[str, tuple[str, ...]] = {
    "umbrela": ("umbrela",),
    "nuggets": ("nugget_create", "nugget_importance", "nugget_assign"),
    "citation": ("support",),
    "no_answer": ("no_answer",),
    "rubric": ("rubric",),
    "faithfulness": _CLAIMS,
    "correctness": _CLAIMS,
    "context": ("context_relevance", "context_useful", *_CLAIMS),
    "answer_relevance": ("answer_relevance", "answer_questions"),
    "rag_guide": ("rag_guide_context_relevance", "rag_guide_context_precision", "rag_guide_claims",
                  "rag_guide_verify", "rag_guide_answer_relevance", "rag_guide_correctness"),
}


def tasks_of(metric: str) -> tuple[str, ...]:
    """The judge tasks ``metric``'s values come from (``()`` for a metric no judge produces). A criterion's column
    ``criteria.<name>`` rests on its own task ``criteria.<name>`` (health counts each criterion apart) and on the
    steps of ``evaluation_steps``."""
    family = metric.split(".", 1)[0]
    if family == "criteria":
        return (metric, "criteria", "criteria_steps")
    return _FAMILY_TASKS.get(family, ())


def unhealthy_tasks(health: Mapping[str, Any] | None) -> list[str]:
    """The unhealthy judge tasks of a run, from manifest.json's ``health`` section (its ``unhealthy_tasks``; a
    manifest written before that key: the tasks its problem lines name)."""
    if not health or health.get("healthy", True):
        return []
    listed = health.get("unhealthy_tasks")
    if isinstance(listed, list):
        return [str(task) for task in listed]
    problems = [str(p) for p in health.get("problems") or []]
    named = [*(health.get("tasks") or {}), *((health.get("controls") or {}).get("tasks") or {})]
    return [task for task in dict.fromkeys(named) if any(p.startswith(f"{task}:") for p in problems)]


def on_unhealthy(metric: str, unhealthy: Iterable[str]) -> list[str]:
    """The unhealthy tasks among those ``metric`` rests on."""
    bad = set(unhealthy)
    return [task for task in tasks_of(metric) if task in bad]


def unhealthy_metrics(metrics: Iterable[str], health: Mapping[str, Any] | None) -> dict[str, list[str]]:
    """metric -> the unhealthy tasks it rests on, for the metrics that rest on one."""
    bad = unhealthy_tasks(health)
    if not bad:
        return {}
    found = {metric: on_unhealthy(metric, bad) for metric in metrics}
    return {metric: tasks for metric, tasks in found.items() if tasks}
