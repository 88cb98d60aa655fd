"""The simulated judge: an OpenAI-compatible HTTP server on loopback, for tests, benchmarks and the offline demo.

It speaks ``POST /v1/chat/completions`` and ``GET /v1/models`` and answers every recognised prompt of the
project deterministically from the prompt's content (see ``sim_answer``). Its scores mean nothing about a
real system; everything produced with it must be labelled simulated.

Knobs (``SimulatedServerConfig``, a superset of the config file's ``judge.simulated``): latency and jitter,
an error rate (429 with ``Retry-After`` or 500), malformed replies (a body that is not JSON, or a reply text
that no parser accepts), hangs (no answer until the client gives up) and an API key to require. Every random
choice is drawn from a hash of (seed, canonical request body, how many times that body was seen before), so
a run is reproducible given its set of requests and a retried request can succeed.

    with SimulatedJudgeServer(SimulatedServerConfig(latency_ms=300, jitter_ms=50)) as server:
        base_url = server.base_url          # "http://127.0.0.1:PORT/v1"
        ...
        server.stats.max_in_flight, server.stats.log[0].kind
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Self

from pydantic import Field

from open_rag_eval._version import __version__
from open_rag_eval.judge.config import SimulatedJudgeConfig, simulated_fingerprint
from open_rag_eval.judge.sim_answer import UNPARSEABLE_REPLY, count_tokens, obeyed, perturb, reply
from open_rag_eval.judge.tokens import chat_tokens
from open_rag_eval.judge.sim_http import (
    Request,
    Response,
    json_response,
    serve_connection,
)

__all__ = ["RequestRecord", "ServerStats", "SimulatedJudgeServer", "SimulatedServerConfig"]

log = logging.getLogger(__name__)

_BAD_JSON = b'{"id": "chatcmpl-sim", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assi'


class SimulatedServerConfig(SimulatedJudgeConfig):
    """Server-side knobs beyond ``judge.simulated``."""

    share_429: float = Field(default=0.5, ge=0, le=1)  # of the errors, the share that are 429 (the rest are 500)
    api_key: str | None = None  # when set, other bearer tokens get 401
    reject_params: list[str] = Field(default_factory=list)  # request fields answered with 400 "unsupported parameter" (reasoning models)
    model: str = "simulated-judge"  # listed by /v1/models


@dataclass
class RequestRecord:
    kind: str  # prompt kind (sim_answer.KINDS) or "-" for a request that never got that far
    query: str
    model: str
    start: float  # time.perf_counter() seconds
    end: float
    status: int  # HTTP status sent; 0 = hung / dropped
    outcome: str  # ok, malformed_body, malformed_text, error, hang, rejected
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class ServerStats:
    requests: int = 0  # chat completion requests received
    connections: int = 0  # TCP connections accepted (keep-alive reuses one for many requests)
    in_flight: int = 0
    max_in_flight: int = 0
    log: list[RequestRecord] = field(default_factory=list)
    unknown_prompts: int = 0

    def reset(self) -> None:
        self.requests = self.connections = self.max_in_flight = self.unknown_prompts = 0
        self.log = []


def _unit(seed: int, salt: str, seen: int, key: bytes) -> float:
    digest = hashlib.sha256(f"{seed}|{salt}|{seen}|".encode() + key).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _messages(body: dict[str, Any]) -> list[tuple[str, str]]:
    out = []
    for message in body["messages"]:
        content = message.get("content") or ""
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        out.append((str(message.get("role", "user")), str(content)))
    return out


def _error(status: int, message: str, kind: str, code: str | None = None, **headers: str) -> Response:
    return json_response(status, {"error": {"message": message, "type": kind, "param": None, "code": code}}, headers)


class SimulatedJudgeServer:
    """The loopback server; runs its own event loop in a background thread. Use as a context manager."""

    def __init__(self, config: SimulatedJudgeConfig | None = None, *, host: str = "127.0.0.1", port: int = 0) -> None:
        base = config or SimulatedServerConfig()
        self.config = base if isinstance(base, SimulatedServerConfig) else SimulatedServerConfig(**base.model_dump())
        self.host, self.port = host, port
        self.stats = ServerStats()
        self.fingerprint = simulated_fingerprint(f"{__version__}|{self.config.seed}")
        self._seen: dict[bytes, int] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self._startup_error: BaseException | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # --- lifecycle --------------------------------------------------------------------------------------

    def start(self) -> str:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="simulated-judge", daemon=True)
        self._thread.start()
        ready.wait()
        if self._startup_error is not None:
            raise self._startup_error
        log.debug("simulated judge listening on %s", self.base_url)
        return self.base_url

    def stop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(self._on_connect, self.host, self.port, limit=1 << 22, backlog=2048)
            )
            self.port = self._server.sockets[0].getsockname()[1]
            self._loop = loop
        except (OSError, OverflowError, ValueError) as error:  # in use, not ours, or not a port at all
            self._startup_error = error if isinstance(error, OSError) else OSError(str(error))
            loop.close()
            ready.set()
            return
        ready.set()
        try:
            loop.run_forever()
        finally:  # a connection accepted while stopping may still run: end it before the loop closes
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.stats.connections += 1
        try:
            await serve_connection(reader, writer, self._route)
        except asyncio.CancelledError:  # shutting down
            writer.close()
        finally:
            self._tasks.discard(task)

    # --- requests ---------------------------------------------------------------------------------------

    async def _route(self, request: Request) -> Response | None:
        if request.path.rstrip("/") in ("/v1/models", "/models") and request.method == "GET":
            model = {"id": self.config.model, "object": "model", "created": 0, "owned_by": "open-rag-eval-simulated"}
            return json_response(200, {"object": "list", "data": [model]})
        if request.path.rstrip("/") in ("/v1/chat/completions", "/chat/completions"):
            if request.method != "POST":
                return _error(405, "use POST", "invalid_request_error")
            return await self._chat(request)
        return _error(404, f"no route {request.method} {request.path}", "invalid_request_error")

    def _authorised(self, request: Request) -> bool:
        key = self.config.api_key
        return key is None or request.headers.get("authorization", "") == f"Bearer {key}"

    async def _chat(self, request: Request) -> Response | None:
        stats = self.stats
        stats.requests += 1
        stats.in_flight += 1
        stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
        record = RequestRecord("-", "", "", time.perf_counter(), 0.0, 0, "rejected")
        try:
            response = await self._complete(request, record)
        finally:
            stats.in_flight -= 1
            record.end = time.perf_counter()
            stats.log.append(record)
        record.status = response.status if response is not None else 0
        return response

    def _check(self, request: Request) -> dict[str, Any] | Response:
        if not self._authorised(request):
            return _error(401, "Incorrect API key provided (simulated judge).", "invalid_request_error",
                          "invalid_api_key")
        try:
            body = json.loads(request.body)
            _messages(body)
        except (ValueError, KeyError, TypeError, AttributeError):
            return _error(400, "the body must be JSON with a 'messages' list", "invalid_request_error")
        for name in self.config.reject_params:
            if name in body:
                return _error(400, f"Unsupported parameter: '{name}' is not supported with this model.",
                              "invalid_request_error", "unsupported_parameter")
        if body.get("stream"):
            return _error(400, "streaming is not supported by the simulated judge", "invalid_request_error")
        return body

    async def _complete(self, request: Request, record: RequestRecord) -> Response | None:
        checked = self._check(request)
        if isinstance(checked, Response):
            return checked
        body, messages = checked, _messages(checked)
        result = reply(messages)
        if result.kind == "unknown":
            self.stats.unknown_prompts += 1
            level = logging.WARNING if self.stats.unknown_prompts == 1 else logging.DEBUG
            log.log(level, "simulated judge: unrecognised prompt (generic reply): %.80r", messages[-1][1] if messages else "")
        record.kind, record.query, record.model = result.kind, result.query, str(body.get("model", ""))
        record.prompt_tokens = chat_tokens(content for _, content in messages)
        key = json.dumps(body, sort_keys=True, ensure_ascii=False).encode()
        digest = hashlib.sha256(key).digest()  # remembered by digest: 90,000 bodies would hold hundreds of MB
        seen = self._seen.get(digest, 0)
        self._seen[digest] = seen + 1
        return await self._fate(request, body, result.text, key, seen, record)

    async def _fate(self, request: Request, body: dict[str, Any], text: str, key: bytes, seen: int,
                    record: RequestRecord) -> Response | None:
        cfg = self.config
        draw = _unit(cfg.seed, "fate", seen, key)
        if draw < cfg.error_rate:
            record.outcome = "error"
            if _unit(cfg.seed, "status", seen, key) < cfg.share_429:
                headers = {} if cfg.retry_after_s is None else {
                    "Retry-After": f"{cfg.retry_after_s:g}", "retry-after-ms": f"{cfg.retry_after_s * 1000:g}"}
                return _error(429, "Rate limit reached (simulated).", "requests", "rate_limit_exceeded", **headers)
            await self._sleep(key, seen)
            return _error(500, "The server had an error (simulated).", "server_error")
        draw -= cfg.error_rate
        if draw < cfg.timeout_rate:
            record.outcome = "hang"
            try:
                await asyncio.wait_for(request.reader.read(1), timeout=cfg.hang_s)
            except TimeoutError:
                pass
            return None
        await self._sleep(key, seen)
        if draw - cfg.timeout_rate < cfg.malformed_rate:
            if _unit(cfg.seed, "malformed", seen, key) < 0.5:
                record.outcome = "malformed_body"
                return Response(200, _BAD_JSON)
            record.outcome, text = "malformed_text", UNPARSEABLE_REPLY
        else:
            record.outcome = "ok"
            if _unit(cfg.seed, "noise", seen, key) < cfg.noise_rate:
                text = perturb(record.kind, text, _unit(cfg.seed, "noise-which", seen, key))
            demand = obeyed(record.kind, _messages(body)) if cfg.injection_rate else None
            if demand is not None and _unit(cfg.seed, "injection", seen, key) < cfg.injection_rate:
                text = demand
        return json_response(200, self._completion(body, text, key, record))

    async def _sleep(self, key: bytes, seen: int) -> None:
        cfg = self.config
        delay = cfg.latency_ms + cfg.jitter_ms * (2 * _unit(cfg.seed, "latency", seen, key) - 1)
        if delay > 0:
            await asyncio.sleep(delay / 1000)

    def _completion(self, body: dict[str, Any], text: str, key: bytes, record: RequestRecord) -> dict[str, Any]:
        n = max(1, int(body.get("n") or 1))
        record.completion_tokens = count_tokens(text) * n
        message = {"role": "assistant", "content": text, "refusal": None}
        return {
            "id": "chatcmpl-sim-" + hashlib.sha256(key).hexdigest()[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": record.model or self.config.model,
            "system_fingerprint": self.fingerprint,
            "choices": [{"index": i, "message": message, "logprobs": None, "finish_reason": "stop"} for i in range(n)],
            "usage": {"prompt_tokens": record.prompt_tokens, "completion_tokens": record.completion_tokens,
                      "total_tokens": record.prompt_tokens + record.completion_tokens},
        }
