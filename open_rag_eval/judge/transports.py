"""How one judge request goes out: the one transport interface, and the HTTP transport under the ``openai`` SDK.

The judge client (``judge.client``) owns the policy -- cache, slots, retries, accounting -- and hands each attempt,
a ``Call``, to its ``Transport``. Three implement it:

- ``SdkTransport`` (here): the request is built and sent by the official ``openai`` SDK (``AsyncOpenAI``, or
  ``AsyncAzureOpenAI`` for ``judge.azure``: deployment paths, ``api-version``, the ``api-key`` header), with SDK
  retries off; underneath, as the SDK's ``httpx2`` transport, ``PooledTransport`` hands each request to the judge's
  keep-alive HTTP/1.1 pool (``judge.http11``), bounded like every request of the project (a total deadline, a
  bound on the reply's size, no redirect followed). With a proxy in the environment the bounded ``httpx2`` client
  (``open_rag_eval.transport``) is used instead;
- the record/replay tape (``judge.replay``): answers from a recording, or records what another transport answered;
- the Ray relay (``executors.relay``): asks an actor that makes the call and caches its judgment.

An attempt ends with one ``Answer``: the raw HTTP ``Reply`` (the client reads it with ``judge.replies``), a
``Judgment`` or ``Failure`` already read, or a ``Completion`` found in the cache by a transport that caches
(``caches``: the relay puts its judgments into the run's cache itself).
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, Union

import httpx2
from httpx2._client import UseClientDefault
from anyio import EndOfStream as _EndOfStream

from open_rag_eval import __version__
from open_rag_eval.judge.base import Completion, Message
from open_rag_eval.judge.http11 import Http11Pool, Reply, proxied
from open_rag_eval.judge.replies import Failure, Judgment
from open_rag_eval.transport import ReplyRefused, bounded_client

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["TRANSPORT_ERRORS", "Answer", "Call", "PooledTransport", "SdkTransport", "Target", "Transport",
           "failure_of", "safe_url"]

# what sending may raise; ``failure_of`` turns each into a ``Failure``
TRANSPORT_ERRORS = (httpx2.HTTPError, ssl.SSLError, _EndOfStream, ValueError, ReplyRefused, RecursionError)

_DECODED = {"content-encoding", "content-length", "transfer-encoding"}  # the pool has inflated and joined the body
Answer = Union[Reply, Judgment, Failure, Completion]


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
        reply = await self.exchange(request)
        headers = [(name, value) for name, value in reply.headers.items() if name not in _DECODED]
        return httpx2.Response(reply.status_code, headers=headers, content=reply.content, request=request)

    async def exchange(self, request: httpx2.Request) -> Reply:
        """The reply to ``request`` from the pool of its origin, as the pool reads it (headers lower-cased)."""
        url = request.url
        origin = (url.scheme, url.host, url.port)
        pool = self._pools.get(origin)
        if pool is None:
            pool = self._pools[origin] = Http11Pool(str(url.copy_with(raw_path=b"/")), deadline_s=self.deadline_s,
                                                    max_bytes=self.max_bytes, headers={})
        timeout = request.extensions.get("timeout")
        deadline = timeout.get("read") if isinstance(timeout, dict) else None
        return await pool.send(url.raw_path, request.headers.raw, request.content,
                               deadline_s=deadline if isinstance(deadline, (int, float)) else None)

    async def aclose(self) -> None:
        for pool in self._pools.values():
            await pool.aclose()


class _DirectClient(httpx2.AsyncClient):
    """The SDK's ``httpx2`` client with nothing between it and its transport: no auth flow, no cookie jar, no
    redirect loop (none is ever followed) -- the SDK sets the auth headers itself and the judge keeps no cookies."""

    def build_request(self, method: str, url: httpx2.URL | str, *, content: Any = None,  # type: ignore[override]
                      params: Any = None, headers: Any = None, timeout: Any = None, **other: Any) -> httpx2.Request:
        """The SDK's request as it built it (its URL is absolute, its headers complete): no merging with client
        defaults, which the SDK never sets on this client."""
        if any(value is not None for value in other.values()):  # data, files, json, cookies: the general path
            return super().build_request(method, url, content=content, params=params, headers=headers,
                                         timeout=timeout, **other)
        limit = self.timeout if timeout is None or isinstance(timeout, UseClientDefault) else httpx2.Timeout(timeout)
        where = (str(url), str(params))
        parsed = self._urls.get(where)
        if parsed is None:  # one parse per endpoint, not one per call
            parsed = self._urls[where] = httpx2.Request(method, url, params=params).url
        return httpx2.Request(method, parsed, content=content, headers=self._sdk_headers(headers),
                              extensions={"timeout": limit.as_dict()})

    def _sdk_headers(self, headers: Any) -> Any:
        """The SDK's headers, checked and normalised once per distinct set (the same for every call of a judge)."""
        if not isinstance(headers, list):
            return headers
        key = tuple(headers)
        memo: dict[tuple[Any, ...], httpx2.Headers] = self.__dict__.setdefault("_parsed_headers", {})
        known = memo.get(key)
        if known is None:
            known = memo[key] = httpx2.Headers(headers)
        return known

    @property
    def _urls(self) -> dict[tuple[str, str], httpx2.URL]:
        return self.__dict__.setdefault("_parsed_urls", {})  # type: ignore[no-any-return]

    async def send(self, request: httpx2.Request, **_: Any) -> httpx2.Response:  # type: ignore[override]
        return await self._transport.handle_async_request(request)


