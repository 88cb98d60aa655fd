"""The LangChain and LlamaIndex connectors with the real packages and their fake/mock components: mapping of answers
and documents/nodes, failures kept with their reason, options validated at the door, and a whole ``eval`` run with
``repeats: 2`` on the simulated judge."""

from __future__ import annotations

import asyncio
import csv
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.config.connector import ConnectorConfig
from open_rag_eval.run.fetch import build_connector
from open_rag_eval.core.errors import ConfigError

HAVE_LANGCHAIN = importlib.util.find_spec("langchain_core") is not None
HAVE_LLAMAINDEX = importlib.util.find_spec("llama_index") is not None and \
    importlib.util.find_spec("llama_index.core") is not None
needs_langchain = pytest.mark.skipif(not HAVE_LANGCHAIN, reason="langchain-core is not installed (extra 'langchain')")
needs_llamaindex = pytest.mark.skipif(not HAVE_LLAMAINDEX,
                                      reason="llama-index-core is not installed (extra 'llamaindex')")

QUERIES = [("q1", "What is solar power?"), ("q2", "Why is the sky blue?")]


def _fetch(kind: str, repeats: int = 1, queries: list[tuple[str, str]] | None = None, **options: Any) -> list[Any]:
    connector = build_connector(ConnectorConfig(type=kind, queries="q.csv", options=options))
    return asyncio.run(connector.fetch(queries or QUERIES, repeats))


@needs_langchain
def test_langchain_retrieval_chain_maps_answer_and_documents() -> None:
    outputs = _fetch("langchain", repeats=2, chain="tests.rag_frameworks:langchain_chain", id_key="source")
    assert [(o.query_id, o.run) for o in outputs] == [("q1", 1), ("q1", 2), ("q2", 1), ("q2", 2)]
    sky = outputs[2]
    assert sky.error is None
    assert [(p.id, p.title, p.score) for p in sky.passages] == [("d2", "Sky", 1.0), ("d1", "Solar", 0.5)]
    assert sky.passages[0].text.startswith("The sky is blue because")
    assert sky.answer_text == "It is explained by the first source [1]. The second source adds detail [2]."
    assert [part.citations for part in sky.answer] == [("d2",), ("d1",)]  # [n] is the n-th document
    assert sky.latency_ms is not None and sky.latency_ms >= 0


@needs_langchain
def test_langchain_lambda_keys_plain_input_and_failures() -> None:
    outputs = _fetch("langchain", queries=[("q1", "Why is the sky blue?"), ("q2", "please fail")],
                     chain="tests.rag_frameworks:langchain_lambda", input_key=None, answer_key="output",
                     documents_key="docs", id_key="doc")
    assert [p.id for p in outputs[0].passages] == ["d2", "d1"] and outputs[0].passages[0].title is None
    assert [part.citations for part in outputs[0].answer] == [("d1",)]
    assert outputs[1].error == "RuntimeError: the index is offline" and outputs[1].passages == ()


@needs_langchain
def test_langchain_result_without_the_configured_keys_is_a_failed_output() -> None:
    outputs = _fetch("langchain", chain="tests.rag_frameworks:langchain_lambda", input_key=None)
    assert outputs[0].error == "malformed result: the chain's result has no 'answer' (it has: output, docs)"


@needs_langchain
def test_a_call_past_its_deadline_is_a_failed_output() -> None:
    outputs = _fetch("langchain", repeats=2, chain="tests.rag_frameworks:langchain_slow", timeout_s=0.2)
    assert [o.error for o in outputs] == ["timed out after 0.2s"] * 4


@needs_langchain
def test_langchain_options_are_validated_at_the_door() -> None:
    with pytest.raises(ConfigError, match=r"connector.options.answer_keys: unknown key \(did you mean 'answer_key'\?\); valid keys here: .*answer_key"):
        build_connector(ConnectorConfig(type="langchain", queries="q.csv",
                                        options={"chain": "tests.rag_frameworks:langchain_chain", "answer_keys": "a"}))
    with pytest.raises(ConfigError, match=r"connector.options.chain: .*has none of ainvoke, invoke \(got int\)"):
        build_connector(ConnectorConfig(type="langchain", queries="q.csv",
                                        options={"chain": "tests.rag_frameworks:NOT_A_CHAIN"}))
    with pytest.raises(ConfigError, match=r"connector.options.chain: module 'tests.rag_frameworks' has no"):
        build_connector(ConnectorConfig(type="langchain", queries="q.csv",
                                        options={"chain": "tests.rag_frameworks:missing"}))


