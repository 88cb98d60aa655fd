"""Results as the plots, comparisons and the report see them: rows of named scores per (query, run)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError

__all__ = ["ResultSet", "Row", "read_json"]


@dataclass
class Row:
    """Scores of one (query, run); ``run`` is None for a per-query row across runs."""

    query_id: str
    query: str
    run: int | None
    scores: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


@dataclass
class ResultSet:
    """One evaluation's results, whatever file layout they came from."""

    label: str
    path: Path
    layout: str  # "ours" | "peer-trec" | "peer-consistency"
    rows: list[Row]
    manifest: dict[str, Any] = field(default_factory=dict)
    simulated: bool | None = None  # None: unknown (the peer records nothing)
    judge_model: str | None = None
    run_values: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # metric -> query -> values

    @property
    def metrics(self) -> list[str]:
        seen: dict[str, None] = {}
        for row in self.rows:
            for name in row.scores:
                seen.setdefault(name, None)
        return list(seen)

    def values(self, metric: str, *, per_run: bool | None = None) -> list[float]:
        """The existing values of ``metric``; ``per_run`` True/False keeps only per-run / per-query rows."""
        out = []
        for row in self.rows:
            if per_run is not None and (row.run is not None) != per_run:
                continue
            value = row.scores.get(metric)
            if value is not None:
                out.append(value)
        return out

    def per_query(self, metric: str) -> dict[str, list[float]]:
        """Values of ``metric`` grouped by query (all runs of a query, or its one cross-run value)."""
        grouped: dict[str, list[float]] = dict(self.run_values.get(metric, {}))
        if grouped:
            return grouped
        for row in self.rows:
            value = row.scores.get(metric)
            if value is not None:
                grouped.setdefault(row.query_id, []).append(value)
        return grouped


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; an absent file is an empty object, a broken one an InputError."""
    if not path.is_file():
        return {}
    def non_finite(name: str) -> None:  # our writers never write NaN or an infinity: the file was altered
        raise InputError(f"not a finite number: {name} (a missing value is null)", file=str(path))

    try:
        data = json.loads(path.read_text(encoding="utf-8"), parse_constant=non_finite)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputError(f"cannot read JSON: {error}", file=str(path)) from error
    if not isinstance(data, dict):
        raise InputError("expected a JSON object", file=str(path))
    return data
