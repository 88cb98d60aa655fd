"""``calibrate``: read human labels and one or more results folders, compare, write calibrate.csv/json."""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Mapping, Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.calibration.compare import RESAMPLES, SEED, TaskAgreement, compare
from open_rag_eval.inputs.human_labels import Item, Judged, judged_items, read_label_files
from open_rag_eval.run.corrected import EXTRA_COLUMNS, Corrected, corrected_estimates
from open_rag_eval.store.csv_cells import csv_text
from open_rag_eval.core.errors import InputError
from open_rag_eval.store.fileio import atomic_write_json, atomic_write_text

__all__ = ["CSV_COLUMNS", "calibrate", "corrected_of", "corrected_table", "judged_of", "load_judged", "load_results",
           "table", "write_calibration"]

CSV_COLUMNS = ("task", "statistic", "value", "ci_low", "ci_high", "n", "note", *EXTRA_COLUMNS)


def load_results(folders: Sequence[Path]) -> list[tuple[str, dict[str, Any]]]:
    """Each results folder's results.json, named by its folder when there are several (several systems)."""
    loaded = []
    for folder in folders:
        path = folder / "results.json" if folder.is_dir() else folder
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError("no results here: run `open-rag-eval eval` first", file=str(path)) from None
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise InputError(f"cannot read the results ({error})", file=str(path)) from None
        if not isinstance(results, dict) or not isinstance(results.get("outputs", []), list):
            raise InputError("not a results.json written by open-rag-eval", file=str(path))
        loaded.append((folder.name if len(folders) > 1 else "", results))
    return loaded


def load_judged(folders: Sequence[Path]) -> list[Judged]:
    """The judge's labels of every results folder; several folders are several systems."""
    return judged_of(load_results(folders), folders)


def judged_of(loaded: Sequence[tuple[str, dict[str, Any]]], folders: Sequence[Path]) -> list[Judged]:
    judged: list[Judged] = []
    for (source, results), folder in zip(loaded, folders, strict=True):
        try:
            judged.extend(judged_items(results, source))
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise InputError(f"not a results.json written by open-rag-eval ({error!r})", file=str(folder)) from None
    return judged


def corrected_of(human: Mapping[Item, Hashable], loaded: Sequence[tuple[str, dict[str, Any]]],
                 folders: Sequence[Path]) -> list[tuple[str, Corrected]]:
    """The corrected estimates of each results folder's judged metrics (docs/calibration.md)."""
    found = []
    for (source, results), folder in zip(loaded, folders, strict=True):
        try:
            found += [(source, c) for c in corrected_estimates(results.get("outputs", []), human)]
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise InputError(f"not a results.json written by open-rag-eval ({error!r})", file=str(folder)) from None
    return found


def calibrate(label_files: Sequence[Path], folders: Sequence[Path], *, resamples: int = RESAMPLES,
              seed: int = SEED) -> list[TaskAgreement]:
    return compare(read_label_files(label_files), load_judged(folders), resamples=resamples, seed=seed)


def write_calibration(out: Path, agreements: Sequence[TaskAgreement], meta: dict[str, Any],
                      corrected: Sequence[tuple[str, Corrected]] = ()) -> None:
    """calibrate.csv: a row per agreement statistic, then a row per corrected metric (task ``corrected``, the
    corrected mean as its value, the other estimates in the columns of ``COLUMNS``); calibrate.json: the same."""
    out.mkdir(parents=True, exist_ok=True)
    rows: list[list[Any]] = [[a.task, s.name, s.value, s.ci_low, s.ci_high, s.n, s.note]
                             + [None] * len(EXTRA_COLUMNS) for a in agreements for s in a.statistics]
    for source, c in corrected:
        row = c.row()
        rows.append(["corrected", f"{source}:{c.metric}" if source else c.metric, row["corrected_mean"],
                     row["corrected_ci95_low"], row["corrected_ci95_high"], c.n_labelled, c.note,
                     *(row[name] for name in EXTRA_COLUMNS)])
    atomic_write_text(out / "calibrate.csv", csv_text(CSV_COLUMNS, [[_cell(v) for v in row] for row in rows]))
    atomic_write_json(out / "calibrate.json", {**meta, "tasks": [a.as_dict() for a in agreements], "corrected": [
        {"results": source, "metric": c.metric, **c.row()} for source, c in corrected]})


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.6g}"
    return "" if value is None else value


def table(agreements: Sequence[TaskAgreement]) -> list[str]:
    """The printed summary: a constant judge named first, one line per statistic, each task's confusion matrix."""
    lines = [f"{a.task}: the judge gave one label for everything: {a.one_label!r} to all {a.n_pairs} compared items "
             "(it does not discriminate; agreement with people is chance at best)"
             for a in agreements if a.one_label is not None]
    lines.append(f"{'task':<18} {'statistic':<16} {'value':>7}  {'95% CI':<18} {'n':>4}")
    for a in agreements:
        lines.append(f"{a.task:<18} {'pairs':<16} {a.n_pairs:>7}  {'':<18} "
                     f"(judge failed {a.n_judge_failed}, not in the results {a.n_not_judged})")
        for s in a.statistics:
            value = "—" if s.value is None else f"{s.value:.3f}"
            ci = "" if s.ci_low is None else f"[{s.ci_low:.3f}, {s.ci_high:.3f}]"
            lines.append(f"{'':<18} {s.name:<16} {value:>7}  {ci:<18} {s.n:>4}  {s.note}".rstrip())
    for a in agreements:
        if a.n_pairs:
            lines.append(f"{a.task}: rows = judge, columns = people ({', '.join(map(str, a.labels))})")
            width = max(len(str(label)) for label in a.labels) + 1
            for label, row in zip(a.labels, a.confusion):
                lines.append(f"  {str(label):>{width}} " + " ".join(f"{count:>{width}}" for count in row))
    return lines


def corrected_table(corrected: Sequence[tuple[str, Corrected]]) -> list[str]:
    """The printed corrected estimates: a line per metric."""
    if not corrected:
        return ["corrected estimates: no judged metric is determined by these labels on any query"]
    lines = [f"{'corrected metric':<26} {'corrected [95% CI]':<26} {'judge-only':<24} {'people-only':<24} "
             f"{'judge bias':<24} {'lambda':>6} {'labelled':>8} {'unlabelled':>10}"]
    for source, c in corrected:
        name = f"{source}:{c.metric}" if source else c.metric
        e = c.estimate
        if e is None:
            lines.append(f"{name:<26} {'—':<26} {c.note}")
            continue
        cells = [f"{i.value:.3f} [{i.low:.3f}, {i.high:.3f}]" for i in (e.corrected, e.judge, e.people, e.bias)]
        lines.append(f"{name:<26} {cells[0]:<26} {cells[1]:<24} {cells[2]:<24} {cells[3]:<24} {e.lam:>6.2f} "
                     f"{c.n_labelled:>8} {c.n_unlabelled:>10}  {c.note}".rstrip())
    return lines
