"""RAG-answer-eval-demo, rebuilt from its own text.

Its definitions: ``keyword_coverage`` = the share of ``expected_keywords`` found in the answer by case-insensitive
*substring* match; ``context_overlap`` = the share of the answer's tokens that also appear in the *gold context* --
the documents listed in ``must_be_grounded_in``, read from ``data/corpus/`` -- "after simple normalization";
``compute_score`` = ``alpha * coverage + (1 - alpha) * overlap`` with alpha 0.5; its example summary line
``q1: score=0.750 (coverage=1.000, overlap=0.500)``. Its data: ``data/eval_questions.json`` (``id, question,
expected_keywords, must_be_grounded_in``) and ``data/corpus/doc1.txt``...

Ours: ``lexical.keyword_coverage`` (``keyword_match: substring``), ``lexical.context_overlap`` (``tokenizer: alnum``,
``corpus:``), ``lexical.keyword_score``; ``empty_score: 0`` for its zeros on empty inputs. The documented differences
of our defaults: whole-word keywords, stopwords removed, the retrieved passages as the context without ``corpus``,
and a missing value (with its reason) where there is nothing to count.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from open_rag_eval.core.errors import InputError
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
from open_rag_eval.inputs import read_query_set
from open_rag_eval.metrics.lexical import alnum_tokens, keyword_coverage
from open_rag_eval.core.types import Labels, Passage, RAGOutput

SEED = {"keyword_match": "substring", "tokenizer": "alnum", "empty_score": 0.0}
DOC1 = "A RAG pipeline has two main components: the retriever and the generator."


def demo(folder: Path) -> Path:
    """The demo's data folder: its question file (the README's example entry, and one more) and corpus."""
    (folder / "corpus").mkdir(parents=True)
    (folder / "corpus" / "doc1.txt").write_text(DOC1 + "\n")
    (folder / "corpus" / "doc2.txt").write_text("Evaluation compares answers with expected keywords.\n")
    (folder / "corpus" / "doc3.txt").write_text("A harness runs every question through the pipeline.\n")
    questions = [
        {"id": "q1", "question": "What are the two main components of a RAG pipeline?",
         "expected_keywords": ["retriever", "generator"], "must_be_grounded_in": ["doc1.txt"]},
        {"id": "q2", "question": "What does a harness do?", "expected_keywords": [],
         "must_be_grounded_in": ["doc3.txt"]},
    ]
    (folder / "eval_questions.json").write_text(json.dumps(questions, indent=2))
    return folder


def evaluate(outputs: list[RAGOutput], **options: object) -> dict[tuple[str, str], float | str]:
    evaluator = GoldenEvaluator(GoldenOptions.model_validate(
        {"metrics": ["lexical.keyword_coverage", "lexical.context_overlap", "lexical.keyword_score"], **options}))
    result = asyncio.run(evaluator.evaluate(outputs, Context()))
    return {(s.query_id, s.metric): s.value if s.value is not None else str(s.error) for s in result.scores}


def answered(qid: str, answer: str, passages: tuple[str, ...] = ("doc2.txt",)) -> RAGOutput:
    return RAGOutput(query_id=qid, query="?", answer=answer,
                     passages=tuple(Passage(id=p, text=f"Unrelated text of {p}.") for p in passages))


def test_the_question_file_is_read_directly(tmp_path: Path) -> None:
    queries = read_query_set(demo(tmp_path) / "eval_questions.json")
    assert [(q.query_id, q.query) for q in queries][0] == ("q1", "What are the two main components of a RAG pipeline?")
    assert queries[0].labels == Labels(expected_keywords=("retriever", "generator"), grounding_ids=("doc1.txt",),
                                       relevant_ids={"doc1.txt": 1})
    assert queries[1].labels.expected_keywords == ()


def test_the_summary_line_score_0_750_coverage_1_overlap_0_500(tmp_path: Path) -> None:
    folder = demo(tmp_path)
    # 8 tokens, 4 of them (the, retriever, and, generator) in doc1.txt
    answer = "The retriever and generator need good prompts always."
    rows = evaluate([answered("q1", answer)], labels=str(folder / "eval_questions.json"),
                    corpus=str(folder / "corpus"), **SEED)
    assert rows[("q1", "lexical.keyword_coverage")] == 1.0
    assert rows[("q1", "lexical.context_overlap")] == 0.5
    assert rows[("q1", "lexical.keyword_score")] == 0.75
    # our defaults: stopwords out (the, and) -> 2 of 6; the context is the retrieved passages of doc1.txt -- none
    ours = evaluate([answered("q1", answer, passages=("doc1.txt",))], labels=str(folder / "eval_questions.json"))
    assert ours[("q1", "lexical.context_overlap")] == 0.0  # the retrieved doc1.txt passage here is unrelated text
    with_corpus = evaluate([answered("q1", answer)], labels=str(folder / "eval_questions.json"),
                           corpus=str(folder / "corpus"))
    assert with_corpus[("q1", "lexical.context_overlap")] == pytest.approx(2 / 6)


def test_substring_matching_beside_whole_words() -> None:
    assert keyword_coverage("Fragmented retrieval", ["rag", "retriever"], match="substring") == (0.5, ["rag"])
    assert keyword_coverage("Fragmented retrieval", ["rag", "retriever"]) == (0.0, [])  # ours: whole words
    assert keyword_coverage("The RETRIEVER ranks", ["retriever"], match="substring") == (1.0, ["retriever"])


def test_the_simple_normalisation() -> None:
    assert alnum_tokens("Don't use RAG-based systems, e.g. BM25!") == ["dont", "use", "ragbased", "systems", "eg",
                                                                      "bm25"]
    assert alnum_tokens(" -- ") == []


def test_empty_inputs(tmp_path: Path) -> None:
    folder = demo(tmp_path)
    labels = str(folder / "eval_questions.json")
    no_keywords = answered("q2", "It runs every question.")
    empty_answer = answered("q1", "")
    seed = evaluate([no_keywords, empty_answer], labels=labels, corpus=str(folder / "corpus"), **SEED)
    assert seed[("q2", "lexical.keyword_coverage")] == 0.0  # the demo: no keywords -> 0.0
    assert seed[("q1", "lexical.context_overlap")] == 0.0  # the demo: no answer token -> 0.0
    assert seed[("q1", "lexical.keyword_score")] == 0.0
    ours = evaluate([no_keywords, empty_answer], labels=labels, corpus=str(folder / "corpus"))
    assert ours[("q2", "lexical.keyword_coverage")] == "no expected keywords"
    assert ours[("q1", "lexical.context_overlap")] == "the answer has no content words"
    assert ours[("q1", "lexical.keyword_score")] == "needs both keyword_coverage and context_overlap"


def test_a_grounding_document_missing_from_the_corpus_is_a_reason_not_a_number(tmp_path: Path) -> None:
    folder = demo(tmp_path)
    out = answered("q9", "retriever").model_copy(update={"labels": Labels(grounding_ids=("doc9.txt",),
                                                                          expected_keywords=("retriever",))})
    rows = evaluate([out], corpus=str(folder / "corpus"), **SEED)
    assert rows[("q9", "lexical.context_overlap")] == "grounding document(s) not in the corpus: doc9.txt"


def test_an_unknown_field_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "eval_questions.json"
    path.write_text(json.dumps([{"id": "q1", "question": "Why?", "expected_keyword": ["x"]}]))
    with pytest.raises(InputError, match=r"eval_questions\.json\[0\].*field 'expected_keyword': unknown field"):
        read_query_set(path)


def test_the_demo_pipeline_end_to_end(tmp_path: Path) -> None:
    """The demo's run: its BM25 retriever and stub generator (the top document's text) over its corpus, its question
    file as the connector's queries, then its three numbers per question."""
    pytest.importorskip("bm25s", reason="the bm25 extra is not installed (pip install -e '.[bm25]')")
    from open_rag_eval.config import load_config_text
    from open_rag_eval.run.fetch import fetch_outputs

    folder = demo(tmp_path / "data")
    text = """
connector:
  type: bm25
  queries: data/eval_questions.json
  options: {corpus: data/corpus, top_k: 2, answer: top_passage}
evaluators: [{type: golden}]
"""
    loaded = load_config_text(text, base_dir=tmp_path)
    outputs = asyncio.run(fetch_outputs(loaded, loaded.config.connector))  # type: ignore[arg-type]
    assert [o.passages[0].id for o in outputs] == ["doc1.txt", "doc3.txt"]
    assert outputs[0].labels.grounding_ids == ("doc1.txt",)  # the question file's labels came along
    rows = evaluate(outputs, corpus=str(folder / "corpus"), **SEED)
    # q1: the answer is doc1.txt's own text: both keywords, every token in the gold document
    assert (rows[("q1", "lexical.keyword_coverage")], rows[("q1", "lexical.context_overlap")]) == (1.0, 1.0)
    assert rows[("q1", "lexical.keyword_score")] == 1.0
    # q2: no expected keyword (the demo's 0.0), the answer is doc3.txt's text
    assert (rows[("q2", "lexical.keyword_coverage")], rows[("q2", "lexical.context_overlap")]) == (0.0, 1.0)
    assert rows[("q2", "lexical.keyword_score")] == 0.5


