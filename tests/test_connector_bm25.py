"""The reference BM25 pipeline (connector ``type: bm25``): chunking and answer composition with literal values,
retrieval over a corpus the tests write, citations that point at the passages quoted, options and the corpus checked
at the door, and the bundled example run end to end offline."""

from __future__ import annotations

import asyncio
import csv
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.config import load_config
from open_rag_eval.config.connector import ConnectorConfig
from open_rag_eval.run.fetch import build_connector, fetch_outputs
from connectors.bm25 import chunk_words, compose_answer
from open_rag_eval.core.errors import ConfigError

needs_bm25 = pytest.mark.skipif(importlib.util.find_spec("bm25s") is None,
                                reason="bm25s is not installed (extra 'bm25')")
CONFIGS = Path(__file__).resolve().parent.parent / "configs"

DOCS = {
    "tides.txt": "Tides are caused by the gravity of the Moon. The Sun adds a smaller pull. Spring tides are large.",
    "volcano.txt": "A volcano erupts when magma rises. Lava is magma that reaches the surface.",
    "moon.txt": "The Moon orbits the Earth every 27 days. Its gravity raises tides in the oceans.",
}


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "corpus"
    folder.mkdir(parents=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "notes.md").write_text("Moon gravity tides", encoding="utf-8")  # not *.txt: not a document
    return folder


def _connector(tmp_path: Path, **options: Any) -> Any:
    return build_connector(ConnectorConfig(type="bm25", queries="q.csv",
                                           options={"corpus": str(_corpus(tmp_path)), **options}))


def test_chunk_words_literal() -> None:
    text = "a b c d e f g"
    assert chunk_words(text, None, 0) == ["a b c d e f g"]
    assert chunk_words(text, 3, 0) == ["a b c", "d e f", "g"]
    assert chunk_words(text, 3, 1) == ["a b c", "c d e", "e f g"]  # no chunk lies wholly inside the previous one
    assert chunk_words(text, 10, 2) == ["a b c d e f g"]
    assert chunk_words("  ", 3, 0) == []


def test_compose_answer_cites_ranks_in_retrieval_order_then_sources() -> None:
    ranked = [(2, 0, "B first."), (1, 1, "A second."), (1, 0, "A first."), (3, 0, "C.")]
    ids = ["a.txt", "b.txt", "c.txt"]
    assert compose_answer(ranked, 2, ids, True) == "A second. [1] B first. [2]\n\nSources:\n[1] a.txt\n[2] b.txt"
    assert compose_answer(ranked, 1, ids, False) == "B first. [2]"
    assert compose_answer([], 2, ids, True) == "NO_ANSWER"


@needs_bm25
def test_retrieval_ranks_by_bm25_and_leaves_out_passages_sharing_no_word(tmp_path: Path) -> None:
    connector = _connector(tmp_path, top_k=3)
    _, passages = connector.answer("How often does the Moon orbit the Earth, and what does its gravity do?")
    assert [p.id for p in passages] == ["moon.txt", "tides.txt"]  # volcano.txt shares no word: never returned
    assert passages[0].score is not None and passages[0].score > passages[1].score > 0
    assert passages[0].title == "moon"
    tied = connector.answer("gravity")[1]  # the same score: the earlier file first, every time
    assert [p.id for p in tied] == ["moon.txt", "tides.txt"] and tied[0].score == tied[1].score
    assert connector.answer("lava")[1][0].id == "volcano.txt"
    assert [p.id for p in _connector(tmp_path / "one", top_k=1).answer("Moon gravity")[1]] == ["moon.txt"]


@needs_bm25
def test_answer_quotes_best_sentences_and_cites_the_passage_each_came_from(tmp_path: Path) -> None:
    outputs = asyncio.run(_connector(tmp_path, top_k=2, answer_sentences=3).fetch(
        [("q1", "Why are there tides?"), ("q2", "capital of Peru")], 1))
    tides, nothing = outputs
    assert tides.error is None and [p.id for p in tides.passages] == ["tides.txt", "moon.txt"]
    assert tides.answer_text == ("Tides are caused by the gravity of the Moon. [1] Spring tides are large. [1] Its "
                                 "gravity raises tides in the oceans. [2]\n\nSources:\n[1] tides.txt\n[2] moon.txt")
    assert [part.citations for part in tides.answer] == [("tides.txt",), ("tides.txt",), ("moon.txt",)]
    for part in tides.answer:
        (cited,) = part.citations
        assert part.text in tides.passage(cited).text  # every statement is quoted from the passage it cites
    assert nothing.passages == () and nothing.answer_text == "NO_ANSWER"  # nothing retrieved: a refusal


@needs_bm25
def test_top_passage_answer_is_the_first_passage_cut(tmp_path: Path) -> None:
    connector = _connector(tmp_path, answer="top_passage", answer_chars=25)
    assert connector.answer("How does the Moon orbit?")[0] == "The Moon orbits the Earth [1]\n\nSources:\n[1] moon.txt"
    assert connector.answer("capital of Peru") == ("NO_ANSWER", ())


