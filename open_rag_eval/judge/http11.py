"""The judge's own HTTP/1.1 client for one origin: POSTs over keep-alive connections on asyncio streams.

A judge run sends thousands of small POSTs to one endpoint; a general HTTP client spends several times the CPU of
the exchange itself on per-request objects and on scanning its connection pool. This one keeps a stack of idle
connections (the most recent first) and does nothing per request but write the request and read the reply, with
the same bounds as ``open_rag_eval.transport``: a **total** deadline per request (``httpx2.ReadTimeout``), at most
``max_bytes`` of reply before and after gzip/deflate (``ReplyRefused``), no redirect followed (``ReplyRefused``).
A connection or protocol problem is an ``httpx2.RequestError`` (``ConnectError``, ``RemoteProtocolError``), so
callers classify every failure as they would the ``httpx2`` client's. An idle connection the server has closed is
dropped before use; a reused connection that the server closed before answering is tried once more on a new one.

Used for ``http://`` and ``https://`` endpoints when no proxy is configured in the environment (otherwise, and for
an injected ``httpx2`` client, the judge goes through ``httpx2``).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

import httpx2

from open_rag_eval.core.wire import post_head, proxied
from open_rag_eval.judge import head_start
from open_rag_eval.judge.head_start import Sent
from open_rag_eval.transport import bounded_body, refuse_redirect

__all__ = ["Http11Pool", "Reply", "proxied"]

MAX_HEADER_LINES = 200
MAX_IDLE = 100
_NO_BODY = {204, 304}


@dataclass(frozen=True)
class Reply:
    status_code: int
    headers: Mapping[str, str]  # names in lower case; repeated headers joined with ", "
    content: bytes

    @property
    def text(self) -> str:
        """The body decoded by its declared charset (UTF-8 when none or unknown), bad bytes replaced."""
        charset = "utf-8"
        for part in self.headers.get("content-type", "").split(";")[1:]:
            name, _, value = part.strip().partition("=")
            if name.strip().lower() == "charset" and value.strip():
                charset = value.strip().strip('"')
        try:
            return self.content.decode(charset, "replace")
        except LookupError:
            return self.content.decode("utf-8", "replace")


class _Connection:
    __slots__ = ("reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    def usable(self) -> bool:
        return not (self.reader.at_eof() or self.writer.is_closing())

    def close(self) -> None:
        self.writer.close()


class _Stale(Exception):
    """A reused connection gave no reply at all (the server had closed it)."""


class Http11Pool:
    """POST to ``url`` (one origin) with every request bounded; ``headers`` are sent with each request."""

    def __init__(self, url: str, *, deadline_s: float, max_bytes: int, headers: Mapping[str, str],
                 ssl_context: ssl.SSLContext | None = None) -> None:
        parsed = httpx2.URL(url)
        if parsed.scheme not in ("http", "https"):
            raise ValueError(f"not an http(s) URL: {parsed.scheme}")
        self.url, self.deadline_s, self.max_bytes = parsed, deadline_s, max_bytes
        self._host = parsed.host
        self._port = parsed.port or (443 if parsed.scheme == "https" else 80)
        self._tls = ssl_context or httpx2.create_ssl_context() if parsed.scheme == "https" else None
        own = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
        self._head = self.head(parsed.raw_path, [(b"Host", parsed.netloc), *own])
        self._idle: list[_Connection] = []
        self._closed = False

    async def post(self, body: bytes) -> Reply:
        """POST ``body`` to this pool's URL with its headers."""
        return await self.request(self._head, body)

    async def send(self, target: bytes, headers: Sequence[tuple[bytes, bytes]], body: bytes, *,
                   deadline_s: float | None = None) -> Reply:
        """POST ``body`` to ``target`` (path and query) of this origin with these headers (a request built by the
        ``openai`` SDK, which names its Host); ``deadline_s`` replaces the pool's deadline for this request."""
        return await self.request(self.head(target, headers), body, deadline_s=deadline_s)

    @staticmethod
    def head(target: bytes, headers: Sequence[tuple[bytes, bytes]]) -> bytes:
        """The encoded head of a POST to ``target`` with ``headers`` (``core.wire.post_head``)."""
        return post_head(target, headers)

    async def request(self, head: bytes, body: bytes, *, deadline_s: float | None = None) -> Reply:
        """POST ``body`` with ``head`` (from ``head``), bounded by ``deadline_s`` (else the pool's deadline). A
        request the program's head start has sent already (``judge.head_start``) is read from its connection,
        its deadline counted from when it was sent."""
        request = head + str(len(body)).encode("ascii") + b"\r\n\r\n" + body
        deadline = self.deadline_s if deadline_s is None else deadline_s
        try:
            async with asyncio.timeout(deadline) as bound:
                sent = await self._sent_ahead(request)
                if sent is not None:  # the deadline runs from the sending
                    bound.reschedule(asyncio.get_running_loop().time() + deadline - (time.monotonic() - sent[1]))
                try:
                    return await self._exchange(request, reuse=sent is None, sent=sent)
                except _Stale:
                    return await self._exchange(request, reuse=False)
        except TimeoutError:
            raise httpx2.ReadTimeout(f"no complete reply within {deadline:g}s") from None

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    # -- one exchange ------------------------------------------------------------------------------------------

    async def _exchange(self, request: bytes, *, reuse: bool, sent: Sent | None = None) -> Reply:
        """One exchange of ``request``: on an idle connection (``reuse``) or a new one, or read from the connection
        the head start ``sent`` it on (which, like a reused one, may turn out closed by the server: ``_Stale``)."""
        connection, reused = await self._open(reuse, sent)
        keep = False
        try:
            if sent is None:
                connection.writer.write(request)
            status, headers, keep = await self._head_of(connection.reader, reused)
            refuse_redirect(status, headers.get("location", ""), self.url)
            content = await bounded_body(self._body(connection.reader, status, headers, keep),
                                         headers.get("content-length", ""), headers.get("content-encoding", ""),
                                         self.max_bytes)
            return Reply(status, headers, content)
        except BaseException:
            keep = False
            raise
        finally:
            self._give_back(connection, keep)

    async def _open(self, reuse: bool, sent: Sent | None) -> tuple[_Connection, bool]:
        """The connection of an exchange, and whether the server may have closed it before answering."""
        if sent is not None:
            return await self._adopt(sent[0]), True
        connection = self._take() if reuse else None
        return (connection, True) if connection is not None else (await self._connect(), False)

    async def _sent_ahead(self, request: bytes) -> Sent | None:
        """The connection the head start sent ``request`` on, once written (None: not sent there)."""
        future = head_start.claim(self._host, self._port, request) if self._tls is None else None
        if future is None:
            return None
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            future.add_done_callback(head_start.close_sent)
            raise

    def _take(self) -> _Connection | None:
        while self._idle:
            connection = self._idle.pop()
            if connection.usable():
                return connection
            connection.close()
        return None

    def _give_back(self, connection: _Connection, keep: bool) -> None:
        if keep and not self._closed and len(self._idle) < MAX_IDLE and connection.usable():
            self._idle.append(connection)
        else:
            connection.close()

    async def _connect(self) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(
                self._host, self._port, ssl=self._tls, server_hostname=self._host if self._tls else None,
                limit=2**16)
        except (OSError, ssl.SSLError) as error:
            raise httpx2.ConnectError(f"{type(error).__name__}: {error}") from None
        return _Connection(reader, writer)

    @staticmethod
    async def _adopt(connection: socket.socket) -> _Connection:
        try:
            reader, writer = await asyncio.open_connection(sock=connection, limit=2**16)
        except BaseException as error:
            connection.close()
            if isinstance(error, OSError):
                raise httpx2.ConnectError(f"{type(error).__name__}: {error}") from None
            raise
        return _Connection(reader, writer)

    async def _head_of(self, reader: asyncio.StreamReader, reused: bool) -> tuple[int, dict[str, str], bool]:
        """The status, headers and whether the connection stays open; 1xx interim replies are skipped."""
        while True:
            try:
                line = await reader.readline()
            except (OSError, ValueError) as error:
                raise _protocol(error) from None
            if not line:
                if reused:
                    raise _Stale()
                raise httpx2.RemoteProtocolError("Server disconnected without sending a response.")
            version, status = _status_line(line)
            headers = await _headers(reader)
            if 100 <= status < 200:
                continue
            connection = headers.get("connection", "").lower()
            keep = "close" not in connection and (version == "HTTP/1.1" or "keep-alive" in connection)
            return status, headers, keep

    async def _body(self, reader: asyncio.StreamReader, status: int, headers: Mapping[str, str],
                    keep: bool) -> AsyncIterator[bytes]:
        try:
            if status in _NO_BODY:
                return
            if "chunked" in headers.get("transfer-encoding", "").lower():
                while size := _chunk_size(await reader.readline()):
                    remaining = size
                    while remaining:
                        data = await reader.read(min(remaining, 65536))
                        if not data:
                            raise httpx2.RemoteProtocolError("the reply ended inside a chunk")
                        remaining -= len(data)
                        yield data
                    await reader.readline()
                while (await reader.readline()).strip():  # trailers
                    pass
                return
            declared = headers.get("content-length")
            if declared is not None:
                if not (declared.isascii() and declared.isdigit()):
                    raise httpx2.RemoteProtocolError("invalid Content-Length")
                remaining = int(declared)
                while remaining:
                    data = await reader.read(min(remaining, 65536))
                    if not data:
                        raise httpx2.RemoteProtocolError("the reply ended before its Content-Length")
                    remaining -= len(data)
                    yield data
                return
            if keep:  # neither length nor chunks on a kept connection: the body is empty
                return
            while data := await reader.read(65536):  # delimited by the server closing the connection
                yield data
        except (OSError, ValueError, asyncio.IncompleteReadError) as error:
            raise _protocol(error) from None


