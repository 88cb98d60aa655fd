"""The head start (``judge.head_start``, ``cli.head_start``): a run's first judge requests sent while the program
loads, each asked by the run exactly once -- never sent twice, never lost, never hidden when the run does not ask
it -- and the run's results those of a run without it."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from open_rag_eval.cli.head_start import CSV_COLUMNS, _foreseeable, requests_of
from open_rag_eval.core.wire import chat_body
from open_rag_eval.judge.head_start import HeadStart
from open_rag_eval.judge.http11 import Http11Pool
from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

DEMO = Path(__file__).resolve().parents[1] / "configs" / "data" / "demo.csv"
KEY_ENV = "OPEN_RAG_EVAL_TEST_HEAD_START_KEY"
JUDGE = {"model": "simulated-judge", "api_key_env": KEY_ENV, "max_concurrency": 16, "cache": "cache.sqlite"}


def _config(folder: Path, base_url: str, **judge: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy(DEMO, folder / "data.csv")
    config = {"input": "data.csv", "output_dir": "out", "judge": {**JUDGE, "base_url": base_url, **judge},
              "evaluators": [{"type": "trec", "k_values": [1, 3]}]}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _eval(config: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The program itself (``python -m open_rag_eval``), as a user starts it."""
    env = {**os.environ, KEY_ENV: "head-start-key", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "-v", "eval", "--config", str(config), *extra],
                          env=env, cwd=config.parent, capture_output=True, text=True, timeout=300)


def _calls(folder: Path) -> int:
    manifest = json.loads((folder / "out" / "manifest.json").read_text(encoding="utf-8"))
    return int(manifest["accounting"]["total"]["calls"])


def test_the_program_sends_its_first_requests_while_loading_and_the_run_asks_each_once(tmp_path: Path) -> None:
    """16 requests leave before the run has loaded; the judge (which checks the key) answers each once, the run
    pays what the judge answered and never more than 16 at once, and writes what a run without a head start
    writes (``--limit`` turns it off: the same six queries)."""
    with SimulatedJudgeServer(SimulatedServerConfig(api_key="head-start-key", latency_ms=50)) as server:
        config = _config(tmp_path / "ahead", server.base_url)
        ran = _eval(config)
        assert ran.returncode == 0, ran.stderr
        assert "head start: 16 judge request(s) sent while the program loaded; the run asked 16 of them" in ran.stderr
        assert "not asked by the run" not in ran.stderr
        paid = _calls(tmp_path / "ahead")
        assert server.stats.requests == paid > 16
        assert server.stats.max_in_flight <= 16
        assert {record.status for record in server.stats.log} == {200}
        again = _eval(config)  # the cache holds every reply now: nothing is sent ahead, nothing asked again
        assert again.returncode == 0, again.stderr
        assert "head start" not in again.stderr
        assert server.stats.requests == paid and _calls(tmp_path / "ahead") == 0
    with SimulatedJudgeServer(SimulatedServerConfig(api_key="head-start-key", latency_ms=50)) as server:
        config = _config(tmp_path / "plain", server.base_url)
        ran = _eval(config, "--limit", "100")
        assert ran.returncode == 0, ran.stderr
        assert "head start" not in ran.stderr
    for name in ("results.csv", "summary.csv"):
        assert (tmp_path / "ahead" / "out" / name).read_bytes() == (tmp_path / "plain" / "out" / name).read_bytes()


