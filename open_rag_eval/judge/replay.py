"""Record and replay the judge: real request/response pairs in a JSONL file, answered again offline.

``judge.record: FILE`` appends one line per HTTP exchange with the real endpoint; ``judge.replay: FILE`` answers
the same requests from the file, through the same client code (classification, retries, parsing), so a real
model's behaviour can be tested without the model. Both are transports of the judge client
(``judge.transports``): ``ReplayTransport`` answers from the file, ``RecordingTransport`` wraps the SDK transport.
One line::

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
import json
import logging
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2

from open_rag_eval.core.errors import ConfigError, InputError
from open_rag_eval.inputs.jsonl import json_object_lines
from open_rag_eval.judge.base import Message
from open_rag_eval.judge.cache import cache_key
from open_rag_eval.judge.config import JudgeConfig
from open_rag_eval.judge.http11 import Reply
from open_rag_eval.judge.replies import Failure
from open_rag_eval.judge.transports import Answer, Call, Transport

if TYPE_CHECKING:
    from open_rag_eval.judge.client import OpenAIJudge

__all__ = ["REPLAY_ENDPOINT", "Exchange", "RecordingTransport", "ReplayTransport", "open_taped_judge", "read_tape",
           "replay_key"]

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


class ReplayTransport:
    """Answers each attempt from the recording (``judge.transports.Transport``): the n-th attempt of a request
    gets its n-th recorded exchange. A request the file does not hold, or an attempt beyond those recorded, is a
    failed judgment saying so -- never a made-up answer."""

    caches = counts = False

    def __init__(self, tape: Mapping[str, list[Exchange]], *, model: str, source: str) -> None:
        self.tape, self.model, self.source = tape, model, source

    async def send(self, call: Call) -> Answer:
        key = replay_key(model=self.model, messages=call.messages, params=call.params,
                         prompt_version=call.prompt_version, sample=call.sample)
        exchanges = self.tape.get(key)
        if not exchanges:
            return Failure("fail", f"replay: {self.source} holds no recorded reply for this {call.task} request "
                                   f"(key {key[:12]}){self._models_hint()}")
        if call.attempt >= len(exchanges):
            return Failure("fail", f"replay: {self.source} records {len(exchanges)} attempt(s) of this {call.task} "
                                   f"request (key {key[:12]}) and the client asked for more; the recording ended "
                                   "in a failure")
        exchange = exchanges[call.attempt]
        return Reply(exchange.status, {k.lower(): v for k, v in exchange.headers.items()},
                     exchange.body.encode("utf-8"))

    def _models_hint(self) -> str:
        models = sorted({e.model for exchanges in self.tape.values() for e in exchanges if e.model})
        if models and self.model not in models:
            return f"; the file was recorded with judge.model {', '.join(repr(m) for m in models)}"
        return ""

    async def aclose(self) -> None:
        """Nothing to close."""


class RecordingTransport:
    """Sends through ``inner`` and appends every HTTP exchange it gets to the tape (``judge.transports.Transport``)."""

    caches = counts = False

    def __init__(self, inner: Transport, writer: _TapeWriter, *, model: str) -> None:
        self.inner, self.writer, self.model = inner, writer, model

    async def send(self, call: Call) -> Answer:
        answer = await self.inner.send(call)
        if isinstance(answer, Reply):
            key = replay_key(model=self.model, messages=call.messages, params=call.params,
                             prompt_version=call.prompt_version, sample=call.sample)
            body = answer.content.decode("utf-8", "replace")
            self.writer.write(key, call, self.model, answer.status_code, body,
                              {name: answer.headers[name] for name in _KEPT_HEADERS if name in answer.headers})
        return answer

    async def aclose(self) -> None:
        try:
            await self.inner.aclose()
        finally:
            self.writer.close()
            log.info("judge: recorded %d exchange(s) to %s", self.writer.written, self.writer.path)


class _TapeWriter:
    """Appends one JSON line per exchange, flushed at once: a run that stops keeps what it recorded."""

    def __init__(self, path: Path, secret: str) -> None:
        self.path, self._secret = Path(path), secret
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._handle = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self.written = 0

    def write(self, key: str, call: Call, model: str, status: int, body: str, headers: Mapping[str, str]) -> None:
        row = {
            "key": key, "task": call.task, "model": model,
            "request": {"messages": [list(m) for m in call.messages], "params": dict(call.params),
                        "prompt_version": call.prompt_version, "sample": call.sample},
            "status": status, "body": body, "headers": dict(headers), "usage": _usage(body),
        }
        line = json.dumps(row, ensure_ascii=False, sort_keys=True, default=str)
        if len(self._secret) >= 4:
            line = line.replace(self._secret, "***")
        with self._lock:
            if self._handle.closed:
                return
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


async def _no_sleep(_seconds: float) -> None:
    await asyncio.sleep(0)


def open_taped_judge(config: JudgeConfig, *, base_dir: Path,
                     transport: httpx2.AsyncBaseTransport | None = None) -> OpenAIJudge:
    """The judge for a config with ``replay`` or ``record`` set. The judge cache is off for both: a replay must
    answer from the file alone, and a recording must see every request. ``transport`` (tests) replaces the
    recorder's network transport under the SDK."""
    from open_rag_eval.judge.client import judge_settings, open_judge, open_transport

    uncached = config.model_copy(update={"cache": False, "replay": None, "record": None})
    if config.replay is not None:
        path = _resolve(config.replay, base_dir)
        tape = read_tape(path)
        replaying = uncached.model_copy(update={"base_url": REPLAY_BASE_URL, "base_urls": None})
        log.info("judge: replaying %d recorded request(s) from %s", len(tape), path)
        # recorded waits are not waited again
        return open_judge(replaying, base_dir=base_dir, sleep=_no_sleep,
                          transport=ReplayTransport(tape, model=config.model, source=str(config.replay)))
    if config.record is None:
        raise ConfigError("neither judge.replay nor judge.record is set", path="judge")
    if config.cache is not False:
        log.info("judge: recording to %s with the judge cache off, so every request reaches the endpoint",
                 config.record)
    settings = judge_settings(uncached)
    http = None if transport is None else httpx2.AsyncClient(transport=transport, timeout=config.timeout_s)
    writer = _TapeWriter(_resolve(config.record, base_dir), os.environ.get(config.api_key_env, "").strip())
    recording = RecordingTransport(open_transport(settings, http_client=http), writer, model=config.model)
    try:
        return open_judge(uncached, base_dir=base_dir, transport=recording)
    except BaseException:
        writer.close()
        raise


def _resolve(value: str, base_dir: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else Path(base_dir) / path
