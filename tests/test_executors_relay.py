"""Relays (``executor.relays``) without Ray: one paid call per key however many ask, a reply asked for just after
its call is not paid again, a failure reaches every asker and is not cached, a call outlives its asker, and a judge
whose calls are relayed fails, retries and counts exactly as one that calls itself. A loopback OpenAI server holds
the requests on an event and counts them; the relay is called in this process the way Ray calls an actor."""

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
from open_rag_eval.judge.base import Completion
from open_rag_eval.judge.cache import JudgeCache
from open_rag_eval.judge.client import open_judge
from open_rag_eval.judge.replies import Failure, Judgment
from open_rag_eval.judge.transports import Call
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
        assert first == second and [key for key, _ in first] == [KEY]
        reply = first[0][1]
        assert isinstance(reply, Judgment) and reply.text == "##final score: 2"
        assert len(held.completions) == 1
        assert cache.get_sync(KEY) is not None and cache.get_sync(KEY).text == "##final score: 2"  # type: ignore[union-attr]
        await relay.submit("c", [CALL])  # just after the call completed: from memory, not paid
        assert await relay.collect("c", 60) == [(KEY, reply)]
        assert relay.stats() == {"calls": 1, "joined": 1, "recent": 1, "in_flight": 0}
        fresh = Relay(config(held.base_url), str(tmp_path), cache=cache)  # nothing in memory: the cache has it
        await fresh.submit("d", [CALL])
        [(_, hit)] = await fresh.collect("d", 60)
        assert isinstance(hit, Completion) and hit.cached and hit.text == "##final score: 2"
        assert len(held.completions) == 1 and fresh.stats()["cached"] == 1
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
        assert first == second
        failure = first[0][1]
        assert isinstance(failure, Failure) and failure.kind == "fail" and "bad request" in failure.reason
        assert len(cache) == 0 and not relay.recent
        await relay.submit("c", [CALL])  # a failure is not remembered: asked again, called again
        [(_, again)] = await relay.collect("c", 60)
        assert again == failure and len(server.completions) == 2
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
        await relay.aclose()

    try:
        asyncio.run(scenario())
    finally:
        cache.close()


def test_two_judges_asking_one_request_through_the_relay_pay_one_call(held: Held, tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "cache.sqlite")

    async def scenario() -> list[Any]:
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
        return done

    try:
        done = asyncio.run(scenario())
    finally:
        cache.close()
    assert [c.text for c in done] == ["##final score: 2"] * 2 and len(held.completions) == 1


@pytest.mark.parametrize("script", [
    [Reply.error(500, "overloaded"), Reply.ok("##final score: 1")],
    [Reply.error(429, "slow down", retry_after="0"), Reply.error(503, "busy"), Reply.ok("##final score: 3")],
    [Reply.error(400, "bad request")],
    [Reply.error(500, "down")] * 3,
    [Reply.ok(None)],  # a 200 with no content
], ids=["500-then-ok", "429-503-ok", "400", "500-every-time", "empty"])
def test_a_relayed_judge_fails_retries_and_counts_as_a_direct_one(script: list[Reply], tmp_path: Path) -> None:
    async def one(relayed: bool) -> tuple[Any, dict[str, int], int]:
        with ScriptedServer(script) as server:
            cache = JudgeCache(tmp_path / f"{relayed}.sqlite")
            relay = Relay(config(server.base_url, max_retries=2), str(tmp_path), cache=cache)
            judge = open_judge(config(server.base_url, max_retries=2), base_dir=tmp_path, cache=cache)
            if relayed:
                attach(judge, RelayClient([Handle(relay)], "worker"))
            try:
                got: Any = await judge.complete(ask("grade this"))
                got = got.text
            except JudgeCallError as error:
                got = str(error)
            stats = judge.accounting.task("umbrela")
            counts = {"calls": stats.calls, "retries": stats.retries, "failures": stats.failures}
            await judge.aclose()
            await relay.aclose()
            rows = len(cache)
            cache.close()
            return got, counts, rows + 100 * len(server.completions)

    direct, relayed = asyncio.run(one(False)), asyncio.run(one(True))
    assert relayed == direct
