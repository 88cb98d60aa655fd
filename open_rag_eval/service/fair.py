"""Running jobs share a judge profile round-robin, so one huge job cannot starve the others.

Each profile has ``max_concurrency`` slots for the whole process. A job's judge calls wait in the job's own queue;
when a slot frees it goes to the next job in turn that has a call waiting, not to whichever job queued most.
``SharedJudge`` wraps a job's judge (its own cache, accounting and retries) and takes a slot around each call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Sequence
from typing import Any

__all__ = ["FairShare", "SharedJudge"]


class FairShare:
    def __init__(self, slots: int) -> None:
        self.slots = slots
        self.in_use = 0
        self._waiting: OrderedDict[str, deque[asyncio.Future[None]]] = OrderedDict()
        self.granted: dict[str, int] = {}  # job -> slots granted (for tests and the bench)

    @contextlib.asynccontextmanager
    async def slot(self, job: str) -> AsyncIterator[None]:
        if self.in_use < self.slots and not self._waiting:
            self.in_use += 1
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.setdefault(job, deque()).append(future)
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._release()  # granted as we were cancelled: pass it on
                else:
                    self._drop(job, future)
                raise
        self.granted[job] = self.granted.get(job, 0) + 1
        try:
            yield
        finally:
            self._release()

    def _drop(self, job: str, future: asyncio.Future[None]) -> None:
        queue = self._waiting.get(job)
        if queue is not None and future in queue:
            queue.remove(future)
            if not queue:
                del self._waiting[job]

    def _release(self) -> None:
        """Hand the freed slot to the first job in turn, which then goes to the back of the line."""
        while self._waiting:
            job, queue = next(iter(self._waiting.items()))
            future = queue.popleft()
            if queue:
                self._waiting.move_to_end(job)
            else:
                del self._waiting[job]
            if not future.done():
                future.set_result(None)
                return
        self.in_use -= 1


class SharedJudge:
    """A job's judge whose calls take a slot of the profile's ``FairShare`` first; each request to an endpoint also
    holds a slot of the deployment's budget when ``budgets`` are given (one per endpoint, ``service.budget``)."""

    def __init__(self, inner: Any, share: FairShare, job: str, budgets: Sequence[Any] = (),
                 profile: str = "") -> None:
        self._inner, self._share, self._job = inner, share, job
        from open_rag_eval.service.budget import BudgetedLimiter
        from open_rag_eval.service.replies import RecordingCache

        self.recorder = None if getattr(inner, "cache", None) is None else RecordingCache(inner.cache)
        if self.recorder is not None:
            inner.cache = self.recorder  # the replies this job used: purged with it
        for i, endpoint in enumerate(getattr(inner, "endpoints", [])):
            budget = budgets[i] if i < len(budgets) else None
            endpoint.limiter = BudgetedLimiter(endpoint.limiter, budget, f"{profile}#{i}")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def complete(self, request: Any) -> Any:
        async with self._share.slot(self._job):
            return await self._inner.complete(request)
