"""The SDK transport over the keep-alive pool: every call goes out as the request the ``openai`` SDK builds for it.

The SDK builds the request of an endpoint and deadline once and each call sends it with its own body; a raw
loopback server records the bytes of every request, and each must equal what the SDK builds for that very call
(plain OpenAI and Azure: path, query, every header, the body), whatever the order of calls and deadlines."""

from __future__ import annotations

import asyncio

import pytest

from open_rag_eval.judge.http11 import Reply
from open_rag_eval.judge.transports import Call, SdkTransport, Target

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
    return [one, two, Call("k3", "umbrela", one.messages, one.params, deadline_s=7.5), Call("k4", "x", two.messages, {})]


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
        assert [h for h in headers if h[0] != b"accept-encoding"] == want_headers  # only the pool's own added
        assert (b"accept-encoding", b"gzip, deflate") in headers
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
