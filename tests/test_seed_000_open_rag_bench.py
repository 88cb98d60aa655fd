"""ResearchMate's evaluation module on the Open RAG Benchmark, rebuilt from its own text.

Its definitions: Recall@K = the share of queries with at least one relevant chunk in the top K chunks (a hit rate,
``golden.hit@k`` here, not our fractional ``golden.recall@k``); a query has a hit when any chunk of its relevant
*section* is retrieved; MRR = mean of 1 / rank of the first relevant chunk (rank 1 -> 1.0, 2 -> 0.5, 5 -> 0.2,
none -> 0); Groundedness = answer tokens found in the context / answer tokens (words, lower-cased, stopwords
removed), answers under 10% flagged ungrounded; the Grounded Ratio. Its data: ``queries.json``, ``qrels.json``
(``{query_id: {doc_id, section_id}}``), ``answers.json``, ``corpus/<doc_id>.json``; chunk ids
``<doc_id>_<section_id>_<chunk>``.
"""

from __future__ import annotations

import asyncio
import re
import json
from pathlib import Path

import pytest

from open_rag_eval.core.errors import InputError
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
from open_rag_eval.inputs import read_query_set
from open_rag_eval.core.types import Labels, Passage, RAGOutput

SECTION_PATTERN = r"^(?P<doc>.+_[0-9]+)_[0-9]+$"  # chunk <doc>_<section>_<n> -> section <doc>_<section>


def bench(folder: Path) -> Path:
    """A small Open RAG Benchmark folder in the layout the module describes."""
    (folder / "corpus").mkdir(parents=True)
    queries = {"q1": {"query": "Which optimiser does the paper use?", "type": "extractive", "source": "text"},
               "q2": {"query": "How large is the training set?", "type": "abstractive", "source": "text-table"}}
    (folder / "queries.json").write_text(json.dumps(queries))
    (folder / "qrels.json").write_text(json.dumps({"q1": {"doc_id": "2401.07294v4", "section_id": 12},
                                                   "q2": {"doc_id": "2401.01872v2", "section_id": 0}}))
    (folder / "answers.json").write_text(json.dumps({"q1": "Adam with a cosine schedule.",
                                                     "q2": "About 1.2 million examples."}))
    sections = [{"text": f"Section {n} of the paper.", "tables": {}, "images": {}} for n in range(13)]
    sections[12]["text"] = "We train with the Adam optimiser and a cosine learning-rate schedule."
    (folder / "corpus" / "2401.07294v4.json").write_text(json.dumps({"title": "A paper", "sections": sections}))
    (folder / "corpus" / "2401.01872v2.json").write_text(json.dumps(
        {"title": "Another", "sections": [{"text": "The training set holds 1.2 million examples."}]}))
    return folder


def evaluate(outputs: list[RAGOutput], **options: object) -> dict[tuple[str, str], float | str]:
    evaluator = GoldenEvaluator(GoldenOptions.model_validate(options))
    result = asyncio.run(evaluator.evaluate(outputs, Context()))
    return {(s.query_id, s.metric): s.value if s.value is not None else str(s.error) for s in result.scores}


def retrieved(qid: str, chunks: list[str], answer: str = "") -> RAGOutput:
    return RAGOutput(query_id=qid, query="?", passages=tuple(Passage(id=c, text=f"text of {c}") for c in chunks),
                     answer=answer)


def test_the_benchmark_folder_is_read_directly(tmp_path: Path) -> None:
    queries = {q.query_id: q for q in read_query_set(bench(tmp_path / "arxiv"))}
    assert queries["q1"].query == "Which optimiser does the paper use?"
    assert queries["q1"].labels.relevant_ids == {"2401.07294v4_12": 1}
    assert queries["q1"].labels.grounding_ids == ("2401.07294v4_12",)
    assert queries["q2"].labels.reference_answer == "About 1.2 million examples."


