"""Golden retrieval measures: docs/methods.md worked examples (numbers from the real trec_eval binary) and edge conventions."""

from __future__ import annotations

import pytest

from open_rag_eval.scoring.golden import (
    evaluated_queries,
    mean_measures,
    measure_names,
    query_measures,
    trec_ranking,
)

QRELS = {"q1": {"d1": 1, "d2": 2, "d3": 0, "d4": 1}, "q2": {"dA": 1, "dB": 0}, "q3": {"x1": 0}}
RUN = {
    "q1": [("d2", 5.0), ("d5", 4.0), ("d1", 3.0), ("d3", 2.0), ("d6", 1.0)],
    "q2": [("dA", 1.0), ("dB", 1.0)],
    "q3": [("x1", 1.0), ("x2", 0.5)],
}
K = (1, 3, 5, 10)


def measures(qid: str, level: int = 1) -> dict[str, float | None]:
    return query_measures(trec_ranking(RUN[qid]), QRELS[qid], K, relevance_level=level)


def test_g1_level_1() -> None:
    m = measures("q1")
    assert m["p@1"] == 1.0
    assert m["p@3"] == pytest.approx(0.666667, abs=1e-6)
    assert m["p@5"] == pytest.approx(0.4)
    assert m["p@10"] == pytest.approx(0.2)  # padded: 2 relevant / 10
    assert m["recall@1"] == pytest.approx(0.333333, abs=1e-6)
    assert m["recall@3"] == m["recall@5"] == pytest.approx(0.666667, abs=1e-6)
    assert m["hit@1"] == 1.0
    assert m["mrr"] == 1.0
    assert m["ap"] == pytest.approx(0.555556, abs=1e-6)
    assert m["ndcg@3"] == m["ndcg@5"] == pytest.approx(0.798485, abs=1e-6)
    assert m["recall_all@5"] == 0.0 and m["recall_all@3"] == 0.0  # d4 never retrieved


def test_g1_level_2() -> None:
    m = measures("q1", level=2)  # only d2 is relevant, R = 1
    assert m["p@3"] == pytest.approx(0.333333, abs=1e-6)
    assert m["recall@3"] == 1.0
    assert m["ap"] == 1.0
    assert m["mrr"] == 1.0
    assert m["ndcg@3"] == pytest.approx(0.798485, abs=1e-6)  # -l does not affect nDCG
    assert m["recall_all@1"] == 1.0


def test_g2_tie_is_broken_by_docid_descending() -> None:
    assert trec_ranking(RUN["q2"]) == ["dB", "dA"]
    m = measures("q2")
    assert m["mrr"] == 0.5
    assert m["ap"] == 0.5
    assert m["p@1"] == 0.0
    assert m["hit@1"] == 0.0
    assert m["ndcg@3"] == pytest.approx(0.630930, abs=1e-6)


def test_g2_list_order_differs_only_for_ties() -> None:
    m = query_measures(["dA", "dB"], QRELS["q2"], K)
    assert m["mrr"] == 1.0


def test_tie_rule_uses_strcmp_order() -> None:
    assert trec_ranking([("d1", 1.0), ("d10", 1.0), ("d2", 1.0), ("D9", 1.0), ("a", 2.0)]) == ["a", "d2", "d10", "d1",
                                                                                                 "D9"]


def test_g3_no_relevant_documents() -> None:
    m = measures("q3")
    for name, value in m.items():
        if name.startswith("recall_all@"):
            assert value is None  # missing (decision 6), not 0
        else:
            assert value == 0.0, name


def test_averages_over_q1_to_q3() -> None:
    per_query = [measures(qid) for qid in evaluated_queries(RUN, QRELS)]
    mean = mean_measures(per_query)
    assert mean["ap"] == pytest.approx(0.3519, abs=1e-4)
    assert mean["mrr"] == pytest.approx(0.5)
    assert mean["p@3"] == pytest.approx(0.3333, abs=1e-4)
    assert mean["recall@3"] == pytest.approx(0.5556, abs=1e-4)
    assert mean["ndcg@3"] == pytest.approx(0.4765, abs=1e-4)
    assert mean["hit@1"] == pytest.approx(0.3333, abs=1e-4)
    assert mean["recall_all@3"] == pytest.approx(0.5)  # q1 0, q2 1, q3 excluded (R = 0)


def test_map_cut_divides_by_all_relevant() -> None:
    m = measures("q1")
    assert m["map@1"] == pytest.approx(1 / 3)
    assert m["map@3"] == pytest.approx((1 + 2 / 3) / 3)


def test_fewer_than_k_documents() -> None:
    m = query_measures(["d1"], {"d1": 1, "d2": 1}, (1, 5))
    assert m["p@5"] == pytest.approx(0.2)
    assert m["recall@5"] == 0.5
    assert m["ndcg@5"] == pytest.approx(1 / (1 + 1 / 1.584962500721156))
    unpadded = query_measures(["d1"], {"d1": 1}, (1, 5), pad=False)
    assert unpadded["p@1"] == 1.0 and unpadded["p@5"] is None


def test_empty_ranking_scores_zero() -> None:
    m = query_measures([], {"d1": 3}, (1, 3))
    assert m["p@3"] == m["mrr"] == m["ap"] == m["ndcg@3"] == m["recall_all@3"] == 0.0


def test_graded_ndcg_uses_linear_gains() -> None:
    m = query_measures(["b", "a"], {"a": 3, "b": 1}, (2,))
    ideal = 3 + 1 / 1.584962500721156
    assert m["ndcg@2"] == pytest.approx((1 + 3 / 1.584962500721156) / ideal)


def test_which_queries_are_averaged() -> None:
    run = {"q1": [], "q9": []}
    qrels = {"q1": {}, "q2": {}}
    assert evaluated_queries(run, qrels) == ["q1"]
    assert evaluated_queries(run, qrels, complete=True) == ["q1", "q2"]


def test_measure_names_order() -> None:
    assert measure_names((1, 3))[:4] == ["p@1", "p@3", "recall@1", "recall@3"]
    assert "mrr" in measure_names((1,)) and "ap" in measure_names((1,))


def test_mean_of_all_missing_is_missing() -> None:
    assert mean_measures([{"recall_all@1": None}]) == {"recall_all@1": None}
