"""Counting parse classes while a run judges: one recorder per run, reached through a context variable.

``ask`` (the one place metrics call the judge) records every judgment it finishes: its task, the class of the reply
it ended with (or ``failed``) and how many replies it took. Outside ``recording()`` nothing is recorded, so metrics
used on their own (tests, notebooks) need no setup. Tasks started inside ``recording()`` inherit the recorder.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from open_rag_eval.core.parsing import CLASSES

__all__ = ["HealthRecorder", "TaskCounts", "record", "recording"]


@dataclass
class TaskCounts:
    """The judgments of one task: how many, their classes, how many replies they took, how many were re-asked."""

    judgments: int = 0
    replies: int = 0
    reasked: int = 0  # judgments that needed more than one reply
    classes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))


@dataclass
class HealthRecorder:
    tasks: dict[str, TaskCounts] = field(default_factory=dict)

    def record(self, task: str, klass: str, replies: int) -> None:
        counts = self.tasks.setdefault(task, TaskCounts())
        counts.judgments += 1
        counts.replies += replies
        counts.reasked += replies > 1
        counts.classes[klass] = counts.classes.get(klass, 0) + 1


_CURRENT: ContextVar[HealthRecorder | None] = ContextVar("open_rag_eval_health", default=None)


@contextmanager
def recording(recorder: HealthRecorder | None = None) -> Iterator[HealthRecorder]:
    """Record every judgment finished inside the block (and in tasks started from it)."""
    active = recorder or HealthRecorder()
    token = _CURRENT.set(active)
    try:
        yield active
    finally:
        _CURRENT.reset(token)


def record(task: str, klass: str, replies: int) -> None:
    recorder = _CURRENT.get()
    if recorder is not None:
        recorder.record(task, klass, replies)
