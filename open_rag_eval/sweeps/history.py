"""The sweep history: one embedded SQLite file that scheduled sweeps append to and ``history`` reads.

Tables: ``sweeps`` (id, time, config digest, system label, output folder, counts, verdict), ``scores`` (every
per-query and per-run score row of a sweep, failures with their reason) and ``aggregates`` (summary.csv of a sweep).
Writes of one sweep happen in one transaction; WAL mode lets ``history`` read while a sweep writes.
"""

from __future__ import annotations

import json
import sqlite3
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import ConfigError
from open_rag_eval.scoring.stats import Aggregate
from open_rag_eval.store.sqlite import Database, connect, guard
from open_rag_eval.core.types import Score

__all__ = ["HISTORY_DB", "History", "SweepRecord"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT UNIQUE NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    system TEXT NOT NULL,
    config_digest TEXT NOT NULL,
    output_dir TEXT NOT NULL,
    n_queries INTEGER NOT NULL,
    n_outputs INTEGER NOT NULL,
    n_failed_outputs INTEGER NOT NULL,
    simulated INTEGER NOT NULL,
    verdict TEXT,
    verdict_json TEXT
);
CREATE TABLE IF NOT EXISTS scores (
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    query_id TEXT NOT NULL,
    run INTEGER,
    metric TEXT NOT NULL,
    value REAL,
    error TEXT
);
CREATE INDEX IF NOT EXISTS scores_by_metric ON scores (sweep_id, metric);
CREATE TABLE IF NOT EXISTS aggregates (
    sweep_id TEXT NOT NULL REFERENCES sweeps(id),
    metric TEXT NOT NULL,
    mean REAL, std REAL, ci95_low REAL, ci95_high REAL, n INTEGER NOT NULL, n_failed INTEGER NOT NULL,
    PRIMARY KEY (sweep_id, metric)
);
"""


HISTORY_DB = Database("sweep history", "sweep.history", {
    "sweeps": frozenset({"seq", "id", "started_at", "finished_at", "system", "config_digest", "output_dir",
                         "n_queries", "n_outputs", "n_failed_outputs", "simulated", "verdict", "verdict_json"}),
    "scores": frozenset({"sweep_id", "query_id", "run", "metric", "value", "error"}),
    "aggregates": frozenset({"sweep_id", "metric", "mean", "std", "ci95_low", "ci95_high", "n", "n_failed"}),
})


@dataclass
class SweepRecord:
    id: str
    started_at: str
    finished_at: str
    system: str
    config_digest: str
    output_dir: str
    n_queries: int
    n_outputs: int
    n_failed_outputs: int
    simulated: bool
    scores: Sequence[Score] = field(default_factory=list)
    summary: Sequence[Aggregate] = field(default_factory=list)
    verdict: str | None = None
    seq: int | None = None


class History:
    """Every SQLite failure (corrupt, locked, read-only, disk full...) raises ``StorageError`` naming the file.
    ``create=False`` opens an existing history read-only (``history`` only reads)."""

    def __init__(self, path: Path, *, create: bool = True) -> None:
        self.path = Path(path)
        if not create and not self.path.exists():
            raise ConfigError(f"no sweep history at {self.path} (a sweep creates it)")
        self._db = connect(self.path, HISTORY_DB, schema=_SCHEMA, readonly=not create)
        self._db.row_factory = sqlite3.Row
        with guard(self.path, HISTORY_DB):  # read-only and never written: no tables yet means no sweeps
            self._empty = not create and not HISTORY_DB.tables.keys() <= {row[0] for row in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> History:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with guard(self.path, HISTORY_DB):
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _rows(self, query: str, params: tuple[Any, ...] = ()) -> list[sqlite3.Row]:
        if self._empty:
            return []
        with guard(self.path, HISTORY_DB):
            return self._db.execute(query, params).fetchall()

    def append(self, record: SweepRecord) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO sweeps (id, started_at, finished_at, system, config_digest, output_dir, n_queries,"
                " n_outputs, n_failed_outputs, simulated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record.id, record.started_at, record.finished_at, record.system, record.config_digest,
                 record.output_dir, record.n_queries, record.n_outputs, record.n_failed_outputs, int(record.simulated)))
            db.executemany("INSERT INTO scores VALUES (?, ?, ?, ?, ?, ?)",
                           [(record.id, s.query_id, s.run, s.metric, s.value, s.error) for s in record.scores])
            db.executemany("INSERT INTO aggregates VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [(record.id, a.metric, a.mean, a.std, a.ci95_low, a.ci95_high, a.n, a.n_failed)
                            for a in record.summary])

    def set_verdict(self, sweep_id: str, verdict: str, data: dict[str, Any]) -> None:
        with self._transaction() as db:
            db.execute("UPDATE sweeps SET verdict = ?, verdict_json = ? WHERE id = ?",
                       (verdict, json.dumps(data, allow_nan=False), sweep_id))

    # ------------------------------------------------------------ reading

    def sweeps(self, system: str | None = None, limit: int | None = None) -> list[SweepRecord]:
        """Sweeps in the order they were recorded (the last ``limit`` of them)."""
        query = "SELECT * FROM sweeps" + (" WHERE system = ?" if system else "") + " ORDER BY seq DESC"
        params: tuple[Any, ...] = (system,) if system else ()
        if limit is not None:
            query += f" LIMIT {int(limit)}"
        return [_record(row) for row in reversed(self._rows(query, params))]

    def get(self, sweep_id: str) -> SweepRecord | None:
        rows = self._rows("SELECT * FROM sweeps WHERE id = ?", (sweep_id,))
        return _record(rows[0]) if rows else None

    def previous(self, sweep_id: str, system: str) -> SweepRecord | None:
        """The last sweep of ``system`` recorded before ``sweep_id``."""
        current = self.get(sweep_id)
        if current is None:
            return None
        rows = self._rows("SELECT * FROM sweeps WHERE system = ? AND seq < ? ORDER BY seq DESC LIMIT 1",
                          (system, current.seq))
        return _record(rows[0]) if rows else None

    def per_query(self, sweep_id: str, metric: str) -> tuple[dict[str, float], int]:
        """Per-query values of ``metric`` (the mean over runs for per-run metrics) and the number of failed rows."""
        values: dict[str, list[float]] = defaultdict(list)
        failed = 0
        for row in self._rows("SELECT query_id, value FROM scores WHERE sweep_id = ? AND metric = ?",
                              (sweep_id, metric)):
            if row["value"] is None:
                failed += 1
            else:
                values[row["query_id"]].append(row["value"])
        return {qid: sum(v) / len(v) for qid, v in values.items()}, failed

    def aggregates(self, sweep_id: str) -> dict[str, Aggregate]:
        rows = self._rows("SELECT * FROM aggregates WHERE sweep_id = ?", (sweep_id,))
        return {row["metric"]: Aggregate(row["metric"], row["mean"], row["std"], row["ci95_low"], row["ci95_high"],
                                         row["n"], row["n_failed"]) for row in rows}

    def trend(self, metric: str, system: str | None = None,
              limit: int | None = None) -> list[tuple[SweepRecord, Aggregate | None]]:
        return [(sweep, self.aggregates(sweep.id).get(metric)) for sweep in self.sweeps(system, limit)]

    def metrics(self) -> list[str]:
        return [row[0] for row in self._rows("SELECT DISTINCT metric FROM aggregates ORDER BY metric")]


def _record(row: sqlite3.Row) -> SweepRecord:
    return SweepRecord(
        id=row["id"], started_at=row["started_at"], finished_at=row["finished_at"], system=row["system"],
        config_digest=row["config_digest"], output_dir=row["output_dir"], n_queries=row["n_queries"],
        n_outputs=row["n_outputs"], n_failed_outputs=row["n_failed_outputs"], simulated=bool(row["simulated"]),
        verdict=row["verdict"], seq=row["seq"])