@needs_llamaindex
def test_llamaindex_vector_index_with_mock_llm() -> None:
    outputs = _fetch("llamaindex", repeats=2, query_engine="tests.rag_frameworks:llamaindex_engine", id_key="doc")
    assert len(outputs) == 4 and all(o.error is None for o in outputs)
    first = outputs[0]
    assert len(first.passages) == 2 and {p.id for p in first.passages} <= {"d1", "d2", "d3"}
    assert all(p.title in ("Solar", "Sky", "Tides") and p.score is not None for p in first.passages)
    assert first.answer_text.startswith("text") and first.answer  # MockLLM's reply, segmented


@needs_llamaindex
def test_llamaindex_passage_ids_are_the_same_in_every_index_build() -> None:
    import hashlib

    from tests.rag_frameworks import CORPUS

    first = _fetch("llamaindex", query_engine="tests.rag_frameworks:llamaindex_default_ids")
    second = _fetch("llamaindex", query_engine="tests.rag_frameworks:llamaindex_default_ids")  # a new build
    ids = sorted(p.id for p in first[0].passages)  # the mock embedding ties every passage: their order is arbitrary
    assert ids == sorted(p.id for p in second[0].passages) and len(ids) == 3
    by_text = {"sha256:" + hashlib.sha256(text.encode()).hexdigest()[:16] for _, _, text in CORPUS}
    assert set(ids) <= by_text  # random document ids: the chunk text's hash
    node_ids = _fetch("llamaindex", query_engine="tests.rag_frameworks:llamaindex_default_ids", passage_ids="node")
    assert {p.id for p in node_ids[0].passages}.isdisjoint(by_text)  # LlamaIndex's own (random) ids, when asked
    named = _fetch("llamaindex", query_engine="tests.rag_frameworks:llamaindex_named_documents")
    assert {p.id for p in named[0].passages} <= {f"{pid}.txt#0" for pid, _, _ in CORPUS}


@needs_llamaindex
def test_llamaindex_custom_engine_node_ids_citations_and_failures() -> None:
    outputs = _fetch("llamaindex", queries=[("q1", "What is solar power?"), ("q2", "please fail")],
                     query_engine="tests.rag_frameworks:llamaindex_custom")
    solar = outputs[0]
    assert [(p.id, p.title, p.score) for p in solar.passages] == [("d1", "Solar", 0.5), ("d2", "Sky", 0.25)]
    assert [part.citations for part in solar.answer] == [("d2",), ()]
    assert outputs[1].error == "ValueError: no index loaded"


@needs_llamaindex
def test_llamaindex_options_are_validated_at_the_door() -> None:
    with pytest.raises(ConfigError, match=r"connector.options.engine: unknown key \(did you mean 'query_engine'\?\); valid keys here: .*query_engine"):
        build_connector(ConnectorConfig(type="llamaindex", queries="q.csv", options={"query_engine": "x:y", "engine": "x:y"}))
    with pytest.raises(ConfigError, match=r"connector.options.query_engine: expected 'module:attr'"):
        build_connector(ConnectorConfig(type="llamaindex", queries="q.csv", options={"query_engine": "nope"}))