def test_an_empty_grounding_list_is_an_empty_gold_context(tmp_path: Path) -> None:
    """The demo concatenates the documents of ``must_be_grounded_in`` into the gold context: an empty list gives an
    empty context, so no answer token is found in it -- overlap 0.0, even though the retrieved passage holds every
    token. Five questions: combined scores 1.0, 0.5, 0.5, 1.0, 0.5, mean 0.70 (0.80 if q3 were scored against its
    retrieved passage)."""
    folder = demo(tmp_path)
    texts = {name: (folder / "corpus" / name).read_text().strip() for name in ("doc1.txt", "doc2.txt", "doc3.txt")}
    questions = [
        {"id": "q1", "question": "?", "expected_keywords": ["retriever", "generator"], "must_be_grounded_in": ["doc1.txt"]},
        {"id": "q2", "question": "?", "expected_keywords": [], "must_be_grounded_in": ["doc3.txt"]},
        {"id": "q3", "question": "?", "expected_keywords": ["harness"], "must_be_grounded_in": []},
        {"id": "q4", "question": "?", "expected_keywords": ["keywords"], "must_be_grounded_in": ["doc2.txt"]},
        {"id": "q5", "question": "?", "expected_keywords": ["retriever", "generator"], "must_be_grounded_in": ["doc1.txt"]},
    ]
    (folder / "eval_questions.json").write_text(json.dumps(questions))
    answers = {"q1": ("doc1.txt", texts["doc1.txt"]), "q2": ("doc3.txt", texts["doc3.txt"]),
               "q3": ("doc3.txt", texts["doc3.txt"]), "q4": ("doc2.txt", texts["doc2.txt"]),
               "q5": ("doc1.txt", "The retriever finds documents.")}
    outputs = [RAGOutput(query_id=qid, query="?", answer=answer, passages=(Passage(id=doc, text=texts[doc]),))
               for qid, (doc, answer) in answers.items()]
    rows = evaluate(outputs, labels=str(folder / "eval_questions.json"), corpus=str(folder / "corpus"), **SEED)
    assert (rows[("q3", "lexical.keyword_coverage")], rows[("q3", "lexical.context_overlap")]) == (1.0, 0.0)
    scores = [rows[(qid, "lexical.keyword_score")] for qid in answers]
    assert scores == [1.0, 0.5, 0.5, 1.0, 0.5]
    assert sum(scores) / len(scores) == pytest.approx(0.70)
    # no grounding list at all: the retrieved passages are the context (overlap 1.0 here)
    unlabelled = outputs[2].model_copy(update={"labels": Labels(expected_keywords=("harness",))})
    assert evaluate([unlabelled], **SEED)[("q3", "lexical.context_overlap")] == 1.0
