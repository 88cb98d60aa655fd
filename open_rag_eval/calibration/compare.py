"""Judge vs people, per task: Cohen's kappa (weighted for ordinal labels), raw agreement, the confusion matrix,
Kendall's tau of the system ranking, each with a percentile bootstrap CI over queries (seeded)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from open_rag_eval.calibration.agreement import Weights, cohen_kappa, confusion, kendall_tau
from open_rag_eval.inputs.human_labels import LABELS, ORDINAL, SCORE, Item, Judged
from open_rag_eval.scoring.stats import quantile

__all__ = ["Pair", "Statistic", "TaskAgreement", "bootstrap", "compare", "pair_up"]

RESAMPLES, SEED = 2000, 0


@dataclass(frozen=True)
class Pair:
    item: Item
    judge: Hashable
    human: Hashable


@dataclass(frozen=True)
class Statistic:
    name: str  # kappa | kappa_linear | kappa_quadratic | agreement | tau_systems
    value: float | None
    ci_low: float | None
    ci_high: float | None
    n: int  # items (systems for tau)
    note: str = ""  # why a value is missing


@dataclass
class TaskAgreement:
    task: str
    labels: tuple[Hashable, ...]
    n_pairs: int  # items with both a judge label and a human label
    n_judge_failed: int  # labelled by people, but the judgment failed
    n_not_judged: int  # labelled by people, absent from the results
    confusion: list[list[int]]  # rows: the judge's label, columns: the people's
    statistics: list[Statistic] = field(default_factory=list)
    systems: dict[str, tuple[float, float]] = field(default_factory=dict)  # system -> (by judge, by people)

    @property
    def one_label(self) -> Hashable | None:
        """The judge's label when it gave that one label to every compared item (at least 2): a constant judge,
        which no statistic of agreement can tell from a judge that reads the items; else None."""
        used = [label for label, row in zip(self.labels, self.confusion) if sum(row)]
        return used[0] if self.n_pairs >= 2 and len(used) == 1 else None

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "labels": list(self.labels), "n_pairs": self.n_pairs, "judge_one_label":
                self.one_label,
                "n_judge_failed": self.n_judge_failed, "n_not_judged": self.n_not_judged,
                "confusion": {"rows": "judge", "columns": "human", "matrix": self.confusion},
                "statistics": [vars(s) for s in self.statistics],
                "systems": {name: {"judge": j, "human": h} for name, (j, h) in self.systems.items()}}


def pair_up(human: Mapping[Item, Hashable], judged: Sequence[Judged]) -> tuple[list[Pair], dict[str, Counts]]:
    """One pair per item the people labelled and the judge labelled (its first label); counts of the rest."""
    first: dict[Item, Hashable | None] = {}
    for j in judged:
        if j.item in human and first.get(j.item) is None:
            first[j.item] = j.label
    pairs = [Pair(item, label, human[item]) for item, label in first.items() if label is not None]
    counts: dict[str, Counts] = defaultdict(Counts)
    for item in human:
        if item not in first:
            counts[item.task].not_judged += 1
        elif first[item] is None:
            counts[item.task].failed += 1
    return pairs, counts


@dataclass
class Counts:
    failed: int = 0
    not_judged: int = 0


def compare(human: Mapping[Item, Hashable], judged: Sequence[Judged], *, resamples: int = RESAMPLES,
            seed: int = SEED) -> list[TaskAgreement]:
    pairs, counts = pair_up(human, judged)
    tasks = [task for task in LABELS if any(item.task == task for item in human)]
    return [_task(task, [p for p in pairs if p.item.task == task], counts[task], human,
                  [j for j in judged if j.item.task == task], resamples, seed) for task in tasks]


def _task(task: str, pairs: list[Pair], counts: Counts, human: Mapping[Item, Hashable], judged: list[Judged],
          resamples: int, seed: int) -> TaskAgreement:
    labels = LABELS[task]
    judge_labels, human_labels = [p.judge for p in pairs], [p.human for p in pairs]
    result = TaskAgreement(task, labels, len(pairs), counts.failed, counts.not_judged,
                           confusion(judge_labels, human_labels, labels))
    by_query: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs:
        by_query[pair.item.query_id].append(pair)
    kinds: list[tuple[str, Weights]] = [("kappa", None)]
    if task in ORDINAL:
        kinds += [("kappa_linear", "linear"), ("kappa_quadratic", "quadratic")]
    for name, weights in kinds:
        def kappa(chosen: Sequence[Pair], weights: Weights = weights) -> float | None:
            return cohen_kappa([p.judge for p in chosen], [p.human for p in chosen], labels, weights)
        result.statistics.append(_statistic(name, kappa, by_query, len(pairs), resamples, seed))
    result.statistics.append(_statistic("agreement", _agreement, by_query, len(pairs), resamples, seed))
    if task in SCORE:
        result.statistics.append(_ranking(task, human, judged, result, resamples, seed))
    return result


def _agreement(chosen: Sequence[Pair]) -> float | None:
    return sum(p.judge == p.human for p in chosen) / len(chosen) if chosen else None


def _statistic(name: str, statistic: Callable[[Sequence[Pair]], float | None], by_query: Mapping[str, list[Pair]],
               n: int, resamples: int, seed: int) -> Statistic:
    pairs = [pair for group in by_query.values() for pair in group]
    value = statistic(pairs) if pairs else None
    if value is None:
        return Statistic(name, None, None, None, n, "no pairs" if not pairs else "undefined: chance agreement is total")
    low, high = bootstrap(list(by_query.values()), lambda groups: statistic([p for g in groups for p in g]),
                          resamples=resamples, seed=seed)
    return Statistic(name, value, low, high, n)


def bootstrap(groups: Sequence[Any], statistic: Callable[[list[Any]], float | None], *,
              resamples: int = RESAMPLES, seed: int = SEED) -> tuple[float | None, float | None]:
    """Percentile 95% interval of ``statistic`` over resamples of the groups (queries) with replacement;
    resamples where the statistic is undefined are left out. (None, None) under 2 groups."""
    import numpy as np

    if len(groups) < 2:
        return None, None
    rng = np.random.default_rng(seed)
    values = []
    for picks in rng.integers(0, len(groups), size=(resamples, len(groups))):
        value = statistic([groups[i] for i in picks])
        if value is not None:
            values.append(value)
    if not values:
        return None, None
    ordered = sorted(values)
    return quantile(ordered, 0.025), quantile(ordered, 0.975)


def _ranking(task: str, human: Mapping[Item, Hashable], judged: list[Judged], result: TaskAgreement,
             resamples: int, seed: int) -> Statistic:
    """Kendall's tau between the systems ranked by the judge's labels and by the people's, on the same items."""
    credit = SCORE[task]
    cells: dict[str, dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    for j in judged:
        if j.label is not None and j.item in human:
            cells[j.system][j.item.query_id].append((credit[j.label], credit[human[j.item]]))
    systems = sorted(cells)
    queries = sorted({q for per_query in cells.values() for q in per_query})

    def scores(chosen: Sequence[str]) -> tuple[list[float], list[float]] | None:
        by_judge, by_people = [], []
        for system in systems:
            means = [_mean(cells[system][q]) for q in chosen if q in cells[system]]
            if not means:
                return None
            by_judge.append(sum(m[0] for m in means) / len(means))
            by_people.append(sum(m[1] for m in means) / len(means))
        return by_judge, by_people

    def tau(chosen: Sequence[str]) -> float | None:
        both = scores(chosen)
        return None if both is None else kendall_tau(*both)

    if len(systems) < 2:
        return Statistic("tau_systems", None, None, None, len(systems), "needs 2 or more runs")
    both = scores(queries)
    assert both is not None
    result.systems = {s: (j, h) for s, j, h in zip(systems, *both)}
    value = kendall_tau(*both)
    if value is None:
        return Statistic("tau_systems", None, None, None, len(systems), "undefined: tied scores on one side")
    low, high = bootstrap(queries, tau, resamples=resamples, seed=seed)
    return Statistic("tau_systems", value, low, high, len(systems))


def _mean(values: Sequence[tuple[float, float]]) -> tuple[float, float]:
    return (sum(v[0] for v in values) / len(values), sum(v[1] for v in values) / len(values))