def _eval(tmp_path: Path, connector: str) -> tuple[list[dict[str, str]], list[dict[str, Any]]]:
    (tmp_path / "queries.csv").write_text("query_id,query\nq1,What is solar power?\nq2,Why is the sky blue?\n",
                                          encoding="utf-8")
    (tmp_path / "eval.yaml").write_text(f"""
output_dir: out
judge:
  simulated: {{seed: 1}}
connector:
  queries: queries.csv
  repeats: 2
  {connector}
evaluators:
  - type: trec
""", encoding="utf-8")
    assert main(["-q", "eval", "--config", str(tmp_path / "eval.yaml")]) == 0
    with (tmp_path / "out" / "results.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    saved = [json.loads(line) for line in (tmp_path / "out" / "outputs.jsonl").read_text().splitlines()]
    return rows, saved


@needs_langchain
def test_eval_through_the_langchain_connector(tmp_path: Path) -> None:
    rows, saved = _eval(tmp_path, 'type: langchain\n  options: {chain: "tests.rag_frameworks:langchain_chain", '
                                  'id_key: source}')
    assert [(r["query_id"], r["run"]) for r in rows] == [("q1", "1"), ("q1", "2"), ("q2", "1"), ("q2", "2")]
    assert all(r["umbrela.mean"] != "" and float(r["umbrela.n_failed"]) == 0 for r in rows)  # judged, not failed
    assert [p["id"] for p in saved[2]["passages"]] == ["d2", "d1"]


@needs_llamaindex
def test_eval_through_the_llamaindex_connector(tmp_path: Path) -> None:
    rows, saved = _eval(tmp_path, 'type: llamaindex\n  options: {query_engine: "tests.rag_frameworks:llamaindex_custom"}')
    assert [(r["query_id"], r["run"]) for r in rows] == [("q1", "1"), ("q1", "2"), ("q2", "1"), ("q2", "2")]
    assert all(r["umbrela.mean"] != "" and float(r["umbrela.n_failed"]) == 0 for r in rows)
    assert saved[0]["answer"][0]["citations"] == ["d2"]


def test_readme_connector_examples_are_valid_configs(tmp_path: Path) -> None:
    """The README's three connector snippets load as they are (options validated by each connector's model)."""
    import re

    from open_rag_eval.config import load_config_text

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", readme, flags=re.DOTALL) if "type: langchain" in b
              or "type: llamaindex" in b or "type: vectara" in b]
    assert len(blocks) == 3
    (tmp_path / "queries.csv").write_text("query\nWhat is solar power?\n", encoding="utf-8")
    for block in blocks:
        loaded = load_config_text(block + "evaluators: [{type: trec}]\njudge: {simulated: {}}\n", base_dir=tmp_path)
        assert loaded.config.connector is not None and loaded.config.connector.repeats == 3


def test_a_missing_framework_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from open_rag_eval.core.errors import MissingDependency, exit_code

    monkeypatch.setitem(sys.modules, "langchain_core", None)  # importing it now raises ImportError
    with pytest.raises(MissingDependency, match=r"'langchain_core' is not installed.*\[langchain\]") as caught:
        build_connector(ConnectorConfig(type="langchain", queries="q.csv", options={"chain": "m:c"}))
    assert exit_code(caught.value) == 2


@pytest.mark.parametrize("kind", [
    pytest.param("langchain", marks=needs_langchain),
    pytest.param("llamaindex", marks=needs_llamaindex),
    "vectara",
])
def test_sweeps_through_each_connector(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_connector_vectara import KEY, VectaraServer

    monkeypatch.setenv("TEST_VECTARA_KEY", KEY)
    (tmp_path / "queries.csv").write_text("query_id,query\nq1,What is solar power?\nq2,Why is the sky blue?\n",
                                          encoding="utf-8")
    with VectaraServer() as server:
        options = {"langchain": '{chain: "tests.rag_frameworks:langchain_chain"}',
                   "llamaindex": '{query_engine: "tests.rag_frameworks:llamaindex_custom"}',
                   "vectara": f'{{corpus_key: c, base_url: "{server.url}", api_key_env: TEST_VECTARA_KEY}}'}[kind]
        config = tmp_path / "sweep.yaml"
        config.write_text(f"""
output_dir: out
connector: {{type: {kind}, queries: queries.csv, repeats: 2, options: {options}}}
evaluators: [{{type: consistency, metrics: [rouge]}}]
sweep: {{history: history.sqlite, system: {kind}, thresholds: {{consistency.rougeL: 0.1}}, seed: 7}}
""", encoding="utf-8")
        assert main(["sweep", "--config", str(config)]) == 0
        assert "verdict: FIRST SWEEP" in capsys.readouterr().out
        assert main(["sweep", "--config", str(config)]) == 0  # the same deterministic system: stable
        assert "verdict: STABLE" in capsys.readouterr().out
