"""The judge's own HTTP/1.1 pool against loopback servers that write exactly the bytes each test scripts."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable

import httpx2
import pytest

from open_rag_eval.judge.http11 import Http11Pool, Reply, proxied
from open_rag_eval.judge.replies import error_fields, success_body
from open_rag_eval.transport import ReplyRefused

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


async def _request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    return head + await reader.readexactly(length)


def _reply(status: int, body: bytes, *extra: str) -> bytes:
    head = [f"HTTP/1.1 {status} X", *extra]
    if not any(h.lower().startswith(("content-length", "transfer-encoding")) for h in extra):
        head.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


async def _serve(script: Script, exchange: Callable[[Http11Pool], Awaitable[object]], *, deadline_s: float = 5.0,
                 max_bytes: int = 1_000_000) -> tuple[object, dict[str, int]]:
    seen = {"connections": 0, "requests": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        try:
            await script(reader, writer, seen["connections"])
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = Http11Pool(f"http://127.0.0.1:{port}/v1/chat/completions", deadline_s=deadline_s, max_bytes=max_bytes,
                      headers={"authorization": "Bearer k", "content-type": "application/json"})
    try:
        return await exchange(pool), seen
    finally:
        await pool.aclose()
        server.close()


def test_keep_alive_reuses_one_connection_and_sends_the_headers() -> None:
    heads: list[bytes] = []

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        while True:
            request = await _request(reader)
            heads.append(request)
            writer.write(_reply(200, b'{"ok": ' + str(len(heads)).encode() + b"}", "Content-Type: application/json"))
            await writer.drain()

    async def three(pool: Http11Pool) -> list[Reply]:
        return [await pool.post(b'{"n": 1}') for _ in range(3)]

    replies, seen = asyncio.run(_serve(script, three))
    assert [json.loads(r.content) for r in replies] == [{"ok": 1}, {"ok": 2}, {"ok": 3}]
    assert seen["connections"] == 1
    first = heads[0].decode()
    assert first.startswith("POST /v1/chat/completions HTTP/1.1\r\n") and "authorization: Bearer k" in first
    assert "Accept-Encoding: gzip, deflate" in first and first.endswith('{"n": 1}')


def test_an_idle_connection_the_server_closed_is_replaced_without_a_failure() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> None:
        await _request(reader)
        writer.write(_reply(200, f'"{number}"'.encode()))  # keep-alive advertised, then closed
        await writer.drain()
        if number == 1:
            await asyncio.sleep(0.05)
            writer.transport.abort()  # the reset arrives while the connection is idle in the pool

    async def two(pool: Http11Pool) -> list[bytes]:
        first = await pool.post(b"{}")
        await asyncio.sleep(0.2)
        return [first.content, (await pool.post(b"{}")).content]

    replies, seen = asyncio.run(_serve(script, two))
    assert replies == [b'"1"', b'"2"'] and seen["connections"] == 2


def test_a_reused_connection_closed_before_the_reply_is_tried_once_on_a_new_one() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, number: int) -> None:
        await _request(reader)
        writer.write(_reply(200, f'"{number}"'.encode()))
        await writer.drain()
        if number == 1:
            await _request(reader)  # the second request arrives on the reused connection: closed unanswered

            return
        await asyncio.sleep(1)

    async def two(pool: Http11Pool) -> list[bytes]:
        return [(await pool.post(b"{}")).content, (await pool.post(b"{}")).content]

    replies, seen = asyncio.run(_serve(script, two))
    assert replies == [b'"1"', b'"2"'] and seen["connections"] == 2


def test_a_new_connection_closed_before_the_reply_is_a_protocol_error() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _request(reader)

    with pytest.raises(httpx2.RemoteProtocolError):
        asyncio.run(_serve(script, lambda pool: pool.post(b"{}")))


def test_chunked_gzip_reply_with_interim_100_is_read() -> None:
    body = gzip.compress(b'{"choices": []}')
    chunked = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:5], body[5:])) + b"0\r\n\r\n"

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        writer.write(_reply(200, chunked, "Transfer-Encoding: chunked", "Content-Encoding: gzip"))
        await writer.drain()

    reply, _ = asyncio.run(_serve(script, lambda pool: pool.post(b"{}")))
    assert isinstance(reply, Reply) and reply.content == b'{"choices": []}' and reply.status_code == 200


@pytest.mark.parametrize("extra, body, kind", [
    (("Content-Length: 5000",), b"x" * 5000, "size"),
    (("Transfer-Encoding: chunked",), b"1000\r\n" + b"x" * 4096 + b"\r\n0\r\n\r\n", "size"),
    (("Content-Encoding: gzip",), gzip.compress(b"x" * 100_000), "size"),
    (("Content-Encoding: br",), b"xx", "encoding"),
    (("Location: http://elsewhere.test/v1",), b"", "redirect"),
])
def test_replies_beyond_the_bounds_are_refused(extra: tuple[str, ...], body: bytes, kind: str) -> None:
    status = 302 if kind == "redirect" else 200

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _request(reader)
        writer.write(_reply(status, body, *extra))
        await writer.drain()
        await asyncio.sleep(0.5)

    with pytest.raises(ReplyRefused) as refused:
        asyncio.run(_serve(script, lambda pool: pool.post(b"{}"), max_bytes=1000))
    assert refused.value.kind == kind


def test_a_dripping_reply_is_cut_at_the_total_deadline() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n")
        for _ in range(100):
            writer.write(b"x")
            await writer.drain()
            await asyncio.sleep(0.05)

    with pytest.raises(httpx2.ReadTimeout):
        asyncio.run(_serve(script, lambda pool: pool.post(b"{}"), deadline_s=0.5))


@pytest.mark.parametrize("garbage", [b"SPDY/9 nonsense\r\n\r\n", b"HTTP/1.1 2000 OK\r\n\r\n",
                                     b"HTTP/1.1 200 OK\r\n bad header\r\n\r\n"])
def test_malformed_replies_are_protocol_errors(garbage: bytes) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, _: int) -> None:
        await _request(reader)
        writer.write(garbage)
        await writer.drain()

    with pytest.raises(httpx2.RemoteProtocolError):
        asyncio.run(_serve(script, lambda pool: pool.post(b"{}")))


def test_nothing_listening_is_a_connect_error() -> None:
    async def main() -> None:
        pool = Http11Pool("http://127.0.0.1:9/v1/chat/completions", deadline_s=2, max_bytes=100, headers={})
        await pool.post(b"{}")

    with pytest.raises(httpx2.ConnectError):
        asyncio.run(main())


def test_reply_text_uses_the_declared_charset() -> None:
    reply = Reply(400, {"content-type": "application/json; charset=latin-1"}, "caf\u00e9".encode("latin-1"))
    assert reply.text == "caf\u00e9"
    assert Reply(400, {"content-type": "text/plain; charset=nonsense"}, b"ok").text == "ok"


def test_proxy_variables_send_the_judge_through_httpx2(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert not proxied()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    assert proxied()


@pytest.mark.parametrize("text, expected", [
    ('{"error": {"message": "slow down", "code": "rate_limit", "param": null}}', ("rate_limit", None, "slow down")),
    ('{"error": {"message": "bad", "code": 400, "param": "seed"}}', ("400", "seed", "bad")),
    ('{"message": "plain", "code": null}', (None, None, "plain")),
    ('{"error": "just a string"}', (None, None, "Error code: 503")),
    ("<html>Bad Gateway</html>", (None, None, "Error code: 503")),
    ('{"error": {"type": "x"}}', (None, None, "Error code: 503")),
    ("[" * 100_000, (None, None, "Error code: 503")),
])
def test_error_fields_read_code_param_and_message(text: str, expected: tuple[object, object, str]) -> None:
    assert error_fields(503, text) == expected


def test_success_body_is_json_only_when_the_content_type_says_so() -> None:
    assert success_body("application/json; charset=utf-8", b'{"a": 1}') == {"a": 1}
    assert success_body("text/plain", b'{"a": 1}') == '{"a": 1}'
    assert success_body("", b"") == ""
    with pytest.raises(ValueError):
        success_body("application/json", b"{not json")
