"""The HTTP transport under the judge client and the HTTP connector: every request within bounds.

``bounded_client(timeout_s, max_bytes)`` is an ``httpx2.AsyncClient`` whose transport

- gives each request a **total** deadline of ``timeout_s`` -- connect, wait and every byte of the reply -- so a server
  that drips one byte a second is cut off like any other timeout (``httpx2.ReadTimeout``; callers retry it as one);
- reads at most ``max_bytes`` of reply, counted **after** decompression: gzip and deflate are inflated here, in
  bounded steps, so a small gzip bomb costs at most the bound (``ReplyRefused``);
- follows no redirect: a 3xx is ``ReplyRefused`` naming the status and where it pointed, so prompts and secret
  headers are never re-sent to another host.

A refused reply is not retried: the same server would send it again.
"""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import AsyncIterable
from typing import Any

import httpx2

from open_rag_eval.core.wire import ACCEPT_ENCODING

__all__ = ["ACCEPT_ENCODING", "BoundedTransport", "ReplyRefused", "bounded_body", "bounded_client", "megabytes",
           "refuse_redirect"]

_DROPPED = {"content-encoding", "content-length", "transfer-encoding"}


class ReplyRefused(Exception):
    """A reply we will not read. ``kind``: "redirect" | "size" | "encoding"."""

    def __init__(self, reason: str, kind: str) -> None:
        super().__init__(reason)
        self.reason, self.kind = reason, kind


def megabytes(size: int) -> str:
    return f"{size / 1_000_000:g} MB"


class _Inflater:
    """zlib in bounded steps: never more than ``budget + 1`` bytes out per call."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._started = False
        self._decoder = self._new(zlib.MAX_WBITS | 32)  # gzip or zlib header, detected

    @staticmethod
    def _new(wbits: int) -> Any:
        return zlib.decompressobj(wbits)

    def feed(self, data: bytes, budget: int) -> bytes:
        out = bytearray()
        while data and len(out) <= budget:
            try:
                out += self._decoder.decompress(data, budget + 1 - len(out))
            except zlib.error:
                if self.encoding == "deflate" and not self._started:  # some servers send raw deflate
                    self._decoder, self._started = self._new(-zlib.MAX_WBITS), True
                    continue
                raise ReplyRefused(f"reply that is not valid {self.encoding} data", "encoding") from None
            self._started = True
            if self._decoder.unconsumed_tail:
                data = self._decoder.unconsumed_tail
            elif self._decoder.eof and self._decoder.unused_data:  # concatenated gzip members
                data, self._decoder = self._decoder.unused_data, self._new(zlib.MAX_WBITS | 32)
            else:
                data = b""
        return bytes(out)


class BoundedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, *, deadline_s: float, max_bytes: int) -> None:
        self.inner, self.deadline_s, self.max_bytes = inner, deadline_s, max_bytes

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING
        try:
            async with asyncio.timeout(self.deadline_s):
                response = await self.inner.handle_async_request(request)
                try:
                    refuse_redirect(response.status_code, response.headers.get("location", ""), request.url)
                    body = await self._read(response)
                finally:
                    await response.aclose()
        except TimeoutError:
            raise httpx2.ReadTimeout(f"no complete reply within {self.deadline_s:g}s", request=request) from None
        headers = [(name, value) for name, value in response.headers.multi_items() if name.lower() not in _DROPPED]
        return httpx2.Response(response.status_code, headers=headers, content=body, extensions=response.extensions)

    async def _read(self, response: httpx2.Response) -> bytes:
        headers = response.headers
        return await bounded_body(response.stream, headers.get("content-length", ""),  # type: ignore[arg-type]
                                  headers.get("content-encoding", ""), self.max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


async def bounded_body(chunks: AsyncIterable[bytes], content_length: str, content_encoding: str, limit: int) -> bytes:
    """A reply's body from its raw chunks: at most ``limit`` bytes read and at most ``limit`` after gzip/deflate
    (``ReplyRefused`` beyond either, or for another encoding)."""
    too_large = ReplyRefused(f"reply larger than {megabytes(limit)} (after decompression)", "size")
    if content_length.isascii() and content_length.isdigit() and int(content_length) > limit:
        raise too_large
    encodings = [e.strip().lower() for e in content_encoding.split(",") if e.strip()]
    encodings = [e for e in encodings if e != "identity"]
    if len(encodings) > 1 or (encodings and encodings[0] not in ("gzip", "x-gzip", "deflate")):
        raise ReplyRefused(f"reply in an unsupported content encoding ({', '.join(encodings)})", "encoding")
    inflater = _Inflater("deflate" if encodings == ["deflate"] else "gzip") if encodings else None
    body, raw = bytearray(), 0
    async for chunk in chunks:
        raw += len(chunk)
        body += inflater.feed(chunk, limit - len(body)) if inflater else chunk
        if raw > limit or len(body) > limit:
            raise too_large
    return bytes(body)


def refuse_redirect(status: int, location: str, url: httpx2.URL) -> None:
    """A 3xx (but 304) is ``ReplyRefused``, naming where it pointed (without credentials or query)."""
    if not 300 <= status < 400 or status == 304:
        return
    try:
        target = url.join(location).copy_with(username=None, password=None, query=None, fragment=None)
        where = f" to {target}"
    except (httpx2.InvalidURL, ValueError, TypeError):
        where = ""
    raise ReplyRefused(f"HTTP {status} redirect{where}: not followed (redirects are never followed; "
                       f"use the final address)", "redirect")


class _BoundedClient(httpx2.AsyncClient):
    """Every transport the client builds -- direct and through proxies from the environment -- is bounded."""

    def __init__(self, *, deadline_s: float, max_bytes: int, **options: Any) -> None:
        self._deadline_s, self._max_bytes = deadline_s, max_bytes
        super().__init__(**options)

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return BoundedTransport(super()._init_transport(*args, **kwargs), deadline_s=self._deadline_s,
                                max_bytes=self._max_bytes)

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return BoundedTransport(super()._init_proxy_transport(*args, **kwargs), deadline_s=self._deadline_s,
                                max_bytes=self._max_bytes)


def bounded_client(*, timeout_s: float, max_bytes: int, **options: Any) -> httpx2.AsyncClient:
    """An ``httpx2.AsyncClient`` whose every request is bounded (see the module doc); ``options`` go to the client."""
    options.setdefault("limits", httpx2.Limits(max_connections=1000, max_keepalive_connections=100))
    return _BoundedClient(deadline_s=timeout_s, max_bytes=max_bytes, timeout=timeout_s, follow_redirects=False,
                          **options)
