"""The judge client: any OpenAI-compatible chat endpoint, POSTed through our bounded ``httpx2`` client.

The request path is ours end to end: one JSON body, one POST, the reply classified by ``judge.replies`` (the same
statuses, bodies and messages the ``openai`` SDK would give, without its per-call request and response objects).

This is the one layer that owns every cross-cutting concern: cache, in-flight de-duplication, concurrency,
RPM/TPM pacing, retries (429, 5xx, timeouts, connection errors; Retry-After honoured), outage detection and
accounting. Metrics only see ``complete(request) -> Completion`` or an error:

- ``JudgeCallError(reason)``: this judgment failed (after its retries, or a non-retryable reply);
- ``JudgeUnavailable(reason)``: the endpoint refuses us (auth) or is down; raised for every later call too.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
import json
import ssl
from typing import Any, NoReturn, Protocol

import httpx2
from anyio import EndOfStream as _EndOfStream

from open_rag_eval import __version__
from open_rag_eval.core.errors import ConfigError, JudgeCallError, JudgeError, JudgeUnavailable
from open_rag_eval.judge.accounting import Accounting, price_for
from open_rag_eval.judge.base import Completion, JudgeRequest, Message
from open_rag_eval.judge.cache import CachedCompletion, JudgeCache, MemoryCache, cache_key, cache_path
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.endpoints import Endpoint, pick
from open_rag_eval.judge.http11 import Http11Pool, Reply, proxied
from open_rag_eval.judge.limits import JudgeLimiter, Limiter, OutageBreaker, RetryPolicy, Sleep, parse_retry_after
from open_rag_eval.judge.rehearsal import reply_need, rough_prompt_tokens
from open_rag_eval.judge.replies import (
    Failure,
    Judgment,
    Usage,
    classify_body,
    classify_status,
    error_fields,
    strip_reasoning,
    success_body,
)
from open_rag_eval.core.redaction import cut, redact, redact_secrets, register_secret
from open_rag_eval.transport import ReplyRefused, bounded_client

__all__ = ["DEFAULT_BASE_URL", "TRANSPORT_ERRORS", "CallRelay", "OpenAIJudge", "cached_completion", "open_judge",
           "recorded", "strip_reasoning"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

log = logging.getLogger("open_rag_eval.judge")



SIMULATED_ENDPOINT = "simulated://judge"
NO_KEY = "not-needed"
# sampling params the methods set themselves (docs/methods.md)
METHOD_PARAMS = frozenset({"temperature", "top_p", "frequency_penalty", "presence_penalty", "max_tokens",
                           "max_completion_tokens", "seed"})
# what a POST may raise, classified by ``OpenAIJudge._classify`` into a ``Failure``
TRANSPORT_ERRORS = (httpx2.HTTPError, ssl.SSLError, _EndOfStream, ValueError, ReplyRefused, RecursionError)


class CallRelay(Protocol):
    """Makes a judge's HTTP calls in another process that outlives the asking one (``executors.relay``): the
    reply to ``payload`` (the cached completion when the cache has ``key``; a judgment, cached before it is returned;
    or a failure), ``endpoint`` the index of the judge's endpoint this attempt goes to."""

    async def ask(self, key: str, endpoint: int, payload: bytes) -> Judgment | Failure | Completion: ...


