"""The shard folder's format (2): a small header, ``shard.json``, and a stream of records, ``records.jsonl``.

A record is one query: its outputs, their positions in the input, each shard evaluator's scores and details for
them and the nugget lists of the query (the judge test-retest of ``consistency`` reuses them in the merge). It is
written as the window holding the query finishes, so ``eval --shard`` holds a window, not its shard; the header is
written last (it carries the shard's judge counters and health, known at its end) and names the number of records.

One record a query rather than one a window: ``merge`` cuts the run's own windows (``source.windows``: whole
queries, about ``WINDOW_OUTPUTS`` outputs) across the shards' boundaries, as a local run over the whole input cuts
them, so that HHEM scores the batches a local run scores; a window of the shard does not line up with them, a query
always does. The shard's positions are kept in the header as ranges (one range for a shard of a contiguous input),
so checking that the shards hold every output exactly once reads a few numbers a shard, not every position.

The header carries the SHA-256 of the records file's bytes (``records_sha256``, computed when the records are
written, the header written last): ``merge`` checks every shard's records against it before anything is merged, and
again as it reads them, so a record edited after it was written (``umbrela.mean`` 7.0, or another number in range)
is refused naming the file, never published. Independently, each score read back must lie in its metric's range
(``catalogue.possible_values``: UMBRELA grades 0-3, shares 0-1, counts never below 0).

Both files are written into the shard's fresh generation folder (``Generation``) and appear at once when the shard
is complete; a failed shard leaves nothing. A shard folder of the previous format (one JSON document) is refused
with the advice to run the shard again.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from open_rag_eval.core.catalogue import possible_values
from open_rag_eval.core.errors import InputError
from open_rag_eval.core.types import EvalResult, RAGOutput
from open_rag_eval.evaluators.base import kept_of

__all__ = ["FORMAT", "RECORDS_FILE", "SHARD_FILE", "Record", "check_digest", "check_positions", "query_records",
           "ranges", "read_header", "read_records", "records_digest", "write_records"]

SHARD_FILE = "shard.json"
RECORDS_FILE = "records.jsonl"
FORMAT = 2


@dataclass
class Record:
    """One query of a shard: its outputs (in input order) and their positions, each shard evaluator's result on
    them, and its nugget lists: (evaluator index, nugget key, the list's fields)."""

    positions: list[int]
    outputs: list[RAGOutput]
    parts: list[EvalResult]
    nuggets: list[tuple[int, Any, dict[str, Any]]] = field(default_factory=list)


def query_records(positions: Sequence[int], outputs: Sequence[RAGOutput], parts: Sequence[EvalResult],
                  evaluators: Sequence[Any] = ()) -> list[Record]:
    """A window's results cut into its queries (first-seen order), each evaluator's scores and details in their
    order; an item of a query without an output in the window goes with the window's last query."""
    index: dict[str, Record] = {}
    for position, output in zip(positions, outputs):
        record = index.setdefault(output.query_id, Record([], [], [EvalResult() for _ in parts]))
        record.positions.append(position)
        record.outputs.append(output)
    if not index:
        return []
    last = next(reversed(index.values()))
    for e, part in enumerate(parts):
        for score in part.scores:
            index.get(score.query_id, last).parts[e].scores.append(score)
        for detail in part.details:
            index.get(detail.query_id, last).parts[e].details.append(detail)
    for e, evaluator in enumerate(evaluators):
        for key, data in kept_of(evaluator).items():
            query = key if isinstance(key, str) else key[0]
            index.get(query, last).nuggets.append((e, key, data))
    return list(index.values())


def write_records(handle: TextIO, records: Iterable[Record]) -> int:
    """Append ``records`` to a records file, one JSON line each; how many."""
    n = 0
    for record in records:
        handle.write(json.dumps({
            "positions": record.positions,
            "outputs": [o.model_dump(mode="json") for o in record.outputs],
            "parts": [part.model_dump(mode="json") for part in record.parts],
            "nuggets": [[e, key if isinstance(key, str) else list(key), data] for e, key, data in record.nuggets],
        }, ensure_ascii=False) + "\n")
        n += 1
    return n


def ranges(positions: Iterable[int]) -> list[list[int]]:
    """Sorted positions as ``[start, stop)`` runs."""
    runs: list[list[int]] = []
    for position in positions:
        if runs and runs[-1][1] == position:
            runs[-1][1] += 1
        else:
            runs.append([position, position + 1])
    return runs


def check_positions(folders: Sequence[Path], shards: Sequence[dict[str, Any]], n_outputs: int) -> None:
    """The shards' position ranges cover every output exactly once (a few numbers a shard in memory)."""
    found = sorted((int(start), int(stop), str(folder)) for folder, shard in zip(folders, shards)
                   for start, stop in shard["positions"])
    at = 0
    for start, stop, _ in found:
        if start != at or stop <= start:
            break
        at = stop
    else:
        if at == n_outputs:
            return
    raise InputError("the shards do not hold every output exactly once", file=str(folders[0]), field="positions")


def read_header(folder: Path) -> dict[str, Any]:
    """A shard folder's header, checked to be of this format."""
    path = folder / SHARD_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"not a shard folder (no {SHARD_FILE}; write one with eval --shard i/n)",
                         file=str(folder)) from None
    except (OSError, ValueError) as error:
        raise InputError(f"cannot read the shard: {error}", file=str(path)) from None
    if not isinstance(data, dict):
        raise InputError(f"not a shard of this version (format {FORMAT})", file=str(path))
    if data.get("format") != FORMAT:
        found = data.get("format")
        raise InputError(f"a shard of format {found!r} (an earlier version's, written whole); this version reads "
                         f"format {FORMAT}: run this shard again (eval --shard {data.get('index', 'i')}/"
                         f"{data.get('of', 'n')})", file=str(path), field="format")
    if not isinstance(data.get("positions"), list) or not isinstance(data.get("n_records"), int):
        raise InputError(f"not a shard of this version (format {FORMAT})", file=str(path))
    if not isinstance(data.get("records_sha256"), str):
        raise InputError(f"the shard names no digest of its {RECORDS_FILE} (written by an earlier version): run this "
                         f"shard again", file=str(path), field="records_sha256")
    return data


