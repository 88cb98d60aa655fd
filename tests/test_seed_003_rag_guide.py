"""The RAG evaluation & optimisation guide's retrieval metrics, rebuilt from its own worked example.

Its ``RetrievalEvaluator`` (k = 3) cuts every ranking to the top k, then: Precision@k = relevant retrieved / k;
Recall@k = relevant retrieved / |relevant|, **1.0 when nothing is relevant**; MRR = 1 / rank of the first relevant
**within the top k**; NDCG with binary gains and the ideal from min(|relevant|, k) relevant documents; hit rate = at
least one relevant. Ours: ``golden.p@k``, ``golden.recall@k`` (``no_relevant: one``), ``golden.mrr@k``,
``golden.ndcg@k``, ``golden.hit@k`` -- and the documented differences of our defaults (``golden.mrr`` has no cut-off;
recall with nothing relevant is 0).
"""

from __future__ import annotations

import asyncio
import math

import pytest

from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
from open_rag_eval.scoring.golden import mean_measures, query_measures
from open_rag_eval.types import Labels, Passage, RAGOutput

# The guide's example, as printed: what the retriever returned, and the ground truth.
RETRIEVED = [
    ["doc_returns_1", "doc_shipping_1", "doc_returns_2"],
    ["doc_password_1", "doc_account_1", "doc_security_1"],
    ["doc_api_1", "doc_api_2", "doc_pricing_1"],
]
RELEVANT = [
    ["doc_returns_1", "doc_returns_2", "doc_returns_3"],
    ["doc_password_1", "doc_password_2"],
    ["doc_api_1", "doc_api_2"],
]


def evaluate(outputs: list[RAGOutput], **options: object) -> dict[tuple[str, str], float | None]:
    evaluator = GoldenEvaluator(GoldenOptions.model_validate({"metrics": ["golden"], **options}))
    result = asyncio.run(evaluator.evaluate(outputs, Context()))
    return {(s.query_id, s.metric): s.value for s in result.scores}


def outputs() -> list[RAGOutput]:
    return [RAGOutput(query_id=f"q{i}", query="?", passages=tuple(Passage(id=d, text=d) for d in retrieved),
                      labels=Labels(relevant_ids={d: 1 for d in relevant}))
            for i, (retrieved, relevant) in enumerate(zip(RETRIEVED, RELEVANT), start=1)]


def run_means(rows: dict[tuple[str, str], float | None]) -> dict[str, float]:
    names = {metric for _, metric in rows}
    return {name: sum(v for (_, m), v in rows.items() if m == name and v is not None) / 3 for name in names}


def test_the_guides_example_at_k_3() -> None:
    rows = evaluate(outputs(), k_values=[3], no_relevant="one")
    # per query, by hand: q1 finds 2 of 3, q2 1 of 2, q3 2 of 2, each with the first result relevant
    assert rows[("q1", "golden.p@3")] == pytest.approx(2 / 3)
    assert rows[("q2", "golden.recall@3")] == 0.5
    idcg_3 = 1 + 1 / math.log2(3) + 1 / math.log2(4)  # 2.130930
    assert rows[("q1", "golden.ndcg@3")] == pytest.approx((1 + 1 / math.log2(4)) / idcg_3)  # 0.703918
    means = run_means(rows)
    assert means["golden.p@3"] == pytest.approx(0.555556, abs=1e-6)  # its example code would print "Precision@3: 0.556"
    assert means["golden.recall@3"] == pytest.approx(0.722222, abs=1e-6)  # Recall@3: 0.722
    assert means["golden.mrr@3"] == 1.0  # MRR: 1.000
    assert means["golden.ndcg@3"] == pytest.approx(0.772355, abs=1e-6)  # NDCG: 0.772
    assert means["golden.hit@3"] == 1.0  # Hit Rate: 1.000


def test_mrr_within_the_top_k_differs_from_our_mrr() -> None:
    ranking = ["x", "y", "z", "rel"]
    values = query_measures(ranking, {"rel": 1}, [3])
    assert values["mrr@3"] == 0.0  # the guide: nothing relevant in its cut ranking
    assert values["mrr"] == 0.25  # ours (trec_eval recip_rank): the whole ranking


def test_recall_with_nothing_relevant() -> None:
    ranking = ["a", "b"]
    assert query_measures(ranking, {}, [3], no_relevant="one")["recall@3"] == 1.0  # the guide: "perfect recall"
    assert query_measures(ranking, {}, [3])["recall@3"] == 0.0  # ours: trec_eval's 0
    assert query_measures(ranking, {}, [3], no_relevant="missing")["recall@3"] is None
    # and the query counts in the mean under the guide's rule, not under 'missing'
    per_query = [query_measures(["a"], {"a": 1}, [1], no_relevant=rule) for rule in ("one", "missing")]
    empty = [query_measures(["a"], {}, [1], no_relevant=rule) for rule in ("one", "missing")]
    assert mean_measures([per_query[0], empty[0]])["recall@1"] == 1.0
    assert mean_measures([per_query[1], empty[1]])["recall@1"] == 1.0  # left out, not averaged in as 0
    assert mean_measures([per_query[0], query_measures(["a"], {}, [1])])["recall@1"] == 0.5


def test_precision_pads_short_rankings_like_the_guide() -> None:
    # the guide divides by k whatever was retrieved: one relevant result at k = 3 is 1/3, as our padded P@k
    assert query_measures(["a"], {"a": 1}, [3])["p@3"] == pytest.approx(1 / 3)
