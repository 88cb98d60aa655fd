"""Corrected estimates: a run's judged metrics recomputed with people's labels where they are given, and the
PPI++ mean of each over all queries (docs/calibration.md).

On an output, the people's value of a metric is the metric's own scoring function fed the people's labels:
UMBRELA measures when every passage the judge graded has a person's grade; citation precision, recall and F1 over
the statements whose judged citations all carry a person's label (fabricated citations keep their 0, uncited
statements count against recall as always); nugget scores over the nuggets with a person's importance and support.
The unit is the query (its runs averaged): a query with a people's value is labelled, every other query with a
judge's value is unlabelled. Intervals are kept within the metric's range, as the summary's are (the judge's bias
is a difference: its interval is not clipped). Pure: result entries (results.json's ``outputs``) and labels in, estimates out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from statistics import fmean
from typing import Any

from open_rag_eval.inputs.human_labels import Item, nugget_key
from open_rag_eval.core.catalogue import value_bounds
from open_rag_eval.scoring.ppi import MIN_LABELLED, Interval, PPIEstimate, ppi_estimate
from open_rag_eval.scoring.stats import clip_interval
from open_rag_eval.scoring.trec import (STRICT_SUPPORT_WEIGHTS, SUPPORT_WEIGHTS, nugget_scores, support_scores,
                                        support_scores_per_passage, umbrela_scores)

__all__ = ["COLUMNS", "EXTRA_COLUMNS", "Corrected", "QueryValues", "corrected_estimates", "labelled_queries", "people_values",
           "query_values"]

# the columns a corrected estimate adds (summary.csv, calibrate.csv): docs/calibration.md
COLUMNS = ("corrected_mean", "corrected_ci95_low", "corrected_ci95_high", "lambda", "judge_mean", "judge_ci95_low",
           "judge_ci95_high", "people_mean", "people_ci95_low", "people_ci95_high", "judge_bias", "judge_bias_ci95_low",
           "judge_bias_ci95_high", "n_labelled", "n_unlabelled", "corrected_note")
# the columns calibrate.csv adds beside its value, ci_low, ci_high, n and note (which hold the corrected estimate)
EXTRA_COLUMNS = tuple(c for c in COLUMNS if c not in ("corrected_mean", "corrected_ci95_low", "corrected_ci95_high",
                                                      "n_labelled", "corrected_note"))
_UMBRELA = re.compile(r"umbrela\.(mean|mrr|(p|ap|map|ndcg)@(\d+))$")
_CITATION = tuple(f"citation.{name}" for name in ("precision", "recall", "f1", "precision_strict", "recall_strict",
                                                  "f1_strict"))
_NUGGETS = tuple(f"nuggets.{name}" for name in ("all", "all_strict", "vital", "vital_strict", "weighted",
                                                "weighted_strict"))
Labels = Mapping[Item, Hashable]


@dataclass(frozen=True)
class QueryValues:
    """One metric's per-query values: the judge's (every query it scored) and the people's (labelled queries)."""

    judge: dict[str, float]
    people: dict[str, float]


@dataclass(frozen=True)
class Corrected:
    metric: str
    estimate: PPIEstimate | None  # None: too few labelled queries (note says)
    n_labelled: int
    n_unlabelled: int
    note: str = ""

    def row(self) -> dict[str, Any]:
        """The COLUMNS of this metric (None where there is no estimate)."""
        e = self.estimate
        values: list[Any] = [None] * 13 if e is None else [
            e.corrected.value, e.corrected.low, e.corrected.high, e.lam, e.judge.value, e.judge.low, e.judge.high,
            e.people.value, e.people.low, e.people.high, e.bias.value, e.bias.low, e.bias.high]
        return dict(zip(COLUMNS, [*values, self.n_labelled, self.n_unlabelled, self.note], strict=True))


def _umbrela(entry: Mapping[str, Any], human: Labels) -> dict[str, float]:
    grades = (entry.get("details", {}).get("umbrela") or {}).get("grades") or []
    query_id = str(entry["query_id"])
    people = [human.get(Item("umbrela", query_id, None, str(g["passage_id"]))) for g in grades]
    if not people or any(not isinstance(grade, int) for grade in people):
        return {}
    wanted = [m for m in entry.get("scores", {}) if _UMBRELA.match(m)]
    ks = sorted({int(match.group(3)) for m in wanted if (match := _UMBRELA.match(m)) and match.group(3)})
    scores = umbrela_scores([int(g) for g in people if isinstance(g, int)], ks)
    return {m: float(v) for m in wanted if (v := scores.get(m.split(".", 1)[1])) is not None}


