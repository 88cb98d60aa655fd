"""A fake RAG system on loopback, for connector and sweep tests.

``POST /query`` with ``{"query": ..., "query_id": ..., "run": ...}`` answers

    {"answer": "... [1] ... [2]", "passages": [{"id": "d1", "text": ...}, ...],
     "result": {"summary": <same answer>, "documents": [{"doc_id", "content", "title", "score"}]}}

so both flat and nested field paths can be tested. ``behaviour`` is switchable between sweeps:

- ``mode="stable"``: the same answer every time; ``mode="unstable"``: each call words the answer differently;
- ``latency_s``: a delay before every reply;
- ``fail``: query id -> HTTP statuses returned first (one per call, consumed), e.g. ``[503, 503]``;
- ``malformed``: query id -> "not_json" | "missing_answer" | "bad_passages" | "null_passage" (a passage whose
  text is null) | "duplicate_ids" (two passages with one id) | "nan_score" (a score NaN, as Python's json writes
  it) | "empty_answer" | "scored" (a valid reply with a passage score) (every call);
- ``echo_header``: a failing reply's body repeats the value of this request header (as careless servers do in
  their 401/500 pages), after ``echo_offset`` characters of padding -- to put a secret across a message cut.
- ``hostile``: query id -> a misbehaving transport (every call): "drip" (a valid reply, one byte every ``drip_s``),
  "huge" (a 40 MB answer), "padded" (a valid reply made 40 MB by a field nobody reads), "gzip_bomb" (1 MB of gzip
  inflating to 1 GiB), "deep_json" (arrays 100,000 deep), "redirect" (307 to ``redirect_to``).

The server records each request's body and headers, and the most requests it handled at once. ``hold_after = N``
makes every request after the first N wait (unanswered, counted in ``in_flight``) until ``release()``: a test that
needs a run to be mid-fetch at some moment holds it there instead of racing it.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.hostile_http import deep_json, gzip_bomb, huge_json
from tests.loopback import Loopback, send_json

__all__ = ["RagBehaviour", "RagServer"]

_WORDINGS = [
    "{topic} is explained in the first source [1]. The second source adds background [2].",
    "According to several reports, {topic} changed a lot over the last decade [2].",
    "Nobody fully agrees on {topic}; opinions range widely across experts and time [1].",
    "Short version: see documents one and two for {topic} [1][2].",
    "{topic}? It depends heavily on context, region, budget and many other local factors.",
]


_ONE = {"id": "d1", "text": "A passage.", "score": 0.5}
_BROKEN: dict[str, Any] = {
    "null_passage": {"answer": "Yes [1].", "passages": [{**_ONE, "text": None}]},
    "duplicate_ids": {"answer": "Yes [1].", "passages": [_ONE, {**_ONE, "text": "Another."}]},
    "nan_score": {"answer": "Yes [1].", "passages": [{**_ONE, "score": float("nan")}]},
    "empty_answer": {"answer": "", "passages": [_ONE]},
    "scored": {"answer": "Yes [1].", "passages": [_ONE]},  # a valid reply whose passage has a score
}


@dataclass
class RagBehaviour:
    mode: str = "stable"
    latency_s: float = 0.0
    fail: dict[str, list[int]] = field(default_factory=dict)
    malformed: dict[str, str] = field(default_factory=dict)
    echo_header: str | None = None
    echo_offset: int = 0
    hostile: dict[str, str] = field(default_factory=dict)
    drip_s: float = 0.25
    redirect_to: str = ""


class RagServer(Loopback):
    def __init__(self, behaviour: RagBehaviour | None = None) -> None:
        self.behaviour = behaviour or RagBehaviour()
        self.requests: list[dict[str, Any]] = []
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.hold_after: int | None = None
        self._arrived = 0
        self._released = threading.Event()
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def release(self) -> None:
        """Let the held requests (and every later one) go on."""
        self._released.set()

    def _hold(self) -> None:
        with self._lock:
            self._arrived += 1
            held = self.hold_after is not None and self._arrived > self.hold_after
        if held and not self._released.wait(300):
            raise TimeoutError("a held request was never released")

    def __exit__(self, *exc: object) -> None:
        self.release()
        super().__exit__(*exc)

    @property
    def url(self) -> str:
        return f"{self.origin}/query"

    def answer(self, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, str]:
        behaviour = self.behaviour
        qid, query = str(body.get("query_id", "")), str(body.get("query", ""))
        with self._lock:
            self.calls += 1
            call = self.calls
            statuses = behaviour.fail.get(qid)
            status = statuses.pop(0) if statuses else 200
        if status != 200:
            if behaviour.echo_header is not None:
                got = {name.lower(): value for name, value in (headers or {}).items()}.get(behaviour.echo_header.lower())
                padding = "." * behaviour.echo_offset
                return status, f'{padding} error {status}: request had {behaviour.echo_header}: {got} -- denied'
            return status, json.dumps({"error": f"injected {status}"})
        kind = behaviour.malformed.get(qid)
        if kind == "not_json":
            return 200, "<html>oops</html>"
        if kind == "missing_answer":
            return 200, json.dumps({"passages": []})
        passages = [{"id": f"{qid}-d{i}", "text": f"Passage {i} about {query}.", "title": f"Doc {i}", "score": 1 / i}
                    for i in (1, 2)]
        if kind == "bad_passages":
            return 200, json.dumps({"answer": "x", "passages": "not a list"})
        if kind in _BROKEN:
            return 200, json.dumps(_BROKEN[kind])
        wording = _WORDINGS[0] if behaviour.mode == "stable" else _WORDINGS[call % len(_WORDINGS)]
        answer = wording.format(topic=query.rstrip("?"))
        documents = [{"doc_id": p["id"], "content": p["text"], "title": p["title"], "score": p["score"]} for p in passages]
        return 200, json.dumps({"answer": answer, "passages": [{"id": p["id"], "text": p["text"]} for p in passages],
                                "result": {"summary": answer, "documents": documents}})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                with server._lock:
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    raw = self.rfile.read(length)
                    body = json.loads(raw or b"{}")
                    with server._lock:
                        server.requests.append({"body": body, "headers": dict(self.headers)})
                    server._hold()
                    if server.behaviour.latency_s:
                        time.sleep(server.behaviour.latency_s)
                    kind = server.behaviour.hostile.get(str(body.get("query_id", "")))
                    if kind is not None:
                        self._hostile(kind, body)
                        return
                    status, text = server.answer(body, dict(self.headers))
                    send_json(self, status, text.encode(), [("Retry-After", "0")] if status == 429 else [])
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _hostile(self, kind: str, body: dict[str, Any]) -> None:
                behaviour = server.behaviour
                if kind == "drip":
                    _, text = server.answer(body)
                    send_json(self, 200, text.encode(), [], behaviour.drip_s)
                elif kind == "huge":
                    send_json(self, 200, huge_json(40).encode())
                elif kind == "padded":  # a valid reply of 40 MB: a field nobody reads carries the bulk
                    _, text = server.answer(body)
                    padded = {**json.loads(text), **json.loads(huge_json(40, "padding"))}
                    send_json(self, 200, json.dumps(padded).encode())
                elif kind == "gzip_bomb":
                    send_json(self, 200, gzip_bomb(), [("Content-Encoding", "gzip")])
                elif kind == "deep_json":
                    send_json(self, 200, deep_json().encode())
                elif kind == "redirect":
                    send_json(self, 307, b"", [("Location", behaviour.redirect_to)])
                else:
                    raise ValueError(f"unknown hostile kind {kind!r}")

        return Handler
