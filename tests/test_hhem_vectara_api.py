"""The vectara_api backend against a real loopback HTTP server: success, 4xx not retried, 429/5xx retried."""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from open_rag_eval.metrics.hallucination import HallucinationMetric, HallucinationOptions, VectaraApiOptions
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput
from tests.loopback import Loopback, send_json

KEY = "vk-test-secret-123"


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)


class FactualConsistencyServer(Loopback):
    """Answers POST /v2/evaluate_factual_consistency with scripted replies; records requests."""

    def __init__(self, replies: list[Reply], default: Reply | None = None) -> None:
        self.replies = deque(replies)
        self.default = default or Reply(500, {"error": "script exhausted"})
        self.seen: list[tuple[str, dict[str, str], Any]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server.lock:
                    server.seen.append((self.path, dict(self.headers), body))
                    reply = server.replies.popleft() if server.replies else server.default
                payload = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode()
                send_json(self, reply.status, payload, reply.headers.items())

            def log_message(self, *args: Any) -> None:
                pass

        super().__init__(Handler)
        self.base_url = self.origin


def outputs(n: int = 1) -> list[RAGOutput]:
    return [
        RAGOutput(query_id=f"q{i}", query="where?",
                  passages=(Passage(id="1", text="The Eiffel Tower is in Paris."), Passage(id="2", text="Built 1889.")),
                  answer=(AnswerPart(text="The tower is in Paris.", citations=("1",)),), answer_text="The tower is in Paris. [1]")
        for i in range(n)
    ]


def run(server: FactualConsistencyServer, items: list[RAGOutput], **vectara: Any):
    options = HallucinationOptions(
        backend="vectara_api", vectara=VectaraApiOptions(base_url=server.base_url, api_key_env="TEST_VECTARA_KEY",
                                                         language="eng", max_concurrency=1, **vectara))
    return asyncio.run(HallucinationMetric(options).score(items))


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_VECTARA_KEY", KEY)


def test_success_sends_the_documented_request_and_reads_score() -> None:
    with FactualConsistencyServer([Reply(200, {"score": 0.23, "p_consistent": 0.12, "p_inconsistent": 0.88})]) as server:
        result = run(server, outputs())
    path, headers, body = server.seen[0]
    assert path == "/v2/evaluate_factual_consistency"
    assert headers["x-api-key"] == KEY
    assert body == {"generated_text": "The tower is in Paris.",
                    "source_texts": ["The Eiffel Tower is in Paris.", "Built 1889."], "language": "eng"}
    assert [(s.metric, s.value) for s in result.scores] == [("hhem.score", 0.23), ("hhem.hallucinated", 1.0)]
    assert result.details[0].data == {"backend": "vectara_api", "chunked": False, "n_chunks": 1, "threshold": 0.5,
                                      "truncated": False, "chunk_scores": [0.23]}


def test_a_4xx_is_not_retried() -> None:
    with FactualConsistencyServer([Reply(422, {"message": "unsupported language"})]) as server:
        result = run(server, outputs())
    assert len(server.seen) == 1
    assert result.scores[0].value is None and "HTTP 422" in result.scores[0].error
    assert KEY not in result.scores[0].error


def test_429_and_5xx_are_retried_then_succeed() -> None:
    replies = [Reply(503, {}, {"Retry-After": "0"}), Reply(429, {}, {"Retry-After": "0"}), Reply(200, {"score": 0.91})]
    with FactualConsistencyServer(replies) as server:
        result = run(server, outputs())
    assert len(server.seen) == 3
    assert [(s.metric, s.value) for s in result.scores] == [("hhem.score", 0.91), ("hhem.hallucinated", 0.0)]


def test_retries_are_bounded() -> None:
    with FactualConsistencyServer([], default=Reply(500, {}, {"Retry-After": "0"})) as server:
        result = run(server, outputs(), max_retries=2)
    assert len(server.seen) == 3
    assert "HTTP 500" in result.scores[0].error and "after 2 retries" in result.scores[0].error


def test_an_auth_refusal_stops_the_remaining_calls() -> None:
    with FactualConsistencyServer([Reply(403, {"message": "forbidden"})], default=Reply(200, {"score": 0.5})) as server:
        result = run(server, outputs(3))
    assert len(server.seen) == 1
    assert all(s.value is None and "HTTP 403" in s.error for s in result.scores)


def test_a_reply_without_a_score_is_a_failure_not_a_guess() -> None:
    with FactualConsistencyServer([Reply(200, {"consistency": 0.7})]) as server:
        result = run(server, outputs())
    assert result.scores[0].value is None and "no score in [0, 1]" in result.scores[0].error


def test_a_missing_key_fails_without_calling(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_VECTARA_KEY")
    with FactualConsistencyServer([Reply(200, {"score": 0.5})]) as server:
        result = run(server, outputs())
    assert not server.seen
    assert "TEST_VECTARA_KEY" in result.scores[0].error and "hallucination.vectara.api_key_env" in result.scores[0].error


@pytest.mark.parametrize("offset", [0, 150, 160])  # from 160 on the key starts 8 characters before the cut
def test_a_key_echoed_in_an_error_body_is_redacted_before_the_cut(offset: int) -> None:
    """A 401 body that repeats the x-api-key (across the 200-character cut from ``offset`` on): no piece is kept."""
    message = "." * offset + f" invalid x-api-key {KEY} for this account"
    with FactualConsistencyServer([Reply(401, {"message": message})]) as server:
        result = run(server, outputs())
    error = result.scores[0].error
    assert "HTTP 401" in error and "invalid x-api-key ***" in error
    assert not [KEY[:k] for k in range(6, len(KEY) + 1) if KEY[:k] in error]


def test_a_redirect_is_not_followed_and_the_api_key_goes_nowhere_else() -> None:
    with FactualConsistencyServer([Reply(200, {"score": 0.5})]) as elsewhere:
        target = elsewhere.base_url.replace("127.0.0.1", "localhost") + "/v2/evaluate_factual_consistency"
        with FactualConsistencyServer([Reply(307, {}, {"Location": target})]) as server:
            result = run(server, outputs())
    assert elsewhere.seen == [] and len(server.seen) == 1  # not re-sent, not retried
    errors = {s.error for s in result.scores}
    assert errors == {f"Vectara API HTTP 307 redirect to {target}: not followed (redirects are never followed; "
                      "use the final address)"}, errors


def test_a_deeply_nested_reply_is_not_json() -> None:
    with FactualConsistencyServer([Reply(200, b"[" * 100_000 + b"]" * 100_000)]) as server:
        result = run(server, outputs())
    assert {s.error for s in result.scores} == {"reply is not JSON"}
