"""Record and replay the judge: real request/response pairs in a JSONL file, answered again offline.

``judge.record: FILE`` appends one line per HTTP exchange with the real endpoint; ``judge.replay: FILE`` answers
the same requests from the file, through the same client code (classification, retries, parsing), so a real
model's behaviour can be tested without the model. One line::

    {"key": "<sha256>", "task": "umbrela", "model": "...",
     "request": {"messages": [[role, content], ...], "params": {...}, "prompt_version": "...", "sample": 0},
     "status": 200, "body": "<the raw response body>", "headers": {"retry-after": "1"}, "usage": {...}}

The key is the judge cache's key with a fixed endpoint (``replay://judge``), so a file recorded against any URL
replays anywhere. Several lines with one key are the attempts of one call, in order (a 500, then the retry's
200); a later recording of the same request only adds attempts after them. A request the file does not hold is
a failed judgment with that reason -- never a made-up answer. Nothing secret is written: no request header, only
the ``retry-after`` and ``content-type`` response headers, and the key's value is masked wherever it appears.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2

from open_rag_eval.core.errors import ConfigError, InputError, JudgeCallError
from open_rag_eval.inputs.jsonl import json_object_lines
from open_rag_eval.judge.base import Completion, JudgeRequest, Message
from open_rag_eval.judge.cache import cache_key
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.transport import BoundedTransport

__all__ = ["REPLAY_ENDPOINT", "Exchange", "TapedJudge", "open_taped_judge", "read_tape", "replay_key"]

log = logging.getLogger("open_rag_eval.judge")

REPLAY_ENDPOINT = "replay://judge"  # in the key instead of the base_url: a recording replays from any URL
REPLAY_BASE_URL = "http://replay.localhost/v1"  # where the replaying client "sends" its requests
_KEPT_HEADERS = ("retry-after", "content-type")
_REQUIRED = {"key": str, "status": int, "body": str}


def replay_key(*, model: str, messages: Sequence[Message], params: Mapping[str, Any], prompt_version: str,
               sample: int) -> str:
    """The judge cache's key, with the endpoint fixed."""
    return cache_key(base_url=REPLAY_ENDPOINT, model=model, messages=messages, params=params,
                     prompt_version=prompt_version, sample=sample)


@dataclass(frozen=True)
class Exchange:
    """One recorded HTTP exchange."""

    key: str
    status: int
    body: str
    headers: Mapping[str, str] = field(default_factory=dict)
    task: str = ""
    model: str = ""


def read_tape(path: Path) -> dict[str, list[Exchange]]:
    """The file's exchanges grouped by key, in file order. Bad lines are an ``InputError`` naming file and line."""
    tape: dict[str, list[Exchange]] = {}
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read the judge replay file ({error})", file=str(path)) from None
    for number, row in json_object_lines(text, str(path)):
        exchange = _exchange(row, str(path), number)
        tape.setdefault(exchange.key, []).append(exchange)
    return tape


def _exchange(row: dict[str, Any], file: str, number: int) -> Exchange:
    for name, kind in _REQUIRED.items():
        if not isinstance(row.get(name), kind) or isinstance(row.get(name), bool):
            raise InputError(f"missing or not a {kind.__name__}", file=file, line=number, field=name)
    headers = row.get("headers") or {}
    if not isinstance(headers, dict):
        raise InputError("must be an object", file=file, line=number, field="headers")
    return Exchange(row["key"], row["status"], row["body"], {str(k): str(v) for k, v in headers.items()},
                    str(row.get("task", "")), str(row.get("model", "")))


@dataclass
class _Call:
    """The logical call in flight in this task: its key, request, and how many HTTP attempts it made."""

    key: str
    request: JudgeRequest
    params: dict[str, Any]
    attempts: int = 0
    exhausted: bool = False


_CURRENT: contextvars.ContextVar[_Call | None] = contextvars.ContextVar("open_rag_eval_taped_call", default=None)


class ReplayExhausted(httpx2.TransportError):
    """The client asked for more attempts of a call than the file records."""


class _ReplayTransport(httpx2.AsyncBaseTransport):
    def __init__(self, tape: Mapping[str, list[Exchange]]) -> None:
        self.tape = tape

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        call = _CURRENT.get()
        exchanges = self.tape.get(call.key, []) if call is not None else []
        if call is None or call.attempts >= len(exchanges):
            if call is not None:
                call.exhausted = True
            raise ReplayExhausted("no more recorded attempts", request=request)
        exchange = exchanges[call.attempts]
        call.attempts += 1
        return httpx2.Response(exchange.status, headers=dict(exchange.headers),
                               content=exchange.body.encode("utf-8"), request=request)


