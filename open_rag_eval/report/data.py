"""Results as the plots, comparisons and the report see them: rows of named scores per (query, run)."""

from __future__ import annotations

import json
import math
from array import array
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.report.columns import Columns

__all__ = ["ResultSet", "Row", "RowValues", "ScoreTable", "read_json"]


@dataclass
class Row:
    """Scores of one (query, run); ``run`` is None for a per-query row across runs."""

    query_id: str
    query: str
    run: int | None
    scores: dict[str, float | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


class ResultSet:
    """One evaluation's results, whatever file layout they came from.

    ``values``, ``per_query``, ``query_means``, ``metrics`` and ``queries`` answer from its values by metric and
    query; ``rows`` is every (query, run) as a ``Row``. A set ``load_results`` read from our results.csv keeps its
    values on disk (``RowValues``: memory grows with its queries, not its rows) and reads its rows again from the
    file when ``rows`` is first asked for: ``rows`` alone holds the whole run. The peer's files are held whole.
    """

    def __init__(self, label: str, path: Path, layout: str, rows: list[Row] | None = None,
                 manifest: dict[str, Any] | None = None, simulated: bool | None = None,
                 judge_model: str | None = None, run_values: dict[str, dict[str, list[float]]] | None = None, *,
                 stored: RowValues | None = None, reread: Callable[[], list[Row]] | None = None) -> None:
        self.label, self.path, self.layout = label, path, layout  # layout: "ours" | "peer-trec" | "peer-consistency"
        self.manifest = manifest if manifest is not None else {}
        self.simulated = simulated  # None: unknown (the peer records nothing)
        self.judge_model = judge_model
        self.run_values = run_values if run_values is not None else {}  # metric -> query -> values
        self._rows = rows if rows is not None or reread is not None else []
        self._stored, self._reread = stored, reread

    def __repr__(self) -> str:
        return f"ResultSet(label={self.label!r}, path={str(self.path)!r}, layout={self.layout!r})"

    @property
    def rows(self) -> list[Row]:
        """Every row (read from the file on first access for a set ``load_results`` read: the whole run)."""
        if self._rows is None:
            assert self._reread is not None
            self._rows = self._reread()
        return self._rows

    @rows.setter
    def rows(self, rows: list[Row]) -> None:
        self._rows, self._stored = rows, None

    @property
    def metrics(self) -> list[str]:
        if self._stored is not None:
            return list(self._stored.metrics)
        seen: dict[str, None] = {}
        for row in self.rows:
            for name in row.scores:
                seen.setdefault(name, None)
        return list(seen)

    def values(self, metric: str, *, per_run: bool | None = None) -> list[float]:
        """The existing values of ``metric``; ``per_run`` True/False keeps only per-run / per-query rows."""
        if self._stored is not None:
            return self._stored.values(metric, per_run)
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
        if self._stored is not None:
            return self._stored.per_query(metric)
        for row in self.rows:
            value = row.scores.get(metric)
            if value is not None:
                grouped.setdefault(row.query_id, []).append(value)
        return grouped

    def queries(self) -> set[str]:
        if self._stored is not None:
            return set(self._stored.query_ids)
        return {row.query_id for row in self.rows}

    def query_means(self, metric: str) -> dict[str, float]:
        """Per query: the mean of its values of ``metric`` (its runs', or its one cross-run value)."""
        if self._stored is not None:
            return self._stored.query_means(metric)
        grouped: dict[str, list[float]] = {}
        for row in self.rows:
            value = row.scores.get(metric)
            if value is not None:
                grouped.setdefault(row.query_id, []).append(value)
        return {query: math.fsum(values) / len(values) for query, values in grouped.items()}


class RowValues:
    """Rows' values by metric, on disk (``report.columns``), for a ``ResultSet``: a value's key is twice its query's
    position, plus one for a row across runs (``run`` None). Query ids and metric names are held in memory;
    ``keep`` (None: every metric) names the metrics whose values are kept (the others' names only)."""

    def __init__(self, keep: Collection[str] | None = None) -> None:
        self.query_ids: list[str] = []  # in the order first seen
        self.metrics: dict[str, None] = {}  # every metric a row has, with a value or a reason
        self._position: dict[str, int] = {}
        self._keep = None if keep is None else frozenset(keep)
        self._values = Columns()

    def add(self, row: Row) -> None:
        position = self._position.get(row.query_id)
        if position is None:
            position = self._position[row.query_id] = len(self.query_ids)
            self.query_ids.append(row.query_id)
        key = 2 * position + (row.run is None)
        for metric, value in row.scores.items():
            self.metrics.setdefault(metric, None)
            if value is not None and (self._keep is None or metric in self._keep):
                self._values.add(metric, key, value)

    def added(self) -> RowValues:
        """Every row is in: the index of query ids used while adding them is let go (no more ``add``)."""
        self._position = {}
        return self

    def _blocks(self, metric: str) -> Iterator[tuple[array[int], array[float]]]:
        if self._keep is not None and metric not in self._keep:
            raise KeyError(f"{metric}: its values were not read (read with metrics={sorted(self._keep)})")
        return self._values.read(metric)

    def values(self, metric: str, per_run: bool | None) -> list[float]:
        out: list[float] = []
        for keys, values in self._blocks(metric):
            if per_run is None:
                out.extend(values)
            else:
                across = not per_run
                out.extend(value for key, value in zip(keys, values) if (key & 1) == across)
        return out

    def per_query(self, metric: str) -> dict[str, list[float]]:
        grouped: dict[str, list[float]] = {}
        for keys, values in self._blocks(metric):
            for key, value in zip(keys, values):
                grouped.setdefault(self.query_ids[key >> 1], []).append(value)
        return grouped

    def query_means(self, metric: str) -> dict[str, float]:
        """``ResultSet.query_means`` (``Columns.means``: ``math.fsum`` over each query's values)."""
        self._blocks(metric)  # a metric not kept is a KeyError, not an empty mapping
        means = self._values.means(metric, len(self.query_ids), shift=1)
        return {query: mean for query, mean in zip(self.query_ids, means) if not math.isnan(mean)}

    def close(self) -> None:
        self._values.close()


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
