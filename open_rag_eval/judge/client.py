"""The judge client: any OpenAI-compatible chat endpoint, through the ``openai`` SDK's ``AsyncOpenAI``.

This is the one layer that owns every cross-cutting concern: cache, in-flight de-duplication, concurrency,
RPM/TPM pacing, retries (429, 5xx, timeouts, connection errors; Retry-After honoured), outage detection and
accounting. The SDK's own retries are off. Metrics only see ``complete(request) -> Completion`` or an error:

- ``JudgeCallError(reason)``: this judgment failed (after its retries, or a non-retryable reply);
- ``JudgeUnavailable(reason)``: the endpoint refuses us (auth) or is down; raised for every later call too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from typing import TYPE_CHECKING

import httpx2

from open_rag_eval.errors import ConfigError, JudgeCallError, JudgeError, JudgeUnavailable
from open_rag_eval.judge.accounting import Accounting, price_for
from open_rag_eval.judge.base import Completion, JudgeRequest, Message
from open_rag_eval.judge.cache import CachedCompletion, JudgeCache, cache_key
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.limits import Limiter, OutageBreaker, RetryPolicy, Sleep, parse_retry_after

__all__ = ["DEFAULT_BASE_URL", "OpenAIJudge", "open_judge", "strip_reasoning"]

if TYPE_CHECKING:
    import openai

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def _openai() -> Any:
    """The SDK, imported on the first real call: a run answered wholly from the cache never loads it."""
    import openai

    return openai
DEFAULT_CACHE = ".open-rag-eval/cache.sqlite"

log = logging.getLogger("open_rag_eval.judge")

_RETRY_STATUS = {408, 409, 429}
_DOWN_STATUS = {401, 403, 404}  # wrong key, no access, wrong base_url/model: every later call would fail too
_THINK_PAIR = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_THINK_CLOSE = re.compile(r"</(think|thinking|reasoning)>", re.IGNORECASE)


SIMULATED_ENDPOINT = "simulated://judge"
# sampling params the methods set themselves (docs/methods.md)
METHOD_PARAMS = frozenset({"temperature", "top_p", "frequency_penalty", "presence_penalty", "max_tokens",
                           "max_completion_tokens", "seed"})


def strip_reasoning(text: str) -> str:
    """Remove reasoning blocks: paired tags, a cut-off opening tag (drops the rest), a lone closing tag."""
    text = _THINK_PAIR.sub("", text)
    opening = _THINK_OPEN.search(text)
    if opening:
        text = text[: opening.start()]
    closings = list(_THINK_CLOSE.finditer(text))
    if closings:
        text = text[closings[-1].end():]
    return text.strip()


@dataclass(frozen=True)
class _Failure:
    kind: str  # "retry" | "fail" | "down"
    reason: str
    retry_after: float | None = None
    rate_limited: bool = False


@dataclass(frozen=True)
class _Reply:
    raw: str
    prompt_tokens: int
    completion_tokens: int
    fingerprint: str | None
    finish_reason: str | None


class _Malformed(Exception):
    pass


class OpenAIJudge:
    """Implements the ``Judge`` protocol. Use ``open_judge(config, ...)`` to build one from a config."""

    def __init__(self, *, model: str, base_url: str, api_key: str, limiter: Limiter,
                 cache: JudgeCache | None = None, retry: RetryPolicy | None = None,
                 breaker: OutageBreaker | None = None, accounting: Accounting | None = None,
                 params: Mapping[str, Any] | None = None, drop_params: Sequence[str] = (),
                 timeout_s: float = 60.0, http_client: httpx2.AsyncClient | None = None,
                 simulated: bool = False, key_name: str = "the API key variable", owns_cache: bool = False,
                 sleep: Sleep = asyncio.sleep) -> None:
        self.model, self.simulated = model, simulated
        self.base_url = base_url.rstrip("/")
        self.cache, self.limiter = cache, limiter
        self.retry = retry or RetryPolicy()
        self.breaker = breaker or OutageBreaker()
        self.accounting = accounting or Accounting(model)
        self.params, self.drop_params = dict(params or {}), frozenset(drop_params)
        self.timeout_s, self._key_name, self._sleep = timeout_s, key_name, sleep
        self._secret = api_key
        self._owns_cache, self._owns_http = owns_cache, http_client is None
        self._http_client = http_client
        self._client: openai.AsyncOpenAI | None = None
        self._inflight: dict[str, asyncio.Future[tuple[Completion, str]]] = {}

    # -- the Judge protocol ------------------------------------------------------------------------------------

    async def complete(self, request: JudgeRequest) -> Completion:
        self._check_available()
        params = self.final_params(request.params)
        endpoint = SIMULATED_ENDPOINT if self.simulated else self.base_url  # its port changes run to run
        key = cache_key(base_url=endpoint, model=self.model, messages=request.messages, params=params,
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
        """The method's params, updated by ``judge.params``, minus ``judge.drop_params``."""
        merged = {**method_params, **self.params}
        return {name: value for name, value in merged.items() if name not in self.drop_params}

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def aclose(self) -> None:
        pending = list(self._inflight.values())
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        if self._owns_http and self._client is not None:
            await self._client.close()
        if self._owns_cache and self.cache is not None:
            self.cache.close()

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()

    # -- internals ---------------------------------------------------------------------------------------------

    def _sdk(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = _openai().AsyncOpenAI(api_key=self._secret, base_url=self.base_url, max_retries=0,
                                                 timeout=self.timeout_s, http_client=self._http_client)
        return self._client

    def _settle(self, key: str, done: asyncio.Future[tuple[Completion, str]]) -> None:
        if self._inflight.get(key) is done:
            del self._inflight[key]
        if not done.cancelled():
            done.exception()  # retrieved here, so an orphaned failure is not reported as "never retrieved"

    def _check_available(self) -> None:
        if self.breaker.reason is not None:
            raise JudgeUnavailable(self._redact(self.breaker.reason))

    async def _cached(self, key: str) -> Completion | None:
        hit = await self.cache.get(key) if self.cache is not None else None
        if hit is None or not strip_reasoning(hit.text):
            return None
        return Completion(strip_reasoning(hit.text), True, hit.prompt_tokens, hit.completion_tokens, hit.fingerprint)

    async def _fetch(self, request: JudgeRequest, params: dict[str, Any], key: str) -> tuple[Completion, str]:
        hit = await self._cached(key)
        if hit is not None:
            return hit, "cache"
        reply = await self._call_api(request.task, request.messages, params, request.priority, key)
        if isinstance(reply, Completion):  # another process cached it while this call waited for a slot
            return reply, "cache"
        text = strip_reasoning(reply.raw)
        if not text:
            hint = " (cut off by the token limit: raise max_tokens)" if reply.finish_reason == "length" else ""
            raise JudgeCallError(f"empty reply from the judge (finish_reason={reply.finish_reason}){hint}",
                                 refused=True)
        if self.cache is not None:
            entry = CachedCompletion(reply.raw, reply.prompt_tokens, reply.completion_tokens, reply.fingerprint,
                                     self.model, _unix_now())
            await self.cache.put(key, entry)
        return Completion(text, False, reply.prompt_tokens, reply.completion_tokens, reply.fingerprint), "api"

    async def _call_api(self, task: str, messages: Sequence[Message], params: dict[str, Any],
                        priority: int = 0, key: str | None = None) -> _Reply | Completion:
        stats = self.accounting.task(task)
        sdk = self._sdk()  # built (and imported) before queueing, so the wait for a slot is the only wait
        estimate = _estimate_tokens(messages, params)
        body = [{"role": role, "content": content} for role, content in messages]
        last = "no attempt made"
        for attempt in range(self.retry.max_retries + 1):
            self._check_available()
            if attempt:
                stats.retries += 1
            try:
                # a retry goes before every call not yet started: calls finish (or fail for good) in turn, so a
                # dead endpoint trips the outage breaker after a few calls, not after every queued call's first try
                async with self.limiter.slot(estimate, priority if attempt == 0 else -1):
                    if attempt == 0 and key is not None and (hit := await self._cached(key)) is not None:
                        return hit
                    if attempt == 0:
                        stats.calls += 1
                    # the SDK's own POST: its errors, auth and retries-off, without re-validating our request
                    # and response through its typed models (half the client's CPU per call)
                    response = await sdk.post("/chat/completions", cast_to=object,
                                              body={**params, "model": self.model, "messages": body},
                                              options={"timeout": self.timeout_s})
                reply = _extract(response)
            except (_openai().OpenAIError, httpx2.HTTPError, ValueError, _Malformed) as error:
                failure = self._classify(error)
                failure = replace(failure, reason=self._redact(failure.reason))
                if failure.kind != "retry":
                    return self._give_up(failure)
                if failure.rate_limited:
                    self.limiter.concurrency.rate_limited()
                last = failure.reason
                if attempt < self.retry.max_retries:
                    wait = self.retry.delay(attempt, failure.retry_after)
                    log.info("judge: %s; retry %d/%d in %.2fs", last, attempt + 1, self.retry.max_retries, wait)
                    await self._sleep(wait)
                continue
            self.breaker.success()
            await self.limiter.concurrency.succeeded()
            self.limiter.used_tokens(estimate, reply.prompt_tokens + reply.completion_tokens)
            self.accounting.usage(task, reply.prompt_tokens, reply.completion_tokens, reply.fingerprint)
            return reply
        self.breaker.failure(last)
        self._check_available()
        raise JudgeCallError(self._redact(f"judge call failed after {self.retry.max_retries + 1} attempts: {last}"))

    def _give_up(self, failure: _Failure) -> _Reply:
        if failure.kind == "down":
            self.breaker.trip(failure.reason)
            raise JudgeUnavailable(self._redact(failure.reason))
        raise JudgeCallError(self._redact(failure.reason), refused=failure.kind == "refuse")

    def _classify(self, error: BaseException) -> _Failure:
        openai = _openai()
        if isinstance(error, openai.APITimeoutError):
            return _Failure("retry", f"timed out after {self.timeout_s:g}s")
        if isinstance(error, openai.APIConnectionError):
            return _Failure("retry", f"cannot connect to {_safe_url(self.base_url)}")
        if isinstance(error, openai.APIStatusError):
            return self._classify_status(error)
        if isinstance(error, httpx2.HTTPError):
            return _Failure("retry", f"transport error ({type(error).__name__})")
        return _Failure("retry", f"malformed reply from the judge ({_short(str(error))})")

    def _classify_status(self, error: openai.APIStatusError) -> _Failure:
        status, message = error.status_code, _short(_server_message(error))
        if status == 429 and error.code == "insufficient_quota":
            return _Failure("down", f"the judge account has no quota left (HTTP 429: {message})")
        if status in _RETRY_STATUS or status >= 500:
            retry_after = parse_retry_after(error.response.headers)
            return _Failure("retry", f"HTTP {status}: {message}", retry_after, rate_limited=status == 429)
        if status in (401, 403):
            return _Failure("down", f"the judge endpoint refused the credentials (HTTP {status}: {message}); "
                                    f"check the key in the environment variable {self._key_name}")
        if status == 404:
            return _Failure("down", f"the judge endpoint has no such model or path (HTTP 404: {message}); "
                                    f"check judge.model ('{self.model}') and judge.base_url")
        unsupported = _unsupported_param(error)
        if unsupported is not None:
            return _Failure("fail", f"the endpoint rejected the parameter '{unsupported}' for model "
                                    f"'{self.model}' (HTTP {status}: {message}); remove it from judge.params "
                                    f"or add it to judge.drop_params")
        return _Failure("refuse", f"HTTP {status}: {message}")

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "***") if len(self._secret) >= 4 else text


