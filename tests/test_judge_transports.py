"""The SDK transport over the keep-alive pool: every call goes out as the request the ``openai`` SDK builds for it.

The request of an endpoint and deadline is built once and each call sends it with its own body; a raw loopback
server records the bytes of every request, and each must equal what the SDK builds for that very call (Azure:
path, query, every header, the body; a plain endpoint: the same less the SDK's ``x-stainless-*`` diagnostic
headers, built without importing the SDK), whatever the order of calls and deadlines."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap

import pytest

from open_rag_eval.judge.http11 import Http11Pool, Reply
from open_rag_eval.judge.transports import Call, SdkTransport, Target, read_deadline

KEY = "sk-transport-test-0417"
OK = b'{"choices":[{"message":{"role":"assistant","content":"2"},"finish_reason":"stop"}]}'


async def _recorded(server_requests: list[bytes], reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:"))
            server_requests.append(head + await reader.readexactly(length))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                         + str(len(OK)).encode() + b"\r\n\r\n" + OK)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _parsed(raw: bytes) -> tuple[bytes, list[tuple[bytes, bytes]], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    start, *lines = head.split(b"\r\n")
    headers = [(name.lower(), value.strip()) for name, _, value in (line.partition(b":") for line in lines)]
    return start, sorted(headers), body


def _calls() -> list[Call]:
    one = Call("k1", "umbrela", (("user", "grade passage A"),), {"temperature": 0.0, "max_tokens": 64})
    two = Call("k2", "support", (("system", "be strict"), ("user", "Ünïcode passage B")), {"temperature": 0.0})
    return [one, two, Call("k3", "umbrela", one.messages, one.params, deadline_s=7.5),
            Call("k4", "x", two.messages, {})]


@pytest.mark.parametrize("azure", [False, True])
def test_every_call_sends_the_request_the_sdk_builds_for_that_call(azure: bool) -> None:
    seen: list[bytes] = []

    async def main() -> list[tuple[Call, bytes]]:
        server = await asyncio.start_server(lambda r, w: _recorded(seen, r, w), "127.0.0.1", 0)
        origin = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        target = Target(origin, KEY, "2024-10-21", "judge-dep") if azure else Target(origin + "/v1", KEY)
        transport = SdkTransport([target], model="gpt-4o-mini", timeout_s=30.0, max_reply_bytes=1 << 20)
        try:
            sent = []
            for call in _calls():
                answer = await transport.send(call)
                assert isinstance(answer, Reply) and answer.status_code == 200 and answer.content == OK
                expected = await transport.request(call.endpoint, call.deadline_s, transport.body(call))
                raw = b"POST " + expected.url.raw_path + b" HTTP/1.1\r\n"
                raw += b"\r\n".join(name + b": " + value for name, value in expected.headers.raw)
                sent.append((call, raw + b"\r\n\r\n" + expected.content))
            return sent
        finally:
            await transport.aclose()
            server.close()

    expected = asyncio.run(main())
    assert len(seen) == 4
    for (call, built), wire in zip(expected, seen):
        start, headers, body = _parsed(wire)
        want_start, want_headers, want_body = _parsed(built)
        assert start == want_start and body == want_body
        if not azure:  # a plain endpoint: the SDK's request less its diagnostic headers
            assert any(name.startswith(b"x-stainless-") for name, _ in want_headers)
            want_headers = [h for h in want_headers if not h[0].startswith(b"x-stainless-")]
        assert [h for h in headers if h[0] != b"accept-encoding"] == want_headers  # only the pool's own added
        assert (b"accept-encoding", b"gzip, deflate") in headers
        if azure:
            timeout = b"7.5" if call.deadline_s else b"30.0"
            assert (b"x-stainless-read-timeout", timeout) in headers  # the template of the call's own deadline
    start, headers, body = _parsed(seen[1])
    if azure:
        assert start == b"POST /openai/deployments/judge-dep/chat/completions?api-version=2024-10-21 HTTP/1.1"
        assert (b"api-key", KEY.encode()) in headers and not any(name == b"authorization" for name, _ in headers)
    else:
        assert start == b"POST /v1/chat/completions HTTP/1.1"
        assert (b"authorization", b"Bearer " + KEY.encode()) in headers
    assert body == ('{"temperature":0.0,"model":"gpt-4o-mini","messages":[{"role":"system","content":"be strict"},'
                    '{"role":"user","content":"Ünïcode passage B"}]}').encode()


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1/", "https://api.example.com/v1",
                                      "http://judge:80/a/b", "http://judge"])
@pytest.mark.parametrize("deadline_s", [None, 7.5])
def test_the_plain_head_is_the_sdks_request_less_its_diagnostic_headers(base_url: str, deadline_s: float | None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("OPENAI_")]:
        monkeypatch.delenv(name)
    transport = SdkTransport([Target(base_url, KEY)], model="m", timeout_s=30.0, max_reply_bytes=1 << 20)

    async def main() -> None:
        pooled = transport._pooled()
        assert pooled is not None
        plain = transport.plain_head(0, deadline_s, pooled)
        built = await transport.request(0, deadline_s, b"")
        kept = [(name, value) for name, value in built.headers.raw if not name.startswith(b"x-stainless-")]
        assert len(kept) < len(built.headers.raw)  # the SDK does send diagnostic headers
        assert plain is not None and plain.head == Http11Pool.head(built.url.raw_path, kept)
        assert plain.deadline_s == read_deadline(built) and plain.pool is pooled.pool(built.url)
        await transport.aclose()

    asyncio.run(main())


def test_no_plain_head_where_the_sdks_request_could_differ_in_more(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in os.environ if name.startswith("OPENAI_")]:
        monkeypatch.delenv(name)
    targets = [Target("http://judge/v1", KEY), Target("http://judge", KEY, "2024-10-21", "dep"),
               Target("http://judge/v1?tenant=a", KEY), Target("http://judge/v1", "")]
    transport = SdkTransport(targets, model="m", timeout_s=30.0, max_reply_bytes=1 << 20)
    pooled = transport._pooled()
    assert pooled is not None
    assert [transport.plain_head(i, None, pooled) is not None for i in range(4)] == [True, False, False, False]
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")  # the SDK would send it as OpenAI-Organization
    assert transport.plain_head(0, None, pooled) is None
    monkeypatch.setenv("OPENAI_API_KEY", "sk-other")
    monkeypatch.delenv("OPENAI_ORG_ID")
    assert transport.plain_head(0, None, pooled) is not None  # a key given to the SDK: the environment's is unread


FRESH = """
import asyncio, json, sys
from open_rag_eval.judge.transports import Call, SdkTransport, Target
OK = b'{"choices":[{"message":{"role":"assistant","content":"2"},"finish_reason":"stop"}]}'
seen = []