class OpenAIJudge:
    """Implements the ``Judge`` protocol. Use ``open_judge(config, ...)`` to build one from a config."""

    def __init__(self, *, model: str, base_url: str, api_key: str, limiter: JudgeLimiter,
                 cache: JudgeCache | MemoryCache | None = None, retry: RetryPolicy | None = None,
                 breaker: OutageBreaker | None = None, accounting: Accounting | None = None,
                 params: Mapping[str, Any] | None = None, drop_params: Sequence[str] = (),
                 timeout_s: float = 60.0, max_reply_bytes: int = 8_000_000,
                 http_client: httpx2.AsyncClient | None = None,
                 simulated: bool = False, key_name: str = "the API key variable", owns_cache: bool = False,
                 context_tokens: int | None = None, max_tokens_param: str = "max_tokens",
                 sleep: Sleep = asyncio.sleep, cache_endpoint: str | None = None,
                 replicas: Sequence[tuple[str, JudgeLimiter]] = ()) -> None:
        self.model, self.simulated = model, simulated
        # judge.base_urls: the first endpoint (base_url, limiter) and the other replicas of the model; each call
        # goes to the least-loaded one (judge.endpoints)
        self.endpoints = [Endpoint(url.rstrip("/"), pacing) for url, pacing in ((base_url, limiter), *replicas)]
        self.base_url = self.endpoints[0].base_url
        # the endpoint named in cache keys (the simulated judge's port changes run to run; every replica of a model
        # caches as the first, so a reply is the same whichever endpoint gave it)
        self.cache_endpoint = SIMULATED_ENDPOINT if simulated else (cache_endpoint or self.base_url).rstrip("/")
        self.cache, self.limiter = cache, limiter
        self.retry = retry or RetryPolicy()
        self.breaker = breaker or OutageBreaker()
        self.accounting = accounting or Accounting(model)
        self.params, self.drop_params = dict(params or {}), frozenset(drop_params)
        self.timeout_s, self._key_name, self._sleep = timeout_s, key_name, sleep
        self.max_reply_bytes = max_reply_bytes
        self.context_tokens, self.max_tokens_param = context_tokens, max_tokens_param
        self._secret = api_key
        if api_key != NO_KEY:
            register_secret(api_key)  # from now on redacted from every message, log line and output file
        self._owns_cache, self._owns_http = owns_cache, http_client is None
        for endpoint in self.endpoints:
            endpoint.http = http_client
        self._headers = _headers(api_key)
        self._inflight: dict[str, asyncio.Future[tuple[Completion, str]]] = {}
        self.relay: CallRelay | None = None  # set: every call with a cache key is made by the relay

    @property
    def pending(self) -> int:
        """Distinct requests asked and not yet answered (queued for a slot or in flight): the judge work the run
        has already asked for, which a progress display turns into a lower bound of the time left."""
        return len(self._inflight)

    # -- the Judge protocol ------------------------------------------------------------------------------------

    async def complete(self, request: JudgeRequest) -> Completion:
        self._check_available()
        params = self.final_params(request.params)
        key = cache_key(base_url=self.cache_endpoint, model=self.model, messages=request.messages, params=params,
                        prompt_version=request.prompt_version, sample=request.sample)
        shared = self._inflight.get(key)
        follower = shared is not None
        if shared is None:
            shared = asyncio.ensure_future(self._fetch(request, params, key))
            self._inflight[key] = shared
            shared.add_done_callback(lambda done: self._settle(key, done))
        stats = self.accounting.task(request.task)
        try:
            completion, source = await asyncio.shield(shared)
        except JudgeError:
            if follower:  # the identical request in flight failed: its call is counted once, as a success would be
                stats.deduplicated += 1
            else:
                stats.failures += 1
            raise
        if source == "cache":
            stats.cache_hits += 1
            if completion.fingerprint:
                self.accounting.fingerprints.add(completion.fingerprint)
        elif follower:
            stats.deduplicated += 1
        return replace(completion, cached=True) if follower else completion

    def final_params(self, method_params: Mapping[str, Any]) -> dict[str, Any]:
        """The method's params, updated by ``judge.params``, the reply cap under ``judge.max_tokens_param``'s name,
        minus ``judge.drop_params``."""
        merged = {**method_params, **self.params}
        other = "max_tokens" if self.max_tokens_param == "max_completion_tokens" else "max_completion_tokens"
        if other in merged:
            cap = merged.pop(other)
            merged.setdefault(self.max_tokens_param, cap)
        return {name: value for name, value in merged.items() if name not in self.drop_params}

    async def send(self, payload: bytes, endpoint: int) -> Judgment | Failure:
        """One POST of ``payload`` to the ``endpoint``-th endpoint, and what its reply is (no slot, no retry, no
        cache: a relay's call, ``executors.relay``)."""
        target = self.endpoints[endpoint]
        try:
            return await self._post(payload, target)
        except TRANSPORT_ERRORS as error:
            return self._classify(error, target)

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        pending = list(self._inflight.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._owns_http:
            for endpoint in self.endpoints:
                if endpoint.http is not None:
                    await endpoint.http.aclose()
        if self._owns_cache and self.cache is not None:
            self.cache.close()

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    # -- internals ---------------------------------------------------------------------------------------------

    def _client(self, endpoint: Endpoint) -> httpx2.AsyncClient | Http11Pool:
        """Our own keep-alive HTTP/1.1 pool; the bounded ``httpx2`` client when the environment names a proxy.
        Both bound each request the same way: a total deadline, the reply's size, no redirects."""
        if endpoint.http is None:
            if proxied():
                endpoint.http = bounded_client(timeout_s=self.timeout_s, max_bytes=self.max_reply_bytes)
            else:
                endpoint.http = Http11Pool(endpoint.url, deadline_s=self.timeout_s, max_bytes=self.max_reply_bytes,
                                           headers=self._headers)
        return endpoint.http  # type: ignore[no-any-return]

    async def _post(self, payload: bytes, endpoint: Endpoint) -> Judgment | Failure:
        """One POST and what its reply is (``judge.replies``); transport errors propagate to ``_classify``."""
        client = self._client(endpoint)
        if isinstance(client, Http11Pool):
            response: httpx2.Response | Reply = await client.post(payload)
        else:
            response = await client.post(endpoint.url, content=payload, headers=self._headers,
                                         timeout=self.timeout_s)
        status = response.status_code
        if 200 <= status < 300:
            return classify_body(success_body(response.headers.get("content-type", ""), response.content))
        code, param, message = error_fields(status, response.text)
        return classify_status(status, code, param, self._redact(message), model=self.model,
                               key_name=self._key_name, retry_after=parse_retry_after(response.headers))

    def _settle(self, key: str, done: asyncio.Future[tuple[Completion, str]]) -> None:
        if self._inflight.get(key) is done:
            del self._inflight[key]
        if not done.cancelled():
            done.exception()  # retrieved here, so an orphaned failure is not reported as "never retrieved"

    def _check_available(self) -> None:
        if self.breaker.reason is not None:
            raise JudgeUnavailable(self._redact(self.breaker.reason))

    async def _cached(self, key: str) -> Completion | None:
        return cached_completion(await self.cache.get(key) if self.cache is not None else None)

    async def _fetch(self, request: JudgeRequest, params: dict[str, Any], key: str) -> tuple[Completion, str]:
        hit = await self._cached(key)
        if hit is not None:
            return hit, "cache"
        self._check_fits(request, params)
        if self.simulated and request.sample:  # the simulated judge draws a sample's noise from its request alone
            params = {**params, "user": f"sample-{request.sample}"}  # (not from how often it saw the body)
        reply = await self._call_api(request.task, request.messages, params, request.priority, key)
        if isinstance(reply, Completion):  # another process cached it while this call waited for a slot
            return reply, "cache"
        reply, entry = recorded(reply, self.model)
        if self.cache is not None and self.relay is None:  # a relay cached it before it answered
            await self.cache.put(key, entry)
        return Completion(reply.text, False, entry.prompt_tokens, entry.completion_tokens, reply.fingerprint), "api"

    def _check_fits(self, request: JudgeRequest, params: Mapping[str, Any]) -> None:
        """With ``judge.context_tokens`` declared, a prompt that cannot fit with the reply its task needs (not the
        whole reply cap: ``rehearsal.reply_need``) fails without a call."""
        if self.context_tokens is None:
            return
        prompt, reply = _prompt_tokens(request.messages), reply_need(request, _reply_tokens(params))
        if prompt + reply > self.context_tokens:
            raise JudgeCallError(f"the prompt (about {prompt} tokens) and the reply its task needs (about {reply} "
                                 f"tokens) do not fit judge.context_tokens ({self.context_tokens}); no call was made")

    async def _call_api(self, task: str, messages: Sequence[Message], params: dict[str, Any],
                        priority: int = 0, key: str | None = None) -> Judgment | Completion:
        stats = self.accounting.task(task)
        relay = self.relay if key is not None else None
        for endpoint in self.endpoints if relay is None else ():
            self._client(endpoint)  # built before queueing, so the wait for a slot is the only wait
        estimate = _prompt_tokens(messages) + _reply_tokens(params)
        body = [{"role": role, "content": content} for role, content in messages]
        payload = json.dumps({**params, "model": self.model, "messages": body}, ensure_ascii=False,
                             separators=(",", ":")).encode()
        last = "no attempt made"
        for attempt in range(self.retry.max_retries + 1):
            self._check_available()
            if attempt:
                stats.retries += 1
            endpoint, started = self.endpoints[0], time.monotonic()
            try:
                # a retry goes before every call not yet started: calls finish (or fail for good) in turn, so a
                # dead endpoint trips the outage breaker after a few calls, not after every queued call's first try
                async with self._slot(estimate, priority if attempt == 0 else -1) as endpoint:
                    if relay is not None and key is not None:  # the relay looks in the cache, then calls
                        started = time.monotonic()
                        index = next(i for i, known in enumerate(self.endpoints) if known is endpoint)
                        relayed = await relay.ask(key, index, payload)
                        if isinstance(relayed, Completion):
                            return relayed
                        if attempt == 0:
                            stats.calls += 1
                        reply = relayed
                    else:
                        if attempt == 0 and key is not None and (hit := await self._cached(key)) is not None:
                            return hit
                        if attempt == 0:
                            stats.calls += 1
                        started = time.monotonic()
                        reply = await self._post(payload, endpoint)
            except TRANSPORT_ERRORS as error:
                reply = self._classify(error, endpoint)
            if isinstance(reply, Judgment):
                self.breaker.success()
                endpoint.succeeded()
                await endpoint.limiter.succeeded()
                self._count_usage(task, estimate, reply.usage, reply.fingerprint, endpoint)
                return reply
            failure = replace(reply, reason=self._redact(reply.reason))
            if failure.usage is not None:  # a 200 that is no judgment still used (and cost) tokens
                self._count_usage(task, estimate, failure.usage, None, endpoint)
            if failure.overload:
                # a 429 says "now"; a timeout or an overflow speaks of the load when its request was sent
                endpoint.limiter.overloaded(failure.reason, None if failure.rate_limited else started)
            if failure.kind == "down" and len(self.endpoints) > 1:
                self._leave_out(endpoint, failure)  # the other endpoints take its calls
            elif failure.kind != "retry":
                self._give_up(failure)
            endpoint.failed()
            last = failure.reason
            other = pick(self.endpoints)
            if other is not None and other is not endpoint and not other.cooling(time.monotonic()):
                continue  # another endpoint is healthy: no need to wait before asking it
            if attempt < self.retry.max_retries:
                wait = self.retry.delay(attempt, failure.retry_after)
                log.info("judge: %s; retry %d/%d in %.2fs", last, attempt + 1, self.retry.max_retries, wait)
                await self._sleep(wait)
        self.breaker.failure(last)
        self._check_available()
        raise JudgeCallError(self._redact(f"judge call failed after {self.retry.max_retries + 1} attempts: {last}"))

    @contextlib.asynccontextmanager
    async def _slot(self, estimate: int, priority: int) -> AsyncIterator[Endpoint]:
        """A slot of the least-loaded endpoint (``judge.endpoints.pick``); one left out while the call waited for
        its slot sends it to another."""
        while True:
            endpoint = pick(self.endpoints)
            if endpoint is None:
                raise JudgeUnavailable(self._redact(self.breaker.reason or "every judge endpoint refused us"))
            async with endpoint.limiter.slot(estimate, priority):
                if endpoint.down is None:
                    yield endpoint
                    return

    def _count_usage(self, task: str, estimate: int, usage: Usage, fingerprint: str | None,
                     endpoint: Endpoint) -> None:
        if usage.known:
            endpoint.limiter.used_tokens(estimate, (usage.prompt_tokens or 0) + (usage.completion_tokens or 0))
        elif usage.problem is not None and usage.problem.startswith("invalid"):
            log.warning("judge: %s; its cost is unknown", usage.problem)
        self.accounting.usage(task, usage.prompt_tokens, usage.completion_tokens, fingerprint)

    def _give_up(self, failure: Failure) -> NoReturn:
        if failure.kind == "down":
            self.breaker.trip(failure.reason)
            raise JudgeUnavailable(self._redact(failure.reason))
        raise JudgeCallError(self._redact(failure.reason), refused=failure.kind == "refuse")

    def _leave_out(self, endpoint: Endpoint, failure: Failure) -> None:
        """One of several endpoints refuses us for good: the others take its calls; none left is an outage."""
        if endpoint.down is None:
            endpoint.down = failure.reason
            log.error("judge endpoint %s left out for the rest of the run: %s", _safe_url(endpoint.base_url),
                      failure.reason)
        if all(e.down is not None for e in self.endpoints):
            self._give_up(failure)

    def _classify(self, error: BaseException, endpoint: Endpoint) -> Failure:
        """A request that raised: a timeout, a connection or protocol error, a refused or malformed reply."""
        if isinstance(error, httpx2.TimeoutException):
            return Failure("retry", f"timed out after {self.timeout_s:g}s", overload=True)
        if isinstance(error, (httpx2.RequestError, ssl.SSLError, _EndOfStream)):
            return Failure("retry", f"cannot connect to {_safe_url(endpoint.base_url)}")
        if isinstance(error, httpx2.HTTPError):
            return Failure("retry", f"transport error ({type(error).__name__})")
        if isinstance(error, ReplyRefused):  # open_rag_eval.transport: the same server would send it again
            if error.kind == "redirect":  # every call would go there: the endpoint is configured wrong
                return Failure("down", f"the judge endpoint answered {error.reason}; check judge.base_url")
            return Failure("fail", f"judge {error.reason}")
        if isinstance(error, RecursionError):
            return Failure("retry", "malformed reply from the judge (JSON nested too deeply)")
        return Failure("retry", f"malformed reply from the judge ({_short(str(error))})")

    def _redact(self, text: str) -> str:
        return redact(text.replace(self._secret, "***") if len(self._secret) >= 4 else text)


def cached_completion(hit: CachedCompletion | None) -> Completion | None:
    """A cached reply as the judge returns it; None when there is none, or only reasoning (asked again)."""
    if hit is None or not strip_reasoning(hit.text):
        return None
    return Completion(strip_reasoning(hit.text), True, hit.prompt_tokens, hit.completion_tokens, hit.fingerprint)


def recorded(reply: Judgment, model: str) -> tuple[Judgment, CachedCompletion]:
    """A judgment with any echoed key redacted, and the cache entry that keeps it."""
    reply = replace(reply, raw=redact_secrets(reply.raw), text=redact_secrets(reply.text))
    usage = reply.usage
    entry = CachedCompletion(reply.raw, usage.prompt_tokens or 0, usage.completion_tokens or 0, reply.fingerprint,
                             model, _unix_now())
    return reply, entry


def _headers(api_key: str) -> dict[str, str]:
    """The request headers, built once: the key as a bearer token, and the organization and project the
    ``openai`` SDK would name from the environment."""
    headers = {"authorization": f"Bearer {api_key}", "content-type": "application/json",
               "accept": "application/json", "user-agent": f"open-rag-eval/{__version__}"}
    for variable, header in (("OPENAI_ORG_ID", "openai-organization"), ("OPENAI_PROJECT_ID", "openai-project")):
        if os.environ.get(variable):
            headers[header] = os.environ[variable]
    return headers


def _prompt_tokens(messages: Sequence[Message]) -> int:
    """A rough count (4 characters a token, 4 per message): enough for pacing and the context budget."""
    return rough_prompt_tokens(messages)


def _reply_tokens(params: Mapping[str, Any]) -> int:
    limit = params.get("max_completion_tokens", params.get("max_tokens", 0))
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else 0


def _safe_url(url: str) -> str:
    """The URL without credentials or query string."""
    parsed = httpx2.URL(url)
    return str(parsed.copy_with(username=None, password=None, query=None))


def _short(text: str, limit: int = 300) -> str:
    return cut(text, limit)  # redacts before it cuts: a key echoed across the cut leaves no prefix behind


def _unix_now() -> float:
    return time.time()


def open_judge(config: JudgeConfig, *, base_dir: Path, simulated: bool = False,
               http_client: httpx2.AsyncClient | None = None, limiter: JudgeLimiter | None = None,
               cache: Any = None, limiters: Sequence[JudgeLimiter] | None = None) -> OpenAIJudge:
    """Build the judge a config describes. Raises ``ConfigError`` when the endpoint needs a key and the
    environment variable ``config.api_key_env`` is unset. Close it with ``aclose()`` or ``async with``.

    ``limiter`` and ``cache`` replace the config's own (one budget and one cache shared by many processes);
    ``limiters`` replace the own limiters of the ``judge.base_urls`` endpoints, one each, in order."""
    urls = config.endpoints() or [(config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
                                   config.max_concurrency)]
    overridden = sorted(METHOD_PARAMS & config.params.keys())
    if overridden:
        log.warning("judge.params sets %s for every request, over the published methods' own values: "
                    "scores will not follow the TREC protocols exactly", ", ".join(overridden))
    api_key = os.environ.get(config.api_key_env, "").strip()
    if not api_key:
        remote = next((url for url, _ in urls if not is_local_url(url)), None)
        if not simulated and remote is not None:
            raise ConfigError(f"no API key for {_safe_url(remote)}: set the environment variable "
                              f"{config.api_key_env}", path="judge.api_key_env")
        api_key = NO_KEY  # local servers ignore it; OpenAI-compatible servers expect the header to be there
    given = list(limiters) if limiters is not None else [limiter] if limiter is not None else []
    pacing = [given[i] if i < len(given) else Limiter.create(limit, config.requests_per_minute,
                                                             config.tokens_per_minute,
                                                             adaptive=config.adaptive_concurrency)
              for i, (_, limit) in enumerate(urls)]
    retry = RetryPolicy(config.max_retries, config.backoff_base_s, config.backoff_cap_s, config.retry_after_cap_s)
    return OpenAIJudge(
        model=config.model, base_url=urls[0][0], api_key=api_key, limiter=pacing[0],
        replicas=[(url, limit) for (url, _), limit in zip(urls[1:], pacing[1:])],
        cache=_open_cache(config.cache, base_dir) if cache is None else cache, retry=retry,
        breaker=OutageBreaker(config.outage_after_failures, config.outage_after_s),
        accounting=Accounting(config.model, price_for(config.model, config.prices)),
        params=config.params, drop_params=config.drop_params, timeout_s=config.timeout_s,
        max_reply_bytes=int(config.max_reply_mb * 1_000_000),
        http_client=http_client, simulated=simulated, key_name=config.api_key_env, owns_cache=cache is None,
        context_tokens=config.context_tokens, max_tokens_param=config.max_tokens_param,
    )


def is_local_url(url: str) -> bool:
    """Loopback, private-network and ``localhost`` endpoints (vLLM, Ollama, LM Studio, ...) need no key."""
    host = httpx2.URL(url).host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost") or host == "host.docker.internal":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_unspecified


def _open_cache(setting: str | bool, base_dir: Path) -> JudgeCache | MemoryCache | None:
    if setting is False:
        return MemoryCache()  # nothing kept after the run; within it, one request is asked once
    path = cache_path(setting, base_dir)
    return None if path is None else JudgeCache(path)
