"""How one judge request goes out: the one transport interface, and the HTTP transport under the ``openai`` SDK.

The judge client (``judge.client``) owns the policy -- cache, slots, retries, accounting -- and hands each attempt,
a ``Call``, to its ``Transport``. Three implement it:

- ``SdkTransport`` (here): the request the official ``openai`` SDK builds (``AsyncOpenAI``, or
  ``AsyncAzureOpenAI`` for ``judge.azure``: deployment paths, ``api-version``, the ``api-key`` header; for a plain
  endpoint the same request built without importing the SDK, less its diagnostic headers), with SDK retries off,
  sent by the judge's keep-alive HTTP/1.1 pool (``judge.http11``) of ``PooledTransport``, the
  SDK's ``httpx2`` transport, bounded like every request of the project (a total deadline, a bound on the reply's
  size, no redirect followed). The SDK builds the request of an endpoint and deadline once; each call sends it
  with its own body (see ``SdkTransport``). With a proxy in the environment, or an ``httpx2`` client given, the
  SDK builds every request and that client sends it (``open_rag_eval.transport``'s bounded client);
- the record/replay tape (``judge.replay``): answers from a recording, or records what another transport answered;
- the Ray relay (``executors.relay``): asks an actor that makes the call and caches its judgment.

An attempt ends with one ``Answer``: the raw HTTP ``Reply`` (the client reads it with ``judge.replies``), a
``Judgment`` or ``Failure`` already read, a ``Completion`` found in the cache by a transport that caches
(``caches``: the relay puts its judgments into the run's cache itself), or, from a transport that shares calls
between processes, a judgment or failure ``Shared`` with it by the call another process's identical request made.
A transport that ``counts`` accounts for what it pays itself (the relay: each call and retry, their tokens and
abandoned prompts, where the call is made); the client then counts only its requests' fates.
"""

from __future__ import annotations

import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union

import httpx2
from httpx2._client import UseClientDefault
from anyio import EndOfStream as _EndOfStream

from open_rag_eval.core.wire import chat_body, chat_head, sdk_settings, user_agent
from open_rag_eval.judge.base import Completion, Message
from open_rag_eval.judge.http11 import Http11Pool, Reply, proxied
from open_rag_eval.judge.replies import Failure, Judgment
from open_rag_eval.transport import ReplyRefused, bounded_client

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["TRANSPORT_ERRORS", "Answer", "Call", "PooledTransport", "SdkTransport", "Shared", "Target", "Transport",
           "failure_of", "safe_url"]

# what sending may raise; ``failure_of`` turns each into a ``Failure``
TRANSPORT_ERRORS = (httpx2.HTTPError, ssl.SSLError, _EndOfStream, ValueError, ReplyRefused, RecursionError)

_DECODED = {"content-encoding", "content-length", "transfer-encoding"}  # the pool has inflated and joined the body


@dataclass(frozen=True, slots=True)
class Shared:
    """The answer of a call another process's identical request made (a relay joined this ask to it): paid, and
    counted, once, where it was made."""

    answer: Judgment | Failure


Answer = Union[Reply, Judgment, Failure, Completion, Shared]


@dataclass(frozen=True, slots=True)
class Call:
    """One attempt of one judge request."""

    key: str  # the judge cache's key of the request
    task: str
    messages: tuple[Message, ...]
    params: Mapping[str, Any]  # the final sampling params (``OpenAIJudge.final_params``)
    prompt_version: str = ""
    sample: int = 0
    endpoint: int = 0  # the index of the endpoint (``judge.base_urls``) this attempt goes to
    attempt: int = 0  # 0 for the first attempt of the request
    deadline_s: float | None = None  # this attempt's total deadline; None: the transport's own


class Transport(Protocol):
    """Sends one attempt and says what came back; never retries, never sleeps."""

    caches: bool  # puts the judgments it gets into the run's cache itself
    counts: bool  # accounts for the calls it makes (their attempts, tokens and abandoned prompts) itself

    async def send(self, call: Call) -> Answer: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Target:
    """Where and how the SDK sends: one endpoint's base URL, the key, and Azure's deployment and API version."""

    base_url: str
    api_key: str
    azure_api_version: str | None = None
    azure_deployment: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


class PooledTransport(httpx2.AsyncBaseTransport):
    """The SDK's ``httpx2`` transport: each request to the judge's keep-alive pool of its origin (``judge.http11``)."""

    def __init__(self, *, deadline_s: float, max_bytes: int) -> None:
        self.deadline_s, self.max_bytes = deadline_s, max_bytes
        self._pools: dict[tuple[str, str, int | None], Http11Pool] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        reply = await self.pool(request.url).send(request.url.raw_path, request.headers.raw, request.content,
                                                  deadline_s=read_deadline(request))
        headers = [(name, value) for name, value in reply.headers.items() if name not in _DECODED]
        return httpx2.Response(reply.status_code, headers=headers, content=reply.content, request=request)

    def pool(self, url: httpx2.URL) -> Http11Pool:
        """The keep-alive pool of ``url``'s origin."""
        origin = (url.scheme, url.host, url.port)
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = Http11Pool(str(url.copy_with(raw_path=b"/")), deadline_s=self.deadline_s,
                                                    max_bytes=self.max_bytes, headers={})
        return pool

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()


