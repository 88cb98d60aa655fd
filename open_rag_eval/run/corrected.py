"""Corrected estimates: the PPI++ mean over all queries of each judged metric that people's labels determine on
some queries (their values: run/people.py), its interval, and the corrected difference of two runs
(docs/calibration.md).

The unit is the query (its runs averaged): a query with a people's value is labelled, every other query with a
judge's value is unlabelled. Intervals are kept within the metric's range, as the summary's are (the judge's bias
is a difference: its interval is not clipped).
Result entries (results.json's ``outputs``) and labels in, estimates out; corrected.json written and read here.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist, fmean
from typing import Any

from open_rag_eval.core.catalogue import value_bounds
from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.human_labels import read_label_files
from open_rag_eval.run.people import HumanLabels, judged, people_values
from open_rag_eval.scoring.ppi import MIN_LABELLED, Z95, Interval, PPIEstimate, ppi_estimate, ppi_mean
from open_rag_eval.scoring.stats import clip_interval
from open_rag_eval.store.fileio import atomic_write_json

__all__ = ["COLUMNS", "CORRECTED_FILE", "DIFFERENCE_COLUMNS", "EXTRA_COLUMNS", "METHOD", "Corrected",
           "CorrectedDifference", "HumanLabels", "QueryValues", "RunLabels", "corrected_differences",
           "corrected_estimates", "people_values", "query_values", "read_corrected", "run_labels", "write_corrected"]

METHOD = "PPI++ mean over queries, power-tuned lambda, normal 95% interval (docs/calibration.md)"
# the columns a corrected estimate adds (summary.csv, calibrate.csv): docs/calibration.md
COLUMNS = ("corrected_mean", "corrected_ci95_low", "corrected_ci95_high", "lambda", "judge_mean", "judge_ci95_low",
           "judge_ci95_high", "people_mean", "people_ci95_low", "people_ci95_high", "judge_bias", "judge_bias_ci95_low",
           "judge_bias_ci95_high", "n_labelled", "n_unlabelled", "corrected_note")
# the columns calibrate.csv adds beside its value, ci_low, ci_high, n and note (which hold the corrected estimate)
EXTRA_COLUMNS = tuple(c for c in COLUMNS if c not in ("corrected_mean", "corrected_ci95_low", "corrected_ci95_high",
                                                      "n_labelled", "corrected_note"))
CORRECTED_FILE = "corrected.json"  # a run's corrected estimates and the per-query values they rest on


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


def query_values(entries: Iterable[Mapping[str, Any]], human: HumanLabels) -> dict[str, QueryValues]:
    """Per metric, per query: the mean over its outputs of the judge's values and of the people's values."""
    judge: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    people: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for entry in entries:
        query_id = str(entry["query_id"])
        scores = entry.get("scores") or {}
        for metric, value in scores.items():
            if judged(metric) and isinstance(value, (int, float)):
                judge[metric][query_id].append(float(value))
        for metric, value in people_values(entry, human).items():
            if isinstance(scores.get(metric), (int, float)):  # a people's value needs the judge's beside it
                people[metric][query_id].append(value)
    return {metric: QueryValues({q: fmean(v) for q, v in by_query.items()},
                                {q: fmean(v) for q, v in people[metric].items()})
            for metric, by_query in judge.items()}


def corrected_estimates(entries: Iterable[Mapping[str, Any]], human: HumanLabels) -> list[Corrected]:
    """One corrected estimate per judged metric that the labels determine on at least one query, by metric name."""
    return [_estimate(metric, values) for metric, values in sorted(query_values(entries, human).items())
            if values.people]


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


@dataclass(frozen=True)
class RunLabels:
    """The people's labels a run corrects its judged metrics with, and the names of their files."""

    labels: HumanLabels
    files: tuple[str, ...]


def run_labels(paths: Sequence[Path]) -> RunLabels | None:
    """The labels of a run's ``labels:`` files, read before anything is judged (a bad file is exit 3 with its file,
    line and field); None without files."""
    if not paths:
        return None
    return RunLabels(read_label_files(paths), tuple(path.name for path in paths))


