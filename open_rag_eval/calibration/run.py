"""``calibrate``: read human labels and one or more results folders, compare, write calibrate.csv/json."""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.calibration.compare import RESAMPLES, SEED, TaskAgreement, compare
from open_rag_eval.calibration.labels import Item, Judged, judged_items, read_labels
from open_rag_eval.store.csv_cells import csv_text
from open_rag_eval.core.errors import InputError
from open_rag_eval.store.fileio import atomic_write_json, atomic_write_text

__all__ = ["CSV_COLUMNS", "calibrate", "load_judged", "table", "write_calibration"]

CSV_COLUMNS = ("task", "statistic", "value", "ci_low", "ci_high", "n", "note")


def load_judged(folders: Sequence[Path]) -> list[Judged]:
    """The judge's labels of every results folder; several folders are several systems."""
    judged: list[Judged] = []
    for folder in folders:
        path = folder / "results.json" if folder.is_dir() else folder
        try:
            results = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InputError("no results here: run `open-rag-eval eval` first", file=str(path)) from None
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise InputError(f"cannot read the results ({error})", file=str(path)) from None
        source = folder.name if len(folders) > 1 else ""
        try:
            judged.extend(judged_items(results, source))
        except (KeyError, TypeError, AttributeError, ValueError) as error:
            raise InputError(f"not a results.json written by open-rag-eval ({error!r})", file=str(path)) from None
    return judged


def calibrate(label_files: Sequence[Path], folders: Sequence[Path], *, resamples: int = RESAMPLES,
              seed: int = SEED) -> list[TaskAgreement]:
    human: dict[Item, Hashable] = {}
    for path in label_files:
        for item, label in read_labels(path).items():
            if item in human and human[item] != label:
                raise InputError(f"this {item.task} item has another label in an earlier labels file",
                                 file=str(path))
            human[item] = label
    return compare(human, load_judged(folders), resamples=resamples, seed=seed)


def write_calibration(out: Path, agreements: Sequence[TaskAgreement], meta: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    rows = [(a.task, s.name, s.value, s.ci_low, s.ci_high, s.n, s.note) for a in agreements for s in a.statistics]

    atomic_write_text(out / "calibrate.csv", csv_text(CSV_COLUMNS, [[_cell(v) for v in row] for row in rows]))
    atomic_write_json(out / "calibrate.json", {**meta, "tasks": [a.as_dict() for a in agreements]})


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