@needs_bm25
def test_chunks_have_document_ids_with_a_separator(tmp_path: Path) -> None:
    connector = _connector(tmp_path, chunk_words=6, chunk_overlap=2, top_k=2)
    assert [p.id for p in connector.index.passages] == [  # 15, 19 and 13 words: chunks start every 4 words
        "moon.txt#0", "moon.txt#1", "moon.txt#2", "moon.txt#3", "tides.txt#0", "tides.txt#1", "tides.txt#2",
        "tides.txt#3", "tides.txt#4", "volcano.txt#0", "volcano.txt#1", "volcano.txt#2"]
    assert connector.index.passages[8].text == "tides are large."  # words 16-18 (the last chunk may be short)
    _, passages = connector.answer("Sun spring tides")
    assert [p.id for p in passages] == ["tides.txt#3", "tides.txt#2"]  # "spring tides" beats "Sun"


@needs_bm25
def test_min_score_and_stopwords_options(tmp_path: Path) -> None:
    assert _connector(tmp_path, min_score=100.0).answer("Moon gravity tides") == ("NO_ANSWER", ())
    assert _connector(tmp_path / "a").answer("the of and")[1] == ()  # only stopwords: nothing to match
    assert _connector(tmp_path / "b", stopwords="none").answer("the of and")[1] != ()


@pytest.mark.parametrize(("options", "path", "message"), [
    ({"top_k": 0}, "connector.options.top_k", "greater than or equal to 1"),
    ({"chunk_words": 5, "chunk_overlap": 5}, "connector.options", "chunk_overlap must be smaller"),
    ({"chunk_overlap": 2}, "connector.options", "needs chunk_words"),
    ({"top_k": 3, "topk": 2}, "connector.options.topk", "unknown key"),
])
def test_bad_options_are_config_errors_naming_the_option(tmp_path: Path, options: dict[str, Any], path: str,
                                                         message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        build_connector(ConnectorConfig(type="bm25", queries="q.csv", options={"corpus": "c", **options}))
    assert caught.value.path == path and message in caught.value.problem


@needs_bm25
def test_corpus_is_relative_to_the_config_and_checked(tmp_path: Path) -> None:
    _corpus(tmp_path)
    (tmp_path / "q.csv").write_text("query_id,query\nq1,Moon gravity\n", encoding="utf-8")
    config = tmp_path / "c.yaml"
    body = "connector: {type: bm25, queries: q.csv, options: {corpus: %s}}\nevaluators: [{type: golden}]\n"
    config.write_text(body % "corpus", encoding="utf-8")
    loaded = load_config(config)
    outputs = asyncio.run(fetch_outputs(loaded, loaded.config.connector))
    assert [p.id for p in outputs[0].passages] == ["moon.txt", "tides.txt"]
    for corpus, problem in (("missing", "does not exist"), ("corpus/tides.txt", "does not exist")):
        config.write_text(body % corpus, encoding="utf-8")
        loaded = load_config(config)
        with pytest.raises(ConfigError) as caught:
            asyncio.run(fetch_outputs(loaded, loaded.config.connector))
        assert caught.value.path == "connector.options.corpus" and problem in caught.value.problem
        assert caught.value.file == str(config)
    (tmp_path / "empty").mkdir()
    config.write_text(body % "empty", encoding="utf-8")
    loaded = load_config(config)
    with pytest.raises(ConfigError, match=r"no file in '.*empty' matches '\*\.txt'"):
        asyncio.run(fetch_outputs(loaded, loaded.config.connector))


@needs_bm25
def test_bundled_example_runs_end_to_end_offline(tmp_path: Path) -> None:
    configs = shutil.copytree(CONFIGS, tmp_path / "configs")  # its judge cache (../.open-rag-eval) lands in tmp_path
    assert main(["-q", "eval", "--config", str(configs / "bm25.yaml"), "--output-dir", str(tmp_path / "out")]) == 0
    assert (tmp_path / ".open-rag-eval" / "bm25-cache.sqlite").exists()
    summary = {row["metric"]: row for row in csv.DictReader((tmp_path / "out" / "summary.csv").open())}
    assert float(summary["golden.hit@3"]["mean"]) > float(summary["golden.hit@1"]["mean"]) > 0.5
    assert float(summary["golden.recall@3"]["mean"]) > float(summary["golden.recall@1"]["mean"])
    assert summary["citation.f1"]["mean"] != ""  # the trec evaluator judged the answers (simulated judge)
    # the queries file's label columns reach the outputs: keywords and expected refusals are checked
    assert 0 < float(summary["lexical.keyword_coverage"]["mean"]) < 1 and summary["lexical.keyword_coverage"]["n"] == "32"
    assert summary["lexical.refusal_correct"]["n"] == "34"
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["simulated"] is True and manifest["config"]["connector"]["type"] == "bm25"
    outputs = [json.loads(line) for line in (tmp_path / "out" / "outputs.jsonl").open()]
    assert len(outputs) == 34 and all(o["passages"] or o["answer_text"] == "NO_ANSWER" for o in outputs)
