"""What every evaluator is: a named bundle of metrics with its own validated options.

An evaluator module defines an ``Options`` pydantic model (``extra="forbid"``) and a class with

    name: str                          # the ``type:`` in config
    needs_judge: bool                  # False: runs without any judge configured
    def __init__(self, options: Options) -> None
    def plan(self, outputs) -> Plan    # an estimate for --dry-run; calls nothing (may also accept
                                       # ``evaluators=``: every evaluator of the run, built, in order)
    async def evaluate(self, outputs, ctx: Context) -> EvalResult

and is listed in ``open_rag_eval.registry.EVALUATORS``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel

from open_rag_eval.judge.base import Judge
from open_rag_eval.judge.rehearsal import PlannedCall
from open_rag_eval.core.types import EvalResult, RAGOutput

__all__ = ["Context", "Evaluator", "Plan", "TaskPlan"]


@dataclass
class TaskPlan:
    """Planned work of one judge task."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reask_calls: int = 0  # at most this many more calls when replies do not parse
    reask_prompt_tokens: int = 0


@dataclass
class Plan:
    """Estimated judge work for --dry-run.

    ``requests`` are the distinct requests an evaluator rehearsed (``open_rag_eval.judge.rehearsal``): identical
    requests of several evaluators are counted once, as the judge's cache counts them. ``reasks`` gives per task how
    many more attempts a request may take when its reply does not parse. ``calls`` / ``prompt_tokens`` /
    ``completion_tokens`` are estimates an evaluator gives without rehearsing; the totals add both. ``fixed``
    requests (the judge-health controls, a fixed number whatever the run's size) are rehearsed on every query and
    never scaled.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: list[str] = field(default_factory=list)
    requests: dict[Hashable, PlannedCall] = field(default_factory=dict)
    reasks: dict[str, int] = field(default_factory=dict)
    scale: float = 1.0  # the rehearsed requests stand for this many times as many (a sample of the queries)
    fixed: dict[Hashable, PlannedCall] = field(default_factory=dict)  # rehearsed on every query: never scaled

    def __add__(self, other: Plan) -> Plan:
        reasks = dict(self.reasks)
        for task, extra in other.reasks.items():
            reasks[task] = max(extra, reasks.get(task, 0))
        return Plan(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.notes + [note for note in other.notes if note not in self.notes],
            {**self.requests, **other.requests},
            reasks,
            max(self.scale, other.scale),
            {**self.fixed, **other.fixed},
        )

    def by_task(self) -> dict[str, TaskPlan]:
        """Planned calls and tokens per judge task (``other`` for estimates given without rehearsal)."""
        tasks: dict[str, TaskPlan] = {}
        self._count(tasks, self.requests.values())
        if self.calls or self.prompt_tokens or self.completion_tokens:
            tasks["other"] = TaskPlan(self.calls, self.prompt_tokens, self.completion_tokens)
        if self.scale != 1.0:
            for task in tasks.values():
                for name in ("calls", "prompt_tokens", "completion_tokens", "reask_calls", "reask_prompt_tokens"):
                    setattr(task, name, round(getattr(task, name) * self.scale))
        self._count(tasks, (call for key, call in self.fixed.items() if key not in self.requests))
        return dict(sorted(tasks.items()))

    def _count(self, tasks: dict[str, TaskPlan], calls: Iterable[PlannedCall]) -> None:
        for call in calls:
            task = tasks.setdefault(call.task, TaskPlan())
            extra = self.reasks.get(call.task, 0)
            task.calls += 1
            task.prompt_tokens += call.prompt_tokens
            task.completion_tokens += call.completion_tokens
            task.reask_calls += extra
            task.reask_prompt_tokens += extra * call.prompt_tokens

    def expected_reasks(self, rates: dict[str, float]) -> TaskPlan:
        """The re-asks to expect at per-task rates (extra replies per judgment, e.g. measured in an earlier run)."""
        expected = TaskPlan()
        for name, task in self.by_task().items():
            rate = rates.get(name, 0.0)
            expected.calls += round(task.calls * rate)
            expected.prompt_tokens += round(task.prompt_tokens * rate)
            expected.completion_tokens += round(task.completion_tokens * rate)
        return expected

    def over_context(self, limit: int) -> dict[str, tuple[int, int]]:
        """Per task, (requests that cannot fit ``limit`` context tokens with the reply they need, requests)."""
        found: dict[str, tuple[int, int]] = {}
        for call in {**self.requests, **self.fixed}.values():
            over, n = found.get(call.task, (0, 0))
            found[call.task] = (over + (call.context_need > limit), n + 1)
        return {task: counts for task, counts in sorted(found.items()) if counts[0]}

    def total(self) -> TaskPlan:
        total = TaskPlan()
        for task in self.by_task().values():
            for name in ("calls", "prompt_tokens", "completion_tokens", "reask_calls", "reask_prompt_tokens"):
                setattr(total, name, getattr(total, name) + getattr(task, name))
        return total


@dataclass
class Context:
    """What an evaluator may use besides its outputs."""

    judge: Judge | None = None
    previous: EvalResult = field(default_factory=EvalResult)  # results of the evaluators before it
    output_dir: Path | None = None
    progress: Callable[[str, int], None] = lambda what, n: None  # e.g. ("outputs", 1) per output done
    extra: dict[str, Any] = field(default_factory=dict)


class Evaluator(Protocol):
    name: ClassVar[str]
    needs_judge: ClassVar[bool]
    Options: ClassVar[type[BaseModel]]

    def plan(self, outputs: Sequence[RAGOutput]) -> Plan: ...

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult: ...