def read_deadline(request: httpx2.Request) -> float | None:
    """The read timeout the SDK gave ``request`` (the pool's total deadline for it), if any."""
    timeout = request.extensions.get("timeout")
    deadline = timeout.get("read") if isinstance(timeout, dict) else None
    return deadline if isinstance(deadline, (int, float)) else None


class _DirectClient(httpx2.AsyncClient):
    """The SDK's ``httpx2`` client with nothing between it and its transport: the request exactly as the SDK built
    it (no client defaults merged in: the SDK sets every header itself), no auth flow, no cookie jar, no redirect
    loop (none is ever followed)."""

    def build_request(self, method: str, url: httpx2.URL | str, *, content: Any = None,  # type: ignore[override]
                      params: Any = None, headers: Any = None, timeout: Any = None, **other: Any) -> httpx2.Request:
        if any(value is not None for value in other.values()):  # data, files, json, cookies: the general path
            return super().build_request(method, url, content=content, params=params, headers=headers,
                                         timeout=timeout, **other)
        limit = self.timeout if timeout is None or isinstance(timeout, UseClientDefault) else httpx2.Timeout(timeout)
        return httpx2.Request(method, url, params=params, content=content, headers=headers,
                              extensions={"timeout": limit.as_dict()})

    async def send(self, request: httpx2.Request, **_: Any) -> httpx2.Response:  # type: ignore[override]
        return await self._transport.handle_async_request(request)


@dataclass(frozen=True, slots=True)
class _Head:
    """The request of a chat completion on one endpoint with one deadline (``SdkTransport.plain_head`` or the SDK's),
    encoded up to its body's length, and the pool that sends it (``Http11Pool.head``)."""

    pool: Http11Pool
    head: bytes
    deadline_s: float | None


class SdkTransport:
    """Every attempt through the ``openai`` SDK, one client per endpoint (see the module docstring).

    Over the keep-alive pool, the SDK builds the request of each endpoint and deadline once -- by its own steps:
    the request options, ``_build_request`` (the URL with Azure's deployment path and ``api-version``, the auth and
    default headers), ``_prepare_request`` -- and every call sends that request with its own body and length: a
    chat completion's request differs from call to call only in its body, which the SDK sends as given. Building
    it anew for each call cost more client CPU than the exchange itself (``bench/perf_bench.py --part cpu``).

    A plain endpoint (not Azure, over the pool, no query in its base URL, a key, no ``OPENAI_*`` setting in the
    environment that the SDK would turn into a header) never imports the SDK: its request is ``plain_head``, the
    SDK's own less its ``x-stainless-*`` diagnostic headers (same method, path, Host, authorization, accept, content
    type and user agent; tests/test_judge_transports.py holds the two together). Importing the SDK costs half a
    second of CPU or more, more than everything else before a run's first request, and a run that imported it
    beside its first requests paid that CPU while its event loop waited for the interpreter lock."""

    caches = counts = False

    def __init__(self, targets: Sequence[Target], *, model: str, timeout_s: float, max_reply_bytes: int,
                 http_client: httpx2.AsyncClient | None = None) -> None:
        self.targets, self.model, self.timeout_s = list(targets), model, timeout_s
        self.max_reply_bytes = max_reply_bytes
        self._given = http_client
        self._http: httpx2.AsyncClient | None = http_client
        self._clients: list[AsyncOpenAI | None] = [None] * len(self.targets)
        self._heads: dict[tuple[int, float | None], _Head] = {}

    async def send(self, call: Call) -> Answer:
        try:
            body = self.body(call)
            pooled = self._pooled()
            if pooled is not None:
                head = self._heads.get((call.endpoint, call.deadline_s)) or await self._head(call, pooled)
                return await head.pool.request(head.head, body, deadline_s=head.deadline_s)
            request = await self.request(call.endpoint, call.deadline_s, body)
            response = await self._http_client().send(request)
            return Reply(response.status_code, _lower(response.headers), await response.aread())
        except TRANSPORT_ERRORS as error:
            return failure_of(error, call.deadline_s or self.timeout_s, self.targets[call.endpoint].base_url)

    async def request(self, endpoint: int, deadline_s: float | None, body: bytes) -> httpx2.Request:
        """The request ``chat.completions.create`` sends to ``endpoint``, built by the SDK's own steps, its body
        given as JSON bytes (the SDK's typed-params transform would cost more client CPU than the rest of a call).
        The SDK's retry loop and response objects are left out: ours is the only retry loop, and the raw reply is
        read by ``judge.replies``, the one reader of replies."""
        from openai._models import FinalRequestOptions

        client = self._client(endpoint)
        # always our deadline: without one the SDK may give its own default (600 s; it reads our client's 5 s,
        # httpx's default, as none given), which the pool then took as the total deadline (timeout_s: 5 let a
        # judge dripping its reply hold every attempt for minutes)
        timeout = self.timeout_s if deadline_s is None else deadline_s
        options = FinalRequestOptions.construct(method="post", url="/chat/completions", content=body, timeout=timeout)
        options = await client._prepare_options(options)
        request = client._build_request(options)
        await client._prepare_request(request)
        return request

    async def _head(self, call: Call, pooled: PooledTransport) -> _Head:
        """The head of ``call``'s endpoint and deadline, built once: our own for a plain endpoint, else the SDK's."""
        head = self.plain_head(call.endpoint, call.deadline_s, pooled)
        if head is None:
            request = await self.request(call.endpoint, call.deadline_s, b"")
            head = _Head(pooled.pool(request.url), Http11Pool.head(request.url.raw_path, request.headers.raw),
                         read_deadline(request))
        self._heads[(call.endpoint, call.deadline_s)] = head
        return head

    def plain_head(self, endpoint: int, deadline_s: float | None, pooled: PooledTransport) -> _Head | None:
        """The request the SDK builds for ``endpoint`` and ``deadline_s`` less its ``x-stainless-*`` headers, built
        here without the SDK (None where the SDK's request could differ in more: Azure, a base URL with a
        query, no key, an ``OPENAI_*`` setting the SDK reads from the environment). tests/test_judge_transports.py
        holds it against the SDK's."""
        target = self.targets[endpoint]
        url = httpx2.URL(target.base_url)
        if target.azure_api_version is not None or url.query or not target.api_key or sdk_settings():
            return None
        return _Head(pooled.pool(url), chat_head(url.netloc, url.raw_path, target.api_key, target.headers),
                     self.timeout_s if deadline_s is None else deadline_s)

    def body(self, call: Call) -> bytes:
        """The request body: the final params, the model and the messages, as compact JSON."""
        return chat_body(call.params, self.model, call.messages)

    def _client(self, index: int) -> AsyncOpenAI:
        client = self._clients[index]
        if client is None:
            client = self._clients[index] = _sdk_client(self.targets[index], self._http_client())
        return client

    def _pooled(self) -> PooledTransport | None:
        """The keep-alive pool's transport, unless the SDK goes through a given or proxied ``httpx2`` client."""
        http = self._http_client()
        transport = http._transport if isinstance(http, _DirectClient) else None
        return transport if isinstance(transport, PooledTransport) else None

    def _http_client(self) -> httpx2.AsyncClient:
        if self._http is None:
            if proxied():
                self._http = bounded_client(timeout_s=self.timeout_s, max_bytes=self.max_reply_bytes)
            else:
                pooled = PooledTransport(deadline_s=self.timeout_s, max_bytes=self.max_reply_bytes)
                self._http = _DirectClient(transport=pooled, timeout=self.timeout_s, follow_redirects=False)
        return self._http

    async def aclose(self) -> None:
        if self._http is not None and self._given is None:
            await self._http.aclose()


