"""Misbehaving transports, judge and RAG system alike: dripping replies, huge replies, gzip bombs, JSON nested
100,000 deep and redirects to another host.

Through the CLI against loopback servers: a total deadline per request cuts a reply dripped one byte at a time
(then retried like any timeout); replies are bounded in size after decompression (the eval process's peak memory
stays far below the 1 GiB a gzip bomb inflates to); deep JSON is a malformed reply, not a RecursionError; a
redirect is never followed -- the reason names the status and the target, and the other host sees nothing.
Unit tests pin the transport's inflating in bounded steps.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from open_rag_eval.transport import BoundedTransport, ReplyRefused, _Inflater, bounded_client
from tests.hostile_http import BOMB_EXPANDED, deep_json, gzip_bomb
from tests.openai_server import Reply, ScriptedServer, completion_body
from tests.rag_server import RagBehaviour, RagServer

ROOT = Path(__file__).resolve().parent.parent
PEAK_MB = 400  # the eval process's peak RSS with a bounded reply (about 80-150 MB; the inflated bomb is 1 GiB)

pytestmark = pytest.mark.timeout(300)


# the eval process reports its own peak RSS (VmHWM: per address space, so not the forking test process's own)
_PEAK_WRAPPER = """
import atexit, runpy, sys
peak_file = sys.argv.pop(1)
def report():
    with open("/proc/self/status") as status, open(peak_file, "w") as out:
        out.write(next(line.split()[1] for line in status if line.startswith("VmHWM:")))
atexit.register(report)
sys.argv[0] = "open_rag_eval"
runpy.run_module("open_rag_eval", run_name="__main__", alter_sys=True)
"""


def run_cli(config: Path) -> tuple[int, str, int]:
    """Exit code, stderr and the eval process's own peak RSS in MB."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    env.pop("OPENAI_BASE_URL", None)
    peak_file = config.parent / "peak_kb.txt"
    done = subprocess.run([sys.executable, "-c", _PEAK_WRAPPER, str(peak_file), "-q", "eval", "--config", str(config)],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env, cwd=config.parent,
                          timeout=240)
    return done.returncode, done.stderr, int(peak_file.read_text()) // 1024


def judge_config(folder: Path, base_url: str, **judge: Any) -> Path:
    line = {"query_id": "q1", "query": "what is a heat pump?",
            "passages": [{"id": "1", "text": "A heat pump moves heat."}],
            "answer": "It moves heat [1]."}
    (folder / "in.jsonl").write_text(json.dumps(line) + "\n", encoding="utf-8")
    config = {"input": "in.jsonl", "output_dir": "out",
              "judge": {"model": "test-model", "base_url": base_url, "api_key_env": "OPEN_RAG_EVAL_TEST_NO_KEY",
                        "cache": False, "timeout_s": 1, "max_retries": 1, "backoff_base_s": 0.01,
                        "backoff_cap_s": 0.02, **judge},
              "evaluators": [{"type": "trec", "metrics": ["umbrela"], "k_values": [1]}]}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def failure_reasons(out: Path) -> str:
    """Every error text recorded in the run's outputs and results."""
    return "\n".join(p.read_text(encoding="utf-8") for p in (out / "results.json", out / "outputs.jsonl")
                     if p.exists())


def no_traceback(stderr: str) -> None:
    assert "Traceback" not in stderr and "RecursionError" not in stderr, stderr


# -- the judge -------------------------------------------------------------------------------------------------


def test_judge_dripping_reply_is_cut_at_the_total_deadline(tmp_path: Path) -> None:
    # 0.25 s between bytes never trips a per-read timeout of 1 s; the whole reply would take minutes
    with ScriptedServer(default=Reply.dripping(0.25)) as server:
        code, stderr, _ = run_cli(judge_config(tmp_path, server.base_url, outage_after_failures=1))
    no_traceback(stderr)
    assert code == 4, stderr
    assert "timed out after 1s" in stderr
    assert len(server.completions) == 2  # the first attempt and its one retry, each cut off


def test_judge_reply_larger_than_the_bound_is_a_failed_call(tmp_path: Path) -> None:
    huge = Reply(200, completion_body("##final score: 2 " + "x" * 1_500_000))
    with ScriptedServer(default=huge) as server:
        code, stderr, _ = run_cli(judge_config(tmp_path, server.base_url, max_reply_mb=1, timeout_s=30))
    no_traceback(stderr)
    assert code in (0, 6), stderr  # the run finishes; the judgment is a failure with its reason
    assert "judge reply larger than 1 MB (after decompression)" in failure_reasons(tmp_path / "out")
    assert len(server.completions) == 1  # not retried: the same server would send it again


