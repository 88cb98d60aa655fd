"""Views of result rows: results.csv, summary.csv, results.json (docs/RESULTS.md). Written atomically."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

from open_rag_eval.store.csv_cells import csv_text, write_csv
from open_rag_eval.store.fileio import atomic_write
from open_rag_eval.core.catalogue import metric_order, value_bounds
from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.core.missing import FAILED, SKIPPED, UNAVAILABLE, UNDEFINED, kind
from open_rag_eval.run.corrected import COLUMNS as CORRECTED_COLUMNS
from open_rag_eval.run.corrected import CORRECTED_FILE, Corrected, RunLabels, write_corrected
from open_rag_eval.run.spill import Spill, finite, query_buckets
from open_rag_eval.run.status import RunStatus, metric_status, metric_status_of, run_status_of
from open_rag_eval.scoring.stats import Aggregate, aggregate
from open_rag_eval.core.types import Detail, EvalResult, RAGOutput, Score

__all__ = ["KEY_COLUMNS", "SIMULATED_COLUMN", "metric_order", "metric_status", "spilled_run_status",
           "summarize", "write_results", "write_spilled"]

KEY_COLUMNS = ("query_id", "query", "run")  # results.csv columns before the metrics
SIMULATED_COLUMN = "simulated_judge"  # the last column: whether the judge was simulated
Key = tuple[str, int | None]


_finite = finite


def _row_keys(outputs: Sequence[RAGOutput], scores: Sequence[Score]) -> list[Key]:
    """Every (query, run) in input order, each query followed by its cross-run row when there is one."""
    runs: dict[str, list[Key]] = {}
    for output in outputs:
        runs.setdefault(output.query_id, []).append(output.key)
    for score in scores:  # scores of queries without an output (e.g. a TREC run file) get rows too
        own = runs.setdefault(score.query_id, [])
        if score.run is not None and (score.query_id, score.run) not in own:
            own.append((score.query_id, score.run))
    cross = {score.query_id for score in scores if score.run is None}
    keys: list[Key] = []
    for query_id, own in runs.items():
        keys.extend(dict.fromkeys(own))
        if query_id in cross:
            keys.append((query_id, None))
    return keys


def _aggregate(metric: str, values: Sequence[float], missing: Counter[str]) -> Aggregate:
    return replace(aggregate(metric, values, missing[FAILED], value_bounds(metric)), n_undefined=missing[UNDEFINED],
                   n_unavailable=missing[UNAVAILABLE], n_skipped=missing[SKIPPED])


def summarize(scores: Sequence[Score]) -> list[Aggregate]:
    """One aggregate per metric; its missing values counted by kind (``n_failed`` only the failures)."""
    values: dict[str, list[float]] = defaultdict(list)
    missing: dict[str, Counter[str]] = defaultdict(Counter)
    for score in scores:
        if score.value is None:
            missing[score.metric][kind(score.error or "")] += 1
        else:
            values[score.metric].append(score.value)
    return [_aggregate(m, values[m], missing[m]) for m in metric_order([*values, *missing])]


def _cell(value: float | None) -> str:
    return "" if value is None else repr(round(value, 10))


def _csv_header(metrics: Sequence[str], errored: Sequence[str]) -> list[str]:
    return [*KEY_COLUMNS, *metrics, *(f"{m}.error" for m in errored), SIMULATED_COLUMN]


def _csv_rows(outputs: Sequence[RAGOutput], scores: Sequence[Score], metrics: Sequence[str], errored: Sequence[str],
              info: RunInfo) -> Iterator[list[Any]]:
    """The rows of ``outputs`` (whole queries) and their scores, under the run's columns."""
    table: dict[Key, dict[str, Score]] = defaultdict(dict)
    for score in scores:
        table[(score.query_id, score.run)][score.metric] = score
    queries = {o.query_id: o.query for o in outputs}
    flag = str(info.simulated).lower()
    for query_id, run in _row_keys(outputs, scores):
        cells = table.get((query_id, run), {})
        row: list[Any] = [query_id, queries.get(query_id, ""), "all" if run is None else run]
        row += [_cell(cells[m].value) if m in cells else "" for m in metrics]
        row += [(cells[m].error or "") if m in cells else "" for m in errored]
        row.append(flag)
        yield row


