"""A scripted OpenAI-compatible HTTP server on loopback, for testing the judge client end to end.

Each ``POST /v1/chat/completions`` takes the next scripted ``Reply`` (then ``default``); a ``responder``
callable can decide from the request body instead. The server records every request (body, headers, arrival
time) and the maximum number of requests it was handling at once.

    with ScriptedServer([Reply.status(429, retry_after="0"), Reply.ok("2")]) as server:
        ... base_url=server.base_url ...
        assert server.max_in_flight <= 4
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.judge.client import OpenAIJudge, open_judge
from open_rag_eval.judge.config import JudgeConfig
from tests.loopback import send_json

__all__ = ["ECHO_KEY", "FAST", "Reply", "ScriptedServer", "Seen", "ask", "azure_door", "completion_body", "config",
           "outcome", "with_judge"]


def completion_body(content: str | None, *, prompt_tokens: int = 10, completion_tokens: int = 2,
                    fingerprint: str | None = "fp_test", model: str = "test-model") -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": fingerprint,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: dict[str, Any] | str = field(default_factory=lambda: completion_body("ok"))
    headers: tuple[tuple[str, str], ...] = ()
    delay_s: float = 0.0
    raw: bytes | None = None  # sent verbatim instead of ``body`` (e.g. gzip bytes with a Content-Encoding header)
    drip_s: float = 0.0  # > 0: the body leaves one byte at a time, this long apart

    @classmethod
    def ok(cls, content: str | None = "ok", *, delay_s: float = 0.0, **usage: Any) -> Reply:
        return cls(200, completion_body(content, **usage), delay_s=delay_s)

    @classmethod
    def error(cls, status: int, message: str = "error", *, retry_after: str | None = None,
              code: str | None = None, param: str | None = None, delay_s: float = 0.0) -> Reply:
        body = {"error": {"message": message, "type": "test_error", "code": code, "param": param}}
        headers = (("Retry-After", retry_after),) if retry_after is not None else ()
        return cls(status, body, headers, delay_s)

    @classmethod
    def shaped(cls, message: dict[str, Any] | None = None, *, finish_reason: Any = "stop", usage: Any = "default",
               fingerprint: Any = "fp_test", drop: tuple[str, ...] = ()) -> Reply:
        """A 200 whose body departs from the usual shape: any ``message`` (content null, missing, a list of parts,
        a refusal), any ``finish_reason``, any ``usage`` (``"default"``: 10 + 2; ``None``: the key left out), any
        fingerprint; ``drop`` removes top-level keys."""
        body = completion_body("x", fingerprint=None)
        body["system_fingerprint"] = fingerprint
        body["choices"][0] = {"index": 0, "finish_reason": finish_reason,
                              "message": {"role": "assistant", "content": "2"} if message is None else message}
        if usage is None:
            del body["usage"]
        elif usage != "default":
            body["usage"] = usage
        for key in drop:
            body.pop(key, None)
        return cls(200, body)

    @classmethod
    def echo_key(cls, status: int, offset: int) -> Reply:
        """An error whose message repeats the bearer token it was sent, after ``offset`` characters of padding."""
        return cls.error(status, "." * offset + f" invalid request for key {ECHO_KEY}: rejected")

    @classmethod
    def malformed(cls) -> Reply:
        return cls(200, '{"id": "chatcmpl-broken", "choices": [')

    # -- misbehaving transports (payloads in hostile_http.py) --

    @classmethod
    def dripping(cls, interval_s: float, content: str = "##final score: 2") -> Reply:
        """A valid completion whose every byte arrives ``interval_s`` after the previous one."""
        return cls(200, completion_body(content), drip_s=interval_s)

    @classmethod
    def redirect(cls, location: str, status: int = 307) -> Reply:
        return cls(status, "", (("Location", location),))

    @classmethod
    def encoded(cls, payload: bytes, encoding: str = "gzip") -> Reply:
        return cls(200, "", (("Content-Encoding", encoding),), raw=payload)


def azure_door(deployment: str, api_version: str, key: str) -> Door:
    """Azure OpenAI's door: ``/openai/deployments/DEPLOYMENT/chat/completions?api-version=VERSION`` with the key in
    the ``api-key`` header, or the status Azure answers (404 for another deployment or no api-version, 401 for a
    missing or wrong key)."""

    def door(seen: Seen) -> Reply | None:
        path, _, query = seen.path.partition("?")
        headers = {name.lower(): value for name, value in seen.headers.items()}
        if path != f"/openai/deployments/{deployment}/chat/completions":
            return Reply.error(404, "The API deployment for this resource does not exist.", code="DeploymentNotFound")
        if f"api-version={api_version}" not in query.split("&"):
            return Reply.error(404, "Resource not found")
        if headers.get("api-key") != key:
            return Reply.error(401, "Access denied due to invalid subscription key or wrong API endpoint.",
                               code="401")
        return None

    return door


@dataclass(frozen=True)
class Seen:
    """One request as the server saw it."""

    at: float  # time.monotonic() on arrival
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Responder = Callable[[dict[str, Any]], Reply]
Door = Callable[["Seen"], "Reply | None"]  # looks at a request before the script: a reply refuses it, None lets it in
ECHO_KEY = "<<bearer token>>"  # in a reply's body: replaced by the token the request carried


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 512  # the default backlog of 5 drops bursts of connections (1 s SYN retransmits)


class ScriptedServer:
    def __init__(self, script: Iterable[Reply] = (), *, default: Reply | None = None,
                 responder: Responder | None = None, door: Door | None = None) -> None:
        self._script: deque[Reply] = deque(script)
        self.door = door
        self.default = default or Reply.ok()
        self.responder = responder
        self.requests: list[Seen] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = _Server(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.01,), daemon=True)

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    @property
    def completions(self) -> list[Seen]:
        return [seen for seen in self.requests if seen.path.partition("?")[0].endswith("/chat/completions")]

    def push(self, *replies: Reply) -> None:
        with self._lock:
            self._script.extend(replies)

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        if self.responder is not None:
            return self.responder(body)
        with self._lock:
            return self._script.popleft() if self._script else self.default

    def _enter(self, seen: Seen) -> None:
        with self._lock:
            self.requests.append(seen)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def _leave(self) -> None:
        with self._lock:
            self.in_flight -= 1


def _handler_for(server: ScriptedServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        wbufsize = 1 << 16  # headers and body leave in one write (no delayed-ACK stalls on keep-alive)

        def log_message(self, format: str, *args: Any) -> None:  # silence the default stderr log
            pass

        def do_GET(self) -> None:
            self._send(Reply(200, {"object": "list", "data": [{"id": "test-model", "object": "model"}]}))

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = json.loads(raw or b"{}")
            seen = Seen(time.monotonic(), self.path, dict(self.headers.items()), body)
            server._enter(seen)
            try:
                refused = server.door(seen) if server.door is not None else None
                reply = refused if refused is not None else server._next_reply(body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                self._send(reply, self.headers.get("Authorization", "").removeprefix("Bearer "))
            except (BrokenPipeError, ConnectionResetError):
                pass
            finally:
                server._leave()

        def _send(self, reply: Reply, token: str = "") -> None:
            data = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            data = data.replace(ECHO_KEY, token)
            payload = reply.raw if reply.raw is not None else data.encode()
            send_json(self, reply.status, payload, reply.headers, reply.drip_s)

    return Handler


# -- helpers for client tests -----------------------------------------------------------------------------

T = TypeVar("T")

FAST = {"backoff_base_s": 0.001, "backoff_cap_s": 0.002, "retry_after_cap_s": 0.05}


def constant_small_model(body: dict[str, Any]) -> Reply:
    """A real small model's one answer per task, given to every request (what a constant 0.5B judge did): every
    passage 2, every citation No Support, every answer "no"; any other task is refused (HTTP 400)."""
    user = body["messages"][-1]["content"]
    if "Statement:" in user:
        return Reply.ok("No Support")
    if "score on an integer scale of 0 to 3" in user:
        return Reply.ok("##final score: 2")
    if "attempt to answer the query" in user:
        return Reply.ok("no")
    return Reply.error(400, "not a task of this test")


def config(base_url: str, **overrides: Any) -> JudgeConfig:
    return JudgeConfig(**{"model": "test-model", "base_url": base_url, "cache": False, **FAST, **overrides})


def ask(text: str = "grade this", task: str = "umbrela", **fields: Any) -> JudgeRequest:
    return JudgeRequest.chat(task, text, **fields)


def with_judge(cfg: JudgeConfig, body: Callable[[OpenAIJudge], Awaitable[T]], base_dir: Path = Path(".")) -> T:
    async def main() -> T:
        async with open_judge(cfg, base_dir=base_dir) as judge:
            return await body(judge)

    return asyncio.run(main())


async def outcome(judge: OpenAIJudge, request: JudgeRequest) -> Any:
    """The completion, or the exception it raised (so tests can look at both)."""
    try:
        return await judge.complete(request)
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return error
