import pytest

from open_rag_eval.scoring.trec import nugget_scores, select_nuggets, support_scores, umbrela_scores

K = (1, 3, 5)


def test_u1() -> None:
    s = umbrela_scores([3, 0, 2, 1, 2], K)
    assert s["p@1"] == 1 and s["p@3"] == pytest.approx(0.666667, abs=1e-6) and s["p@5"] == pytest.approx(0.6)
    assert s["ap@3"] == pytest.approx(0.833333, abs=1e-6) and s["ap@5"] == pytest.approx(0.755556, abs=1e-6)
    assert s["mrr"] == 1 and s["mean"] == pytest.approx(1.6)
    assert s["map@3"] == pytest.approx(0.555556, abs=1e-6)  # trec_eval form, R = 3


def test_u2_padding_and_vectara_omission() -> None:
    s = umbrela_scores([1, 1, 2, 0], K)
    assert s["p@1"] == 0 and s["p@3"] == pytest.approx(1 / 3) and s["ap@3"] == pytest.approx(0.333333, abs=1e-6)
    assert s["mrr"] == pytest.approx(1 / 3) and s["mean"] == 1.0 and s["p@5"] == pytest.approx(0.2)
    assert umbrela_scores([1, 1, 2, 0], K, pad=False)["p@5"] is None


def test_u3_nothing_relevant() -> None:
    s = umbrela_scores([0, 1, 0], K)
    assert all(s[f"{m}@{k}"] == 0 for m in ("p", "ap", "map") for k in K)
    assert s["ndcg@1"] == 0 and s["ndcg@3"] == pytest.approx(0.630930, abs=1e-6)  # graded gains: grade 1 counts
    assert s["mrr"] == 0 and s["mean"] == pytest.approx(0.333333, abs=1e-6)


def test_umbrela_ndcg_uses_linear_grades() -> None:
    s = umbrela_scores([2, 3], (2,))
    ideal = 3 + 2 / 1.584962500721156
    assert s["ndcg@2"] == pytest.approx((2 + 3 / 1.584962500721156) / ideal)


def _check(values: dict[str, float], expected: dict[str, float]) -> None:
    for key, value in expected.items():
        assert values[key] == pytest.approx(value, abs=1e-6), key


def test_n1() -> None:
    pairs = [("vital", "support"), ("vital", "partial_support"), ("vital", "not_support"), ("okay", "support"),
             ("okay", "partial_support")]
    _check(nugget_scores(pairs), {"all": 0.6, "all_strict": 0.4, "vital": 0.5, "vital_strict": 0.333333,
                                  "weighted": 0.5625, "weighted_strict": 0.375})


def test_n2_no_vital_and_the_peer_bug_not_copied() -> None:
    _check(nugget_scores([("okay", "support"), ("okay", "not_support")]),
           {"all": 0.5, "all_strict": 0.5, "vital": 0, "vital_strict": 0, "weighted": 0.5, "weighted_strict": 0.5})


def test_n3_all_supported_is_one() -> None:
    assert set(nugget_scores([("vital", "support")] * 3).values()) == {1.0}


def test_n4_failed_assignment_earns_nothing() -> None:
    pairs = [("vital", "failed"), ("vital", "support"), ("okay", "partial_support")]
    _check(nugget_scores(pairs), {"all": 0.5, "all_strict": 0.333333, "vital": 0.5, "vital_strict": 0.5,
                                  "weighted": 0.5, "weighted_strict": 0.4})


def test_run_level_vital_strict_is_the_mean_over_topics() -> None:
    n1 = nugget_scores([("vital", "support"), ("vital", "partial_support"), ("vital", "not_support"),
                        ("okay", "support"), ("okay", "partial_support")])["vital_strict"]
    n3 = nugget_scores([("vital", "support")] * 3)["vital_strict"]
    assert (n1 + n3) / 2 == pytest.approx(0.666667, abs=1e-6)


def test_selection_vital_first_stable() -> None:
    scored = [("a", "okay"), ("b", "vital"), ("c", "okay"), ("d", "vital")]
    assert [t for t, _ in select_nuggets(scored, 20)] == ["b", "d", "a", "c"]
    assert [t for t, _ in select_nuggets(scored, 3)] == ["b", "d", "a"]


def _support(statements: list[list[str | None]]) -> dict[str, float]:
    return {k: float(v) for k, v in support_scores(statements).items()}


def test_s1_paper_example() -> None:
    _check(_support([["PS"], ["FS"], []]), {"precision": 0.75, "recall": 0.5, "f1": 0.6})


def test_s2_first_citation_and_all_citations() -> None:
    _check(_support([["FS"], ["PS"], []]), {"precision": 0.75, "recall": 0.5, "f1": 0.6})
    _check(_support([["FS", "NS"], ["PS"], []]), {"precision": 0.5, "recall": 1 / 3})


def test_s3_all_cited_precision_equals_recall() -> None:
    _check(_support([["FS"], ["NS"]]), {"precision": 0.5, "recall": 0.5, "f1": 0.5})


def test_s4_no_citations_and_unparsed_exclusion() -> None:
    _check(_support([[], []]), {"precision": 0, "recall": 0, "f1": 0})
    _check(_support([[None], ["FS"]]), {"precision": 1.0, "recall": 1.0, "n_unparsed": 1})


def test_support_strict_variant_counts_only_full_support() -> None:
    """S1 (a1 -> PS, a2 -> FS, a3 uncited) in the hard variant: P = 1/2, R = 1/3, F1 = 0.4."""
    from open_rag_eval.scoring.trec import STRICT_SUPPORT_WEIGHTS, support_scores

    strict = support_scores([["PS"], ["FS"], []], STRICT_SUPPORT_WEIGHTS)
    assert strict["precision"] == pytest.approx(0.5)
    assert strict["recall"] == pytest.approx(1 / 3)
    assert strict["f1"] == pytest.approx(0.4)