def test_judge_gzip_bomb_costs_at_most_the_bound(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply.encoded(gzip_bomb())) as server:
        code, stderr, peak_mb = run_cli(judge_config(tmp_path, server.base_url, timeout_s=30))
    no_traceback(stderr)
    assert code in (0, 6), stderr
    assert "judge reply larger than 8 MB (after decompression)" in failure_reasons(tmp_path / "out")
    assert peak_mb < PEAK_MB, f"peak RSS {peak_mb} MB"


def test_judge_gzip_reply_within_the_bound_is_read(tmp_path: Path) -> None:
    payload = gzip.compress(json.dumps(completion_body("##final score: 2")).encode())
    with ScriptedServer(default=Reply.encoded(payload)) as server:
        code, stderr, _ = run_cli(judge_config(tmp_path, server.base_url))
    assert code == 0, stderr
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert "umbrela.mean" in json.dumps(results) and "larger than" not in json.dumps(results)
    assert server.completions[0].headers.get("Accept-Encoding") == "gzip, deflate"


def test_judge_deep_json_is_a_malformed_reply(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply(200, deep_json())) as server:
        code, stderr, _ = run_cli(judge_config(tmp_path, server.base_url, timeout_s=30))
    no_traceback(stderr)
    assert code in (0, 6), stderr
    assert "malformed reply from the judge (JSON nested too deeply)" in failure_reasons(tmp_path / "out")


def test_judge_cross_host_redirect_is_not_followed(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply.ok("##final score: 3")) as elsewhere:
        port = elsewhere.base_url.split(":")[2].split("/")[0]
        target = f"http://localhost:{port}/v1/chat/completions"
        with ScriptedServer(default=Reply.redirect(target + "?token=abc")) as server:
            code, stderr, _ = run_cli(judge_config(tmp_path, server.base_url))
    no_traceback(stderr)
    assert code == 4, stderr  # every call would be redirected: the endpoint is configured wrong
    assert f"HTTP 307 redirect to {target}: not followed" in stderr and "token=abc" not in stderr
    assert len(server.completions) == 1 and elsewhere.requests == []


# -- the RAG connector -----------------------------------------------------------------------------------------


def connector_config(folder: Path, url: str, **options: Any) -> Path:
    (folder / "queries.csv").write_text("query_id,query\nbad,what is a heat pump?\ngood,what is solar power?\n",
                                        encoding="utf-8")
    config = {"output_dir": "out",
              "connector": {"type": "http", "queries": "queries.csv",
                            "options": {"url": url, "timeout_s": 1, "retries": 1, "backoff_s": 0,
                                        "body": {"query": "{query}", "query_id": "{query_id}"}, **options}},
              "judge": {"model": "simulated-judge", "simulated": {}, "api_key_env": "OPEN_RAG_EVAL_TEST_NO_KEY",
                        "cache": False},
              "evaluators": [{"type": "trec", "metrics": ["umbrela"], "k_values": [1]}]}
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def saved_outputs(folder: Path) -> dict[str, dict[str, Any]]:
    lines = (folder / "out" / "outputs.jsonl").read_text(encoding="utf-8").splitlines()
    return {row["query_id"]: row for row in map(json.loads, lines)}


def calls_for(server: RagServer, qid: str) -> int:
    return sum(1 for request in server.requests if request["body"].get("query_id") == qid)


@pytest.mark.parametrize("kind, timeout_s, reason, calls", [
    ("drip", 1, "timed out after 1s after 2 attempts", 2),
    ("huge", 30, "reply larger than 32 MB (after decompression)", 1),
    ("gzip_bomb", 30, "reply larger than 32 MB (after decompression)", 1),
    ("deep_json", 30, "malformed reply: the reply's JSON is nested too deeply", 1),
])
def test_connector_misbehaving_system(tmp_path: Path, kind: str, timeout_s: int, reason: str, calls: int) -> None:
    gzip_bomb()  # built before the server answers with it
    behaviour = RagBehaviour(hostile={"bad": kind})
    with RagServer(behaviour) as server:
        code, stderr, peak_mb = run_cli(connector_config(tmp_path, server.url, timeout_s=timeout_s))
    no_traceback(stderr)
    assert code in (0, 6), stderr
    outputs = saved_outputs(tmp_path)
    assert outputs["bad"]["error"] == reason
    assert outputs["good"].get("error") is None and "heat" not in outputs["good"]["answer"]
    assert calls_for(server, "bad") == calls
    assert peak_mb < PEAK_MB, f"peak RSS {peak_mb} MB"