def _sdk_client(target: Target, http: httpx2.AsyncClient) -> AsyncOpenAI:
    from openai import AsyncAzureOpenAI, AsyncOpenAI

    headers = {"user-agent": user_agent(), **target.headers}
    if target.azure_api_version is not None:
        return AsyncAzureOpenAI(azure_endpoint=target.base_url, azure_deployment=target.azure_deployment,
                                api_version=target.azure_api_version, api_key=target.api_key, max_retries=0,
                                http_client=http, default_headers=headers)
    return AsyncOpenAI(base_url=target.base_url, api_key=target.api_key, max_retries=0, http_client=http,
                       default_headers=headers)


def _lower(headers: httpx2.Headers) -> dict[str, str]:
    merged: dict[str, str] = {}
    for name, value in headers.multi_items():
        key = name.lower()
        merged[key] = f"{merged[key]}, {value}" if key in merged else value
    return merged


def failure_of(error: BaseException, deadline_s: float, base_url: str) -> Failure:
    """A request that raised: a timeout, a connection or protocol error, a refused or malformed reply."""
    if isinstance(error, httpx2.TimeoutException):
        return Failure("retry", f"timed out after {deadline_s:g}s", overload=True, timed_out=True)
    if isinstance(error, (httpx2.RequestError, ssl.SSLError, _EndOfStream)):
        return Failure("retry", f"cannot connect to {safe_url(base_url)}")
    if isinstance(error, httpx2.HTTPError):
        return Failure("retry", f"transport error ({type(error).__name__})")
    if isinstance(error, ReplyRefused):  # open_rag_eval.transport: the same server would send it again
        if error.kind == "redirect":  # every call would go there: the endpoint is configured wrong
            return Failure("down", f"the judge endpoint answered {error.reason}; check judge.base_url")
        return Failure("fail", f"judge {error.reason}")
    if isinstance(error, RecursionError):
        return Failure("retry", "malformed reply from the judge (JSON nested too deeply)")
    from open_rag_eval.core.redaction import cut

    return Failure("retry", f"malformed reply from the judge ({cut(str(error), 300)})")


def safe_url(url: str) -> str:
    """The URL without credentials or query string."""
    parsed = httpx2.URL(url)
    return str(parsed.copy_with(username=None, password=None, query=None))
