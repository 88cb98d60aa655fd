"""Randomized cross-check of the golden retrieval measures against trec_eval itself (pytrec-eval-terrier)."""

from __future__ import annotations

import random

import pytest

from open_rag_eval.scoring.golden import evaluated_queries, query_measures, trec_ranking

pytrec_eval = pytest.importorskip("pytrec_eval")

K_VALUES = (1, 2, 3, 5, 10, 20)
CUTS = ",".join(str(k) for k in K_VALUES)
TREC_MEASURES = {f"P.{CUTS}", f"recall.{CUTS}", f"success.{CUTS}", "recip_rank", "map", f"map_cut.{CUTS}",
                 f"ndcg_cut.{CUTS}"}
# our name -> trec_eval name (``{k}`` filled per cutoff)
NAMES = {"p@{k}": "P_{k}", "recall@{k}": "recall_{k}", "hit@{k}": "success_{k}", "map@{k}": "map_cut_{k}",
         "ndcg@{k}": "ndcg_cut_{k}"}
# docids of different lengths and cases so the strcmp tie rule is exercised ("d1" < "d10" < "d2" < "D3")
POOL = [f"d{i}" for i in range(25)] + ["D3", "a", "zz", "d1#0"]


def _random_case(rng: random.Random) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(rng.randint(1, 6)):
        qid = f"q{q}"
        judged = rng.sample(POOL, rng.randint(1, 12))
        qrels[qid] = {docid: rng.choice((-1, 0, 0, 1, 1, 2, 3)) for docid in judged}
        if rng.random() < 0.9:
            retrieved = rng.sample(POOL, rng.randint(1, 22))
            # few distinct scores -> many ties
            run[qid] = {docid: float(rng.choice((0.0, 0.5, 1.0, 1.5, 2.0, -1.0))) for docid in retrieved}
    if rng.random() < 0.3:
        run["only_in_run"] = {"d1": 1.0}
    return qrels, run


@pytest.mark.parametrize("seed", range(300))
def test_matches_trec_eval(seed: int) -> None:
    rng = random.Random(seed)
    qrels, run = _random_case(rng)
    level = rng.choice((1, 1, 2))
    expected = pytrec_eval.RelevanceEvaluator(qrels, TREC_MEASURES, relevance_level=level).evaluate(run)
    assert sorted(evaluated_queries(run, qrels)) == sorted(expected)
    for qid in evaluated_queries(run, qrels):
        ours = query_measures(trec_ranking(run[qid].items()), qrels[qid], K_VALUES, relevance_level=level)
        theirs = expected[qid]
        assert ours["mrr"] == pytest.approx(theirs["recip_rank"], abs=1e-9)
        assert ours["ap"] == pytest.approx(theirs["map"], abs=1e-9)
        for k in K_VALUES:
            for our_name, their_name in NAMES.items():
                value = ours[our_name.format(k=k)]
                assert value == pytest.approx(theirs[their_name.format(k=k)], abs=1e-9), (qid, our_name, k)