def records_digest(folder: Path) -> str:
    """The SHA-256 of a shard folder's records file (its bytes as written)."""
    digest = hashlib.sha256()
    try:
        with (folder / RECORDS_FILE).open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except FileNotFoundError:
        raise InputError(f"the shard has no {RECORDS_FILE}: run this shard again", file=str(folder)) from None
    except OSError as error:
        raise InputError(f"cannot read the shard's records: {error}", file=str(folder / RECORDS_FILE)) from None
    return digest.hexdigest()


def check_digest(folder: Path, header: dict[str, Any], found: str | None = None) -> None:
    """The records of ``folder`` are the bytes its header's digest names (``found``: their digest, when known)."""
    if (found or records_digest(folder)) != header["records_sha256"]:
        raise InputError(f"the records do not match the digest in {SHARD_FILE} (changed after the shard was "
                         "written): run this shard again", file=str(folder / RECORDS_FILE), field="records_sha256")


def read_records(folder: Path, header: dict[str, Any]) -> Iterator[Record]:
    """The records of a shard folder, one at a time; a line that is not a whole record, a score outside its
    metric's range, bytes that are not those the header's digest names or a count that is not the header's is an
    ``InputError`` naming the file (and line)."""
    path, expected = folder / RECORDS_FILE, int(header["n_records"])
    n, digest = 0, hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for n, raw in enumerate(handle, 1):
                digest.update(raw)
                yield _record(raw.decode("utf-8"), path, n)
    except FileNotFoundError:
        raise InputError(f"the shard has no {RECORDS_FILE}: run this shard again", file=str(folder)) from None
    except (OSError, UnicodeError) as error:
        raise InputError(f"cannot read the shard's records: {error}", file=str(path)) from None
    check_digest(folder, header, digest.hexdigest())
    if n != expected:
        raise InputError(f"the shard holds {n} records, its {SHARD_FILE} says {expected}: run this shard again",
                         file=str(path))


def _record(line: str, path: Path, n: int) -> Record:
    try:
        if not line.endswith("\n"):
            raise ValueError("the line is cut short")
        data = json.loads(line)
        nuggets = [(int(e), key if isinstance(key, str) else tuple(key), dict(fields))
                   for e, key, fields in data["nuggets"]]
        record = Record([int(p) for p in data["positions"]],
                        [RAGOutput.model_validate(o) for o in data["outputs"]],
                        [EvalResult.model_validate(p) for p in data["parts"]], nuggets)
    except (ValueError, KeyError, TypeError) as error:
        raise InputError(f"not a shard record ({str(error).splitlines()[0] if str(error) else type(error).__name__})"
                         ": run this shard again", file=str(path), line=n) from None
    if len(record.positions) != len(record.outputs) or not record.outputs:
        raise InputError("not a shard record (its positions and outputs differ): run this shard again",
                         file=str(path), line=n)
    for part in record.parts:
        for score in part.scores:
            _check_range(score.metric, score.value, path, n, f"query_id '{score.query_id}' run {score.run}")
    return record


def _check_range(metric: str, value: float | None, path: Path, n: int, where: str) -> None:
    """A value read back lies in its metric's range (a metric the catalogue does not declare: any finite number)."""
    if value is None:
        return
    low, high = possible_values(metric) or (-math.inf, math.inf)
    if not (math.isfinite(value) and low <= value <= high):
        span = f"[{low:g}, {high:g}]".replace("inf", "∞")
        raise InputError(f"{value!r} for {where} is outside the metric's range {span}: the record was changed "
                         "after it was written, or written wrong; run this shard again", file=str(path), line=n,
                         field=metric)
