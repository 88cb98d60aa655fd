"""The people's value of a judged metric on one output: the metric's own scoring function fed the people's labels
in place of the judge's, where the labels determine it (docs/calibration.md, "What is corrected").

UMBRELA measures when every passage the judge graded has a person's grade; citation precision, recall and F1 over
the statements whose judged citations all carry a person's label (fabricated citations keep their 0, uncited
statements count against recall as always); nugget scores over the nuggets with a person's importance and support.
Pure: a results.json output entry and the labels in, numbers out.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from typing import Any

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.inputs.human_labels import Item, nugget_key
from open_rag_eval.scoring.trec import (STRICT_SUPPORT_WEIGHTS, SUPPORT_WEIGHTS, nugget_scores, support_scores,
                                        support_scores_per_passage, umbrela_scores)

__all__ = ["HumanLabels", "judged", "people_values"]

HumanLabels = Mapping[Item, Hashable]
_UMBRELA = re.compile(r"umbrela\.(mean|mrr|(p|ap|map|ndcg)@(\d+))$")
_CITATION = tuple(f"citation.{name}" for name in ("precision", "recall", "f1", "precision_strict", "recall_strict",
                                                  "f1_strict"))
_NUGGETS = tuple(f"nuggets.{name}" for name in ("all", "all_strict", "vital", "vital_strict", "weighted",
                                                "weighted_strict"))

def _umbrela(entry: Mapping[str, Any], human: HumanLabels) -> dict[str, float]:
    grades = (entry.get("details", {}).get("umbrela") or {}).get("grades") or []
    query_id = str(entry["query_id"])
    people = [human.get(Item(Tasks.UMBRELA, query_id, None, str(g["passage_id"]))) for g in grades]
    if not people or any(not isinstance(grade, int) for grade in people):
        return {}
    wanted = [m for m in entry.get("scores", {}) if _UMBRELA.match(m)]
    ks = sorted({int(match.group(3)) for m in wanted if (match := _UMBRELA.match(m)) and match.group(3)})
    scores = umbrela_scores([int(g) for g in people if isinstance(g, int)], ks)
    return {m: float(v) for m in wanted if (v := scores.get(m.split(".", 1)[1])) is not None}


def _citation(entry: Mapping[str, Any], human: HumanLabels) -> dict[str, float]:
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


def _nuggets(entry: Mapping[str, Any], human: HumanLabels) -> dict[str, float]:
    query_id, run = str(entry["query_id"]), int(entry.get("run") or 1)
    pairs = []
    for nugget in (entry.get("details", {}).get("nuggets") or {}).get("nuggets") or []:
        key = nugget_key(str(nugget["text"]))
        importance = human.get(Item(Tasks.NUGGET_IMPORTANCE, query_id, None, key))
        support = human.get(Item("nugget_support", query_id, run, key))
        if importance is not None and support is not None:
            pairs.append((str(importance), str(support)))
    if not pairs:
        return {}
    scores = nugget_scores(pairs)
    return {m: scores[m.split(".", 1)[1]] for m in _NUGGETS if m in entry.get("scores", {})}


def people_values(entry: Mapping[str, Any], human: HumanLabels) -> dict[str, float]:
    """The people's value of each judged metric their labels determine on this output (results.json entry)."""
    return _umbrela(entry, human) | _citation(entry, human) | _nuggets(entry, human)


def judged(metric: str) -> bool:
    """Whether people's labels can determine ``metric`` (a judged metric this module recomputes)."""
    return bool(_UMBRELA.match(metric)) or metric in _CITATION or metric in _NUGGETS