def _protocol(error: BaseException) -> httpx2.RemoteProtocolError:
    return httpx2.RemoteProtocolError(f"{type(error).__name__}: {error}")


def _status_line(line: bytes) -> tuple[str, int]:
    parts = line.decode("latin-1").rstrip("\r\n").split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not (parts[1].isascii() and parts[1].isdigit()) \
            or len(parts[1]) != 3:
        raise httpx2.RemoteProtocolError(f"malformed status line {line[:80]!r}")
    return parts[0], int(parts[1])


async def _headers(reader: asyncio.StreamReader) -> dict[str, str]:
    headers: dict[str, str] = {}
    for _ in range(MAX_HEADER_LINES):
        try:
            line = await reader.readline()
        except (OSError, ValueError) as error:
            raise _protocol(error) from None
        if line in (b"\r\n", b"\n"):
            return headers
        if not line:
            raise httpx2.RemoteProtocolError("the reply ended inside its headers")
        name, colon, value = line.decode("latin-1").partition(":")
        if not colon or not name.strip() or name != name.strip():
            raise httpx2.RemoteProtocolError(f"malformed header line {line[:80]!r}")
        key, value = name.lower(), value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    raise httpx2.RemoteProtocolError(f"more than {MAX_HEADER_LINES} header lines")


def _chunk_size(line: bytes) -> int:
    size = line.split(b";", 1)[0].strip()
    try:
        return int(size, 16)
    except ValueError:
        raise httpx2.RemoteProtocolError(f"malformed chunk size {line[:40]!r}") from None
