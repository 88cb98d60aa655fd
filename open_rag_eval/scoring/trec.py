"""Pure scores of the TREC 2024 RAG methods (docs/methods.md).

No I/O and no judge: grades and labels in, numbers out. Checked against the worked examples of docs/methods.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import TypeVar

from open_rag_eval.scoring.retrieval import average_precision, ndcg_at_k, precision_at_k, reciprocal_rank

__all__ = [
    "RELEVANT_GRADE",
    "STRICT_SUPPORT_WEIGHTS",
    "SUPPORT_WEIGHTS",
    "binarise",
    "nugget_scores",
    "select_nuggets",
    "support_scores",
    "support_scores_per_passage",
    "umbrela_scores",
    "vectara_ap_at_k",
]

RELEVANT_GRADE = 2  # UMBRELA grade >= 2 is relevant for binary measures
SUPPORT_WEIGHTS = {"FS": 1.0, "PS": 0.5, "NS": 0.0}
STRICT_SUPPORT_WEIGHTS = {"FS": 1.0, "PS": 0.0, "NS": 0.0}  # the hard variant: only full support counts
_NUGGET_CREDIT = {"support": 1.0, "partial_support": 0.5}
T = TypeVar("T")
_NUGGET_KEYS = ("all", "all_strict", "vital", "vital_strict", "weighted", "weighted_strict")


def binarise(grades: Sequence[int]) -> list[int]:
    return [1 if grade >= RELEVANT_GRADE else 0 for grade in grades]


def vectara_ap_at_k(rels: Sequence[int], k: int) -> float:
    """Mean of precision@i over relevant ranks i <= k; the denominator is the number relevant in the top k."""
    found, total = 0, 0.0
    for rank, rel in enumerate(rels[:k], start=1):
        if rel:
            found += 1
            total += found / rank
    return total / found if found else 0.0


def umbrela_scores(grades: Sequence[int], k_values: Iterable[int], pad: bool = True) -> dict[str, float | None]:
    """mean, p@k, ap@k (vectara), map@k (trec_eval, R = relevant among the graded passages), mrr, ndcg@k.

    ``grades`` are in retrieval order. With ``pad=False`` P@k and AP@k for k beyond the list are None (vectara omits
    them).
    """
    rels = binarise(grades)
    n_relevant = sum(rels)
    scores: dict[str, float | None] = {"mean": fmean(grades) if grades else None, "mrr": reciprocal_rank(rels)}
    for k in k_values:
        scores[f"p@{k}"] = precision_at_k(rels, k, pad=pad)
        scores[f"ap@{k}"] = None if not pad and k > len(rels) else vectara_ap_at_k(rels, k)
        scores[f"map@{k}"] = average_precision(rels, n_relevant, k)
        scores[f"ndcg@{k}"] = ndcg_at_k([float(g) for g in grades], [float(g) for g in grades], k)
    return scores


def nugget_scores(nuggets: Sequence[tuple[str, str]]) -> dict[str, float]:
    """All / Vital / Weighted and their strict variants from (importance, assignment) pairs.

    Anything but ``vital`` is okay; credit 1 for ``support``, 0.5 for ``partial_support`` (strict: support only),
    0 otherwise (``failed`` and unknown labels included). Weighted: vital weight 1, okay weight 0.5. An empty
    denominator gives 0.0 (castorini).
    """
    sums = dict.fromkeys(("v", "v*", "o", "o*"), 0.0)
    n_vital = n_okay = 0
    for importance, assignment in nuggets:
        credit = _NUGGET_CREDIT.get(assignment, 0.0)
        strict = 1.0 if assignment == "support" else 0.0
        group = "v" if importance == "vital" else "o"
        sums[group] += credit
        sums[group + "*"] += strict
        n_vital, n_okay = (n_vital + 1, n_okay) if group == "v" else (n_vital, n_okay + 1)

    def ratio(numerator: float, denominator: float) -> float:
        return numerator / denominator if denominator else 0.0

    n_all, weight = n_vital + n_okay, n_vital + 0.5 * n_okay
    values = (
        ratio(sums["v"] + sums["o"], n_all),
        ratio(sums["v*"] + sums["o*"], n_all),
        ratio(sums["v"], n_vital),
        ratio(sums["v*"], n_vital),
        ratio(sums["v"] + 0.5 * sums["o"], weight),
        ratio(sums["v*"] + 0.5 * sums["o*"], weight),
    )
    return dict(zip(_NUGGET_KEYS, values, strict=True))


def select_nuggets(scored: Sequence[tuple[T, str]], cap: int) -> list[tuple[T, str]]:
    """(nugget, importance) pairs: every vital before every okay, creation order kept within each group; first cap."""
    return sorted(scored, key=lambda item: item[1] != "vital")[:cap]


def support_scores(statements: Sequence[Sequence[str | None]],
                   weights: Mapping[str, float] = SUPPORT_WEIGHTS) -> dict[str, float | int]:
    """Weighted precision, recall and F1 from the judged labels of each statement, in citation order.

    A statement's labels are those of its judged citations: one (the first citation, TREC 2024) or all of them
    (the all_citations variant: the statement's weight is the mean of its parsed labels). A statement without
    citations has no labels and counts against recall only. A statement whose labels are all unparsed (None) is
    excluded from numerators and denominators; ``n_unparsed`` counts unparsed labels. No scored statement:
    P = R = F1 = 0 (RAGDoll convention). ``STRICT_SUPPORT_WEIGHTS`` give the hard variant (partial support is 0).
    """
    cited: list[float] = []
    n_statements = n_unparsed = 0
    for labels in statements:
        parsed = [weights[label] for label in labels if label is not None]
        n_unparsed += len(labels) - len(parsed)
        if labels and not parsed:
            continue
        n_statements += 1
        if parsed:
            cited.append(fmean(parsed))
    precision = sum(cited) / len(cited) if cited else 0.0
    recall = sum(cited) / n_statements if n_statements else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "n_unparsed": n_unparsed}


def support_scores_per_passage(statements: Sequence[Sequence[tuple[str, str | None]]],
                               weights: Mapping[str, float] = SUPPORT_WEIGHTS) -> dict[str, float | int]:
    """Citation precision, recall and F1 as vectara's open-rag-eval defines them, from each statement's judged
    (passage id, label) pairs, in citation order.

    Precision: the mean over the distinct cited passages of the mean weight each passage got (a passage cited by
    three statements counts once). Recall: the mean over statements of the mean weight of the statement's citations;
    a statement without citations counts 0. Unparsed labels (None) are left out and counted in ``n_unparsed``; a
    statement whose labels are all unparsed is left out of recall, as in ``support_scores``. Nothing scored: 0.
    """
    by_passage: dict[str, list[float]] = {}
    statement_weights: list[float] = []
    n_unparsed = 0
    for citations in statements:
        parsed = [(pid, weights[label]) for pid, label in citations if label is not None]
        n_unparsed += len(citations) - len(parsed)
        if citations and not parsed:
            continue
        for pid, weight in parsed:
            by_passage.setdefault(pid, []).append(weight)
        statement_weights.append(fmean(weight for _, weight in parsed) if parsed else 0.0)
    precision = fmean(fmean(found) for found in by_passage.values()) if by_passage else 0.0
    recall = fmean(statement_weights) if statement_weights else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1, "n_unparsed": n_unparsed}
