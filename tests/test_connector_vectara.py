"""The Vectara connector against a loopback server speaking Vectara's REST query API v2: the request it sends
(path, x-api-key, search.limit, generation with numeric citations), search results mapped to passages, numeric
citations mapped to passage ids, failures (401 echoing the key, bad JSON, a failed generation) kept with a reason and
no key anywhere, and a whole ``eval`` run with ``repeats: 2``."""

from __future__ import annotations

import asyncio
import csv
import json
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from connectors.vectara import VectaraConnector, VectaraOptions
from open_rag_eval.cli import main
from open_rag_eval.config.connector import ConnectorConfig
from open_rag_eval.run.fetch import build_connector
from open_rag_eval.core.errors import ConfigError
from tests.loopback import Loopback, send_json

KEY = "zqk_vectara-secret-4711"
QUERIES = [("q1", "What is solar power?"), ("q2", "Why is the sky blue?")]


class VectaraServer(Loopback):
    """``POST /v2/corpora/{key}/query`` and ``POST /v2/query`` as documented; ``mode`` injects failures."""

    def __init__(self, mode: str = "ok") -> None:
        self.mode, self.requests = mode, []  # type: ignore[var-annotated]
        super().__init__(self._handler())

    @property
    def url(self) -> str:
        return self.origin

    def reply(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, bytes]:
        key = headers.get("x-api-key", "")
        if key != KEY or self.mode == "unauthorized":
            return 401, json.dumps({"messages": [f"Unauthorized: API key {key} is not valid"]}).encode()
        if self.mode == "bad_json":
            return 200, b'{"summary": "cut off'
        query = body["query"]
        results = [{"text": f"{query} is answered by passage {n}.", "score": 0.9 / n, "part_metadata": {},
                    "document_metadata": {"title": f"Doc {n}"}, "document_id": "doc-a" if n < 3 else "doc-b",
                    "request_corpora_index": 0} for n in range(1, body["search"]["limit"] + 1)]
        reply: dict[str, Any] = {"search_results": results, "response_language": "eng",
                                 "factual_consistency_score": 0.8}
        if "generation" in body and self.mode != "no_summary":
            reply["summary"] = "The first result says so [1]. Two more agree [2][3]. One is made up [9]."
        return 200, json.dumps(reply).encode()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                headers = {k.lower(): v for k, v in self.headers.items()}
                owner.requests.append({"path": self.path, "headers": headers, "body": body})
                send_json(self, *owner.reply(self.path, headers, body))

        return Handler


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_VECTARA_KEY", KEY)


def _fetch(server: VectaraServer, repeats: int = 1, **options: Any) -> list[Any]:
    options = {"corpus_key": "my-corpus", "base_url": server.url, "api_key_env": "TEST_VECTARA_KEY", "limit": 3,
               "backoff_s": 0, **options}
    return asyncio.run(VectaraConnector(VectaraOptions(**options)).fetch(QUERIES, repeats))


def test_request_follows_the_documented_schema() -> None:
    with VectaraServer() as server:
        outputs = _fetch(server, repeats=2, generation={"generation_preset_name": "mockingbird-2.0"})
    assert len(outputs) == 4 and all(o.error is None for o in outputs)
    request = server.requests[0]
    assert request["path"] == "/v2/corpora/my-corpus/query"
    assert request["headers"]["x-api-key"] == KEY
    assert request["body"]["query"] in ("What is solar power?", "Why is the sky blue?")
    assert request["body"]["search"] == {"limit": 3}
    assert request["body"]["generation"] == {"max_used_search_results": 5, "citations": {"style": "numeric"},
                                             "response_language": "auto", "generation_preset_name": "mockingbird-2.0"}
    assert request["body"]["stream_response"] is False


def test_several_corpora_use_the_multi_corpus_endpoint() -> None:
    with VectaraServer() as server:
        _fetch(server, corpus_key=["a", "b"], generate=False)
    request = server.requests[0]
    assert request["path"] == "/v2/query"
    assert request["body"]["search"] == {"limit": 3, "corpora": [{"corpus_key": "a"}, {"corpus_key": "b"}]}
    assert "generation" not in request["body"]


