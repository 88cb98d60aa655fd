"""The judge's seams for running in many processes: the limiter interface, shared limiter and cache, and several
endpoints of one model (``judge.base_urls``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from open_rag_eval.errors import ConfigError
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.judge.client import open_judge
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.limits import Limiter
from open_rag_eval.judge.simulated import SimulatedJudgeServer
from open_rag_eval.config import load_config_text


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
    second = open_judge(config, base_dir=tmp_path, endpoint=1)
    assert second.base_url == "http://127.0.0.1:2/v1"
    assert second.limiter.concurrency.maximum == 3
    assert second.cache_endpoint == "http://127.0.0.1:1/v1"  # replicas of one model share cached replies
    assert open_judge(config, base_dir=tmp_path, endpoint=2).base_url == "http://127.0.0.1:1/v1"


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
