"""The labels a judgment gave, for the label distribution of each task (degeneracy, docs/judge-health.md).

``labels_of(task, value)`` turns a parsed reply (the ``Parsed.value`` a metric accepted) into the labels it holds,
as the task's ``reading`` in ``core.judge_tasks.TABLE`` says: one for a grade or a verdict, one per item for a list
of labels (nugget importance and assignment, claim verdicts). Tasks whose replies are free text (nugget lists,
claims, questions) have no labels. Pure.
"""

from __future__ import annotations

from typing import Any

from open_rag_eval.core.judge_tasks import TABLE

__all__ = ["FREE_TEXT", "labels_of"]

FREE_TEXT = frozenset(task.name for task in TABLE.values() if task.reading == "free")


def labels_of(task: str, value: Any) -> tuple[str, ...]:
    """The labels of one accepted reply; () when the task has none or the value is not a label."""
    known = TABLE.get(task)
    reading = known.reading if known is not None else "value"
    if value is None or reading == "free":
        return ()
    if reading == "first" and isinstance(value, tuple) and value:
        value = value[0]
    if reading == "refusal" and isinstance(value, tuple) and len(value) == 2:
        return ("refusal",) if value[0] else _one(value[1])
    if isinstance(value, (list, tuple)):
        return tuple(label for item in value for label in _one(getattr(item, "supported", item)))
    return _one(value)


def _one(value: Any) -> tuple[str, ...]:
    if isinstance(value, bool):
        return ("yes" if value else "no",)
    if isinstance(value, int):
        return (str(value),)
    if isinstance(value, float):
        return (f"{value:g}",)
    if isinstance(value, str):
        return (value,)
    return ()
