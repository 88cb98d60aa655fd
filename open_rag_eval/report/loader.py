"""Read evaluation results for plots, comparisons and the report.

Accepted inputs (detected from the path and the CSV header):

- our output directory (``results.csv`` + ``manifest.json`` + ``results.json``, see docs/RESULTS.md),
  or its ``results.csv`` given directly (the manifest beside it is read when present);
- the peer's TREC CSV (``run_N_``-prefixed columns holding JSON cells, or the older unprefixed layout);
- the peer's consistency CSV (``consistency_<metric>`` columns holding ``{"values": [..], "stats": {..}}``).

Everything becomes ``ResultSet.rows``: one ``Row`` per (query, run) -- ``run=None`` for a query across runs --
with our metric names. An empty cell is a missing value, never a number. Our results.csv is read as a stream: every
cell is checked as it goes by, the values are kept on disk by metric (``data.RowValues``) and the rows are read again
only when ``ResultSet.rows`` is asked for; the peer's files are read whole.
"""

from __future__ import annotations

import contextlib
import csv
import io
import itertools
import math
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path
from typing import Any

from open_rag_eval.store.csv_cells import read_cell
from open_rag_eval.core.errors import InputError
from open_rag_eval.run.results import KEY_COLUMNS, SIMULATED_COLUMN
from open_rag_eval.report import peer
from open_rag_eval.report.data import ResultSet, Row, RowValues, ScoreTable, read_json

__all__ = ["ResultSet", "Row", "ScoreTable", "finite_cell", "iter_rows", "load_results", "load_results_text",
           "read_json", "scan_results"]

csv.field_size_limit(2**31 - 1)


def finite_cell(text: str, *, file: str, line: int, field_name: str) -> float | None:
    """A number read back from a results CSV: empty is missing; anything else must be a finite number."""
    return _float(text, file=file, line=line, field_name=field_name)


def _float(text: str, *, file: str, line: int, field_name: str) -> float | None:
    text = text.strip()
    if text == "":
        return None
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"not a number: {text[:40]!r}", file=file, line=line, field=field_name) from None
    if not math.isfinite(value):  # our writer never writes one: a results file holding one was edited or forged
        raise InputError(f"not a finite number: {text[:40]!r} (a missing value is an empty cell)", file=file,
                         line=line, field=field_name)
    return value


@contextlib.contextmanager
def _open_csv(path: Path, text: str | None = None) -> Iterator[tuple[list[str], Iterator[dict[str, str]]]]:
    """The CSV's header and its records, read one at a time; a read error is an InputError naming the file.
    ``text``: the file's text, already in memory (``path`` then only names it)."""
    def records(reader: csv.DictReader[str]) -> Iterator[dict[str, str]]:
        try:
            yield from reader
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            raise InputError(f"cannot read CSV: {error}", file=str(path)) from error

    try:
        handle = io.StringIO(text, newline="") if text is not None else path.open(newline="", encoding="utf-8-sig")
    except OSError as error:
        raise InputError(f"cannot read CSV: {error}", file=str(path)) from error
    with handle:
        reader = csv.DictReader(handle)
        try:
            header = list(reader.fieldnames or [])
        except (OSError, UnicodeDecodeError, csv.Error) as error:
            raise InputError(f"cannot read CSV: {error}", file=str(path)) from error
        yield header, records(reader)


def _metrics(header: list[str]) -> list[str]:
    return [name for name in header if name not in (*KEY_COLUMNS, SIMULATED_COLUMN) and not name.endswith(".error")]


def _our_rows(path: Path, header: list[str], records: Iterable[dict[str, str]]) -> Iterator[Row]:
    metrics = _metrics(header)
    for line, record in enumerate(records, start=2):
        run_text = (record.get("run") or "").strip()
        if run_text in ("all", ""):
            run = None
        else:
            try:
                run = int(run_text)
            except ValueError:
                raise InputError(f"run must be an integer or 'all', got {run_text!r}",
                                 file=str(path), line=line, field="run") from None
        row = Row(query_id=read_cell(record.get("query_id") or ""), query=read_cell(record.get("query") or ""), run=run)
        for metric in metrics:
            value = _float(record.get(metric) or "", file=str(path), line=line, field_name=metric)
            reason = read_cell((record.get(f"{metric}.error") or "").strip())
            if value is not None:
                row.scores[metric] = value
            elif reason:
                row.scores[metric] = None
                row.errors[metric] = reason
        yield row


def _load_ours(csv_path: Path, header: list[str], records: Iterator[dict[str, str]],
               keep: Collection[str] | None, described: ResultSet | None = None, text: str | None = None) -> ResultSet:
    """Our results.csv, read once as a stream into its values by metric; its rows read again when asked for (from
    ``text`` when given: the file's text in memory)."""
    first = next(records, None)
    described = described or _our_set(csv_path.parent, csv_path, first)
    stored = RowValues(keep)
    try:
        for row in _our_rows(csv_path, header, itertools.chain([first] if first else [], records)):
            stored.add(row)
    except BaseException:
        stored.close()
        raise

    def reread() -> list[Row]:
        with _open_csv(csv_path, text) as (again, rest):
            return list(_our_rows(csv_path, again, rest))

    return ResultSet(described.label, described.path, described.layout, None, described.manifest,
                     described.simulated, described.judge_model, stored=stored.added(), reread=reread)


