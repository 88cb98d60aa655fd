"""Results as the plots, comparisons and the report see them: rows of named scores per (query, run)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.report.columns import Columns

__all__ = ["ResultSet", "Row", "ScoreTable", "read_json"]


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

    def queries(self) -> set[str]:
        return {row.query_id for row in self.rows}

    def query_means(self, metric: str) -> dict[str, float]:
        """Per query: the mean of its values of ``metric`` (its runs', or its one cross-run value)."""
        grouped: dict[str, list[float]] = {}
        for row in self.rows:
            value = row.scores.get(metric)
            if value is not None:
                grouped.setdefault(row.query_id, []).append(value)
        return {query: math.fsum(values) / len(values) for query, values in grouped.items()}


@dataclass
class ScoreTable:
    """One evaluation's values by metric and query, for a comparison: ``ResultSet``'s description, its rows' values
    on disk (``report.columns``, keyed by the query's position), its query ids and metric names in memory."""

    label: str
    path: Path
    layout: str
    manifest: dict[str, Any] = field(default_factory=dict)
    simulated: bool | None = None
    judge_model: str | None = None
    query_ids: list[str] = field(default_factory=list)  # in the order first seen
    _position: dict[str, int] = field(default_factory=dict)
    _metrics: dict[str, None] = field(default_factory=dict)  # every metric a row has, with a value or a reason
    _values: Columns = field(default_factory=Columns)

    @classmethod
    def of(cls, described: ResultSet) -> ScoreTable:
        return cls(described.label, described.path, described.layout, described.manifest, described.simulated,
                   described.judge_model)

    @classmethod
    def from_rows(cls, result: ResultSet) -> ScoreTable:
        table = cls.of(result)
        for row in result.rows:
            table.add(row)
        return table

    def add(self, row: Row) -> None:
        position = self._position.get(row.query_id)
        if position is None:
            position = self._position[row.query_id] = len(self.query_ids)
            self.query_ids.append(row.query_id)
        for metric, value in row.scores.items():
            self._metrics.setdefault(metric, None)
            if value is not None:
                self._values.add(metric, position, value)

    @property
    def metrics(self) -> list[str]:
        return list(self._metrics)

    def queries(self) -> set[str]:
        return set(self.query_ids)

    def query_means(self, metric: str) -> dict[str, float]:
        """``ResultSet.query_means``, one metric's values read back from disk."""
        means = self._values.means(metric, len(self.query_ids))
        return {query: mean for query, mean in zip(self.query_ids, means) if not math.isnan(mean)}

    def close(self) -> None:
        self._values.close()


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
