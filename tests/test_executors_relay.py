"""Relays (``executor.relays``) without Ray: one paid call per key however many ask, a reply asked for just after
its call is not paid again, a failure reaches every asker and is not cached, a call outlives its asker, and a judge
whose calls are relayed fails, retries and counts exactly as one that calls itself. What is paid is counted once,
by the relay that paid it (its ``accounting``): an asker counts a call another asker started as deduplicated and an
answer from the cache or the relay's memory as a cache hit. A loopback OpenAI server holds the requests on an event
and counts them; the relay is called in this process the way Ray calls an actor."""

from __future__ import annotations

import asyncio
import hashlib
import threading
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.executors.relay import Relay, RelayClient, attach
from open_rag_eval.judge.accounting import Accounting, TaskStats
from open_rag_eval.judge.base import Completion
from open_rag_eval.judge.cache import JudgeCache, MemoryCache
from open_rag_eval.judge.client import open_judge
from open_rag_eval.judge.replies import Failure, Judgment
from open_rag_eval.judge.transports import Call, Shared
from tests.openai_server import Reply, ScriptedServer, ask, config

KEY = hashlib.sha256(b"one request").hexdigest()
CALL = Call(KEY, "umbrela", (("user", "grade this"),), {})


class Held(ScriptedServer):
    """Answers ``reply`` once ``gate`` is set (every request waits for it)."""

    def __init__(self, reply: Reply) -> None:
        self.gate = threading.Event()
        super().__init__(responder=self._hold)
        self.reply = reply

    def _hold(self, body: dict[str, Any]) -> Reply:
        self.gate.wait(60)
        return self.reply


@pytest.fixture
def held() -> Iterator[Held]:
    with Held(Reply.ok("##final score: 2")) as server:
        yield server


