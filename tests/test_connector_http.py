"""The HTTP connector against a loopback RAG server: repeats, mapping, retries, failures, malformed replies."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import pytest

from connectors.http import HttpConnector, HttpOptions, get_path
from open_rag_eval.config import load_config_text
from open_rag_eval.config.connector import ConnectorConfig
from open_rag_eval.run.fetch import build_connector, fetch_outputs
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.core.types import RAGOutput
from tests.rag_server import RagBehaviour, RagServer

QUERIES = [("q1", "What is solar power?"), ("q2", "Why is the sky blue?")]


def _fetch(server: RagServer, repeats: int = 1, queries: list[tuple[str, str]] | None = None,
           **options: Any) -> list[RAGOutput]:
    body = {"query": "{query}", "query_id": "{query_id}", "run": "{run}"}
    connector = HttpConnector(HttpOptions(url=server.url, body=body, backoff_s=0, **options))
    return asyncio.run(connector.fetch(queries or QUERIES, repeats))


def test_repeats_order_and_flat_mapping() -> None:
    with RagServer() as server:
        outputs = _fetch(server, repeats=3)
    assert [(o.query_id, o.run) for o in outputs] == [("q1", 1), ("q1", 2), ("q1", 3), ("q2", 1), ("q2", 2), ("q2", 3)]
    first = outputs[0]
    assert first.error is None and first.query == "What is solar power?"
    assert [p.id for p in first.passages] == ["q1-d1", "q1-d2"]
    assert first.answer_text == "What is solar power is explained in the first source [1]. The second source adds background [2]."
    assert [part.citations for part in first.answer] == [("q1-d1",), ("q1-d2",)]  # [n] resolved to passage ids
    assert first.latency_ms is not None and first.latency_ms > 0
    bodies = sorted((r["body"]["query_id"], r["body"]["run"]) for r in server.requests)
    assert bodies == [("q1", 1), ("q1", 2), ("q1", 3), ("q2", 1), ("q2", 2), ("q2", 3)]  # "{run}" is sent as a number


def test_nested_field_paths() -> None:
    with RagServer() as server:
        outputs = _fetch(server, answer_path="result.summary", passages_path="result.documents",
                         passage_id_path="doc_id", passage_text_path="content", passage_title_path="title",
                         passage_score_path="score")
    passage = outputs[1].passages[1]
    assert (passage.id, passage.text, passage.title, passage.score) == ("q2-d2", "Passage 2 about Why is the sky blue?.",
                                                                        "Doc 2", 0.5)


def test_retries_then_success_and_failures_recorded() -> None:
    behaviour = RagBehaviour(fail={"q1": [503, 429], "q2": [500, 500, 500, 500]})
    with RagServer(behaviour) as server:
        outputs = _fetch(server, retries=2)
    assert outputs[0].error is None and outputs[0].answer_text  # two retryable failures, then an answer
    assert outputs[1].error == 'HTTP 500: {"error": "injected 500"} after 3 attempts'
    assert len(server.requests) == 6


def test_client_errors_are_not_retried() -> None:
    with RagServer(RagBehaviour(fail={"q1": [400]})) as server:
        outputs = _fetch(server, retries=3)
    assert outputs[0].error == 'HTTP 400: {"error": "injected 400"}'
    assert len(server.requests) == 2


@pytest.mark.parametrize(("kind", "reason"), [
    ("not_json", "malformed reply: the reply is not JSON"),
    ("missing_answer", "malformed reply: the reply has no field 'answer'"),
    ("bad_passages", "malformed reply: 'passages' is not a list (got str)"),
])
def test_malformed_replies_become_failed_outputs(kind: str, reason: str) -> None:
    with RagServer(RagBehaviour(malformed={"q2": kind})) as server:
        outputs = _fetch(server, repeats=2)
    assert [o.error for o in outputs] == [None, None, reason, reason]


@pytest.mark.parametrize(("kind", "reason"), [
    ("null_passage", "malformed reply: passage passages.0: text is not text (got null)"),  # not the text "None"
    ("nan_score", "malformed reply: passage passages.0: score is not a finite number (got nan)"),
    ("duplicate_ids", "the http connector's output is invalid: field 'passages[1].id': duplicate passage id 'd1'"),
    ("empty_answer", "the http connector's output is invalid: field 'answer': no answer: the trec evaluator's "
                     "metric 'citation' reads the answer"),
])
def test_a_reply_breaking_the_input_rule_is_a_failed_output_that_reads_back(kind: str, reason: str,
                                                                           tmp_path: Path) -> None:
    """Validated at fetch time with the rule every input door applies, so the saved outputs.jsonl reads back."""
    from open_rag_eval.inputs import output_to_json, read_outputs

    (tmp_path / "queries.csv").write_text("query_id,query\nq1,What is solar power?\nq2,Why is the sky blue?\n")
    with RagServer(RagBehaviour(malformed={"q1": "scored", "q2": kind})) as server:
        loaded = load_config_text(f"connector: {{type: http, queries: queries.csv, options: {{url: '{server.url}', "
                                  "body: {query: '{query}', query_id: '{query_id}'}, backoff_s: 0, "
                                  "passage_score_path: score}}\n"
                                  "evaluators: [{type: trec, metrics: [citation]}]\n",
                                  base_dir=tmp_path)
        outputs = asyncio.run(fetch_outputs(loaded, loaded.config.connector))  # type: ignore[arg-type]
    assert [o.error for o in outputs] == [None, reason]
    assert outputs[1].passages == () and outputs[1].answer == ()
    saved = tmp_path / "outputs.jsonl"
    saved.write_text("".join(json.dumps(output_to_json(o)) + "\n" for o in outputs), encoding="utf-8")
    assert [(o.query_id, o.error) for o in read_outputs(saved)] == [("q1", None), ("q2", reason)]


def test_a_reply_without_an_answer_is_kept_when_no_metric_reads_one(tmp_path: Path) -> None:
    """A retriever behind the connector (passages, no answer) with golden's retrieval metrics only: not failed."""
    (tmp_path / "queries.csv").write_text("query_id,query\nq1,What is solar power?\nq2,Why is the sky blue?\n")
    with RagServer(RagBehaviour(malformed={"q2": "empty_answer"})) as server:
        loaded = load_config_text(f"connector: {{type: http, queries: queries.csv, options: {{url: '{server.url}', "
                                  "body: {query: '{query}', query_id: '{query_id}'}, backoff_s: 0}}\n"
                                  "evaluators: [{type: golden, metrics: [golden]}]\n", base_dir=tmp_path)
        outputs = asyncio.run(fetch_outputs(loaded, loaded.config.connector))  # type: ignore[arg-type]
    assert [(o.query_id, o.error, o.answer_text == "") for o in outputs] == [("q1", None, False), ("q2", None, True)]


