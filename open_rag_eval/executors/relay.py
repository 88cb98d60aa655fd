"""Relays: the judge's HTTP calls made by actors that outlive the workers (``executor.relays``, docs/scaling.md).

With ``relays: N`` every judge call of a Ray run (worker or driver) is made by one of N ``Relay`` actors, chosen by
the call's cache key (``route``: the same key always reaches the same relay, whichever worker asks and whichever
endpoint the attempt goes to). The worker still does everything else as in a local run: the cache lookup before
the call, its slot of the shared budget, the endpoint choice, retries, backoff and cool-downs; it asks its relay for
one attempt and classifies nothing itself. A relay, for each key:

- joins a request for a key already in flight to that call (a retried shard's request joins the call its dead
  worker had made);
- looks in the run's cache before it calls (a reply recorded since the worker looked is not paid again);
- puts a judgment into the cache (awaited) BEFORE it forgets the call, and keeps the last ``RECENT`` replies, so a
  request that arrives just after is answered from memory;
- finishes a call whatever happens to the worker that asked it (the call is the relay's task, not the asker's);
- counts what it pays where it pays it (``accounting``: each call and retry it sends, their tokens, the prompts of
  attempts that timed out), since the asker may die before it hears back; the driver adds every relay's counts to
  the run's (``paid``). The asker counts only its request's fate: the answer of the call its ask started is counted
  here; an answer ``Shared`` with it by another asker's call is deduplicated; one from the cache or from memory
  (a ``Completion``) is a cache hit.

A worker's ``RelayClient`` batches its asks (every ask of a ``WINDOW_S`` window in one ``submit`` call a relay) and
gets the replies back in batches (one long-polling ``collect`` call a relay at a time): two actor calls amortised
over many judge calls, not one each way per call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

from open_rag_eval.judge.accounting import Accounting, price_for
from open_rag_eval.judge.base import Completion
from open_rag_eval.judge.cache import CachedCompletion
from open_rag_eval.judge.client import OpenAIJudge, cached_completion, open_judge, recorded
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.http11 import Reply
from open_rag_eval.judge.rehearsal import rough_prompt_tokens
from open_rag_eval.judge.replies import Failure, Judgment, Usage
from open_rag_eval.judge.transports import Call, Shared

__all__ = ["RECENT", "Outcome", "Relay", "RelayClient", "RemoteCache", "attach", "route"]

log = logging.getLogger("open_rag_eval.executors")

RECENT = 4096  # completed replies a relay keeps in memory, per relay
WINDOW_S = 0.003  # a worker's asks gathered into one submit
POLL_S = 1.0  # a collect call returns after this long with nothing to return (the worker polls again)
STALE_S = 600.0  # an asker not heard from for this long is forgotten (a worker that died)

# what an ask ends with: a cached completion, a judgment (cached), a failure of this attempt (either ``Shared`` with
# an asker whose ask did not start the call), or an error that stops the run (a cache that cannot be written: a
# StorageError naming the file)
Outcome = Union[Completion, Judgment, Failure, Shared, BaseException]


def route(key: str, relays: int) -> int:
    """The relay of a cache key (a sha256 in hex): stable across processes and runs."""
    return int(key[:12], 16) % relays


class Relay:
    """Makes judge calls for every worker (a Ray actor; see the module docstring). ``cache``: the run's cache (an
    object with async ``get``/``put``); ``cache_owner``: the name of the ``CacheOwner`` actor to reach it by."""

    def __init__(self, config: JudgeConfig, base_dir: str, cache_owner: str | None = None, cache: Any = None) -> None:
        self.config, self.base_dir, self.cache_owner, self.cache = config, base_dir, cache_owner, cache
        self.judge: OpenAIJudge | None = None
        self.inflight: dict[str, asyncio.Task[None]] = {}
        self.waiting: dict[str, list[str]] = {}  # key -> the askers waiting for its call
        self.recent: OrderedDict[str, Outcome] = OrderedDict()
        self.outbox: dict[str, list[tuple[str, Outcome]]] = {}
        self.ready: dict[str, asyncio.Event] = {}
        self.seen: dict[str, float] = {}
        self.counts: Counter[str] = Counter()  # calls, cached, joined, recent
        self.accounting = Accounting(config.model, price_for(config.model, config.prices))  # what it paid

    async def submit(self, asker: str, asks: Sequence[Call]) -> None:
        """Take ``asks`` (attempts of judge requests); their outcomes go to ``asker``'s outbox."""
        now = time.monotonic()
        self.seen[asker] = now
        self._forget_stale(now)
        for call in asks:
            key = call.key
            if key in self.recent:
                self.recent.move_to_end(key)
                self.counts["recent"] += 1
                self._deliver(asker, key, self.recent[key])
                continue
            self.waiting.setdefault(key, []).append(asker)
            if key in self.inflight:
                self.counts["joined"] += 1
                continue
            self.inflight[key] = asyncio.get_running_loop().create_task(self._call(call))

    async def collect(self, asker: str, wait_s: float = POLL_S) -> list[tuple[str, Outcome]]:
        """The outcomes ready for ``asker``, waiting up to ``wait_s`` for the first."""
        self.seen[asker] = time.monotonic()
        if not self.outbox.get(asker):
            ready = self.ready.setdefault(asker, asyncio.Event())
            ready.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ready.wait(), wait_s)
        self.seen[asker] = time.monotonic()
        return self.outbox.pop(asker, [])

    def pending(self) -> dict[str, int]:
        """Askers -> keys they wait for (a call in flight)."""
        waiting: Counter[str] = Counter(asker for askers in self.waiting.values() for asker in askers)
        return dict(waiting)

    def stats(self) -> dict[str, int]:
        return {**self.counts, "in_flight": len(self.inflight)}

    def paid(self) -> tuple[dict[str, Any], bool]:
        """What this relay paid (its accounting's snapshot), and whether Ray restarted it during the run (the counts
        of the relay that died are lost with it)."""
        restarted = False
        with contextlib.suppress(ImportError):  # a relay outside Ray (tests/test_executors_relay.py) never restarts
            import ray

            restarted = ray.is_initialized() and ray.get_runtime_context().was_current_actor_reconstructed
        return self.accounting.snapshot(), bool(restarted)

    # -- one call --------------------------------------------------------------------------------------------

    async def _call(self, call: Call) -> None:
        key = call.key
        kept: Completion | None = None
        try:
            outcome, kept = await self._outcome(call)
        except Exception as error:  # noqa: BLE001 - a cache that fails, a judge that cannot open: to the askers
            outcome = error
        if kept is not None:  # in the cache already: remembered (a cache hit), then forgotten in flight
            self.recent[key] = kept
            if len(self.recent) > RECENT:
                self.recent.popitem(last=False)
        del self.inflight[key]
        for i, asker in enumerate(self.waiting.pop(key, [])):  # the first asker's ask started the call
            self._deliver(asker, key, Shared(outcome) if i and isinstance(outcome, (Judgment, Failure)) else outcome)

    async def _outcome(self, call: Call) -> tuple[Outcome, Completion | None]:
        """The call's outcome, and the cache hit a later ask of its key gets (a judgment's)."""
        judge = self._open()
        if self.cache is not None and (hit := cached_completion(await self.cache.get(call.key))) is not None:
            self.counts["cached"] += 1
            return hit, hit
        self.counts["calls"] += 1
        self.accounting.sent(call.task, call.attempt)
        answer = await judge.transport.send(call)
        reply = judge.read(answer, call.params) if isinstance(answer, Reply) else answer
        assert isinstance(reply, (Judgment, Failure))  # the relay's own HTTP transport reads no cache, shares nothing
        if not isinstance(reply, Judgment):
            self._count(call, reply.usage, None, reply.timed_out)
            return reply, None
        self._count(call, reply.usage, reply.fingerprint, False)
        reply, entry = recorded(reply, judge.model)
        if self.cache is not None:
            await self.cache.put(call.key, entry)
        return reply, cached_completion(entry)

    def _count(self, call: Call, usage: Usage | None, fingerprint: str | None, timed_out: bool) -> None:
        """A paid attempt's tokens (``usage``: None for a failure that had none) and, timed out, its prompt as
        abandoned: what the client counts of an attempt it sends itself."""
        if usage is not None:
            self.accounting.usage(call.task, usage.prompt_tokens, usage.completion_tokens, fingerprint)
        if timed_out:
            self.accounting.abandoned(call.task, rough_prompt_tokens(call.messages))

    def _open(self) -> OpenAIJudge:
        """The relay's own judge client (its HTTP pools; never its own cache), and the run's cache."""
        if self.judge is None:
            self.judge = open_judge(self.config.model_copy(update={"cache": False}), base_dir=Path(self.base_dir))
            if self.cache is None and self.cache_owner is not None:
                import ray

                self.cache = RemoteCache(ray.get_actor(self.cache_owner))
        return self.judge

    def _deliver(self, asker: str, key: str, outcome: Outcome) -> None:
        if asker not in self.seen:  # forgotten: it died long ago
            return
        self.outbox.setdefault(asker, []).append((key, outcome))
        if (ready := self.ready.get(asker)) is not None:
            ready.set()

    def _forget_stale(self, now: float) -> None:
        for asker in [a for a, seen in self.seen.items() if now - seen > STALE_S]:
            for table in (self.seen, self.outbox, self.ready):
                table.pop(asker, None)

    async def aclose(self) -> None:
        if self.judge is not None:
            await self.judge.aclose()