def _our_set(directory: Path, csv_path: Path, first: dict[str, str] | None,
             manifest: dict[str, Any] | None = None) -> ResultSet:
    """The set's description (label, manifest -- read beside the file unless given --, simulated), without its rows."""
    manifest = read_json(directory / "manifest.json") if manifest is None else manifest
    judge = manifest.get("judge") or {}
    simulated = manifest.get("simulated", judge.get("simulated"))
    if simulated is None and first and SIMULATED_COLUMN in first:  # a results.csv without its manifest
        simulated = first[SIMULATED_COLUMN] == "true"
    label = directory.name if csv_path.name == "results.csv" else csv_path.name
    return ResultSet(label=label or str(directory), path=directory, layout="ours", rows=[], manifest=manifest,
                     simulated=bool(simulated) if simulated is not None else None, judge_model=judge.get("model"))


def _csv_path(path: Path) -> Path:
    if path.is_dir():
        csv_path = path / "results.csv"
        if not csv_path.is_file():
            raise InputError("no results.csv in this directory", file=str(path))
        return csv_path
    if path.is_file():
        return path
    raise InputError("no such file or directory", file=str(path))


def iter_rows(path: Path | str) -> Iterator[Row]:
    """The rows of a results directory or CSV file one at a time (ours read as a stream; the peer's files whole)."""
    csv_path = _csv_path(Path(path))
    with _open_csv(csv_path) as (header, records):
        if "run" in header and "query_id" in header:
            yield from _our_rows(csv_path, header, records)
            return
    yield from load_results(path).rows


def scan_results(path: Path | str, label: str | None = None) -> ScoreTable:
    """``load_results`` for a comparison: the rows' values by metric and query, on disk (``report.columns``), so a
    results file of any size is read in memory that grows with its queries, not its rows. Close it after use."""
    csv_path = _csv_path(Path(path))
    with _open_csv(csv_path) as (header, records):
        if "query_id" not in header:
            raise InputError("missing column 'query_id'", file=str(csv_path), line=1, field="query_id")
        if "run" in header:
            first = next(records, None)
            described = _our_set(csv_path.parent, csv_path, first)
            table = ScoreTable.of(described)
            try:
                rows = _our_rows(csv_path, header, itertools.chain([first] if first else [], records))
                for row in rows:
                    table.add(row)
            except BaseException:
                table.close()
                raise
            if label:
                table.label = label
            return table
    return ScoreTable.from_rows(load_results(path, label))


def load_results(path: Path | str, label: str | None = None, *, metrics: Collection[str] | None = None) -> ResultSet:
    """Read a results directory or CSV file (ours or the peer's); raises InputError naming the file, line and field
    of the first bad cell (every cell of ours is checked here). ``metrics``: keep only these metrics' values (of
    ours; the others are checked and named, and asking for their values is a KeyError)."""
    csv_path = _csv_path(Path(path))
    with _open_csv(csv_path) as (header, records):
        if "query_id" not in header:
            raise InputError("missing column 'query_id'", file=str(csv_path), line=1, field="query_id")
        if "run" in header:
            result = _load_ours(csv_path, header, records, metrics)
        else:
            result = _load_peer(csv_path, header, list(records))
    if label:
        result.label = label
    return result


def load_results_text(text: str, manifest: dict[str, Any], label: str) -> ResultSet:
    """``load_results`` of our results.csv held as text, with its manifest (``api.Results``): the text is read as a
    stream as a file is, and again when the set's rows are asked for."""
    name = Path(label) / "results.csv"
    with _open_csv(name, text) as (header, records):
        if "query_id" not in header or "run" not in header:
            raise InputError("not our results.csv: expected the columns 'query_id' and 'run'", file=str(name), line=1)
        first = next(records, None)
        described = _our_set(name.parent, name, first, manifest)
        described.label = label
        chained = itertools.chain([first] if first else [], records)
        return _load_ours(name, header, chained, None, described, text)


def _load_peer(csv_path: Path, header: list[str], records: list[dict[str, str]]) -> ResultSet:
    if peer.is_consistency(header):
        result = peer.load_consistency(csv_path, header, records)
    elif peer.is_trec(header):
        result = peer.load_trec(csv_path, header, records)
    else:
        raise InputError("not a results file: expected our results.csv (a 'run' column) or a TREC/consistency CSV "
                         "of vectara's open-rag-eval (run_N_ or consistency_ columns)", file=str(csv_path), line=1)
    return result