def test_unreachable_system() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the call: nothing listens there
    connector = HttpConnector(HttpOptions(url=f"http://127.0.0.1:{port}/q", retries=1, backoff_s=0))
    outputs = asyncio.run(connector.fetch(QUERIES[:1], 1))
    assert outputs[0].error == "connection failed: ConnectError after 2 attempts"


def test_concurrency_is_bounded() -> None:
    queries = [(f"q{i}", f"question {i}") for i in range(8)]
    with RagServer(RagBehaviour(latency_s=0.05)) as server:
        outputs = _fetch(server, repeats=2, queries=queries, concurrency=3)
    assert len(outputs) == 16 and all(o.error is None for o in outputs)
    assert 1 <= server.max_in_flight <= 3


def test_secret_headers_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_RAG_KEY", "s3cret-value")
    with RagServer() as server:
        outputs = _fetch(server, secret_headers={"Authorization": {"env": "TEST_RAG_KEY", "prefix": "Bearer "}},
                         headers={"X-Client": "open-rag-eval"})
    assert server.requests[0]["headers"]["Authorization"] == "Bearer s3cret-value"
    assert server.requests[0]["headers"]["X-Client"] == "open-rag-eval"
    assert "s3cret" not in repr(outputs)
    monkeypatch.delenv("TEST_RAG_KEY")
    with pytest.raises(ConfigError, match="TEST_RAG_KEY is not set"):
        HttpConnector(HttpOptions(url="http://127.0.0.1:1/", secret_headers={"Authorization": {"env": "TEST_RAG_KEY"}}))


def test_get_path() -> None:
    data = {"a": {"b": [{"c": 1}, {"c": 2}]}}
    assert get_path(data, "a.b.1.c") == 2
    with pytest.raises(ValueError, match="no field 'a.x'"):
        get_path(data, "a.x")
    assert get_path(data, "a.b.-1.c") == 2
    for index in ("\u00b9", "\u0661", "--1"):  # str.isdigit is true of '¹' and '١'; int() of them or '--1' raises
        with pytest.raises(ValueError, match="no field"):
            get_path(data, f"a.b.{index}.c")


def test_build_connector_validates_options() -> None:
    with pytest.raises(ConfigError, match="connector.options.concurrency"):
        build_connector(ConnectorConfig(type="http", queries="q.csv", options={"url": "http://x", "concurrency": 0}))
    with pytest.raises(ConfigError, match="connector.options.url"):
        build_connector(ConnectorConfig(type="http", queries="q.csv", options={}))
    with pytest.raises(ConfigError, match="valid choices: bm25, http"):
        build_connector(ConnectorConfig(type="nope", queries="q.csv"))


def test_fetch_outputs_with_the_peers_queries_file(tmp_path: Path) -> None:
    (tmp_path / "queries.csv").write_bytes("\ufeffquery\r\nWhat is solar power?\r\nWhy is the sky blue?\r\n".encode())
    with RagServer() as server:
        text = f"""
connector:
  type: http
  queries: queries.csv
  repeats: 2
  options: {{url: "{server.url}", body: {{query: "{{query}}"}}}}
evaluators: [{{type: consistency, metrics: [rouge]}}]
"""
        loaded = load_config_text(text, base_dir=tmp_path)
        outputs = asyncio.run(fetch_outputs(loaded, loaded.config.connector))  # type: ignore[arg-type]
    assert len(outputs) == 4 and all(o.error is None for o in outputs)
    assert outputs[0].query_id.startswith("q_") and outputs[0].query == "What is solar power?"