def test_a_hit_is_any_chunk_of_the_relevant_section_and_k_counts_chunks(tmp_path: Path) -> None:
    folder = bench(tmp_path / "arxiv")
    outputs = [
        # q1: chunks of other sections first, then two chunks of section 12 at ranks 3 and 4
        retrieved("q1", ["2401.07294v4_3_0", "2401.07294v4_3_1", "2401.07294v4_12_1", "2401.07294v4_12_0"]),
        # q2: the relevant section's chunk at rank 6
        retrieved("q2", [f"2401.09999v1_{n}_0" for n in range(5)] + ["2401.01872v2_0_0"]),
    ]
    seed = evaluate(outputs, labels=str(folder), k_values=[3, 5, 10], k_counts="chunks",
                    doc_id_pattern=SECTION_PATTERN, metrics=["golden.hit@k", "golden.mrr"])
    assert [seed[("q1", f"golden.hit@{k}")] for k in (3, 5, 10)] == [1.0, 1.0, 1.0]
    assert [seed[("q2", f"golden.hit@{k}")] for k in (3, 5, 10)] == [0.0, 0.0, 1.0]
    assert seed[("q1", "golden.mrr")] == pytest.approx(1 / 3)
    assert seed[("q2", "golden.mrr")] == pytest.approx(1 / 6)
    # our default ranks sections once (k counts sections): section 3, then section 12 at rank 2
    default = evaluate(outputs, labels=str(folder), k_values=[3], doc_id_pattern=SECTION_PATTERN,
                       metrics=["golden.mrr", "golden.hit@k"])
    assert default[("q1", "golden.mrr")] == 0.5
    assert default[("q2", "golden.mrr")] == pytest.approx(1 / 6)  # five distinct sections before it: same rank


def test_recall_at_k_is_the_share_of_queries_with_a_hit() -> None:
    # "Recall@3 = 0.60 means 60% of queries have a relevant chunk in top 3": five queries, three hits in the top 3
    outputs = [retrieved(f"q{i}", ["x", "rel", "y"] if i < 3 else ["x", "y", "z", "rel"]) for i in range(5)]
    outputs = [o.model_copy(update={"labels": Labels(relevant_ids={"rel": 1, "other": 1})}) for o in outputs]
    rows = evaluate(outputs, k_values=[3], metrics=["golden.hit@k", "golden.recall@k"])
    assert sum(rows[(f"q{i}", "golden.hit@3")] for i in range(5)) / 5 == pytest.approx(0.60)
    # fractional recall is another number: half the relevant set was found where there was a hit
    assert sum(rows[(f"q{i}", "golden.recall@3")] for i in range(5)) / 5 == pytest.approx(0.30)


@pytest.mark.parametrize(("rank", "rr"), [(1, 1.0), (2, 0.5), (5, 0.2), (None, 0.0)])
def test_reciprocal_rank_examples(rank: int | None, rr: float) -> None:
    chunks = [f"c{i}" for i in range(1, 7)]
    if rank is not None:
        chunks[rank - 1] = "rel"
    out = retrieved("q", chunks).model_copy(update={"labels": Labels(relevant_ids={"rel": 1})})
    assert evaluate([out], k_values=[1], metrics=["golden.mrr"])[("q", "golden.mrr")] == rr