def test_requests_sent_ahead_that_the_run_never_asks_are_said(tmp_path: Path) -> None:
    """A bad row stops the run at load, after the head start has sent the first pairs: the judge answered them,
    and the run says so instead of hiding the calls."""
    with SimulatedJudgeServer(SimulatedServerConfig(latency_ms=10)) as server:
        config = _config(tmp_path, server.base_url)
        lines = (tmp_path / "data.csv").read_text(encoding="utf-8").splitlines()
        lines[-1] = ",".join(["q9", "", *lines[-1].split(",")[2:]])  # the last row has an empty query
        (tmp_path / "data.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
        ran = _eval(config)
    assert ran.returncode == 3, ran.stderr
    assert "empty query" in ran.stderr
    assert "16 judge request(s) sent while the program loaded were not asked by the run" in ran.stderr


@pytest.mark.parametrize(("change", "foreseeable"), [
    ({}, True),
    ({"judge": {"params": {"seed": 1}}}, False),
    ({"judge": {"requests_per_minute": 60}}, False),
    ({"judge": {"structured": "json_schema"}}, False),
    ({"evaluators": [{"type": "trec", "metrics": ["citation"]}]}, False),
    ({"evaluators": [{"type": "trec", "umbrela": {"prompt": "vectara"}}]}, False),
    ({"evaluators": [{"type": "trec"}, {"type": "golden"}]}, False),
    ({"profile": "vectara"}, False),
    ({"input": "outputs.jsonl"}, False),
])
def test_only_a_run_whose_first_requests_are_known_from_its_file_gets_a_head_start(change: dict[str, Any],
                                                                                   foreseeable: bool) -> None:
    config: dict[str, Any] = {"input": "data.csv", "judge": {**JUDGE, "base_url": "http://127.0.0.1:9/v1"},
                              "evaluators": [{"type": "trec", "k_values": [1, 3]}]}
    for key, value in change.items():
        config[key] = {**config[key], **value} if key == "judge" else value
    assert _foreseeable(config) is foreseeable


def test_a_head_start_request_is_the_request_of_the_runs_umbrela_grader() -> None:
    """The request built here, byte for byte, is the default UMBRELA grader's through the judge's own steps (its
    final params, the transport's body)."""
    from open_rag_eval.evaluators.trec import TrecOptions
    from open_rag_eval.metrics.umbrela import UmbrelaGrader
    from open_rag_eval.core.types import Passage

    request = UmbrelaGrader(TrecOptions().umbrela).request("what is it", Passage(id="[1]", text=" a text "), 0.0, 0)
    body = chat_body(request.params, "m", request.messages)
    built = next(requests_of(iter([("what is it", " a text ")]), "m", b"HEAD:"))
    assert built == b"HEAD:" + str(len(body)).encode() + b"\r\n\r\n" + body


def test_the_judge_defaults_read_are_the_configs() -> None:
    """A default that drifted would send requests the run does not ask, or more at once than it allows."""
    from open_rag_eval.cli.head_start import DEFAULTS
    from open_rag_eval.judge.config import JudgeConfig

    assert DEFAULTS == {name: getattr(JudgeConfig(), name) for name in DEFAULTS}


def test_the_columns_read_are_the_csv_layouts() -> None:
    from open_rag_eval.inputs.csv_layout import CSV_OPTIONAL, CSV_REQUIRED

    assert CSV_COLUMNS == {*CSV_REQUIRED, *CSV_OPTIONAL}


class _Listener:
    """A loopback socket that accepts, keeps each connection open and what it sends; never answers."""

    def __init__(self) -> None:
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.port = self.socket.getsockname()[1]
        self.received: list[bytes] = []
        self.connections: list[socket.socket] = []  # open until the test ends: a closed one would be a reply
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            self.connections.append(connection)
            self.received.append(connection.recv(65536))

    def wait_for(self, count: int) -> None:
        """Until ``count`` requests have come (10 s at most: a busy machine starts threads late)."""
        for _ in range(1000):
            if len(self.received) >= count:
                return
            time.sleep(0.01)
        raise AssertionError(f"{len(self.received)} request(s) received, not {count}")


def test_a_request_asked_before_it_was_sent_is_never_sent_and_one_never_asked_is_closed_and_counted() -> None:
    listener = _Listener()
    head_start = HeadStart("127.0.0.1", listener.port, [b"first", b"second"], connect_s=5)
    assert head_start.claim("127.0.0.1", listener.port, b"first") is None  # the run sends it itself
    head_start.start()
    listener.wait_for(1)
    assert head_start.finish() == (1, 1)
    assert listener.received == [b"second"]
    listener.socket.close()


def test_the_pool_reads_a_sent_request_with_its_deadline_counted_from_the_sending() -> None:
    """A judge that never answers: the deadline (1 s) runs from when the head start wrote the request, so the run,
    asking 0.7 s later, waits about 0.3 s, not 1 s."""
    listener = _Listener()
    pool = Http11Pool(f"http://127.0.0.1:{listener.port}/v1/chat/completions", deadline_s=1.0, max_bytes=1000,
                      headers={})
    body = b"{}"
    request = pool._head + str(len(body)).encode() + b"\r\n\r\n" + body
    head_start = HeadStart("127.0.0.1", listener.port, [request], connect_s=5).start()
    listener.wait_for(1)  # sent (its deadline began before): a slow thread start on a busy machine is not counted

    async def ask() -> float:
        from open_rag_eval.judge import head_start as process

        process._active = head_start
        try:
            await asyncio.sleep(0.7)
            began = time.monotonic()
            with pytest.raises(httpx2.ReadTimeout):
                await pool.post(body)
            return time.monotonic() - began
        finally:
            process._active = None
            await pool.aclose()

    waited = asyncio.run(ask())
    assert waited < 0.65
    assert listener.received == [request]  # sent once, by the head start
    assert head_start.finish() == (1, 0)
    listener.socket.close()


def test_a_judge_the_head_start_cannot_reach_leaves_every_request_to_the_run() -> None:
    """Nothing listens: the head start's first connection fails, it sends nothing more, and the run's own request
    fails as it would have without it (a connection error, which the client retries)."""
    with socket.create_server(("127.0.0.1", 0)) as closed:
        port = closed.getsockname()[1]
    pool = Http11Pool(f"http://127.0.0.1:{port}/v1/chat/completions", deadline_s=5.0, max_bytes=1000, headers={})
    requests = [pool._head + b"2\r\n\r\n{}", pool._head + b"3\r\n\r\n{ }"]
    head_start = HeadStart("127.0.0.1", port, requests, connect_s=5).start()

    async def ask() -> None:
        from open_rag_eval.judge import head_start as process

        process._active = head_start
        try:
            with pytest.raises(httpx2.ConnectError):
                await pool.post(b"{ }")
        finally:
            process._active = None
            await pool.aclose()

    asyncio.run(ask())
    assert head_start.finish() == (0, 0)


LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]\n" for i in range(9))