def test_connector_reply_bound_is_configurable(tmp_path: Path) -> None:
    with RagServer(RagBehaviour(hostile={"bad": "padded"})) as server:  # 40 MB, a normal answer in it
        run_cli(connector_config(tmp_path, server.url, max_reply_mb=50, timeout_s=30))
    bad = saved_outputs(tmp_path)["bad"]
    assert bad.get("error") is None and "heat pump" in bad["answer"][0]["text"]  # 40 MB fits in 50


def test_connector_cross_host_redirect_is_not_followed(tmp_path: Path) -> None:
    with RagServer() as elsewhere:
        target = elsewhere.url.replace("127.0.0.1", "localhost")
        with RagServer(RagBehaviour(hostile={"bad": "redirect"}, redirect_to=target)) as server:
            code, stderr, _ = run_cli(connector_config(tmp_path, server.url))
    no_traceback(stderr)
    error = saved_outputs(tmp_path)["bad"]["error"]
    assert error.startswith(f"HTTP 307 redirect to {target}: not followed"), error
    assert calls_for(server, "bad") == 1 and elsewhere.requests == []


# -- the transport ---------------------------------------------------------------------------------------------


def _mock(handler: Any, *, deadline_s: float = 5.0, max_bytes: int = 1000) -> httpx2.AsyncClient:
    inner = httpx2.MockTransport(handler)
    return httpx2.AsyncClient(transport=BoundedTransport(inner, deadline_s=deadline_s, max_bytes=max_bytes))


def _get(client: httpx2.AsyncClient) -> httpx2.Response:
    async def main() -> httpx2.Response:
        async with client:
            return await client.get("http://127.0.0.1:1/x")

    return asyncio.run(main())


@pytest.mark.parametrize("encoding, data", [
    ("gzip", gzip.compress(b"a" * 1000)),
    ("deflate", zlib.compress(b"a" * 1000)),
    ("deflate", zlib.compress(b"a" * 1000)[2:-4]),  # raw deflate, as some servers send
    ("identity", b"a" * 1000),
    ("gzip", gzip.compress(b"a" * 400) + gzip.compress(b"a" * 600)),  # two members
])
def test_transport_inflates_up_to_the_bound(encoding: str, data: bytes) -> None:
    response = _get(_mock(lambda request: httpx2.Response(200, content=data,
                                                          headers={"Content-Encoding": encoding})))
    assert response.content == b"a" * 1000 and "content-encoding" not in response.headers


@pytest.mark.parametrize("headers, data, reason", [
    ({"Content-Encoding": "gzip"}, gzip.compress(b"a" * 1001), "larger than 0.001 MB"),
    ({}, b"a" * 1001, "larger than 0.001 MB"),
    ({"Content-Encoding": "br"}, b"xx", "unsupported content encoding (br)"),
    ({"Content-Encoding": "gzip, gzip"}, gzip.compress(gzip.compress(b"a")), "unsupported content encoding"),
    ({"Content-Encoding": "gzip"}, b"not gzip at all", "not valid gzip data"),
    ({"Location": "https://other.example:8443/v1/x?key=s3cret"}, b"", "redirect to https://other.example:8443/v1/x:"),
])
def test_transport_refuses(headers: dict[str, str], data: bytes, reason: str) -> None:
    status = 308 if "Location" in headers else 200
    with pytest.raises(ReplyRefused, match=reason.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        _get(_mock(lambda request: httpx2.Response(status, stream=httpx2.ByteStream(data), headers=headers)))


def test_inflater_never_holds_more_than_the_bound() -> None:
    inflater = _Inflater("gzip")
    bomb = gzip_bomb()
    out = inflater.feed(bomb[:65536], 10_000_000)
    assert len(out) == 10_000_001 < BOMB_EXPANDED  # stops one byte past the bound, not at 1 GiB


def test_transport_deadline_is_total() -> None:
    async def slow_stream() -> Any:
        for _ in range(100):
            await asyncio.sleep(0.05)
            yield b"x"

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, content=slow_stream())

    with pytest.raises(httpx2.ReadTimeout, match="no complete reply within 0.3s"):
        _get(_mock(handler, deadline_s=0.3))


def test_bounded_client_wraps_proxy_transports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    client = bounded_client(timeout_s=1, max_bytes=10)
    transports = [client._transport, *client._mounts.values()]  # noqa: SLF001 - what the client will use
    assert len(transports) >= 2 and all(isinstance(t, BoundedTransport) for t in transports)
    asyncio.run(client.aclose())