async def serve(reader, writer):
    while True:
        try:
            head = await reader.readuntil(b"\\r\\n\\r\\n")
        except asyncio.IncompleteReadError:
            return
        length = next(int(line.split(b":")[1]) for line in head.split(b"\\r\\n")
                      if line.lower().startswith(b"content-length:"))
        await reader.readexactly(length)
        names = sorted(line.split(b":")[0].decode().lower() for line in head.split(b"\\r\\n")[1:])
        seen.append({"sdk_imported": "openai" in sys.modules, "headers": names})
        writer.write(b"HTTP/1.1 200 OK\\r\\nContent-Length: " + str(len(OK)).encode() + b"\\r\\n\\r\\n" + OK)
        await writer.drain()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = "http://127.0.0.1:%d/v1" % server.sockets[0].getsockname()[1]
    transport = SdkTransport([Target(url, "sk-fresh")], model="m", timeout_s=30.0, max_reply_bytes=1 << 20)
    call = Call("k", "umbrela", (("user", "grade"),), {})
    await transport.send(call)
    await transport.send(Call("k", "umbrela", (("user", "grade"),), {}, deadline_s=7.5))
    await transport.aclose()
    server.close()
    print(json.dumps(seen))

asyncio.run(main())
"""


@pytest.mark.parametrize("org", [None, "org-test"])
def test_a_plain_endpoint_never_imports_the_sdk(org: str | None) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("OPENAI_")}
    if org is not None:
        env["OPENAI_ORG_ID"] = org  # a header only the SDK knows: every request is the SDK's
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(FRESH)], env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    first, second = json.loads(done.stdout)
    if org is None:
        for seen in (first, second):
            assert not seen["sdk_imported"] and not any(h.startswith("x-stainless-") for h in seen["headers"])
        assert [name for name in first["headers"] if name] == ["accept", "accept-encoding", "authorization",
                                                                "content-length", "content-type", "host", "user-agent"]
    else:
        assert first["sdk_imported"] and "x-stainless-lang" in first["headers"]
        assert "openai-organization" in first["headers"] and first == second


@pytest.mark.parametrize("deadline_s, expected", [(None, 5.0), (7.5, 7.5)])
def test_every_request_carries_the_judges_deadline_never_the_sdks_default(deadline_s: float | None,
                                                                         expected: float) -> None:
    # the SDK takes an http client's timeout of 5 s (httpx's default) for "none given" and builds the request with
    # its own default (600 s), which the pool took as the total deadline: with timeout_s: 5 a dripping judge held
    # every attempt for minutes. The pool's deadline is ours
    transport = SdkTransport([Target("http://127.0.0.1:9/v1", KEY)], model="m", timeout_s=5.0,
                             max_reply_bytes=1 << 20)

    async def main() -> None:
        assert read_deadline(await transport.request(0, deadline_s, b"")) == expected
        await transport.aclose()

    asyncio.run(main())
