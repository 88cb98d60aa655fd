"""Corrected estimates from a run's results and people's labels (run/corrected.py): which labels determine which
metric on a query, with literal numbers, and the estimate equal to the method authors' package."""

from __future__ import annotations

from typing import Any

import numpy as np
import ppi_py
import pytest

from open_rag_eval.inputs.human_labels import Item
from open_rag_eval.run.corrected import corrected_estimates, people_values, query_values


def _entry(query_id: str, grades: dict[str, int], run: int = 1, scores: dict[str, float] | None = None,
           statements: list[list[tuple[str, str, bool]]] | None = None,
           nuggets: list[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    judged = [g for g in grades.values()]
    details: dict[str, Any] = {"umbrela": {"grades": [{"passage_id": p, "grade": g} for p, g in grades.items()]}}
    if statements is not None:
        details["citation"] = {"scoring": "per_statement", "statements": [
            {"judgments": [{"passage_id": p, "label": label, "fabricated": fab} for p, label, fab in row]}
            for row in statements]}
    if nuggets is not None:
        details["nuggets"] = {"nuggets": [{"text": t, "importance": i, "assignment": a} for t, i, a in nuggets]}
    return {"query_id": query_id, "run": run, "details": details,
            "scores": {"umbrela.mean": sum(judged) / len(judged), "umbrela.p@2": 0.5, **(scores or {})}}


def _grades(query_id: str, grades: dict[str, int]) -> dict[Item, Any]:
    return {Item("umbrela", query_id, None, p): g for p, g in grades.items()}


def test_umbrela_needs_every_graded_passage_labelled() -> None:
    entry = _entry("q1", {"a": 3, "b": 1, "c": 2})
    assert people_values(entry, _grades("q1", {"a": 2, "b": 0})) == {}  # c has no person's grade
    values = people_values(entry, _grades("q1", {"a": 2, "b": 0, "c": 3, "z": 1}))
    # people's grades in retrieval order 2, 0, 3: mean 5/3; relevant (>= 2) at ranks 1 and 3: P@2 = 1/2
    assert values == {"umbrela.mean": pytest.approx(5 / 3), "umbrela.p@2": 0.5}


def test_citation_over_the_labelled_statements_fabricated_and_uncited_kept() -> None:
    statements = [[("p1", "FS", False)], [("p2", "FS", False)], [("p9", "NS", True)], [], [("p3", "FS", False)]]
    entry = _entry("q1", {"p1": 3}, scores={"citation.precision": 1.0, "citation.recall": 0.8, "citation.f1": 0.9},
                   statements=statements)
    human = {Item("citation_support", "q1", 1, "1:p1"): "FS", Item("citation_support", "q1", 1, "2:p2"): "PS"}
    # statement 5 has no person's label: left out. Kept: FS (1), PS (0.5), fabricated NS (0), uncited.
    # precision = 1.5 / 3 = 0.5; recall = 1.5 / 4 = 0.375; F1 = 2 * 0.5 * 0.375 / 0.875 = 3/7
    assert people_values(entry, human) == {"citation.precision": 0.5, "citation.recall": 0.375,
                                           "citation.f1": pytest.approx(3 / 7)}
    assert people_values(entry, {}) == {}  # nothing a person labelled: no people's value


def test_nuggets_over_the_nuggets_with_both_labels() -> None:
    entry = _entry("q1", {"p1": 3}, run=2, scores={"nuggets.all": 1.0, "nuggets.vital": 1.0},
                   nuggets=[("The sky  is blue", "vital", "support"), ("grass is green", "okay", "support"),
                            ("water is wet", "okay", "support")])
    human = {Item("nugget_importance", "q1", None, "the sky is blue"): "vital",
             Item("nugget_support", "q1", 2, "the sky is blue"): "partial_support",
             Item("nugget_importance", "q1", None, "grass is green"): "okay",
             Item("nugget_support", "q1", 2, "grass is green"): "not_support",
             Item("nugget_support", "q1", 2, "water is wet"): "support"}  # no importance: left out
    # two nuggets: 0.5 + 0 over 2 = 0.25 (all); the vital one partially supported: 0.5
    assert people_values(entry, human) == {"nuggets.all": 0.25, "nuggets.vital": 0.5}


def test_the_query_is_the_unit_and_a_people_value_needs_the_judges() -> None:
    entries = [_entry("q1", {"a": 3, "b": 1}), _entry("q1", {"a": 1, "b": 1}, run=2), _entry("q2", {"a": 0, "b": 2})]
    values = query_values(entries, _grades("q1", {"a": 2, "b": 2}))
    assert values["umbrela.mean"].judge == {"q1": 1.5, "q2": 1.0}  # q1's runs (2 and 1) averaged
    assert values["umbrela.mean"].people == {"q1": 2.0}


def test_too_few_labelled_queries_is_a_missing_estimate_with_its_reason() -> None:
    [mean, p2] = corrected_estimates([_entry("q1", {"a": 3}), _entry("q2", {"a": 1})], _grades("q1", {"a": 2}))
    assert mean.metric == "umbrela.mean" and mean.estimate is None and "at least 2" in mean.note
    assert mean.row()["corrected_mean"] is None and (mean.n_labelled, mean.n_unlabelled) == (1, 1)


def test_corrected_umbrela_mean_and_citation_f1_equal_the_method_authors_package() -> None:
    rng = np.random.default_rng(5)
    entries: list[dict[str, Any]] = []
    human: dict[Item, Any] = {}
    for q in range(60):
        people = rng.integers(0, 4, size=4)
        judge = np.clip(people + rng.integers(0, 2, size=4), 0, 3)
        grades = {f"p{i}": int(g) for i, g in enumerate(judge)}
        labels = ["FS" if g >= 2 else "NS" for g in people]
        statements = [[(f"p{i}", "FS" if g >= 1 else "NS", False)] for i, g in enumerate(judge)]
        judged = [1.0 if row[0][1] == "FS" else 0.0 for row in statements]
        f1 = sum(judged) / 4
        entries.append(_entry(f"q{q}", grades, scores={"citation.f1": f1}, statements=statements))
        if q < 20:
            human |= _grades(f"q{q}", {f"p{i}": int(g) for i, g in enumerate(people)})
            human |= {Item("citation_support", f"q{q}", 1, f"{i + 1}:p{i}"): label for i, label in enumerate(labels)}
    found = {c.metric: c for c in corrected_estimates(entries, human)}
    values = query_values(entries, human)
    for metric in ("umbrela.mean", "citation.f1"):
        by_query = values[metric]
        labelled = sorted(by_query.people)
        y = np.array([by_query.people[q] for q in labelled])
        yhat = np.array([by_query.judge[q] for q in labelled])
        unlabelled = np.array([v for q, v in by_query.judge.items() if q not in by_query.people])
        assert (len(y), len(unlabelled)) == (20, 40)
        low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05)
        estimate = found[metric].estimate
        assert estimate is not None
        point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled))[0])
        assert abs(estimate.corrected.value - point) < 1e-9
        bounds = (0.0, 3.0) if metric == "umbrela.mean" else (0.0, 1.0)
        assert abs(estimate.corrected.low - max(float(low[0]), bounds[0])) < 1e-9
        assert abs(estimate.corrected.high - min(float(high[0]), bounds[1])) < 1e-9