def summary_csv(summary: Sequence[Aggregate], info: RunInfo, status: dict[str, str] | None = None,
                corrected: Sequence[Corrected] | None = None) -> str:
    """summary.csv; with ``corrected`` (a run with people's labels) the corrected columns follow, filled on the
    metrics the labels correct (docs/calibration.md)."""
    header = ["metric", "mean", "std", "ci95_low", "ci95_high", "n", "n_failed", "n_undefined", "n_unavailable",
              "n_skipped", "min", "median", "p95", "max", "status", "simulated_judge"]
    rows = [
        [a.metric, _cell(a.mean), _cell(a.std), _cell(a.ci95_low), _cell(a.ci95_high), a.n, a.n_failed, a.n_undefined,
         a.n_unavailable, a.n_skipped, _cell(a.min), _cell(a.median), _cell(a.p95), _cell(a.max), (status or {}).get(a.metric, "ok"),
         str(info.simulated).lower()]
        for a in summary
    ]
    if corrected is not None:
        by_metric = {c.metric: c.row() for c in corrected}
        header += list(CORRECTED_COLUMNS)
        empty: dict[str, Any] = {}
        rows = [row + [_corrected_cell(by_metric.get(str(row[0]), empty).get(name)) for name in CORRECTED_COLUMNS]
                for row in rows]
    return csv_text(header, rows)


def _corrected_cell(value: Any) -> Any:
    return _cell(value) if isinstance(value, float) else "" if value is None else value


def _output_entry(output: RAGOutput) -> dict[str, Any]:
    return {
        "query_id": output.query_id,
        "query": output.query,
        "run": output.run,
        "source": output.source,
        "error": output.error,
        "answer_text": output.answer_text,
        "passages": [p.model_dump(exclude_none=True) for p in output.passages],
        "answer": [part.model_dump() for part in output.answer],
        "scores": {},
        "errors": {},
        "details": {},
    }


def _fill(entry: dict[str, Any], scores: Iterable[Score], details: Iterable[Detail]) -> dict[str, Any]:
    for score in scores:
        if score.value is None:
            entry["errors"][score.metric] = score.error
        else:
            entry["scores"][score.metric] = score.value
    for detail in details:
        entry["details"][detail.section] = detail.data
    return entry


def _query_entries(spill: Spill) -> Iterator[dict[str, Any]]:
    """The queries' entries of a spilled run in a whole run's order: bucket by bucket, window by window."""
    for bucket in spill.buckets():
        for outputs, scores, details, sizes in spill.windows(bucket=bucket):
            where = query_buckets({o.key for o in outputs}, scores, details, sizes)
            queries = _entries(outputs, scores, details)[1]
            yield from (entry for query_id, entry in queries.items() if where[query_id] == bucket)


def _write_json(handle: TextIO, windows: Iterable[tuple[Any, ...]], query_entries: Iterable[dict[str, Any]],
                summary: Sequence[Aggregate], info: RunInfo, status: dict[str, str] | None) -> None:
    """results.json from windows of whole queries, (outputs, scores, details) each, and the queries' entries."""
    handle.write('{\n  "simulated": ' + json.dumps(info.simulated) + ',\n  "outputs": ')
    _write_list(handle, (entry for window in windows for entry in _entries(*window[:3])[0]))
    handle.write(',\n  "queries": ')
    _write_list(handle, query_entries)
    handle.write(',\n  "summary": ')
    _write_list(handle, ({**a.as_dict(), "status": (status or {}).get(a.metric, "ok")} for a in summary))
    handle.write("\n}\n")


def _output_entries(spill: Spill) -> Iterator[dict[str, Any]]:
    """results.json's output entries of a spilled run, window by window."""
    for window in spill.windows(("outputs", "scores", "details")):
        yield from _entries(*window[:3])[0]