class SdkTransport:
    """Every attempt through the ``openai`` SDK, one client per endpoint (see the module docstring)."""

    caches = False

    def __init__(self, targets: Sequence[Target], *, model: str, timeout_s: float, max_reply_bytes: int,
                 http_client: httpx2.AsyncClient | None = None) -> None:
        self.targets, self.model, self.timeout_s = list(targets), model, timeout_s
        self.max_reply_bytes = max_reply_bytes
        self._given = http_client
        self._http: httpx2.AsyncClient | None = http_client
        self._clients: list[AsyncOpenAI | None] = [None] * len(self.targets)
        self._templates: dict[float | None, Any] = {}

    def prepare(self) -> None:
        """Build the clients now (so the wait for a slot is the only wait of the first calls)."""
        for index in range(len(self.targets)):
            self._client(index)

    async def send(self, call: Call) -> Answer:
        client = self._client(call.endpoint)
        try:
            # the request the SDK's chat.completions.create sends, built by the SDK's own steps (options, the
            # request with its URL -- Azure's deployment path and api-version --, auth and default headers), its
            # body given as JSON bytes: the SDK's typed-params transform would cost more client CPU than the rest of
            # a call. The SDK's retry loop is left out (ours is the only one), and the raw reply is read by
            # judge.replies, the one reader of replies (bench/perf_bench.py --part cpu)
            options = self._options(call.deadline_s).model_copy(update={"content": self.body(call)})
            options = await client._prepare_options(options)
            request = client._build_request(options)
            await client._prepare_request(request)
            http = self._http_client()
            if isinstance(http, _DirectClient) and isinstance(http._transport, PooledTransport):
                return await http._transport.exchange(request)
            response = await http.send(request)
            return Reply(response.status_code, _lower(response.headers), await response.aread())
        except TRANSPORT_ERRORS as error:
            return failure_of(error, call.deadline_s or self.timeout_s, self.targets[call.endpoint].base_url)

    def _options(self, deadline_s: float | None) -> Any:
        """The SDK's request options of a chat completion (one per deadline; each call copies it with its body)."""
        options = self._templates.get(deadline_s)
        if options is None:
            from openai._models import FinalRequestOptions

            timeout: dict[str, Any] = {} if deadline_s is None else {"timeout": deadline_s}
            options = self._templates[deadline_s] = FinalRequestOptions.construct(
                method="post", url="/chat/completions", **timeout)
        return options

    def body(self, call: Call) -> bytes:
        """The request body: the final params, the model and the messages, as compact JSON."""
        messages = [{"role": role, "content": content} for role, content in call.messages]
        return json.dumps({**call.params, "model": self.model, "messages": messages}, ensure_ascii=False,
                          separators=(",", ":")).encode()

    def _client(self, index: int) -> AsyncOpenAI:
        client = self._clients[index]
        if client is None:
            client = self._clients[index] = _sdk_client(self.targets[index], self._http_client())
        return client

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
    plain, azure = _sdk_classes()
    headers = {"user-agent": f"open-rag-eval/{__version__}", **target.headers}
    if target.azure_api_version is not None:
        return azure(azure_endpoint=target.base_url, azure_deployment=target.azure_deployment,  # type: ignore[no-any-return]
                     api_version=target.azure_api_version, api_key=target.api_key, max_retries=0,
                     http_client=http, default_headers=headers)
    return plain(base_url=target.base_url, api_key=target.api_key, max_retries=0,  # type: ignore[no-any-return]
                 http_client=http, default_headers=headers)


@functools.cache
def _sdk_classes() -> tuple[type, type]:
    """``AsyncOpenAI`` and ``AsyncAzureOpenAI`` that remember the headers and URLs they build for every call alike
    (the same key, defaults and deadline; the same path): the SDK rebuilds them per request, which costs more client
    CPU than the exchange itself (``bench/perf_bench.py --part cpu``)."""
    from openai import AsyncAzureOpenAI, AsyncOpenAI

    class Remembering:
        def _build_headers(self, options: Any, *, retries_taken: int = 0) -> httpx2.Headers:
            if options.headers or retries_taken:
                return super()._build_headers(options, retries_taken=retries_taken)  # type: ignore[misc, no-any-return]
            memo: dict[str, httpx2.Headers] = self.__dict__.setdefault("_memo_headers", {})
            key = repr(options.timeout)
            if key not in memo:
                memo[key] = super()._build_headers(options, retries_taken=0)  # type: ignore[misc]
            return memo[key].copy()

        def _prepare_url(self, url: str) -> httpx2.URL:
            memo: dict[str, httpx2.URL] = self.__dict__.setdefault("_memo_urls", {})
            if url not in memo:
                memo[url] = super()._prepare_url(url)  # type: ignore[misc]
            return memo[url]

    plain = type("JudgeOpenAI", (Remembering, AsyncOpenAI), {})
    azure = type("JudgeAzureOpenAI", (Remembering, AsyncAzureOpenAI), {})
    return plain, azure


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