def _extract(response: Any) -> _Reply:
    """The reply's text, usage and fingerprint from the chat-completion JSON."""
    try:
        choice = response["choices"][0]
        content = choice["message"].get("content")
        usage = response.get("usage") or {}
        return _Reply(
            raw=content if isinstance(content, str) else "",
            prompt_tokens=int(usage.get("prompt_tokens") or 0),
            completion_tokens=int(usage.get("completion_tokens") or 0),
            fingerprint=response.get("system_fingerprint"),
            finish_reason=choice.get("finish_reason"),
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        raise _Malformed("the reply is not a chat completion") from None


def _server_message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
    return error.message


def _unsupported_param(error: openai.APIStatusError) -> str | None:
    message = _server_message(error)
    lowered = message.lower()
    named = error.code in ("unsupported_parameter", "unsupported_value") or any(
        marker in lowered for marker in ("unsupported parameter", "unsupported value", "not supported",
                                         "unrecognized request argument", "extra inputs are not permitted",
                                         "unknown parameter"))
    if not named:
        return None
    if error.param:
        return str(error.param)
    quoted = re.search(r"['\"`]([A-Za-z_][A-Za-z0-9_.]*)['\"`]", message)
    return quoted.group(1) if quoted else "?"


def _estimate_tokens(messages: Sequence[Message], params: Mapping[str, Any]) -> int:
    prompt = sum(len(content) // 4 + 4 for _, content in messages)
    limit = params.get("max_completion_tokens", params.get("max_tokens", 0))
    return prompt + (limit if isinstance(limit, int) else 0)


def _safe_url(url: str) -> str:
    """The URL without credentials or query string."""
    parsed = httpx2.URL(url)
    return str(parsed.copy_with(username=None, password=None, query=None))


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _unix_now() -> float:
    return time.time()


def open_judge(config: JudgeConfig, *, base_dir: Path, simulated: bool = False,
               http_client: httpx2.AsyncClient | None = None) -> OpenAIJudge:
    """Build the judge a config describes. Raises ``ConfigError`` when the endpoint needs a key and the
    environment variable ``config.api_key_env`` is unset. Close it with ``aclose()`` or ``async with``."""
    base_url = (config.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
    overridden = sorted(METHOD_PARAMS & config.params.keys())
    if overridden:
        log.warning("judge.params sets %s for every request, over the published methods' own values: "
                    "scores will not follow the TREC protocols exactly", ", ".join(overridden))
    api_key = os.environ.get(config.api_key_env, "").strip()
    if not api_key:
        if not (simulated or is_local_url(base_url)):
            raise ConfigError(f"no API key for {_safe_url(base_url)}: set the environment variable "
                              f"{config.api_key_env}", path="judge.api_key_env")
        api_key = "not-needed"  # local servers ignore it; the SDK insists on one
    retry = RetryPolicy(config.max_retries, config.backoff_base_s, config.backoff_cap_s, config.retry_after_cap_s)
    return OpenAIJudge(
        model=config.model, base_url=base_url, api_key=api_key,
        limiter=Limiter.create(config.max_concurrency, config.requests_per_minute, config.tokens_per_minute,
                               adaptive=config.adaptive_concurrency),
        cache=_open_cache(config.cache, base_dir), retry=retry,
        breaker=OutageBreaker(config.outage_after_failures, config.outage_after_s),
        accounting=Accounting(config.model, price_for(config.model, config.prices)),
        params=config.params, drop_params=config.drop_params, timeout_s=config.timeout_s,
        http_client=http_client, simulated=simulated, key_name=config.api_key_env, owns_cache=True,
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


def _open_cache(setting: str | bool, base_dir: Path) -> JudgeCache | None:
    if setting is False:
        return None
    path = Path(DEFAULT_CACHE if setting is True else setting).expanduser()
    return JudgeCache(path if path.is_absolute() else Path(base_dir) / path)