@pytest.mark.parametrize("text", ["input: [a\n", "\tjudge: 1\n", "- a list\n",
                                  "input: data.csv\njudge: {base_url: 7}\n", LAUGHS])
def test_a_config_the_head_start_cannot_read_leaves_the_run_to_say_what_is_wrong(tmp_path: Path, text: str) -> None:
    from open_rag_eval.cli.head_start import begin
    from open_rag_eval.judge import head_start as process

    (tmp_path / "config.yaml").write_text(text, encoding="utf-8")
    args = argparse.Namespace(whole_process=True, dry_run=False, limit=None, shard=None, executor=None,
                              ray_address=None, track=None, config=tmp_path / "config.yaml")
    begin(args)
    assert process.finish() is None


DRIVER = """
import sys
import open_rag_eval.judge.head_start as head_start
write, seen = head_start.HeadStart._send, []

def first(self, request):
    if not seen:
        heavy = ("pydantic", "asyncio", "httpx2", "numpy", "openai")
        seen.append(sorted(name for name in heavy if name in sys.modules))
        print("loaded at the first request sent ahead:", seen[0], file=sys.stderr)
    return write(self, request)

head_start.HeadStart._send = first
import open_rag_eval.cli as cli
sys.argv = ["open-rag-eval", "-v", "eval", "--config", sys.argv[1]]
cli.main()
"""


def test_the_first_request_leaves_before_pydantic_asyncio_or_any_http_package_has_loaded(tmp_path: Path) -> None:
    """What the head start waits for is the standard library, libyaml and the prompt files: the config schemas,
    the event loop and the HTTP client load while the judge answers."""
    with SimulatedJudgeServer(SimulatedServerConfig(latency_ms=10)) as server:
        config = _config(tmp_path, server.base_url)
        env = {**os.environ, KEY_ENV: "head-start-key", "HF_HUB_OFFLINE": "1"}
        ran = subprocess.run([sys.executable, "-c", DRIVER, str(config)], env=env, cwd=tmp_path, capture_output=True,
                             text=True, timeout=300)
    assert ran.returncode == 0, ran.stderr
    assert "loaded at the first request sent ahead: []" in ran.stderr
    assert "the run asked 16 of them" in ran.stderr


def test_a_server_we_did_not_write_answers_each_request_sent_ahead_once(tmp_path: Path) -> None:
    """The standard library's HTTP server (keep-alive, a thread per connection), answering every UMBRELA request
    with grade 2 after 50 ms: each request it sees is a distinct one, it sees exactly the calls the run counts, and
    never more than 16 at once."""
    from tests.openai_server import Reply, ScriptedServer

    with ScriptedServer(default=Reply.ok("##final score: 2", delay_s=0.05)) as server:
        config = _config(tmp_path, server.base_url)
        text = yaml.safe_load(config.read_text(encoding="utf-8"))
        text["evaluators"] = [{"type": "trec", "k_values": [1, 3], "metrics": ["umbrela"]}]
        config.write_text(yaml.safe_dump(text), encoding="utf-8")
        ran = _eval(config)
        bodies = [json.dumps(seen.body, sort_keys=True) for seen in server.requests]
        assert ran.returncode == 0, ran.stderr
        assert "head start: 16 judge request(s) sent while the program loaded; the run asked 16 of them" in ran.stderr
        assert len(bodies) == len(set(bodies)) == _calls(tmp_path) > 16
        assert server.max_in_flight <= 16
