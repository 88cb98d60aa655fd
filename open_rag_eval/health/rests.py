"""Which judge tasks a metric rests on, and which of a run's metrics rest on an unhealthy one.

A metric whose judge task is unhealthy (its controls failed, one label for everything, too many replies that did not
parse or never came) is never shown as meeting its target: the report's card, the console's headline row and
``plot`` say "judge unhealthy" in place of the verdict, and the report's coverage line counts the outputs holding
such values apart (docs/judge-health.md). Pure functions over metric names and manifest.json's ``health`` section.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from open_rag_eval.core import judge_tasks

__all__ = ["UNHEALTHY", "on_unhealthy", "tasks_of", "unhealthy_metrics", "unhealthy_tasks"]

UNHEALTHY = "judge unhealthy"  # the words said in place of a target verdict


def tasks_of(metric: str) -> tuple[str, ...]:
    """The judge tasks ``metric``'s values come from (``core.judge_tasks``; ``()`` for a metric no judge produces
    or a family not declared there)."""
    return judge_tasks.tasks_of(metric) or ()


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