class RelayClient:
    """The judge's transport through the relays (``judge.transports.Transport``): asks batched, outcomes collected.
    The relay looks in the run's cache before it calls and caches the judgment it gets (``caches``), and counts the
    calls it pays (``counts``)."""

    caches = counts = True

    def __init__(self, relays: Sequence[Any], asker: str, *, window_s: float = WINDOW_S) -> None:
        self.relays, self.asker, self.window_s = list(relays), asker, window_s
        self._asks: list[list[Call]] = [[] for _ in self.relays]
        self._futures: dict[str, list[asyncio.Future[Outcome]]] = {}
        self._flushing: asyncio.Task[None] | None = None
        self._polls: list[asyncio.Task[None] | None] = [None for _ in self.relays]

    async def send(self, call: Call) -> Judgment | Failure | Completion | Shared:
        key = call.key
        index = route(key, len(self.relays))
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        self._futures.setdefault(key, []).append(future)
        self._asks[index].append(call)
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())
        poll = self._polls[index]
        if poll is None or poll.done():
            self._polls[index] = asyncio.get_running_loop().create_task(self._collect(index))
        outcome = await future
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    async def _flush(self) -> None:
        await asyncio.sleep(self.window_s)
        while any(self._asks):
            batches = [(index, asks) for index, asks in enumerate(self._asks) if asks]
            self._asks = [[] for _ in self.relays]
            sent = await asyncio.gather(*(self.relays[index].submit.remote(self.asker, asks)
                                          for index, asks in batches), return_exceptions=True)
            for (index, asks), result in zip(batches, sent):
                if isinstance(result, BaseException):
                    failure = _lost(index, result)
                    for call in asks:
                        self._resolve(call.key, failure)

    async def _collect(self, index: int) -> None:
        relay = self.relays[index]
        while any(route(key, len(self.relays)) == index for key in self._futures):
            try:
                done = await relay.collect.remote(self.asker, POLL_S)
            except Exception as error:  # noqa: BLE001 - the relay died: this attempt failed, the judge retries
                failure = _lost(index, error)
                for key in [k for k in self._futures if route(k, len(self.relays)) == index]:
                    self._resolve(key, failure)
                return
            for key, outcome in done:
                self._resolve(key, outcome)

    def _resolve(self, key: str, outcome: Outcome) -> None:
        for future in self._futures.pop(key, []):
            if not future.done():
                future.set_result(outcome)

    async def aclose(self) -> None:
        """Nothing to close: the relays outlive the worker."""


