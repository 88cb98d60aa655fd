"""``HttpConnector``: query a RAG system over HTTP, ``repeats`` times per query.

Each call sends the JSON ``body`` template with ``{query}``, ``{query_id}`` and ``{run}`` filled in (a string that is
exactly one placeholder becomes the value itself, so ``"{run}"`` sends a number). The reply is mapped with dotted
field paths (``result.documents``, ``choices.0.text``) to the answer text and passages (id, text, title, score);
inline ``[n]`` markers in the answer are resolved against the passages as in the CSV input.

Secrets stay in the environment: ``secret_headers: {Authorization: {env: RAG_API_KEY, prefix: "Bearer "}}`` reads the
variable when the connector is built and never writes its value anywhere.

Concurrency is bounded (``concurrency``); 429 / 5xx replies, timeouts and network errors are retried with
exponential backoff and jitter (a server's Retry-After wins). A call that still fails, or a reply that cannot be
mapped, becomes an output with ``error`` set to the reason: it is reported, never silently missing.

    connector:
      type: http
      queries: queries.csv
      repeats: 3
      options:
        url: https://rag.example.com/query
        body: {question: "{query}", stream: false}
        answer_path: answer
        passages_path: sources
        passage_id_path: id
        passage_text_path: snippet
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import time
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import httpx2
from pydantic import BaseModel, ConfigDict, Field

from open_rag_eval import (ConfigError, Passage, RAGOutput, ReplyRefused, RetryPolicy, bounded_client, cut,
                           parse_retry_after, register_credentials, register_secret, segment_answer)

__all__ = ["HttpConnector", "HttpOptions", "Malformed", "SecretHeader", "get_path"]

log = logging.getLogger(__name__)


class SecretHeader(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env: str  # the environment variable holding the secret
    prefix: str = ""  # e.g. "Bearer "


class HttpOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    url: str
    method: Literal["POST", "PUT", "GET"] = "POST"  # GET sends the template as query parameters
    headers: dict[str, str] = {}
    secret_headers: dict[str, SecretHeader] = {}
    body: Any = {"query": "{query}"}
    answer_path: str = "answer"
    passages_path: str | None = "passages"  # None: the system returns no passages
    passage_id_path: str | None = "id"  # None: passages are numbered 1, 2, ... in reply order
    passage_text_path: str = "text"
    passage_title_path: str | None = None
    passage_score_path: str | None = None
    refused_path: str | None = None  # a boolean the system sets when it declines to answer
    concurrency: int = Field(4, ge=1, le=256)
    timeout_s: float = Field(60.0, gt=0, le=86_400)  # the whole request: connect, wait, every byte of the reply
    max_reply_mb: float = Field(32.0, gt=0, le=4096)  # a longer reply (after decompression) is a failed call
    retries: int = Field(3, ge=0, le=20)
    backoff_s: float = Field(0.5, ge=0, le=3600)
    retry_statuses: list[int] = [408, 429, 500, 502, 503, 504]


class Malformed(ValueError):
    """A reply that cannot be mapped to an output."""


_MISSING = object()


def _is_index(part: str) -> bool:
    """A list index: ASCII digits (``'¹'.isdigit()`` is true, ``int('¹')`` raises), an optional leading minus."""
    digits = part.removeprefix("-")
    return digits.isascii() and digits.isdigit()


def get_path(data: Any, path: str) -> Any:
    """The value at a dotted path (``a.b.0.c``); raises ``Malformed`` naming the path when it is absent."""
    current = data
    for part in path.split("."):
        if isinstance(current, dict):
            current = current.get(part, _MISSING)
        elif isinstance(current, list) and _is_index(part) and -len(current) <= int(part) < len(current):
            current = current[int(part)]
        else:
            current = _MISSING
        if current is _MISSING:
            raise Malformed(f"the reply has no field '{path}'")
    return current


def _fill(template: Any, values: dict[str, Any]) -> Any:
    if isinstance(template, dict):
        return {key: _fill(value, values) for key, value in template.items()}
    if isinstance(template, list):
        return [_fill(value, values) for value in template]
    if isinstance(template, str):
        for name, value in values.items():
            if template == "{" + name + "}":
                return value
        for name, value in values.items():
            template = template.replace("{" + name + "}", str(value))
    return template


class _Failed(Exception):
    def __init__(self, reason: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason, self.retryable, self.retry_after = reason, retryable, retry_after


class HttpConnector:
    Options: ClassVar[type[BaseModel]] = HttpOptions

    def __init__(self, options: HttpOptions, *, http_client: httpx2.AsyncClient | None = None) -> None:
        self.options = options
        self._client = http_client
        register_credentials(options.headers, options.url)  # a literal credential in a plain header is still one
        self._headers = {**options.headers, **self._secret_headers()}
        self._retry = RetryPolicy(max_retries=options.retries, base_s=options.backoff_s)

    def _secret_headers(self) -> dict[str, str]:
        headers = {}
        for name, secret in self.options.secret_headers.items():
            value = os.environ.get(secret.env)
            if not value:
                raise ConfigError(f"environment variable {secret.env} is not set",
                                  path=f"connector.options.secret_headers.{name}")
            register_secret(value)  # from now on redacted from every message, log line and output file
            headers[name] = secret.prefix + value
        return headers

    async def fetch(self, queries: Sequence[tuple[str, str]], repeats: int) -> list[RAGOutput]:
        limit = asyncio.Semaphore(self.options.concurrency)
        # a total deadline per request, a bounded reply, no redirects (open_rag_eval.transport)
        client = self._client or bounded_client(timeout_s=self.options.timeout_s,
                                                max_bytes=int(self.options.max_reply_mb * 1_000_000))
        try:
            jobs = [self._one(client, limit, qid, query, run) for qid, query in queries for run in range(1, repeats + 1)]
            return list(await asyncio.gather(*jobs))
        finally:
            if self._client is None:
                await client.aclose()

    async def _one(self, client: httpx2.AsyncClient, limit: asyncio.Semaphore, qid: str, query: str,
                   run: int) -> RAGOutput:
        async with limit:
            try:
                reply, latency_ms = await self._call(client, qid, query, run)
                return self._output(reply, qid, query, run, latency_ms)
            except _Failed as failure:
                return RAGOutput(query_id=qid, query=query, run=run, error=failure.reason)
            except Malformed as error:
                return RAGOutput(query_id=qid, query=query, run=run, error=f"malformed reply: {error}")
            except RecursionError:
                return RAGOutput(query_id=qid, query=query, run=run, error="malformed reply: nested too deeply")

    async def _call(self, client: httpx2.AsyncClient, qid: str, query: str, run: int) -> tuple[Any, float]:
        body = _fill(self.options.body, {"query": query, "query_id": qid, "run": run})
        attempt = 0
        while True:
            started = time.perf_counter()
            try:
                return await self._attempt(client, body), (time.perf_counter() - started) * 1000
            except _Failed as failure:
                if not failure.retryable or attempt >= self.options.retries:
                    attempts = f" after {attempt + 1} attempts" if attempt else ""
                    raise _Failed(failure.reason + attempts, False) from None
                delay = self._retry.delay(attempt, failure.retry_after)
                log.debug("query %s run %d: %s; retrying in %.2fs", qid, run, failure.reason, delay)
                attempt += 1
                await asyncio.sleep(delay)

    async def _attempt(self, client: httpx2.AsyncClient, body: Any) -> Any:
        options = self.options
        try:
            if options.method == "GET":
                response = await client.get(options.url, params=body, headers=self._headers, timeout=options.timeout_s)
            else:
                response = await client.request(options.method, options.url, json=body, headers=self._headers,
                                                timeout=options.timeout_s)
        except httpx2.TimeoutException:
            raise _Failed(f"timed out after {options.timeout_s:g}s", True) from None
        except httpx2.TransportError as error:
            raise _Failed(f"connection failed: {type(error).__name__}", True) from None
        except ReplyRefused as error:  # too large, a redirect: the same server would send it again
            raise _Failed(error.reason, False) from None
        if 300 <= response.status_code < 400:
            raise _Failed(f"HTTP {response.status_code} redirect: not followed (use the final address)", False)
        if response.status_code >= 400:
            retryable = response.status_code in options.retry_statuses
            snippet = cut(response.text, 200)  # redacted before the cut
            raise _Failed(f"HTTP {response.status_code}" + (f": {snippet}" if snippet else ""), retryable,
                          parse_retry_after(response.headers))
        try:
            return response.json()
        except (ValueError, UnicodeDecodeError):
            raise Malformed("the reply is not JSON") from None
        except RecursionError:
            raise Malformed("the reply's JSON is nested too deeply") from None

    def _output(self, reply: Any, qid: str, query: str, run: int, latency_ms: float) -> RAGOutput:
        answer = get_path(reply, self.options.answer_path)
        if answer is None:
            answer = ""
        if not isinstance(answer, str):
            raise Malformed(f"'{self.options.answer_path}' is not text (got {type(answer).__name__})")
        passages = self._passages(reply)
        parts = segment_answer(answer, [p.id for p in passages]) if answer.strip() else ()
        return RAGOutput(query_id=qid, query=query, run=run, passages=passages, answer=parts, answer_text=answer,
                         latency_ms=round(latency_ms, 3), refused=self._refused(reply))

    def _refused(self, reply: Any) -> bool | None:
        if self.options.refused_path is None:
            return None
        flag = get_path(reply, self.options.refused_path)
        if flag is not None and not isinstance(flag, bool):
            raise Malformed(f"'{self.options.refused_path}' is not true, false or null (got {type(flag).__name__})")
        return flag

    def _passages(self, reply: Any) -> tuple[Passage, ...]:
        options = self.options
        if options.passages_path is None:
            return ()
        items = get_path(reply, options.passages_path)
        if items is None:
            return ()
        if not isinstance(items, list):
            raise Malformed(f"'{options.passages_path}' is not a list (got {type(items).__name__})")
        passages = []
        for index, item in enumerate(items, start=1):
            where = f"{options.passages_path}.{index - 1}"
            try:
                pid = index if options.passage_id_path is None else get_path(item, options.passage_id_path)
                text = get_path(item, options.passage_text_path)
                title = get_path(item, options.passage_title_path) if options.passage_title_path else None
                score = get_path(item, options.passage_score_path) if options.passage_score_path else None
                passages.append(Passage(id=_id(pid), text=_text(text, "text"),
                                        title=None if title is None else _text(title, "title"),
                                        score=None if score is None else _score(score)))
            except Malformed as error:
                raise Malformed(f"passage {where}: {error}") from None
            except (TypeError, ValueError) as error:
                raise Malformed(f"passage {where}: {json.dumps(str(error))[1:-1]}") from None
        return tuple(passages)


def _text(value: Any, name: str) -> str:
    """A passage's text or title as the system sent it: text only (null is not the text "None")."""
    if not isinstance(value, str):
        raise Malformed(f"{name} is not text (got {'null' if value is None else type(value).__name__})")
    return value


def _id(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not str(value).strip():
        raise Malformed(f"id is not a non-empty string or integer (got {value!r})")
    return str(value)


def _score(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise Malformed(f"score is not a finite number (got {value!r})")
    return float(value)
