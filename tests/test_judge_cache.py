"""The SQLite judge cache: keys, entries, and sharing across processes (real subprocesses, real server)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from open_rag_eval.judge.cache import CachedCompletion, JudgeCache, cache_key
from tests.openai_server import Reply, ScriptedServer, ask, config, with_judge

KEY_FIELDS = {"base_url": "http://h/v1", "model": "m", "messages": (("user", "q"),),
              "params": {"temperature": 0}, "prompt_version": "v1", "sample": 0}

CHILD = """
import asyncio, json, sys
from pathlib import Path
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.judge.client import open_judge
from open_rag_eval.judge.config import JudgeConfig

async def main(base_url: str, cache: str, texts: list[str]) -> dict:
    config = JudgeConfig(model="test-model", base_url=base_url, cache=cache)
    async with open_judge(config, base_dir=Path(".")) as judge:
        done = await asyncio.gather(*(judge.complete(JudgeRequest.chat("umbrela", t)) for t in texts))
        return {"cached": [c.cached for c in done], "texts": [c.text for c in done],
                "accounting": judge.accounting.snapshot()["total"]}

print(json.dumps(asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))))
"""


def test_key_depends_on_every_field_and_nothing_else() -> None:
    base = cache_key(**KEY_FIELDS)
    assert base == cache_key(**{**KEY_FIELDS, "base_url": "http://h/v1/", "params": {"temperature": 0}})
    changes = [{"base_url": "http://other/v1"}, {"model": "m2"}, {"messages": (("system", "q"),)},
               {"params": {"temperature": 1}}, {"params": {"temperature": 0, "response_format": {"type": "json"}}},
               {"prompt_version": "v2"}, {"sample": 1}]
    keys = {cache_key(**{**KEY_FIELDS, **change}) for change in changes}
    assert len(keys) == len(changes) and base not in keys
    assert len(base) == 64


def test_entries_round_trip(tmp_path: Path) -> None:
    cache = JudgeCache(tmp_path / "deep" / "cache.sqlite")
    entry = CachedCompletion("<think>x</think>2", 11, 3, "fp_1", "m", 1_700_000_000.5)
    cache.put_sync("k", entry)
    assert cache.get_sync("k") == entry and cache.get_sync("other") is None and len(cache) == 1
    cache.close()
    reopened = JudgeCache(tmp_path / "deep" / "cache.sqlite")
    assert reopened.get_sync("k") == entry
    assert reopened._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    reopened.close()


def _child(base_url: str, cache: Path, *texts: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, base_url, str(cache), *texts],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _result(process: subprocess.Popen[str]) -> dict:
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return json.loads(out)


def test_cache_hit_across_processes(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    with ScriptedServer([Reply.ok("first answer")]) as server:
        here = with_judge(config(server.base_url, cache=str(cache)), lambda judge: judge.complete(ask("shared")))
        there = _result(_child(server.base_url, cache, "shared"))
    assert (here.text, here.cached) == ("first answer", False)
    assert there["cached"] == [True] and there["texts"] == ["first answer"]
    assert (there["accounting"]["calls"], there["accounting"]["cache_hits"]) == (0, 1)
    assert len(server.completions) == 1


@pytest.mark.slow  # two interpreter start-ups
def test_two_processes_write_one_cache_at_once(tmp_path: Path) -> None:
    cache = tmp_path / "cache.sqlite"
    first = [f"q{i}" for i in range(20)]
    second = [f"q{i}" for i in range(10, 30)]
    with ScriptedServer(default=Reply.ok("1", delay_s=0.01)) as server:
        results = [_result(p) for p in [_child(server.base_url, cache, *first),
                                         _child(server.base_url, cache, *second)]]
    assert all(r["texts"] == ["1"] * 20 for r in results)
    assert len(JudgeCache(cache)) == 30
    assert len(server.completions) == sum(r["accounting"]["calls"] for r in results)


def test_writes_go_through_one_writer_thread_in_order_and_close_waits_for_them(tmp_path: Path) -> None:
    """200 writes given at once: one thread writes them (the loop's shared pool started up to six), the last
    value of a key given twice is the one kept, and every write is in the file once ``close`` returns."""
    import asyncio
    import threading

    cache = JudgeCache(tmp_path / "cache.sqlite")
    entry = CachedCompletion("text", 3, 1, None, "m", 0.0)

    async def write() -> set[str]:
        await asyncio.gather(*(cache.put(f"k{i}", entry) for i in range(200)))
        names = {thread.name for thread in threading.enumerate() if thread.name.startswith(("judge-cache",
                                                                                              "asyncio_"))}
        await cache.put("k0", CachedCompletion("last", 3, 1, None, "m", 0.0))
        return names

    threads = asyncio.run(write())
    cache.close()
    assert threads == {"judge-cache_0"}
    reopened = JudgeCache(tmp_path / "cache.sqlite")
    assert len(reopened) == 200
    hit = reopened.get_sync("k0")
    assert hit is not None and hit.text == "last"
    reopened.close()