def write_corrected(path: Path, entries: Iterable[Mapping[str, Any]], human: RunLabels) -> list[Corrected]:
    """corrected.json: each corrected metric's estimate and its per-query judge's and people's values (what
    ``compare`` pairs across two runs); returns the estimates."""
    values = query_values(entries, human.labels)
    corrected = [_estimate(metric, v) for metric, v in sorted(values.items()) if v.people]
    atomic_write_json(path, {"method": METHOD, "labels": list(human.files), "n_labels": len(human.labels),
                             "metrics": [{"metric": c.metric, **c.row()} for c in corrected],
                             "queries": {c.metric: {"judge": values[c.metric].judge, "people": values[c.metric].people}
                                         for c in corrected}})
    return corrected


def read_corrected(folder: Path) -> dict[str, QueryValues] | None:
    """The per-query values of a run's corrected metrics (None: the run had no labels)."""
    path = folder / CORRECTED_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return {metric: QueryValues({str(q): float(v) for q, v in by["judge"].items()},
                                    {str(q): float(v) for q, v in by["people"].items()})
                for metric, by in data["queries"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as error:
        raise InputError(f"cannot read the corrected estimates ({error!r})", file=str(path)) from None


DIFFERENCE_COLUMNS = ("metric", "corrected_diff", "ci95_low", "ci95_high", "p_value", "lambda", "judge_diff",
                      "n_labelled", "n_unlabelled", "note")


@dataclass(frozen=True)
class CorrectedDifference:
    """B - A of a metric's corrected mean over the queries both runs scored: PPI++ on the per-query differences."""

    metric: str
    diff: Interval | None  # None: fewer than 2 queries labelled in both runs
    lam: float | None
    p_value: float | None  # two-sided, normal: the interval's own test of "no difference"
    judge_diff: float | None  # the judge's mean difference over the same queries
    n_labelled: int
    n_unlabelled: int
    note: str = ""

    def row(self) -> list[Any]:
        d = self.diff
        return [self.metric, None if d is None else d.value, None if d is None else d.low,
                None if d is None else d.high, self.p_value, self.lam, self.judge_diff, self.n_labelled,
                self.n_unlabelled, self.note]


def corrected_differences(a: Mapping[str, QueryValues], b: Mapping[str, QueryValues]) -> list[CorrectedDifference]:
    """Per metric corrected in both runs: the PPI++ mean of people(B) - people(A) on the queries labelled in both,
    with judge(B) - judge(A) on every query both runs scored as the prediction (docs/calibration.md)."""
    return [_difference(metric, a[metric], b[metric]) for metric in sorted(set(a) & set(b))]


def _difference(metric: str, a: QueryValues, b: QueryValues) -> CorrectedDifference:
    both = [q for q in a.judge if q in b.judge]
    labelled = [q for q in both if q in a.people and q in b.people]
    unlabelled = [q for q in both if q not in labelled]
    judge_diff = fmean(b.judge[q] - a.judge[q] for q in both) if both else None
    if len(labelled) < MIN_LABELLED:
        return CorrectedDifference(metric, None, None, None, judge_diff, len(labelled), len(unlabelled),
                                   f"{len(labelled)} query labelled in both runs: at least {MIN_LABELLED} are needed")
    diff, lam = ppi_mean([b.people[q] - a.people[q] for q in labelled], [b.judge[q] - a.judge[q] for q in labelled],
                         [b.judge[q] - a.judge[q] for q in unlabelled])
    return CorrectedDifference(metric, diff, lam, _p_value(diff), judge_diff, len(labelled), len(unlabelled),
                               _note(len(labelled), len(unlabelled)))


def _p_value(diff: Interval) -> float:
    se = diff.width / (2 * Z95)
    if se == 0.0:
        return 1.0 if diff.value == 0.0 else 0.0
    return 2 * (1 - NormalDist().cdf(abs(diff.value) / se))