def _citation(entry: Mapping[str, Any], human: Labels) -> dict[str, float]:
    detail = entry.get("details", {}).get("citation") or {}
    query_id, run = str(entry["query_id"]), int(entry.get("run") or 1)
    rows: list[list[tuple[str, str | None]]] = []
    n_labelled = 0
    for number, statement in enumerate(detail.get("statements") or [], 1):
        row = []
        for judgment in statement.get("judgments") or []:
            passage = str(judgment["passage_id"])
            label = judgment.get("label") if judgment.get("fabricated") else \
                human.get(Item("citation_support", query_id, run, f"{number}:{passage}"))
            row.append((passage, None if label is None else str(label)))
        labelled = all(label is not None for _, label in row)
        n_labelled += labelled and bool(row) and not all(j.get("fabricated") for j in statement["judgments"])
        if labelled:
            rows.append(row)
    if not n_labelled:
        return {}
    per_passage = detail.get("scoring") == "per_passage"
    values: dict[str, float] = {}
    for suffix, weights in (("", SUPPORT_WEIGHTS), ("_strict", STRICT_SUPPORT_WEIGHTS)):
        scores = support_scores_per_passage(rows, weights) if per_passage else \
            support_scores([[label for _, label in row] for row in rows], weights)
        values |= {f"citation.{name}{suffix}": float(scores[name]) for name in ("precision", "recall", "f1")}
    return {m: v for m, v in values.items() if m in entry.get("scores", {})}


def _nuggets(entry: Mapping[str, Any], human: Labels) -> dict[str, float]:
    query_id, run = str(entry["query_id"]), int(entry.get("run") or 1)
    pairs = []
    for nugget in (entry.get("details", {}).get("nuggets") or {}).get("nuggets") or []:
        key = nugget_key(str(nugget["text"]))
        importance = human.get(Item("nugget_importance", query_id, None, key))
        support = human.get(Item("nugget_support", query_id, run, key))
        if importance is not None and support is not None:
            pairs.append((str(importance), str(support)))
    if not pairs:
        return {}
    scores = nugget_scores(pairs)
    return {m: scores[m.split(".", 1)[1]] for m in _NUGGETS if m in entry.get("scores", {})}


def people_values(entry: Mapping[str, Any], human: Labels) -> dict[str, float]:
    """The people's value of each judged metric their labels determine on this output (results.json entry)."""
    return _umbrela(entry, human) | _citation(entry, human) | _nuggets(entry, human)


def _judged(metric: str) -> bool:
    return bool(_UMBRELA.match(metric)) or metric in _CITATION or metric in _NUGGETS


def query_values(entries: Iterable[Mapping[str, Any]], human: Labels) -> dict[str, QueryValues]:
    """Per metric, per query: the mean over its outputs of the judge's values and of the people's values."""
    judge: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    people: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for entry in entries:
        query_id = str(entry["query_id"])
        scores = entry.get("scores") or {}
        for metric, value in scores.items():
            if _judged(metric) and isinstance(value, (int, float)):
                judge[metric][query_id].append(float(value))
        for metric, value in people_values(entry, human).items():
            if isinstance(scores.get(metric), (int, float)):  # a people's value needs the judge's beside it
                people[metric][query_id].append(value)
    return {metric: QueryValues({q: fmean(v) for q, v in by_query.items()},
                                {q: fmean(v) for q, v in people[metric].items()})
            for metric, by_query in judge.items()}


def corrected_estimates(entries: Iterable[Mapping[str, Any]], human: Labels) -> list[Corrected]:
    """One corrected estimate per judged metric that the labels determine on at least one query, by metric name."""
    found = []
    for metric, values in sorted(query_values(entries, human).items()):
        if values.people:
            found.append(_estimate(metric, values))
    return found


def _estimate(metric: str, values: QueryValues) -> Corrected:
    labelled = sorted(values.people)
    unlabelled = [q for q in values.judge if q not in values.people]
    if len(labelled) < MIN_LABELLED:
        return Corrected(metric, None, len(labelled), len(unlabelled),
                         f"{len(labelled)} labelled query: at least {MIN_LABELLED} are needed")
    estimate = ppi_estimate([values.people[q] for q in labelled], [values.judge[q] for q in labelled],
                            [values.judge[q] for q in unlabelled])
    bounds = value_bounds(metric)
    clipped = replace(estimate, corrected=_within(estimate.corrected, bounds), judge=_within(estimate.judge, bounds),
                      people=_within(estimate.people, bounds))
    return Corrected(metric, clipped, len(labelled), len(unlabelled), _note(len(labelled), len(unlabelled)))


def _within(interval: Interval, bounds: tuple[float, float] | None) -> Interval:
    """The interval kept within the metric's range, as every interval of the summary is."""
    return Interval(interval.value, *clip_interval(interval.low, interval.high, bounds))


def _note(n: int, big_n: int) -> str:
    if big_n == 0:
        return "every query is labelled: the people-only estimate"
    return f"few labels ({n}): the normal interval is approximate" if n < 30 else ""


def labelled_queries(corrected: Sequence[Corrected]) -> int:
    """The most labelled queries of any metric (the report's "corrected with N human labels")."""
    return max((c.n_labelled for c in corrected), default=0)
