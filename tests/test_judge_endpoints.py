"""The judge's seams for running in many processes: the limiter interface, shared limiter and cache, and several
endpoints of one model (``judge.base_urls``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from open_rag_eval.core.errors import ConfigError, JudgeCallError, JudgeUnavailable
from open_rag_eval.judge.base import Completion, JudgeRequest
from open_rag_eval.judge.client import OpenAIJudge, open_judge
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.limits import Limiter
from open_rag_eval.judge.simulated import SimulatedJudgeServer
from open_rag_eval.config import load_config_text
from tests.openai_server import FAST, Reply, ScriptedServer, ask, outcome, with_judge


def test_the_limiter_interface_halves_the_concurrency_on_overload_and_recovers_on_successes() -> None:
    limiter = Limiter.create(8)
    limiter.overloaded("rate limited")
    assert limiter.concurrency.limit == 4
    for _ in range(4):
        asyncio.run(limiter.succeeded())
    assert limiter.concurrency.limit == 5


def test_base_urls_give_each_endpoint_its_own_concurrency_and_one_cache_name(tmp_path: Path) -> None:
    config = JudgeConfig(model="m", base_urls=["http://127.0.0.1:1/v1", {"url": "http://127.0.0.1:2/v1",
                                                                          "max_concurrency": 3}],
                         max_concurrency=5, cache=False)
    assert config.endpoints() == [("http://127.0.0.1:1/v1", 5), ("http://127.0.0.1:2/v1", 3)]
    judge = open_judge(config, base_dir=tmp_path)
    assert [e.base_url for e in judge.endpoints] == ["http://127.0.0.1:1/v1", "http://127.0.0.1:2/v1"]
    assert [e.limiter.concurrency.maximum for e in judge.endpoints] == [5, 3]
    assert judge.cache_endpoint == "http://127.0.0.1:1/v1"  # replicas of one model share cached replies
    shared = [Limiter.create(1), Limiter.create(2)]
    assert [e.limiter for e in open_judge(config, base_dir=tmp_path, limiters=shared).endpoints] == shared


def test_base_url_and_base_urls_together_are_a_config_error(tmp_path: Path) -> None:
    text = ("input: in.csv\njudge:\n  base_url: http://127.0.0.1:1/v1\n  base_urls: [http://127.0.0.1:2/v1]\n"
            "evaluators: [{type: trec}]\n")
    with pytest.raises(ConfigError, match="base_url or judge.base_urls"):
        load_config_text(text, base_dir=tmp_path)


def test_a_given_limiter_and_cache_replace_the_config_s_own(tmp_path: Path) -> None:
    class Cache:
        def __init__(self) -> None:
            self.put_keys: list[str] = []
            self.closed = False

        async def get(self, key: str) -> None:
            return None

        async def put(self, key: str, entry: object) -> None:
            self.put_keys.append(key)

        def close(self) -> None:
            self.closed = True

    cache, limiter = Cache(), Limiter.create(2)

    async def ask(base_url: str) -> None:
        config = JudgeConfig(model="simulated-judge", base_url=base_url, cache=str(tmp_path / "unused.sqlite"))
        async with open_judge(config, base_dir=tmp_path, limiter=limiter, cache=cache) as judge:
            assert judge.limiter is limiter
            await judge.complete(JudgeRequest.chat("no_answer", "Is this an answer? yes"))

    with SimulatedJudgeServer() as server:
        asyncio.run(ask(server.base_url))
    assert len(cache.put_keys) == 1 and not cache.closed  # the owner of a shared cache closes it
    assert not (tmp_path / "unused.sqlite").exists()
    assert limiter.concurrency.max_in_flight == 1


# -- several endpoints of one model, on real loopback servers ------------------------------------------------


def _spread(urls: list[object], n: int = 40, **overrides: object) -> list[object]:
    config = JudgeConfig(**{"model": "test-model", "base_urls": urls, "cache": False, **FAST, **overrides})

    async def body(judge: OpenAIJudge) -> list[object]:
        return list(await asyncio.gather(*(outcome(judge, ask(f"grade answer {i}")) for i in range(n))))

    return with_judge(config, body)


def test_calls_spread_over_every_endpoint_each_within_its_own_concurrency() -> None:
    with ScriptedServer(default=Reply.ok("2", delay_s=0.02)) as first, \
            ScriptedServer(default=Reply.ok("2", delay_s=0.02)) as second:
        done = _spread([{"url": first.base_url, "max_concurrency": 3},
                        {"url": second.base_url, "max_concurrency": 5}])
    assert all(isinstance(c, Completion) and c.text == "2" for c in done)
    assert len(first.completions) + len(second.completions) == 40  # each judgment asked once
    assert first.completions and second.completions  # both endpoints took calls
    assert 1 <= first.max_in_flight <= 3 and 1 <= second.max_in_flight <= 5  # neither beyond its own concurrency


def test_an_endpoint_answering_500s_loses_no_judgment() -> None:
    with ScriptedServer(default=Reply.error(500, "internal error")) as failing, \
            ScriptedServer(default=Reply.ok("2")) as healthy:
        done = _spread([failing.base_url, healthy.base_url], max_concurrency=4)
    assert all(isinstance(c, Completion) and c.text == "2" for c in done)
    assert failing.completions and len(healthy.completions) == 40  # the healthy one answered every judgment


def test_an_endpoint_that_is_down_loses_no_judgment() -> None:
    with ScriptedServer() as gone:
        down = gone.base_url  # nothing listens there any more
    with ScriptedServer(default=Reply.ok("2")) as healthy:
        done = _spread([down, healthy.base_url], max_concurrency=4)
    assert all(isinstance(c, Completion) and c.text == "2" for c in done)
    assert len(healthy.completions) == 40


def test_an_endpoint_refusing_the_key_is_left_out_and_the_others_answer() -> None:
    with ScriptedServer(default=Reply.error(401, "bad key", code="invalid_api_key")) as refusing, \
            ScriptedServer(default=Reply.ok("2")) as healthy:
        done = _spread([refusing.base_url, healthy.base_url], max_concurrency=2)
    assert all(isinstance(c, Completion) for c in done) and len(healthy.completions) == 40
    assert len(refusing.completions) <= 2  # left out after its first refusals (the calls already sent)


def test_every_endpoint_failing_is_a_missing_judgment_with_its_reason() -> None:
    with ScriptedServer(default=Reply.error(500, "internal error")) as first, \
            ScriptedServer(default=Reply.error(503, "overloaded")) as second:
        done = _spread([first.base_url, second.base_url], n=3, max_retries=3)
    assert all(isinstance(c, JudgeCallError) and "failed after 4 attempts" in str(c) for c in done)
    assert len(first.completions) + len(second.completions) == 3 * 4
    with ScriptedServer(default=Reply.error(401, "bad key", code="invalid_api_key")) as first, \
            ScriptedServer(default=Reply.error(401, "bad key", code="invalid_api_key")) as second:
        done = _spread([first.base_url, second.base_url], n=3)
    assert all(isinstance(c, JudgeUnavailable) for c in done)


def test_a_reply_from_any_endpoint_is_cached_for_all_of_them(tmp_path: Path) -> None:
    cache, failing = str(tmp_path / "cache.sqlite"), [True]

    def first_reply(body: object) -> Reply:
        return Reply.error(500, "internal error") if failing[0] else Reply.ok("2")

    with ScriptedServer(responder=first_reply) as first, ScriptedServer(default=Reply.ok("2")) as second:
        urls = [first.base_url, second.base_url]
        _spread(urls, n=6, cache=cache)  # the first endpoint fails: the second answers everything...
        assert len(second.completions) == 6
        failing[0] = False
        asked = len(first.completions)
        again = _spread(urls, n=6, cache=cache)  # ...cached for both: nothing is asked again
    assert all(isinstance(c, Completion) and c.cached for c in again)
    assert len(first.completions) == asked and len(second.completions) == 6
