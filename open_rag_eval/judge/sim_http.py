"""A minimal HTTP/1.1 server on asyncio streams (keep-alive, Content-Length and chunked bodies).

Just enough HTTP for an OpenAI-compatible loopback endpoint: one request at a time per connection (no
pipelining), responses always carry ``Content-Length``. The handler returns a ``Response``; returning ``None``
drops the connection without an answer (used to simulate a hung server).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Request", "Response", "json_response", "serve_connection"]

_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
            429: "Too Many Requests", 500: "Internal Server Error"}


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    reader: asyncio.StreamReader


@dataclass
class Response:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"


Handler = Callable[[Request], Awaitable[Response | None]]


def json_response(status: int, payload: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(status, json.dumps(payload, ensure_ascii=False).encode(), dict(headers or {}))


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    while True:
        size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
        if size == 0:
            while (await reader.readline()).strip():  # trailers
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readline()


async def _read_request(reader: asyncio.StreamReader) -> Request | None:
    line = await reader.readline()
    while line in (b"\r\n", b"\n"):
        line = await reader.readline()
    if not line:
        return None
    method, target, _version = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
    return Request(method.upper(), target.split("?", 1)[0], headers, body, reader)


def _encode(response: Response, keep_alive: bool) -> bytes:
    head = [f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Status')}",
            f"Content-Type: {response.content_type}", f"Content-Length: {len(response.body)}",
            "Connection: " + ("keep-alive" if keep_alive else "close")]
    head += [f"{name}: {value}" for name, value in response.headers.items()]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + response.body


async def serve_connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler) -> None:
    """Serve requests on one connection until the client closes it (or asks to)."""
    try:
        while (request := await _read_request(reader)) is not None:
            response = await handler(request)
            if response is None:
                break
            keep_alive = request.headers.get("connection", "").lower() != "close"
            writer.write(_encode(response, keep_alive))
            await writer.drain()
            if not keep_alive:
                break
    except (ConnectionError, asyncio.IncompleteReadError, ValueError):
        pass
    finally:
        writer.close()