def _entries(outputs: Sequence[RAGOutput], scores: Sequence[Score], details: Sequence[Detail]
             ) -> tuple[Iterator[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The entries of ``outputs`` (lazily, in order) and of their queries as a whole."""
    by_key: dict[Key, RAGOutput] = {}
    for output in outputs:
        by_key[output.key] = output  # a repeated key: the last output, at the first one's place
    own_scores: dict[Key, list[Score]] = defaultdict(list)
    own_details: dict[Key, list[Detail]] = defaultdict(list)
    queries: dict[str, dict[str, Any]] = {}
    runs: dict[str, tuple[str, list[int]]] = {}  # each query's text (its first output's) and runs, in order
    for output in outputs:
        runs.setdefault(output.query_id, (output.query, []))[1].append(output.run)
    for score in scores:
        key = (score.query_id, score.run)
        if score.run is not None and key in by_key:
            own_scores[key].append(score)
        else:
            _fill(_query_entry(queries, runs, score.query_id), (score,), ())
    for detail in details:
        key = (detail.query_id, detail.run)
        if detail.run is not None and key in by_key:
            own_details[key].append(detail)
        else:
            _fill(_query_entry(queries, runs, detail.query_id), (), (detail,))
    entries = (_fill(_output_entry(output), own_scores.get(key, ()), own_details.get(key, ()))
               for key, output in by_key.items())
    return entries, queries


def _write_list(handle: TextIO, items: Iterable[Any]) -> None:
    """A list of the top-level object, as ``json.dump(indent=2)`` writes it, item by item."""
    first = True
    for item in items:
        text = json.dumps(_strict(item), indent=2, ensure_ascii=False, allow_nan=False)
        handle.write(("[\n    " if first else ",\n    ") + text.replace("\n", "\n    "))
        first = False
    handle.write("[]" if first else "\n  ]")


def _query_entry(queries: dict[str, dict[str, Any]], runs: dict[str, tuple[str, list[int]]],
                 query_id: str) -> dict[str, Any]:
    if query_id not in queries:
        text, known = runs.get(query_id, ("", []))
        queries[query_id] = {"query_id": query_id, "query": text, "runs": list(known), "scores": {}, "errors": {},
                             "details": {}}
    return queries[query_id]


def write_results(
    output_dir: Path, outputs: Sequence[RAGOutput], result: EvalResult, info: RunInfo,
    extra_rows: Sequence[Aggregate] = (),
) -> list[Aggregate]:
    """Write results.csv, summary.csv and results.json; return the summary (``extra_rows``, e.g. the judge-health
    rates, are appended to it)."""
    with Spill() as spill:
        spill.add(outputs, [result])
        return write_spilled(output_dir, spill, info, extra_rows)


def write_spilled(output_dir: Path, spill: Spill, info: RunInfo, extra_rows: Sequence[Aggregate] = (),
                  labels: RunLabels | None = None) -> list[Aggregate]:
    """results.csv, summary.csv and results.json of a run whose windows are in ``spill``, in streaming passes over
    them: memory holds a window, or one metric's values. Returns the summary (``extra_rows`` appended). With
    people's ``labels``, the corrected estimates too: summary.csv's corrected columns and corrected.json."""
    metrics = metric_order(spill.metrics)
    errored = [m for m in metrics if m in spill.errored]

    def rows() -> Iterator[list[Any]]:
        for outputs, scores in spill.windows(("outputs", "scores")):
            yield from _csv_rows(outputs, scores, metrics, errored, info)

    summary = [_aggregate(m, spill.column(m), spill.kinds.get(m) or Counter()) for m in metrics]
    summary += list(extra_rows)
    status = metric_status_of(summary, spill.kinds)
    atomic_write(output_dir / "results.csv", lambda handle: write_csv(handle, _csv_header(metrics, errored), rows()))
    corrected = None
    if labels is not None:
        corrected = write_corrected(output_dir / CORRECTED_FILE, _output_entries(spill), labels)
    atomic_write(output_dir / "summary.csv", lambda handle: handle.write(summary_csv(summary, info, status,
                                                                                     corrected)))
    atomic_write(output_dir / "results.json", lambda handle: _write_json(
        handle, spill.windows(("outputs", "scores", "details")), _query_entries(spill), summary, info, status))
    return summary


def spilled_run_status(summary: Sequence[Aggregate], spill: Spill) -> RunStatus:
    """``run_status`` of a spilled run."""
    return run_status_of(summary, spill.kinds, spill.reasons)


def _strict(value: Any) -> Any:
    """Replace non-finite floats anywhere (details included) by null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _strict(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(item) for item in value]
    return value

