"""The golden evaluator end to end: run files, qrels over passages, labels, lexical rows, options, the example config."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pydantic import ValidationError

from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
from open_rag_eval.core.types import AnswerPart, EvalResult, Labels, Passage, RAGOutput, Score

ROOT = Path(__file__).parent.parent
DATA = ROOT / "configs" / "data"


def evaluate(outputs: list[RAGOutput], ctx: Context | None = None, **options: object) -> EvalResult:
    evaluator = GoldenEvaluator(GoldenOptions.model_validate(options), base_dir=DATA)
    return asyncio.run(evaluator.evaluate(outputs, ctx or Context()))


def table(result: EvalResult) -> dict[tuple[str, int | None, str], float | str]:
    return {(s.query_id, s.run, s.metric): s.value if s.value is not None else str(s.error) for s in result.scores}


def output(qid: str = "q", passages: tuple[str, ...] = (), answer: str = "", **kwargs: object) -> RAGOutput:
    return RAGOutput(query_id=qid, query="question?", passages=tuple(Passage(id=p, text=f"text of {p}") for p in passages),
                     answer=(AnswerPart(text=answer),) if answer else (), answer_text=answer, **kwargs)


def test_run_file_reproduces_g1_to_g3() -> None:
    rows = table(evaluate([], run="golden_trec_run.txt", qrels="golden_trec_qrels.txt", k_values=[1, 3]))
    assert rows[("q1", 1, "golden.ap")] == pytest.approx(0.555556, abs=1e-6)
    assert rows[("q1", 1, "golden.ndcg@3")] == pytest.approx(0.798485, abs=1e-6)
    assert rows[("q2", 1, "golden.mrr")] == 0.5  # the tie
    assert rows[("q3", 1, "golden.p@3")] == 0.0
    assert rows[("q3", 1, "golden.recall_all@3")] == "no relevant documents"
    assert {qid for qid, _, _ in rows} == {"q1", "q2", "q3"}


def test_run_file_with_relevance_level_2() -> None:
    rows = table(evaluate([], run="golden_trec_run.txt", qrels="golden_trec_qrels.txt", k_values=[3], relevance_level=2))
    assert rows[("q1", 1, "golden.p@3")] == pytest.approx(1 / 3)
    assert rows[("q1", 1, "golden.ap")] == 1.0
    assert rows[("q1", 1, "golden.ndcg@3")] == pytest.approx(0.798485, abs=1e-6)


def test_complete_adds_qrels_only_queries(tmp_path: Path) -> None:
    (tmp_path / "run").write_text("q1 Q0 d1 1 1.0 t\nq9 Q0 d1 1 1.0 t\n")
    (tmp_path / "qrels").write_text("q1 0 d1 1\nq2 0 d7 1\n")
    plain = table(evaluate([], run=str(tmp_path / "run"), qrels=str(tmp_path / "qrels"), k_values=[1]))
    assert {qid for qid, _, _ in plain} == {"q1"}  # q9 (run only) ignored, q2 (qrels only) left out
    full = table(evaluate([], run=str(tmp_path / "run"), qrels=str(tmp_path / "qrels"), k_values=[1], complete=True))
    assert full[("q2", 1, "golden.p@1")] == 0.0 and full[("q2", 1, "golden.recall_all@1")] == 0.0


def test_a_run_sharing_no_query_with_the_qrels_is_an_error_and_a_partial_overlap_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from open_rag_eval.core.errors import InputError

    (tmp_path / "run").write_text("1 Q0 d1 1 1.0 t\n2 Q0 d1 1 1.0 t\n")
    (tmp_path / "qrels").write_text("q1 0 d1 1\nq2 0 d7 1\n")
    with pytest.raises(InputError, match=r"run: the run shares no query with the qrels \(run: 1, 2; qrels: q1, q2\): "
                                         "check that both use the same query ids"):
        evaluate([], run=str(tmp_path / "run"), qrels=str(tmp_path / "qrels"), k_values=[1])
    (tmp_path / "run").write_text("q1 Q0 d1 1 1.0 t\n2 Q0 d1 1 1.0 t\n")
    with caplog.at_level("WARNING"):
        rows = table(evaluate([], run=str(tmp_path / "run"), qrels=str(tmp_path / "qrels"), k_values=[1]))
    assert {qid for qid, _, _ in rows} == {"q1"}
    assert [r.getMessage() for r in caplog.records] == [
        "golden: 1 of 2 queries of the run have no judgments in the qrels (no values for them), e.g. 2"]


def test_chunks_map_to_documents_counted_once_at_first_rank() -> None:
    out = output(passages=("x#0", "rel#3", "rel#1", "other#0", "x#1"),
                 labels=Labels(relevant_ids={"rel": 1, "other": 2, "missing": 1}))
    rows = table(evaluate([out], k_values=[2, 3], doc_id_separator="#"))
    # document ranking: x, rel, other
    assert rows[("q", 1, "golden.p@2")] == 0.5
    assert rows[("q", 1, "golden.p@3")] == pytest.approx(2 / 3)
    assert rows[("q", 1, "golden.recall@3")] == pytest.approx(2 / 3)
    assert rows[("q", 1, "golden.mrr")] == 0.5
    assert rows[("q", 1, "golden.ap")] == pytest.approx((1 / 2 + 2 / 3) / 3)


def test_doc_id_pattern() -> None:
    out = output(passages=("doc-7_chunk2", "doc-8_chunk0"), labels=Labels(relevant_ids={"doc-8": 1}))
    rows = table(evaluate([out], k_values=[1], doc_id_pattern=r"(?P<doc>.+)_chunk\d+$"))
    assert rows[("q", 1, "golden.mrr")] == 0.5


def test_without_mapping_passage_ids_are_document_ids() -> None:
    out = output(passages=("a#0", "a#1"), labels=Labels(relevant_ids={"a": 1}))
    assert table(evaluate([out], k_values=[1]))[("q", 1, "golden.hit@1")] == 0.0


def test_qrels_label_outputs_and_fall_back_to_own_labels() -> None:
    labelled = output("g2", passages=("bronte#0", "austen#2", "austen#0"))
    own = output("mine", passages=("z",), labels=Labels(relevant_ids={"z": 1}))
    unlabelled = output("none", passages=("z",))
    rows = table(evaluate([labelled, own, unlabelled], k_values=[1], qrels="golden_qrels.txt", doc_id_separator="#"))
    assert rows[("g2", 1, "golden.mrr")] == 0.5
    assert rows[("mine", 1, "golden.mrr")] == 1.0
    assert not [key for key in rows if key[0] == "none" and key[2].startswith("golden.")]


def test_passage_scores_ranking_with_tie_rule() -> None:
    passages = (Passage(id="dA", text="a", score=1.0), Passage(id="dB", text="b", score=1.0))
    out = RAGOutput(query_id="q", query="?", passages=passages, labels=Labels(relevant_ids={"dA": 1}))
    assert table(evaluate([out], k_values=[1]))[("q", 1, "golden.mrr")] == 1.0
    assert table(evaluate([out], k_values=[1], passage_order="score"))[("q", 1, "golden.mrr")] == 0.5
    unscored = output(passages=("dA",), labels=Labels(relevant_ids={"dA": 1}))
    rows = table(evaluate([unscored], k_values=[1], passage_order="score"))
    assert "needs a score" in str(rows[("q", 1, "golden.mrr")])


def test_empty_relevant_ids_score_zero_and_recall_all_missing() -> None:
    rows = table(evaluate([output(passages=("a",), labels=Labels(relevant_ids={}))], k_values=[1]))
    assert rows[("q", 1, "golden.p@1")] == 0.0
    assert rows[("q", 1, "golden.recall_all@1")] == "no relevant documents"


def test_fewer_passages_than_k_unpadded_precision_is_missing() -> None:
    rows = table(evaluate([output(passages=("a",), labels=Labels(relevant_ids={"a": 1}))], k_values=[1, 5],
                          pad_precision=False))
    assert rows[("q", 1, "golden.p@1")] == 1.0
    assert rows[("q", 1, "golden.p@5")] == "fewer than k documents retrieved"


def test_failed_output_gets_missing_values() -> None:
    out = output(passages=("a",), labels=Labels(relevant_ids={"a": 1}, expected_refusal=False), error="timeout",
                 latency_ms=5.0)
    rows = table(evaluate([out], k_values=[1]))
    assert rows[("q", 1, "golden.p@1")] == "the system gave no output: timeout"
    assert rows[("q", 1, "lexical.refusal_correct")] == "the system gave no output: timeout"
    assert all(isinstance(value, str) for value in rows.values())


def test_lexical_rows_on_the_example() -> None:
    from open_rag_eval.inputs import read_outputs

    outputs = read_outputs(DATA / "golden_outputs.jsonl")
    rows = table(evaluate(outputs, qrels="golden_qrels.txt", doc_id_separator="#", k_values=[1, 3]))
    assert rows[("g1", 1, "lexical.citation_compliance")] == 1.0  # sources section + 2 citations (2 required)
    assert rows[("g2", 1, "lexical.groundedness")] == pytest.approx(5 / 6)  # "written" is not in the passages
    assert rows[("g2", 1, "lexical.citation_compliance")] == 0.5  # no sources section
    assert rows[("g2", 1, "lexical.keyword_score")] == pytest.approx(0.5 * 1 + 0.5 * 5 / 6)
    assert rows[("g3", 1, "lexical.ungrounded")] == 1.0
    assert rows[("g3", 1, "lexical.keyword_score")] == 0.5  # keyword in the answer, but nothing grounded
    assert rows[("g4", 1, "lexical.refusal_correct")] == 0.0  # refused an answerable query
    assert rows[("g5", 1, "lexical.refusal_correct")] == 1.0  # NO_ANSWER on an out-of-scope query
    assert rows[("g5", 1, "lexical.groundedness")] == "the system declined (NO_ANSWER)"
    assert ("g5", 1, "lexical.keyword_coverage") not in rows  # no keyword labels -> no row
    assert rows[("g2", 1, "latency.ms")] == 1240.0
    assert rows[("g3", 1, "golden.hit@3")] == 0.0


def test_context_overlap_uses_grounding_documents_only() -> None:
    passages = (Passage(id="good#0", text="Paris is the capital"), Passage(id="bad#0", text="Lyon food"))
    labels = Labels(expected_keywords=("paris", "lyon"), grounding_ids=("good",))
    out = RAGOutput(query_id="q", query="?", passages=passages, answer_text="Paris and Lyon food",
                    answer=(AnswerPart(text="Paris and Lyon food"),), labels=labels)
    rows = table(evaluate([out], doc_id_separator="#"))
    assert rows[("q", 1, "lexical.groundedness")] == 1.0
    assert rows[("q", 1, "lexical.context_overlap")] == pytest.approx(1 / 3)
    assert rows[("q", 1, "lexical.keyword_coverage")] == 1.0
    assert rows[("q", 1, "lexical.keyword_score")] == pytest.approx(0.5 + 0.5 / 3)
    rows = table(evaluate([out], doc_id_separator="#", alpha=1.0))
    assert rows[("q", 1, "lexical.keyword_score")] == 1.0


def test_empty_answer_and_empty_keywords() -> None:
    out = output(labels=Labels(expected_keywords=(), expected_refusal=True, required_citations=0))
    rows = table(evaluate([out]))
    assert rows[("q", 1, "lexical.groundedness")] == "the answer has no content words"
    assert rows[("q", 1, "lexical.keyword_coverage")] == "no expected keywords"
    assert rows[("q", 1, "lexical.keyword_score")] == "needs both keyword_coverage and context_overlap"
    assert rows[("q", 1, "lexical.citation_compliance")] == 0.5  # 0 citations >= 0 required, no sources
    assert rows[("q", 1, "lexical.refusal_correct")] == 1.0  # an empty answer declines


def test_refusal_uses_the_no_answer_judgment_when_present() -> None:
    answered = output("a", answer="I don't know.", labels=Labels(expected_refusal=False))
    declined = output("b", answer="Paris.", labels=Labels(expected_refusal=True))
    failed = output("c", answer="Paris.", labels=Labels(expected_refusal=False))
    previous = EvalResult(scores=[
        Score(query_id="a", run=1, metric="no_answer.answered", value=1.0),
        Score(query_id="b", run=1, metric="no_answer.answered", value=0.0),
        Score(query_id="c", run=1, metric="no_answer.answered", error="judge call failed"),
    ])
    result = evaluate([answered, declined, failed], Context(previous=previous))
    rows = table(result)
    assert rows[("a", 1, "lexical.refusal_correct")] == 1.0  # the judge says it answered
    assert rows[("b", 1, "lexical.refusal_correct")] == 1.0  # the judge says it declined
    assert rows[("c", 1, "lexical.refusal_correct")] == "the no-answer judgment failed: judge call failed"
    detail = next(d for d in result.details if d.query_id == "a" and d.section == "lexical")
    assert detail.data["refusal_source"] == "no_answer"


def test_metric_subset() -> None:
    out = output(passages=("a",), answer="Paris.", labels=Labels(relevant_ids={"a": 1}), latency_ms=3.0)
    rows = table(evaluate([out], k_values=[1, 3], metrics=["golden.p@k", "golden.mrr", "latency"]))
    assert sorted(metric for _, _, metric in rows) == ["golden.mrr", "golden.p@1", "golden.p@3", "latency.ms"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"k_values": [0]}, "distinct positive"),
        ({"k_values": [3, 3]}, "distinct positive"),
        ({"run": "r.txt"}, "'run' needs 'qrels'"),
        ({"doc_id_separator": "#", "doc_id_pattern": "(.*)"}, "not both"),
        ({"doc_id_pattern": "("}, "not a valid regular expression"),
        ({"metrics": ["golden.p@5x"]}, "valid choices"),
        ({"alpha": 2}, "less than or equal"),
        ({"unknown": 1}, "Extra inputs"),
    ],
)
def test_bad_options(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        GoldenOptions.model_validate(options)


def test_example_config_validates_and_needs_no_judge() -> None:
    from open_rag_eval.config import load_config

    loaded = load_config(ROOT / "configs" / "golden.yaml")
    spec = loaded.evaluators[0]
    assert spec.type == "golden" and spec.build().contract().needs_judge is False
    evaluator = spec.cls(spec.options, base_dir=loaded.base_dir)
    from open_rag_eval.inputs import read_outputs

    outputs = read_outputs(loaded.resolve_path(loaded.config.input))
    rows = table(asyncio.run(evaluator.evaluate(outputs, Context())))
    assert rows[("g1", 1, "golden.ndcg@3")] == 1.0
    assert rows[("g2", 1, "golden.mrr")] == 0.5
