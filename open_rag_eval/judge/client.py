"""The judge client: any OpenAI-compatible chat endpoint (or Azure OpenAI), one ``Transport`` underneath.

This is the one layer that owns every cross-cutting concern: cache, in-flight de-duplication, concurrency,
RPM/TPM pacing, retries (429, 5xx, timeouts, connection errors; Retry-After honoured), outage detection and
accounting. How one attempt goes out is its transport's business (``judge.transports``: the ``openai`` SDK over
the judge's keep-alive pool, the record/replay tape, the Ray relay); what a reply *is* is decided in one place,
``judge.replies``. Metrics only see ``complete(request) -> Completion`` or an error:

- ``JudgeCallError(reason)``: this judgment failed (after its retries, or a non-retryable reply);
- ``JudgeUnavailable(reason)``: the endpoint refuses us (auth) or is down; raised for every later call too.

A timed-out attempt is tried again at most once with the same deadline, then once with twice the deadline; the
prompt tokens of every attempt given up on are counted as abandoned (``Accounting``), since the server may still
have processed them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Any, NoReturn

import httpx2

from open_rag_eval.core.eta import CallClock
from open_rag_eval.core.errors import ConfigError, JudgeCallError, JudgeError, JudgeUnavailable
from open_rag_eval.core.redaction import redact, redact_secrets, register_secret
from open_rag_eval.core.wire import local_host
from open_rag_eval.prompts import reply_schema
from open_rag_eval.judge.accounting import Accounting, price_for
from open_rag_eval.judge.base import Completion, JudgeRequest, Message, guarding
from open_rag_eval.judge.cache import CachedCompletion, JudgeCache, MemoryCache, cache_key, cache_path
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.endpoints import Endpoint, pick
from open_rag_eval.judge.http11 import Reply
from open_rag_eval.judge.limits import JudgeLimiter, Limiter, OutageBreaker, Sleep, parse_retry_after
from open_rag_eval.judge.rehearsal import reply_need, rough_prompt_tokens
from open_rag_eval.judge.replies import (
    Failure,
    Judgment,
    Usage,
    classify_body,
    classify_status,
    error_fields,
    format_rejected,
    strip_reasoning,
    success_body,
)
from open_rag_eval.judge.settings import NO_KEY, SIMULATED_ENDPOINT, JudgeSettings, settings_for
from open_rag_eval.judge.transports import (
    TRANSPORT_ERRORS,
    Call,
    SdkTransport,
    Shared,
    Target,
    Transport,
    failure_of,
    safe_url,
)

__all__ = ["DEFAULT_BASE_URL", "SIMULATED_ENDPOINT", "TRANSPORT_ERRORS", "OpenAIJudge", "Timeouts",
           "cached_completion", "open_judge", "open_transport", "recorded", "strip_reasoning"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"

log = logging.getLogger("open_rag_eval.judge")

# sampling params the methods set themselves (docs/methods.md)
METHOD_PARAMS = frozenset({"temperature", "top_p", "frequency_penalty", "presence_penalty", "max_tokens",
                           "max_completion_tokens", "seed"})


class OpenAIJudge:
    """Implements the ``Judge`` protocol over one ``Transport``. Use ``open_judge(config, ...)`` to build one from a
    config; ``limiters`` pace the endpoints of ``settings.base_urls``, one each, in order."""

    def __init__(self, settings: JudgeSettings, *, limiters: Sequence[JudgeLimiter],
                 cache: JudgeCache | MemoryCache | None = None, transport: Transport | None = None,
                 breaker: OutageBreaker | None = None, accounting: Accounting | None = None,
                 sleep: Sleep = asyncio.sleep, owns_cache: bool = False) -> None:
        if len(limiters) != len(settings.base_urls):
            raise ValueError(f"{len(settings.base_urls)} endpoint(s) need as many limiters, not {len(limiters)}")
        self.settings, self.model, self.simulated = settings, settings.model, settings.simulated
        self.reask = settings.reask  # read by the metrics' re-ask (metrics._judging)
        # judge.base_urls: each call goes to the least-loaded endpoint (judge.endpoints)
        self.endpoints = [Endpoint(url, pacing) for url, pacing in zip(settings.base_urls, limiters)]
        self.cache_endpoint = settings.cache_name
        self.cache, self.limiter = cache, limiters[0]
        self.retry, self.timeout_s = settings.retry, settings.timeout_s
        self.breaker = breaker or OutageBreaker()
        self.accounting = accounting or Accounting(settings.model)
        self.transport: Transport = transport or open_transport(settings)
        self._sleep, self._owns_cache = sleep, owns_cache
        self._secret = settings.api_key
        if settings.api_key != NO_KEY:
            register_secret(settings.api_key)  # from now on redacted from every message, log line and output file
        self._inflight: dict[str, asyncio.Future[tuple[Completion, str]]] = {}
        self.timing = CallClock()  # how long requests take now: the console's time left (core.eta)
        self.asked = asyncio.Event()  # set as the first request goes to the transport (``run.pipeline`` waits on it)

    @property
    def base_url(self) -> str:
        return self.endpoints[0].base_url

    @property
    def pending(self) -> int:
        """Distinct requests asked and not yet answered (queued for a slot or in flight): the judge work the run
        has already asked for, which a progress display turns into a lower bound of the time left."""
        return len(self._inflight)

    # -- the Judge protocol ------------------------------------------------------------------------------------

    async def complete(self, request: JudgeRequest) -> Completion:
        self._check_available()
        params = self.final_params(request.params, request.task)
        key = cache_key(base_url=self.cache_endpoint, model=self.model, messages=request.messages, params=params,
                        prompt_version=request.prompt_version, sample=request.sample)
        shared = self._inflight.get(key)
        follower = shared is not None
        if shared is None:
            shared = asyncio.ensure_future(self._fetch(request, params, key))
            self._inflight[key] = shared
            shared.add_done_callback(lambda done: self._settle(key, done))
        stats = self.accounting.task(request.task)
        if request.prompt_version:
            self.accounting.prompts.add(request.prompt_version)
        try:
            completion, source = await asyncio.shield(shared)
        except JudgeError:
            if follower:  # the identical request in flight failed: its call is counted once, as a success would be
                stats.deduplicated += 1
            else:
                stats.failures += 1
            raise
        if follower:  # the one call or cache read in flight is counted by its leader, a repeat of it as repeated
            stats.deduplicated += 1
        elif source == "cache":
            stats.cache_hits += 1
        if source == "cache" and completion.fingerprint:
            self.accounting.fingerprints.add(completion.fingerprint)
        return replace(completion, cached=True) if follower else completion

    def final_params(self, method_params: Mapping[str, Any], task: str = "") -> dict[str, Any]:
        """The method's params, updated by ``judge.params``, the reply cap under ``judge.max_tokens_param``'s name,
        minus ``judge.drop_params``; with ``judge.structured``, ``task``'s reply schema as the ``response_format``
        in that form (unless the method sets one: a profile's own)."""
        merged = {**method_params, **self.settings.params}
        if self.settings.structured is not None and "response_format" not in merged:
            schema = reply_schema(task, self.settings.structured)
            if schema is not None:
                merged["response_format"] = schema
        name = self.settings.max_tokens_param
        other = "max_tokens" if name == "max_completion_tokens" else "max_completion_tokens"
        if other in merged:
            cap = merged.pop(other)
            merged.setdefault(name, cap)
        drop = self.settings.drop_params
        return {key: value for key, value in merged.items() if key not in drop} if drop else merged

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        pending = list(self._inflight.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        await self.transport.aclose()
        if self._owns_cache and self.cache is not None:
            self.cache.close()

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    # -- internals ---------------------------------------------------------------------------------------------

    def read(self, reply: Reply, params: Mapping[str, Any] | None = None) -> Judgment | Failure:
        """What an HTTP reply is (``judge.replies``); ``params``: the request's, whose ``response_format`` an error
        may name (the endpoint does not take it: every later call would fail the same way)."""
        status = reply.status_code
        try:
            if 200 <= status < 300:
                return classify_body(success_body(reply.headers.get("content-type", ""), reply.content))
        except (ValueError, RecursionError) as error:
            return failure_of(error, self.timeout_s, self.base_url)
        code, param, message = error_fields(status, reply.text)
        sent = (params or {}).get("response_format")
        rejected = format_rejected(status, param, self._redact(message), sent) if sent is not None else None
        if rejected is not None:
            return rejected
        return classify_status(status, code, param, self._redact(message), model=self.model,
                               key_name=self.settings.key_name, retry_after=parse_retry_after(reply.headers))

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
        reply = await self._call_api(request, params, key)
        if isinstance(reply, Completion):  # another process cached it while this call waited for a slot
            return reply, "cache"
        reply, entry = recorded(reply, self.model)
        if self.cache is not None and not self.transport.caches:  # a transport that caches has put it there
            await self.cache.put(key, entry)
        return Completion(reply.text, False, entry.prompt_tokens, entry.completion_tokens, reply.fingerprint,
                          entry.logprobs), "api"

    def _check_fits(self, request: JudgeRequest, params: Mapping[str, Any]) -> None:
        """With ``judge.context_tokens`` declared, a prompt that cannot fit with the reply its task needs (not the
        whole reply cap: ``rehearsal.reply_need``) fails without a call."""
        limit = self.settings.context_tokens
        if limit is None:
            return
        prompt, reply = _prompt_tokens(request.messages), reply_need(request, _reply_tokens(params))
        if prompt + reply > limit:
            raise JudgeCallError(f"the prompt (about {prompt} tokens) and the reply its task needs (about {reply} "
                                 f"tokens) do not fit judge.context_tokens ({limit}); no call was made")

    async def _call_api(self, request: JudgeRequest, params: dict[str, Any], key: str) -> Judgment | Completion:
        stats = self.accounting.task(request.task)
        prompt = _prompt_tokens(request.messages)
        estimate = prompt + _reply_tokens(params)
        call = Call(key, request.task, request.messages, params, request.prompt_version, request.sample)
        last, timeouts, attempts, timed_out = "no attempt made", Timeouts(self.timeout_s), 0, False
        succeeded = None  # the calls that had succeeded when this one was first sent
        counted = self.transport.counts  # a relay counts the attempts it pays, their tokens and abandoned prompts
        for attempt in range(self.retry.max_retries + 1):
            self._check_available()
            stats.retries += bool(attempt) and not counted
            endpoint, started = self.endpoints[0], time.monotonic()
            try:
                # a retry goes before every call not yet started: calls finish (or fail for good) in turn, so a
                # dead endpoint trips the outage breaker after a few calls, not after every queued call's first try
                async with self._slot(estimate, request.priority if attempt == 0 else -1) as endpoint:
                    self._check_available()  # the judge went down while this call waited for its slot
                    if attempt == 0 and not self.transport.caches and (hit := await self._cached(key)) is not None:
                        return hit
                    if attempt == 0:
                        stats.calls += not counted
                        succeeded = self.breaker.successes
                    started, timing = time.monotonic(), self.timing.begin()
                    self.asked.set()
                    try:
                        answer = await self.transport.send(replace(
                            call, endpoint=self.endpoints.index(endpoint), attempt=attempt, deadline_s=timeouts.next_s))
                    finally:
                        self.timing.end(timing)
            except TRANSPORT_ERRORS as error:
                answer = failure_of(error, timeouts.next_s or self.timeout_s, endpoint.base_url)
            if isinstance(answer, Completion):
                return answer
            if isinstance(answer, Shared):  # another process's identical request made the call: paid there
                stats.deduplicated += attempt == 0
                answer = answer.answer
            reply = self.read(answer, params) if isinstance(answer, Reply) else answer
            if isinstance(reply, Judgment):
                self.breaker.success()
                endpoint.succeeded()
                await endpoint.limiter.succeeded()
                self._count_usage(request.task, estimate, reply.usage, reply.fingerprint, endpoint, counted)
                return reply
            failure = replace(reply, reason=self._redact(reply.reason))
            if failure.usage is not None:  # a 200 that is no judgment still used (and cost) tokens
                self._count_usage(request.task, estimate, failure.usage, None, endpoint, counted)
            if failure.timed_out:
                if not counted:
                    self.accounting.abandoned(request.task, prompt)
                failure = timeouts.after(failure)
            if failure.overload and (endpoint.answered or not failure.timed_out):
                # a 429 says "now"; a timeout or an overflow speaks of the load when its request was sent. A timeout
                # of an endpoint that has not answered yet says nothing of our load (it is down, or drips its
                # replies): the concurrency stays, so the outage breaker sees it within its stated bound
                endpoint.limiter.overloaded(failure.reason, None if failure.rate_limited else started)
            if failure.kind == "down" and len(self.endpoints) > 1:
                self._leave_out(endpoint, failure)  # the other endpoints take its calls
            elif failure.kind != "retry" and not failure.timed_out:
                self._give_up(failure)
            endpoint.failed()
            last, attempts = failure.reason, attempt + 1
            timed_out = failure.timed_out and failure.kind != "retry"
            if timed_out:
                break  # every deadline passed: it ends as a call failed after its retries (the outage breaker)
            other = pick(self.endpoints)
            if other is not None and other is not endpoint and not other.cooling(time.monotonic()):
                continue  # another endpoint is healthy: no need to wait before asking it
            if attempt < self.retry.max_retries:
                wait = self.retry.delay(attempt, failure.retry_after)
                log.info("judge: %s; retry %d/%d in %.2fs", last, attempt + 1, self.retry.max_retries, wait)
                await self._sleep(wait)
        # a request that timed out for good says so itself ("timed out 3 times (deadlines ...)")
        failed = last if timed_out else f"judge call failed after {attempts} attempts: {last}"
        if guarding():  # a control's call: a failed control, never an outage
            raise JudgeCallError(self._redact(failed))
        if succeeded is not None and self.breaker.successes > succeeded:  # others were answered since it was sent
            raise JudgeCallError(self._redact(f"{failed} (other requests succeeded meanwhile: this request's "
                                              "content is the likely cause)"))
        self.breaker.failure(last)
        self._check_available()
        raise JudgeCallError(self._redact(failed))

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
                     endpoint: Endpoint, counted: bool = False) -> None:
        """A reply's tokens to the endpoint's pacing, and to the accounting unless its transport ``counted`` them
        where they were paid (a relay)."""
        if usage.known:
            endpoint.limiter.used_tokens(estimate, (usage.prompt_tokens or 0) + (usage.completion_tokens or 0))
        elif usage.problem is not None and usage.problem.startswith("invalid"):
            log.warning("judge: %s; its cost is unknown", usage.problem)
        if not counted:
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
            log.error("judge endpoint %s left out for the rest of the run: %s", safe_url(endpoint.base_url),
                      failure.reason)
        if all(e.down is not None for e in self.endpoints):
            self._give_up(failure)

    def _redact(self, text: str) -> str:
        return redact(text.replace(self._secret, "***") if len(self._secret) >= 4 else text)


class Timeouts:
    """The deadlines of one request's attempts: a timed-out attempt is tried once more with the same deadline,
    then once with twice that; a third timeout fails the judgment, naming every deadline it waited."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.waited: list[float] = []
        self.next_s: float | None = None

    def after(self, failure: Failure) -> Failure:
        """The failure of a timed-out attempt, with what comes next: a retry, or the end of the request."""
        self.waited.append(self.next_s or self.timeout_s)
        if len(self.waited) == 1:
            return failure
        if len(self.waited) == 2:
            self.next_s = 2 * self.timeout_s
            return replace(failure, reason=f"{failure.reason}; retried once with the same deadline, "
                                           f"now once with {self.next_s:g}s")
        spent = ", ".join(f"{s:g}s" for s in self.waited)
        return replace(failure, kind="fail", reason=f"timed out {len(self.waited)} times (deadlines {spent}): the "
                                                    "judge did not answer in time; raise judge.timeout_s for a "
                                                    "slow server")


def _target(settings: JudgeSettings, url: str) -> Target:
    return Target(url, settings.api_key, settings.azure_api_version, settings.azure_deployment)


def cached_completion(hit: CachedCompletion | None) -> Completion | None:
    """A cached reply as the judge returns it; None when there is none, or only reasoning (asked again)."""
    if hit is None or not strip_reasoning(hit.text):
        return None
    return Completion(strip_reasoning(hit.text), True, hit.prompt_tokens, hit.completion_tokens, hit.fingerprint,
                      hit.logprobs)


def recorded(reply: Judgment, model: str) -> tuple[Judgment, CachedCompletion]:
    """A judgment with any echoed key redacted, and the cache entry that keeps it (with its log-probabilities)."""
    reply = replace(reply, raw=redact_secrets(reply.raw), text=redact_secrets(reply.text))
    usage = reply.usage
    entry = CachedCompletion(reply.raw, usage.prompt_tokens or 0, usage.completion_tokens or 0, reply.fingerprint,
                             model, _unix_now(), reply.logprobs)
    return reply, entry


def _prompt_tokens(messages: Sequence[Message]) -> int:
    """A rough count (4 characters a token, 4 per message): enough for pacing and the context budget."""
    return rough_prompt_tokens(messages)


def _reply_tokens(params: Mapping[str, Any]) -> int:
    limit = params.get("max_completion_tokens", params.get("max_tokens", 0))
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else 0


def _unix_now() -> float:
    return time.time()


def open_judge(config: JudgeConfig, *, base_dir: Path,
               http_client: httpx2.AsyncClient | None = None, limiter: JudgeLimiter | None = None,
               cache: Any = None, limiters: Sequence[JudgeLimiter] | None = None,
               transport: Transport | None = None, sleep: Sleep = asyncio.sleep) -> OpenAIJudge:
    """Build the judge a config describes. Raises ``ConfigError`` when the endpoint needs a key and the
    environment variable ``config.api_key_env`` is unset. Close it with ``aclose()`` or ``async with``.

    ``limiter`` and ``cache`` replace the config's own (one budget and one cache shared by many processes);
    ``limiters`` replace the own limiters of the ``judge.base_urls`` endpoints, one each, in order; ``transport``
    replaces the SDK transport (``http_client``: the ``httpx2`` client under the SDK's)."""
    settings = judge_settings(config)
    overridden = sorted(METHOD_PARAMS & config.params.keys())
    if overridden:
        log.warning("judge.params sets %s for every request, over the published methods' own values: "
                    "scores will not follow the TREC protocols exactly", ", ".join(overridden))
    limits = [limit for _, limit in _urls(config)]
    given = list(limiters) if limiters is not None else [limiter] if limiter is not None else []
    pacing = [given[i] if i < len(given) else Limiter.create(limit, config.requests_per_minute,
                                                             config.tokens_per_minute,
                                                             adaptive=config.adaptive_concurrency)
              for i, limit in enumerate(limits)]
    if transport is None and http_client is not None:
        transport = open_transport(settings, http_client=http_client)
    return OpenAIJudge(
        settings, limiters=pacing, transport=transport, sleep=sleep,
        cache=_open_cache(config.cache, base_dir) if cache is None else cache, owns_cache=cache is None,
        breaker=OutageBreaker(config.outage_after_failures, config.outage_after_s),
        accounting=Accounting(config.model, price_for(config.model, config.prices)),
    )


def judge_settings(config: JudgeConfig) -> JudgeSettings:
    """The client settings of ``config``, the key read from its environment variable (``ConfigError`` when a
    remote endpoint needs one and it is unset)."""
    urls = [url for url, _ in _urls(config)]
    api_key = os.environ.get(config.api_key_env, "").strip()
    if not api_key:
        remote = next((url for url in urls if not is_local_url(url)), None)
        if config.simulated is None and remote is not None:
            raise ConfigError(f"no API key for {safe_url(remote)}: set the environment variable "
                              f"{config.api_key_env}", path="judge.api_key_env")
        api_key = NO_KEY  # local servers ignore it; OpenAI-compatible servers expect the header to be there
    return settings_for(config, urls, api_key=api_key)


def open_transport(settings: JudgeSettings, *, http_client: httpx2.AsyncClient | None = None) -> SdkTransport:
    """The SDK transport of ``settings``' endpoints (over ``http_client`` when given)."""
    return SdkTransport([_target(settings, url) for url in settings.base_urls], model=settings.model,
                        timeout_s=settings.timeout_s, max_reply_bytes=settings.max_reply_bytes,
                        http_client=http_client)


def _urls(config: JudgeConfig) -> list[tuple[str, int]]:
    return config.endpoints() or [(config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
                                   config.max_concurrency)]


def is_local_url(url: str) -> bool:
    """Loopback, private-network and ``localhost`` endpoints (vLLM, Ollama, LM Studio, ...) need no key."""
    return local_host(httpx2.URL(url).host)


def _open_cache(setting: str | bool, base_dir: Path) -> JudgeCache | MemoryCache | None:
    if setting is False:
        return MemoryCache()  # nothing kept after the run; within it, one request is asked once
    path = cache_path(setting, base_dir)
    return None if path is None else JudgeCache(path)
