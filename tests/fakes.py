"""Fakes shared by the tests: a scripted judge that records its calls."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.judge.base import Completion, JudgeRequest

Matcher = Callable[[JudgeRequest], bool]


def task_is(task: str, contains: str = "") -> Matcher:
    """Match requests of one task whose last message contains ``contains``."""
    return lambda request: request.task == task and contains in request.prompt


@dataclass
class ScriptedJudge:
    """Answers each request from the first matching script entry's queue; an exhausted queue raises.

    ``script`` is a list of (matcher, replies); a reply that is an Exception is raised instead.
    """

    script: list[tuple[Matcher, list[str | Exception]]] = field(default_factory=list)
    model: str = "scripted"
    simulated: bool = True
    calls: list[JudgeRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queues = [(matcher, deque(replies)) for matcher, replies in self.script]

    def add(self, matcher: Matcher, *replies: str | Exception) -> ScriptedJudge:
        self._queues.append((matcher, deque(replies)))
        return self

    async def complete(self, request: JudgeRequest) -> Completion:
        self.calls.append(request)
        for matcher, queue in self._queues:
            if matcher(request):
                if not queue:
                    raise JudgeCallError(f"script exhausted for task {request.task}")
                reply = queue.popleft()
                if isinstance(reply, Exception):
                    raise reply
                return Completion(text=reply)
        raise JudgeCallError(f"no script entry for task {request.task}")