class _RecordTransport(httpx2.AsyncBaseTransport):
    def __init__(self, writer: _TapeWriter, model: str, inner: httpx2.AsyncBaseTransport | None = None) -> None:
        self.writer, self.model = writer, model
        self.inner = inner or httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        body = await response.aread()
        call = _CURRENT.get()
        if call is not None:
            call.attempts += 1
            self.writer.write(call, self.model, response.status_code, body.decode("utf-8", "replace"),
                              {name: response.headers[name] for name in _KEPT_HEADERS if name in response.headers})
        return httpx2.Response(response.status_code, headers=response.headers, content=body, request=request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class _TapeWriter:
    """Appends one JSON line per exchange, flushed at once: a run that stops keeps what it recorded."""

    def __init__(self, path: Path, secret: str) -> None:
        self.path, self._secret = Path(path), secret
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.written = 0

    def write(self, call: _Call, model: str, status: int, body: str, headers: Mapping[str, str]) -> None:
        request = call.request
        row = {
            "key": call.key, "task": request.task, "model": model,
            "request": {"messages": [list(m) for m in request.messages], "params": call.params,
                        "prompt_version": request.prompt_version, "sample": request.sample},
            "status": status, "body": body, "headers": dict(headers), "usage": _usage(body),
        }
        line = json.dumps(row, ensure_ascii=False, sort_keys=True, default=str)
        if len(self._secret) >= 4:
            line = line.replace(self._secret, "***")
        with self._lock:
            self._handle.write(line + "\n")
            self._handle.flush()
            self.written += 1

    def close(self) -> None:
        with self._lock:
            self._handle.close()


def _usage(body: str) -> dict[str, Any] | None:
    try:
        usage = json.loads(body).get("usage")
    except (ValueError, AttributeError):
        return None
    return usage if isinstance(usage, dict) else None


class TapedJudge:
    """A judge client whose HTTP goes to a recording (replay) or through a recorder (record).

    Everything else is the wrapped ``OpenAIJudge``: its attributes are this object's attributes."""

    def __init__(self, inner: Any, http_client: httpx2.AsyncClient, *,
                 tape: Mapping[str, list[Exchange]] | None = None, source: str = "",
                 writer: _TapeWriter | None = None) -> None:
        self._inner, self._http, self._tape, self._source, self._writer = inner, http_client, tape, source, writer

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    @property
    def replaying(self) -> bool:
        return self._tape is not None

    async def complete(self, request: JudgeRequest) -> Completion:
        params = self._inner.final_params(request.params)
        key = replay_key(model=self._inner.model, messages=request.messages, params=params,
                         prompt_version=request.prompt_version, sample=request.sample)
        if self._tape is not None and key not in self._tape:
            self._inner.accounting.task(request.task).failures += 1
            raise JudgeCallError(f"replay: {self._source} holds no recorded reply for this {request.task} request "
                                 f"(key {key[:12]}){self._models_hint()}")
        call = _Call(key, request, params)
        token = _CURRENT.set(call)
        try:
            return await self._inner.complete(request)
        except JudgeCallError:
            if call.exhausted:
                raise JudgeCallError(f"replay: {self._source} records {call.attempts} attempt(s) of this "
                                     f"{request.task} request (key {key[:12]}) and the client asked for more; "
                                     f"the recording ended in a failure") from None
            raise
        finally:
            _CURRENT.reset(token)

    def _models_hint(self) -> str:
        models = sorted({e.model for exchanges in (self._tape or {}).values() for e in exchanges if e.model})
        if models and self._inner.model not in models:
            return f"; the file was recorded with judge.model {', '.join(repr(m) for m in models)}"
        return ""

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
            await self._http.aclose()
        finally:
            if self._writer is not None:
                self._writer.close()
                log.info("judge: recorded %d exchange(s) to %s", self._writer.written, self._writer.path)

    async def __aenter__(self) -> TapedJudge:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:
        await self.aclose()


async def _no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


def open_taped_judge(config: JudgeConfig, *, base_dir: Path, simulated: bool = False,
                     transport: httpx2.AsyncBaseTransport | None = None) -> TapedJudge:
    """The judge for a config with ``replay`` or ``record`` set. The judge cache is off for both: a replay must
    answer from the file alone, and a recording must see every request. ``transport`` (tests) replaces the
    recorder's real network transport."""
    from open_rag_eval.judge.client import open_judge

    uncached = config.model_copy(update={"cache": False, "replay": None, "record": None})
    if config.replay is not None:
        path = _resolve(config.replay, base_dir)
        tape = read_tape(path)
        replaying = uncached.model_copy(update={"base_url": REPLAY_BASE_URL})
        http = httpx2.AsyncClient(transport=_ReplayTransport(tape))
        inner = open_judge(replaying, base_dir=base_dir, http_client=http)
        inner._sleep = _no_sleep  # recorded waits are not waited again
        log.info("judge: replaying %d recorded request(s) from %s", len(tape), path)
        return TapedJudge(inner, http, tape=tape, source=str(config.replay))
    if config.record is None:
        raise ConfigError("neither judge.replay nor judge.record is set", path="judge")
    if config.cache is not False:
        log.info("judge: recording to %s with the judge cache off, so every request reaches the endpoint",
                 config.record)
    writer = _TapeWriter(_resolve(config.record, base_dir), os.environ.get(config.api_key_env, "").strip())
    network = transport or BoundedTransport(httpx2.AsyncHTTPTransport(), deadline_s=config.timeout_s,
                                            max_bytes=int(config.max_reply_mb * 1_000_000))  # as a live judge's
    http = httpx2.AsyncClient(transport=_RecordTransport(writer, config.model, network), timeout=config.timeout_s)
    try:
        inner = open_judge(uncached, base_dir=base_dir, simulated=simulated, http_client=http)
    except BaseException:
        writer.close()
        raise
    return TapedJudge(inner, http, writer=writer)


def _resolve(value: str, base_dir: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(base_dir) / path
