"""The system's own ``refused`` flag from every connector that can read one, with the HTTP connector's semantics:
true or false as the system says, null when it does not say, a failed output naming the field when the value is
not a boolean or the configured field is absent. LangChain and LlamaIndex with the real packages; the BM25 reference
pipeline says so itself when it answers ``NO_ANSWER``; an ``eval`` through a connector scores refusals from the flag."""

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
from connectors.inprocess import Malformed, refusal_flag

needs_langchain = pytest.mark.skipif(importlib.util.find_spec("langchain_core") is None,
                                     reason="langchain-core is not installed (extra 'langchain')")
needs_llamaindex = pytest.mark.skipif(importlib.util.find_spec("llama_index") is None
                                      or importlib.util.find_spec("llama_index.core") is None,
                                      reason="llama-index-core is not installed (extra 'llamaindex')")
needs_bm25 = pytest.mark.skipif(importlib.util.find_spec("bm25s") is None,
                                reason="bm25s is not installed (extra 'bm25')")

QUERIES = [("q1", "Why is the sky blue?"), ("q2", "Quantum chromodynamics lattice?"),
           ("q3", "Why is the sky blue, maybe?")]


def _fetch(kind: str, queries: list[tuple[str, str]] = QUERIES, **options: Any) -> list[Any]:
    connector = build_connector(ConnectorConfig(type=kind, queries="q.csv", options=options))
    return asyncio.run(connector.fetch(queries, 1))


def test_refusal_flag_accepts_booleans_and_null_only() -> None:
    assert (refusal_flag(True, "x"), refusal_flag(False, "x"), refusal_flag(None, "x")) == (True, False, None)
    for value, kind in (("yes", "str"), (1, "int"), (0.0, "float"), ([], "list")):
        with pytest.raises(Malformed, match=rf"^'refused' is not true, false or null \(got {kind}\)$"):
            refusal_flag(value, "'refused'")


@needs_langchain
def test_langchain_reads_the_refused_key() -> None:
    sky, quantum, maybe = _fetch("langchain", chain="tests.rag_frameworks:langchain_refusing", refused_key="refused")
    assert (sky.error, sky.refused, [p.id for p in sky.passages][:1]) == (None, False, ["d2"])
    assert (quantum.error, quantum.refused, quantum.passages) == (None, True, ())
    assert quantum.answer_text == "Please ask about solar power, the sky or tides."
    assert maybe.refused is None and maybe.error == "malformed result: 'refused' is not true, false or null (got str)"


@needs_langchain
def test_langchain_without_refused_key_leaves_the_flag_unsaid_and_a_missing_key_fails() -> None:
    outputs = _fetch("langchain", chain="tests.rag_frameworks:langchain_refusing")
    assert [(o.error, o.refused) for o in outputs] == [(None, None)] * 3  # not configured: not read
    missing = _fetch("langchain", queries=QUERIES[:1], chain="tests.rag_frameworks:langchain_refusing",
                     refused_key="declined")[0]
    assert missing.error == "malformed result: the chain's result has no 'declined' (it has: answer, context, refused)"


@needs_llamaindex
def test_llamaindex_reads_the_refused_key_from_the_response_metadata() -> None:
    queries = [*QUERIES, ("q4", "Why is the sky blue, silent?")]
    sky, quantum, maybe, silent = _fetch("llamaindex", queries=queries, refused_key="refused",
                                         query_engine="tests.rag_frameworks:llamaindex_refusing")
    assert (sky.error, sky.refused, sky.answer[0].citations) == (None, False, ("d2",))
    assert (quantum.error, quantum.refused, quantum.answer_text) == (None, True, "I cannot answer that from my sources.")
    assert maybe.error == "malformed result: the response's metadata 'refused' is not true, false or null (got int)"
    assert silent.error == "malformed result: the response's metadata has no 'refused' (it has: nothing)"
    unsaid = _fetch("llamaindex", queries=queries, query_engine="tests.rag_frameworks:llamaindex_refusing")
    assert [(o.error, o.refused) for o in unsaid] == [(None, None)] * 4


@needs_bm25
def test_the_bm25_pipeline_says_when_it_declines(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "moon.txt").write_text("The Moon orbits the Earth every 27 days.", encoding="utf-8")
    answered, declined = _fetch("bm25", queries=[("a", "How often does the Moon orbit?"), ("b", "Lava flows?")],
                                corpus=str(corpus))
    assert (answered.refused, answered.answer_text.startswith("The Moon orbits the Earth every 27 days. [1]")) == \
        (False, True)
    assert (declined.refused, declined.answer_text, declined.passages) == (True, "NO_ANSWER", ())


@needs_langchain
def test_eval_scores_refusals_from_the_connectors_flag(tmp_path: Path) -> None:
    # q2 is declined in words the lexical detector does not read as a refusal ("Please ask about solar power, the
    # sky or tides."), so only the flag makes it a false refusal (0.0); q1 answers and was expected to (1.0).
    (tmp_path / "queries.csv").write_text("query_id,query,expected_refusal\nq1,Why is the sky blue?,false\n"
                                          "q2,Quantum chromodynamics lattice?,false\n", encoding="utf-8")
    (tmp_path / "eval.yaml").write_text("""
output_dir: out
connector:
  queries: queries.csv
  type: langchain
  options: {chain: "tests.rag_frameworks:langchain_refusing", refused_key: refused}
evaluators:
  - type: golden
    metrics: [lexical.refusal_correct]
""", encoding="utf-8")
    assert main(["-q", "eval", "--config", str(tmp_path / "eval.yaml")]) == 0
    with (tmp_path / "out" / "results.csv").open(newline="", encoding="utf-8") as handle:
        rows = {row["query_id"]: row for row in csv.DictReader(handle)}
    assert (float(rows["q1"]["lexical.refusal_correct"]), float(rows["q2"]["lexical.refusal_correct"])) == (1.0, 0.0)
    saved = [json.loads(line) for line in (tmp_path / "out" / "outputs.jsonl").read_text().splitlines()]
    assert [record.get("refused") for record in saved] == [False, True]
