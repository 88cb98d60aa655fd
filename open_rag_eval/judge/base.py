"""What metrics see of the judge: one request in, one completion out.

Metrics build a ``JudgeRequest`` (messages + the method's sampling params + the template's version) and await
``judge.complete``. Everything cross-cutting -- cache, in-flight de-duplication, concurrency, rate limits,
retries, accounting -- happens behind that call. A call that fails for good raises ``JudgeCallError``
(the metric records a failed judgment); an unusable endpoint raises ``JudgeUnavailable`` (the run stops).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["Completion", "Judge", "JudgeRequest", "Message", "Priority", "TokenLogprobs", "guard_calls", "guarding"]

Message = tuple[str, str]  # (role, content)
# the log-probabilities of a reply's tokens, where the request asked for them (``logprobs: true``): each token as
# written, with its most likely alternatives at that position as (token, log-probability) pairs
TokenLogprobs = tuple[tuple[str, tuple[tuple[str, float], ...]], ...]


class Priority:
    """Queue order of judge calls when they wait for a slot: calls that others depend on go first, leaves last.
    (UMBRELA grades feed nugget creation, which feeds importance and assignment; support and no-answer feed
    nothing.)"""

    CHAIN_START = 0
    CHAIN = 1
    LEAF = 2


@dataclass(frozen=True)
class JudgeRequest:
    task: str  # accounting label, e.g. "umbrela", "nugget_create", "support"
    messages: tuple[Message, ...]
    params: Mapping[str, Any] = field(default_factory=dict)  # the method's sampling params
    prompt_version: str = ""  # sha256 of the template
    sample: int = 0  # independent samples of one prompt differ only here
    priority: int = 0  # scheduling hint, not part of the request: lower goes first when calls queue

    @property
    def prompt(self) -> str:
        """The method's own prompt: the last user message before any reply sent back (a corrective re-ask)."""
        asked = ""
        for role, content in self.messages:
            if role == "assistant":
                break
            if role == "user":
                asked = content
        return asked

    @classmethod
    def chat(
        cls,
        task: str,
        user: str,
        *,
        system: str | None = None,
        params: Mapping[str, Any] | None = None,
        prompt_version: str = "",
        sample: int = 0,
        priority: int = 0,
    ) -> JudgeRequest:
        messages: tuple[Message, ...] = (("user", user),)
        if system is not None:
            messages = (("system", system),) + messages
        return cls(task, messages, dict(params or {}), prompt_version, sample, priority)


@dataclass(frozen=True)
class Completion:
    text: str
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    fingerprint: str | None = None
    logprobs: TokenLogprobs | None = None  # None: not asked for, or the judge returned none


class Judge(Protocol):
    """The async chat-completion client shared by every metric of a run."""

    model: str
    simulated: bool

    async def complete(self, request: JudgeRequest) -> Completion: ...


_GUARD: ContextVar[bool] = ContextVar("open_rag_eval_guard_calls", default=False)


@contextmanager
def guard_calls() -> Iterator[None]:
    """The judge requests made inside (and in the tasks started inside) check the judge rather than judge the run:
    the judge-health controls. Their failures are failed controls, never an outage: the client's outage breaker
    counts only the run's own judgments (docs/judge-health.md)."""
    token = _GUARD.set(True)
    try:
        yield
    finally:
        _GUARD.reset(token)


def guarding() -> bool:
    """Whether the current request is a guard's (``guard_calls``)."""
    return _GUARD.get()