async def until(condition: Callable[[], bool]) -> None:
    """Wait for ``condition`` (a state of the system, not a time)."""
    for _ in range(60_000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition was never met")


def counted(stats: TaskStats) -> tuple[int, ...]:
    """calls, retries, cache hits, deduplicated, failures, prompt and completion tokens."""
    return (stats.calls, stats.retries, stats.cache_hits, stats.deduplicated, stats.failures, stats.prompt_tokens,
            stats.completion_tokens)


def merged(*accountings: Accounting) -> TaskStats:
    """The run's totals: every process's (and relay's) accounting added, as the Ray driver adds them."""
    total = Accounting("test-model")
    for accounting in accountings:
        total.absorb(accounting.snapshot())
    return total.total()


class Handle:
    """A relay in this process, called the way a Ray actor handle is (``handle.method.remote(...)``)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.relay, name)
        return types.SimpleNamespace(remote=lambda *args: asyncio.ensure_future(method(*args)))


def test_two_asks_for_one_key_pay_one_call_and_an_ask_after_it_pays_none(held: Held, tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "cache.sqlite")

    async def scenario() -> None:
        relay = Relay(config(held.base_url), str(tmp_path), cache=cache)
        await relay.submit("a", [CALL])
        await until(lambda: held.in_flight == 1)  # the call is at the endpoint
        await relay.submit("b", [CALL])  # the same key, asked by another worker
        assert relay.pending() == {"a": 1, "b": 1}
        held.gate.set()
        first, second = await relay.collect("a", 60), await relay.collect("b", 60)
        [(key, reply)] = first
        assert key == KEY and isinstance(reply, Judgment) and reply.text == "##final score: 2"
        assert second == [(KEY, Shared(reply))]  # b's ask joined the call a's ask started: b counts it as shared
        assert len(held.completions) == 1
        stored = cache.get_sync(KEY)
        assert stored is not None and stored.text == "##final score: 2"
        await relay.submit("c", [CALL])  # just after the call completed: from memory, not paid, a cache hit
        assert await relay.collect("c", 60) == [(KEY, Completion("##final score: 2", True, 10, 2, "fp_test"))]
        assert relay.stats() == {"calls": 1, "joined": 1, "recent": 1, "in_flight": 0}
        # the one call paid, counted where it was paid: a call, its tokens (the server's 10 + 2), no retry
        assert counted(relay.accounting.total()) == (1, 0, 0, 0, 0, 10, 2)
        assert relay.paid() == (relay.accounting.snapshot(), False)
        fresh = Relay(config(held.base_url), str(tmp_path), cache=cache)  # nothing in memory: the cache has it
        await fresh.submit("d", [CALL])
        [(_, hit)] = await fresh.collect("d", 60)
        assert isinstance(hit, Completion) and hit.cached and hit.text == "##final score: 2"
        assert len(held.completions) == 1 and fresh.stats()["cached"] == 1
        assert counted(fresh.accounting.total()) == (0, 0, 0, 0, 0, 0, 0)  # it paid nothing
        await relay.aclose()
        await fresh.aclose()

    try:
        asyncio.run(scenario())
    finally:
        cache.close()


def test_a_failed_call_reaches_every_asker_and_nothing_is_cached(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "cache.sqlite")

    async def scenario(server: Held) -> None:
        relay = Relay(config(server.base_url), str(tmp_path), cache=cache)
        await relay.submit("a", [CALL])
        await until(lambda: server.in_flight == 1)
        await relay.submit("b", [CALL])
        server.gate.set()
        first, second = await relay.collect("a", 60), await relay.collect("b", 60)
        [(_, failure)] = first
        assert second == [(KEY, Shared(failure))]
        assert isinstance(failure, Failure) and failure.kind == "fail" and "bad request" in failure.reason
        assert len(cache) == 0 and not relay.recent
        await relay.submit("c", [CALL])  # a failure is not remembered: asked again, called again
        [(_, again)] = await relay.collect("c", 60)
        assert again == failure and len(server.completions) == 2
        assert counted(relay.accounting.total()) == (2, 0, 0, 0, 0, 0, 0)  # two calls paid, no tokens reported
        await relay.aclose()

    with Held(Reply.error(400, "bad request")) as server:
        try:
            asyncio.run(scenario(server))
        finally:
            cache.close()


def test_a_call_whose_asker_went_away_is_still_cached(held: Held, tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "cache.sqlite")

    async def scenario() -> None:
        relay = Relay(config(held.base_url), str(tmp_path), cache=cache)
        client = RelayClient([Handle(relay)], "worker")
        asking = asyncio.ensure_future(client.send(CALL))
        await until(lambda: held.in_flight == 1)
        asking.cancel()  # the asking worker is gone
        await asyncio.gather(asking, return_exceptions=True)
        held.gate.set()
        await until(lambda: relay.stats()["in_flight"] == 0)
        assert cache.get_sync(KEY) is not None and len(held.completions) == 1
        assert counted(relay.accounting.total()) == (1, 0, 0, 0, 0, 10, 2)  # paid, and counted, once
        await relay.aclose()

    try:
        asyncio.run(scenario())
    finally:
        cache.close()


def test_two_judges_asking_one_request_through_the_relay_pay_one_call(held: Held, tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "cache.sqlite")

    async def scenario() -> tuple[list[Any], list[Accounting]]:
        relay = Relay(config(held.base_url), str(tmp_path), cache=cache)
        judges = [open_judge(config(held.base_url), base_dir=tmp_path, cache=cache) for _ in range(2)]
        for i, judge in enumerate(judges):
            attach(judge, RelayClient([Handle(relay)], f"worker-{i}"))
        first = asyncio.ensure_future(judges[0].complete(ask("grade this")))
        await until(lambda: held.in_flight == 1)
        second = asyncio.ensure_future(judges[1].complete(ask("grade this")))
        await until(lambda: relay.stats().get("joined") == 1)
        held.gate.set()
        done = await asyncio.gather(first, second)
        for judge in judges:
            await judge.aclose()
        await relay.aclose()
        return done, [relay.accounting, *(judge.accounting for judge in judges)]

    try:
        done, accountings = asyncio.run(scenario())
    finally:
        cache.close()
    assert [c.text for c in done] == ["##final score: 2"] * 2 and len(held.completions) == 1
    relayed, first, second = accountings
    assert counted(relayed.total()) == (1, 0, 0, 0, 0, 10, 2)  # the call and its tokens, where they were paid
    assert counted(first.total()) == (0, 0, 0, 0, 0, 0, 0)  # its ask started the call: counted by the relay
    assert counted(second.total()) == (0, 0, 0, 1, 0, 0, 0)  # joined to the first's call
    # the run's totals equal a single process's that asked the same request twice at once (one call, one repeat)
    assert counted(merged(*accountings)) == (1, 0, 0, 1, 0, 10, 2)


def test_a_dead_workers_call_is_counted_once_when_its_retried_shard_joins_it(held: Held, tmp_path: Path) -> None:
    """The asker dies with its call in flight (its accounting with it); its shard's second run asks again and joins
    the call: the run counts one paid call with its tokens, and the repeat as deduplicated."""
    cache = JudgeCache(tmp_path / "cache.sqlite")

    async def scenario() -> tuple[Any, Accounting, Accounting]:
        relay = Relay(config(held.base_url), str(tmp_path), cache=cache)
        dead = open_judge(config(held.base_url), base_dir=tmp_path, cache=cache)
        attach(dead, RelayClient([Handle(relay)], "worker-0:1"))
        asking = asyncio.ensure_future(dead.complete(ask("grade this")))
        await until(lambda: held.in_flight == 1)
        asking.cancel()  # the worker is killed: what it counted is lost with it
        await asyncio.gather(asking, return_exceptions=True)
        again = open_judge(config(held.base_url), base_dir=tmp_path, cache=cache)
        attach(again, RelayClient([Handle(relay)], "worker-0:2"))
        second = asyncio.ensure_future(again.complete(ask("grade this")))
        await until(lambda: relay.stats().get("joined") == 1)
        held.gate.set()
        done = await second
        await dead.aclose()
        await again.aclose()
        await relay.aclose()
        return done, relay.accounting, again.accounting

    try:
        done, relayed, again = asyncio.run(scenario())
    finally:
        cache.close()
    assert done.text == "##final score: 2" and len(held.completions) == 1
    assert counted(merged(relayed, again)) == (1, 0, 0, 1, 0, 10, 2)


def test_an_answer_the_relay_finds_in_the_cache_is_a_cache_hit_not_a_call(tmp_path: Path) -> None:
    """The worker looked in the cache before another's reply was recorded; the relay finds it there: nothing is
    paid, and the worker counts a cache hit (not a call as well)."""
    cache = JudgeCache(tmp_path / "cache.sqlite")

    async def scenario(server: ScriptedServer) -> tuple[Completion, Accounting, Accounting]:
        writer = open_judge(config(server.base_url), base_dir=tmp_path, cache=cache)
        await writer.complete(ask("grade this"))  # recorded in the run's cache
        await writer.aclose()
        relay = Relay(config(server.base_url), str(tmp_path), cache=cache)
        late = open_judge(config(server.base_url), base_dir=tmp_path, cache=MemoryCache())  # looked before: a miss
        attach(late, RelayClient([Handle(relay)], "worker"))
        done = await late.complete(ask("grade this"))
        await late.aclose()
        await relay.aclose()
        return done, relay.accounting, late.accounting

    with ScriptedServer([Reply.ok("##final score: 2")]) as server:
        try:
            done, relayed, late = asyncio.run(scenario(server))
        finally:
            cache.close()
        assert done.text == "##final score: 2" and done.cached and len(server.completions) == 1
    assert counted(relayed.total()) == (0, 0, 0, 0, 0, 0, 0)
    assert counted(late.total()) == (0, 0, 1, 0, 0, 0, 0)


@pytest.mark.parametrize(("script", "settings"), [
    ([Reply.error(500, "overloaded"), Reply.ok("##final score: 1")], {}),
    ([Reply.error(429, "slow down", retry_after="0"), Reply.error(503, "busy"), Reply.ok("##final score: 3")], {}),
    ([Reply.error(400, "bad request")], {}),
    ([Reply.error(500, "down")] * 3, {}),
    ([Reply.ok(None)], {}),  # a 200 with no content (its tokens used all the same)
    ([Reply.shaped({"role": "assistant", "content": "##final score: 2"}, usage=None)], {}),  # usage unknown
    # the first attempt outlives its deadline (its prompt abandoned), the second is answered at once
    ([Reply.ok("##final score: 2", delay_s=6.0), Reply.ok("##final score: 1")], {"timeout_s": 2.0}),
], ids=["500-then-ok", "429-503-ok", "400", "500-every-time", "empty", "no-usage", "timeout-then-ok"])
def test_a_relayed_judge_fails_retries_and_counts_as_a_direct_one(script: list[Reply], settings: dict[str, Any],
                                                                  tmp_path: Path) -> None:
    """The same outcome, the same calls at the endpoint and the same run's accounting (the judge's and the relay's
    added) as a judge that calls itself: calls, retries, failures, tokens, unknown usage, abandoned prompts."""
    async def one(relayed: bool) -> tuple[Any, dict[str, Any], int]:
        with ScriptedServer(script) as server:
            cache = JudgeCache(tmp_path / f"{relayed}.sqlite")
            relay = Relay(config(server.base_url, max_retries=2, **settings), str(tmp_path), cache=cache)
            judge = open_judge(config(server.base_url, max_retries=2, **settings), base_dir=tmp_path, cache=cache)
            if relayed:
                attach(judge, RelayClient([Handle(relay)], "worker"))
            try:
                got: Any = await judge.complete(ask("grade this"))
                got = got.text
            except JudgeCallError as error:
                got = str(error)
            await judge.aclose()
            await relay.aclose()
            rows = len(cache)
            cache.close()
            if not relayed:
                assert counted(relay.accounting.total()) == (0, 0, 0, 0, 0, 0, 0)
            return got, vars(merged(judge.accounting, relay.accounting)), rows + 100 * len(server.completions)

    direct, relayed = asyncio.run(one(False)), asyncio.run(one(True))
    assert relayed == direct
    assert direct[1]["calls"] == 1  # the request counted once in the run, however many attempts
    if settings:  # the timed-out attempt: retried, its prompt abandoned
        assert (direct[1]["retries"], direct[1]["abandoned"]) == (1, 1) and direct[0] == "##final score: 1"
