"""Counting parse classes while a run judges: one recorder per run, reached through a context variable.

``ask`` (the one place metrics call the judge) records every judgment it finishes: its task, the class of the reply
it ended with (or ``failed``), how many replies it took and the labels it gave (``core.labels``). Outside ``recording()`` nothing is recorded, so metrics
used on their own (tests, notebooks) need no setup. Tasks started inside ``recording()`` inherit the recorder.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from open_rag_eval.core.parsing import CLASSES

log = logging.getLogger(__name__)

__all__ = ["MAX_UNPARSED", "HealthRecorder", "TaskCounts", "failure_cause", "record", "recording"]

MAX_UNPARSED = 20  # distinct reasons a task keeps of its judgments that never parsed; the rest count as "other"


@dataclass
class TaskCounts:
    """The judgments of one task: how many, their classes, how many replies they took, how many were re-asked."""

    judgments: int = 0
    replies: int = 0
    reasked: int = 0  # judgments that needed more than one reply
    classes: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CLASSES, 0))
    labels: dict[str, int] = field(default_factory=dict)  # label -> how many times the judge gave it
    causes: dict[str, int] = field(default_factory=dict)  # failed judgments by cause (``failure_cause``)
    unparsed: dict[str, int] = field(default_factory=dict)  # judgments that never parsed, by what was wrong

    def add(self, other: TaskCounts | dict[str, Any]) -> None:
        """Add another record of the same task (a shard's, or its ``vars``)."""
        row = vars(other) if isinstance(other, TaskCounts) else other
        self.judgments += row["judgments"]
        self.replies += row["replies"]
        self.reasked += row["reasked"]
        for klass, n in row["classes"].items():
            self.classes[klass] = self.classes.get(klass, 0) + n
        for name in ("labels", "causes", "unparsed"):
            mine = getattr(self, name)
            for key, n in row.get(name, {}).items():
                mine[key] = mine.get(key, 0) + n


@dataclass
class HealthRecorder:
    tasks: dict[str, TaskCounts] = field(default_factory=dict)
    watch: Callable[[HealthRecorder, str], None] | None = None  # called after each judgment (its task)

    def record(self, task: str, klass: str, replies: int, labels: Sequence[str] = (), cause: str | None = None,
               unparsed: str | None = None) -> None:
        counts = self.tasks.setdefault(task, TaskCounts())
        counts.judgments += 1
        counts.replies += replies
        counts.reasked += replies > 1
        counts.classes[klass] = counts.classes.get(klass, 0) + 1
        for label in labels:
            counts.labels[label] = counts.labels.get(label, 0) + 1
        if cause is not None:
            counts.causes[cause] = counts.causes.get(cause, 0) + 1
        if unparsed is not None:
            known = unparsed in counts.unparsed or len(counts.unparsed) < MAX_UNPARSED
            key = unparsed if known else "other"
            counts.unparsed[key] = counts.unparsed.get(key, 0) + 1
        if self.watch is not None:
            try:
                self.watch(self, task)
            except Exception as error:  # noqa: BLE001 - a display must never cost a judgment
                log.warning("judge-health display failed: %r", error)

    def merge(self, parts: Sequence[dict[str, dict[str, Any]]]) -> HealthRecorder:
        """Add the records of other processes (``{task: vars(TaskCounts)}`` each)."""
        for part in parts:
            for task, row in part.items():
                self.tasks.setdefault(task, TaskCounts()).add(row)
        return self


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


def record(task: str, klass: str, replies: int, labels: Sequence[str] = (), cause: str | None = None,
           unparsed: str | None = None) -> None:
    recorder = _CURRENT.get()
    if recorder is not None:
        recorder.record(task, klass, replies, labels, cause, unparsed)


_CAUSES = (("timeout", ("timed out", "timeout")),
           ("overflow", ("do not fit", "context length", "context window", "maximum context", "too long", "truncat")),
           ("refused", ("refus", "declin", "content filter", "content_filter")),
           ("cut off", ("max_tokens", "cut off", "finish_reason length", "length limit")),
           ("replay", ("replay:",)))


def failure_cause(reason: str, refused: bool = False) -> str:
    """What a failed call's reason says went wrong, in one word: timeout, overflow, refused, cut off, replay (no
    recorded reply), else error."""
    if refused:
        return "refused"
    lower = reason.lower()
    return next((cause for cause, words in _CAUSES if any(w in lower for w in words)), "error")