def test_search_results_become_passages_and_numeric_citations_their_ids() -> None:
    with VectaraServer() as server:
        outputs = _fetch(server)
    solar = outputs[0]
    assert [(p.id, p.title, p.score) for p in solar.passages] == [("doc-a", "Doc 1", 0.9), ("doc-a#2", "Doc 2", 0.45),
                                                                  ("doc-b", "Doc 3", 0.3)]
    assert solar.passages[0].text == "What is solar power? is answered by passage 1."
    assert solar.answer_text == "The first result says so [1]. Two more agree [2][3]. One is made up [9]."
    assert [part.citations for part in solar.answer] == [("doc-a",), ("doc-a#2", "doc-b"), ("9",)]
    assert solar.refused is None  # the query API has no field saying the summary declines


def test_search_only_gives_an_empty_answer() -> None:
    with VectaraServer() as server:
        outputs = _fetch(server, generate=False)
    assert outputs[0].error is None and outputs[0].answer_text == "" and len(outputs[0].passages) == 3


@pytest.mark.parametrize(("mode", "reason"), [
    ("bad_json", "malformed reply: the reply is not JSON"),
    ("no_summary", "malformed reply: the reply has no 'summary' (generation failed or was not returned)"),
])
def test_bad_replies_become_failed_outputs_with_a_reason(mode: str, reason: str) -> None:
    with VectaraServer(mode) as server:
        outputs = _fetch(server)
    assert [o.error for o in outputs] == [reason, reason]


def test_unauthorized_reply_echoing_the_key_leaks_nothing() -> None:
    with VectaraServer("unauthorized") as server:
        outputs = _fetch(server, retries=2)
    assert [o.error for o in outputs] == ['HTTP 401: {"messages": ["Unauthorized: API key *** is not valid"]}'] * 2
    assert KEY not in repr(outputs)
    assert len(server.requests) == 2  # a 401 is not retried


def test_options_are_validated_at_the_door(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match=r"connector.options.corpus: unknown key \(did you mean 'corpus_key'\?\); valid keys here: .*corpus_key"):
        build_connector(ConnectorConfig(type="vectara", queries="q.csv", options={"corpus_key": "c", "corpus": "c"}))
    monkeypatch.delenv("TEST_VECTARA_KEY")
    with pytest.raises(ConfigError, match=r"connector.options.api_key_env: environment variable TEST_VECTARA_KEY"):
        build_connector(ConnectorConfig(type="vectara", queries="q.csv",
                                        options={"corpus_key": "c", "api_key_env": "TEST_VECTARA_KEY"}))


def test_eval_through_the_vectara_connector(tmp_path: Path) -> None:
    (tmp_path / "queries.csv").write_text("query_id,query\nq1,What is solar power?\nq2,Why is the sky blue?\n",
                                          encoding="utf-8")
    with VectaraServer() as server:
        (tmp_path / "eval.yaml").write_text(f"""
output_dir: out
judge:
  simulated: {{seed: 1}}
connector:
  type: vectara
  queries: queries.csv
  repeats: 2
  options: {{corpus_key: my-corpus, base_url: "{server.url}", api_key_env: TEST_VECTARA_KEY, limit: 3}}
evaluators:
  - type: trec
""", encoding="utf-8")
        assert main(["-q", "eval", "--config", str(tmp_path / "eval.yaml")]) == 0
    assert len(server.requests) == 4
    with (tmp_path / "out" / "results.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["query_id"], r["run"]) for r in rows] == [("q1", "1"), ("q1", "2"), ("q2", "1"), ("q2", "2")]
    assert all(r["umbrela.mean"] != "" and float(r["umbrela.n_failed"]) == 0 for r in rows)
    saved = [json.loads(line) for line in (tmp_path / "out" / "outputs.jsonl").read_text().splitlines()]
    assert saved[0]["answer"][1]["citations"] == ["doc-a#2", "doc-b"]
    for path in (tmp_path / "out").rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8", errors="replace"), path