def test_groundedness_and_the_grounded_ratio() -> None:
    grounded = RAGOutput(query_id="g", query="?", answer="The model uses attention mechanisms for processing.",
                         passages=(Passage(id="c", text="Attention mechanisms are key to the model architecture."),))
    ungrounded = RAGOutput(query_id="u", query="?", answer="The sky is blue because of Rayleigh scattering.",
                           passages=(Passage(id="c", text="The document discusses machine learning techniques."),))
    rows = evaluate([grounded, ungrounded], metrics=["lexical.groundedness", "lexical.grounded", "lexical.ungrounded"])
    # content tokens: model, uses, attention, mechanisms, processing -> model, attention, mechanisms found
    assert rows[("g", "lexical.groundedness")] == pytest.approx(3 / 5)
    assert rows[("u", "lexical.groundedness")] == 0.0  # sky, blue, rayleigh, scattering: none in the context
    assert (rows[("g", "lexical.grounded")], rows[("u", "lexical.grounded")]) == (1.0, 0.0)  # threshold 10%
    assert (rows[("g", "lexical.ungrounded")], rows[("u", "lexical.ungrounded")]) == (0.0, 1.0)
    # the module's report: Groundedness (avg) 0.3, Grounded Ratio 0.5
    assert (rows[("g", "lexical.groundedness")] + rows[("u", "lexical.groundedness")]) / 2 == pytest.approx(0.3)
    assert (rows[("g", "lexical.grounded")] + rows[("u", "lexical.grounded")]) / 2 == 0.5


def test_the_corpus_gives_the_gold_sections_text(tmp_path: Path) -> None:
    folder = bench(tmp_path / "arxiv")
    out = retrieved("q1", ["2401.07294v4_3_0"], answer="Adam optimiser, cosine schedule.")
    rows = evaluate([out], labels=str(folder), corpus=str(folder), metrics=["lexical.context_overlap"])
    assert rows[("q1", "lexical.context_overlap")] == 1.0  # the gold section's text, not the retrieved chunk
    without = evaluate([out], labels=str(folder), metrics=["lexical.context_overlap"])
    assert without[("q1", "lexical.context_overlap")] == 0.0  # no retrieved passage of the gold section


def test_a_broken_benchmark_file_names_file_and_key(tmp_path: Path) -> None:
    folder = bench(tmp_path / "arxiv")
    (folder / "qrels.json").write_text(json.dumps({"q1": {"doc_id": "2401.07294v4"}}))
    with pytest.raises(InputError, match=r"qrels\.json.*q1.*section_id"):
        read_query_set(folder)
    (folder / "qrels.json").write_text(json.dumps({"q9": {"doc_id": "d", "section_id": 1}}))
    with pytest.raises(InputError, match=r"qrels\.json.*q9.*not in queries\.json"):
        read_query_set(folder)


def test_a_one_character_token_counts_here_and_not_in_the_module() -> None:
    """The module's tokeniser reads ASCII words and drops 1-character tokens; ours keeps "8" (docs/seeds.md).
    Content tokens model, trains, 8, layers, attention, dropout, residual, connections, images: 7 of 9 in the context
    here (0.777778); without "8", 6 of 8 (0.75) in the module."""
    answer = "The model trains 8 layers with attention, dropout and residual connections over images."
    context = "The model has 8 layers using attention, dropout and residual connections."
    output = RAGOutput(query_id="q", query="?", answer=answer, passages=(Passage(id="c", text=context),))
    rows = evaluate([output], metrics=["lexical.groundedness"])
    assert rows[("q", "lexical.groundedness")] == pytest.approx(0.777778, abs=1e-6)
    from open_rag_eval.metrics.lexical import english_stopwords

    stop = english_stopwords()
    module = [t for t in re.findall(r"[a-z0-9]+", answer.lower()) if len(t) > 1 and t not in stop]
    vocabulary = set(re.findall(r"[a-z0-9]+", context.lower()))
    assert sum(t in vocabulary for t in module) / len(module) == 0.75


def test_an_empty_answer_is_missing_here_where_the_module_says_grounded() -> None:
    """The module scores an empty answer 1.0 and grounded (nothing ungrounded in it); here it has no token to count:
    groundedness and grounded are missing with the reason (docs/seeds.md)."""
    output = RAGOutput(query_id="q", query="?", answer="", passages=(Passage(id="c", text="Some context."),))
    rows = evaluate([output], metrics=["lexical.groundedness", "lexical.grounded"])
    assert rows[("q", "lexical.groundedness")] == "the answer has no content words"
    assert rows[("q", "lexical.grounded")] == "the answer has no content words"