def _lost(index: int, error: BaseException) -> Failure:
    log.warning("judge relay %d unreachable: %s", index, str(error).splitlines()[0][:300] if str(error) else error)
    return Failure("retry", f"the judge relay {index} is unreachable ({type(error).__name__})")


def attach(judge: Any, client: RelayClient | None) -> None:
    """Make the relays ``judge``'s transport (a simulated judge is not relayed: it charges nothing)."""
    if client is not None and isinstance(judge, OpenAIJudge) and not judge.simulated:
        judge.transport = client


class RemoteCache:
    """A worker's face of ``CacheOwner`` with the judge cache's async get/put, batched."""

    def __init__(self, owner: Any, *, window_s: float = 0.003) -> None:
        self.owner, self.window_s = owner, window_s
        self._gets: dict[str, list[asyncio.Future[CachedCompletion | None]]] = {}
        self._puts: list[tuple[str, CachedCompletion, asyncio.Future[None]]] = []
        self._flushing: asyncio.Task[None] | None = None

    async def get(self, key: str) -> CachedCompletion | None:
        future: asyncio.Future[CachedCompletion | None] = asyncio.get_running_loop().create_future()
        self._gets.setdefault(key, []).append(future)
        self._schedule()
        return await future

    async def put(self, key: str, entry: CachedCompletion) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._puts.append((key, entry, future))
        self._schedule()
        await future

    def close(self) -> None:
        """The owner closes the cache; a worker only stops using it."""

    def _schedule(self) -> None:
        if self._flushing is None or self._flushing.done():
            self._flushing = asyncio.get_running_loop().create_task(self._flush())

    async def _flush(self) -> None:
        await asyncio.sleep(self.window_s)
        while self._gets or self._puts:
            gets, puts = self._gets, self._puts
            self._gets, self._puts = {}, []
            if puts:
                try:
                    await self.owner.put_many.remote([(key, entry) for key, entry, _ in puts])
                except Exception as error:
                    _fail([future for _, _, future in puts], _cause(error))
                else:
                    for _, _, future in puts:
                        if not future.done():
                            future.set_result(None)
            if gets:
                try:
                    found = await self.owner.get_many.remote(list(gets))
                except Exception as error:
                    _fail([future for waiting in gets.values() for future in waiting], _cause(error))
                else:
                    for entry, waiting in zip(found, gets.values()):
                        for waiter in waiting:
                            if not waiter.done():
                                waiter.set_result(entry)


def _fail(futures: Sequence[asyncio.Future[Any]], error: BaseException) -> None:
    for future in futures:
        if not future.done():
            future.set_exception(error)


def _cause(error: BaseException) -> BaseException:
    """The error raised inside an actor (a ``StorageError`` naming the cache file), not Ray's wrapper."""
    return getattr(error, "cause", None) or error
