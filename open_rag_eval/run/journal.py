"""A connector run's fetched outputs, appended to ``outputs.jsonl`` in the fresh results folder as they arrive.

A run killed (or failed) after fetching keeps that file; the next run of the same connector (same type, options
and repeats, recorded in ``.open-rag-eval-connector.json``) reuses the saved outputs of every query whose runs all
succeeded, and fetches only the others. A line cut by a kill is dropped; a journal that cannot be read is set
aside with a warning (the queries are fetched again), never half-used. A journal whose queries' lines are
contiguous (as runs write them) is read as a stream (``OutputJournal.reuse``), any other at once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from array import array
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError, StorageError
from open_rag_eval.core.notices import quiet, tallied
from open_rag_eval.store.fileio import append_text, atomic_stream, atomic_write_text
from open_rag_eval.core.types import RAGOutput

__all__ = ["IDENTITY_FILE", "JOURNAL_FILE", "RESUME_FILES", "OutputJournal", "connector_identity", "reusable"]

log = logging.getLogger(__name__)

JOURNAL_FILE = "outputs.jsonl"
IDENTITY_FILE = ".open-rag-eval-connector.json"
RESUME_FILES = (JOURNAL_FILE, IDENTITY_FILE)


def connector_identity(kind: str, options: dict[str, Any], repeats: int) -> str:
    material = json.dumps({"type": kind, "options": options, "repeats": repeats}, sort_keys=True, default=str)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


class OutputJournal:
    def __init__(self, folder: Path, identity: str) -> None:
        self.path = folder / JOURNAL_FILE
        self._identity_path = folder / IDENTITY_FILE
        self.identity = identity

    def saved(self) -> list[RAGOutput]:
        """The outputs an unfinished run of the same connector saved (empty when there are none)."""
        if not self.path.is_file():
            return []
        if self._recorded_identity() != self.identity:
            log.info("the saved outputs in %s come from another connector setup: fetching every query", self.path)
            return []
        from open_rag_eval.inputs import read_outputs

        try:
            self._drop_torn_line()
            return read_outputs(self.path)
        except (InputError, OSError) as error:
            log.warning("cannot reuse the saved outputs in %s (%s): fetching every query", self.path, error)
            return []

    def reuse(self, queries: Sequence[tuple[str, str]], repeats: int,
              emit: Callable[[list[RAGOutput]], None]) -> set[str]:
        """The saved outputs ``reusable`` picks, handed to ``emit`` (each query's runs in order) and kept as the
        journal's first lines, in the order of the queries (with this connector's identity); returns their query ids.

        The journal is read as a stream when each query's lines are contiguous in it (as a run writes them): once
        for its lines' places, once as outputs, query by query, and once for the lines kept; memory holds a few
        numbers a line and a query's outputs. Otherwise it is read at once, as before."""
        if not self.path.is_file() or self._recorded_identity() != self.identity:
            found = {} if not self.path.is_file() else reusable(self.saved(), queries, repeats)
            return self._begin_with(found, queries, emit)
        try:
            self._drop_torn_line()
            places = _line_places(self.path)
            if places is None:  # a query's lines apart: read at once
                return self._begin_with(reusable(self.saved(), queries, repeats), queries, emit)
            with quiet():  # its warnings (citations naming no passage) are noted once, as the kept lines are read
                kept = _reusable_lines(self.path, queries, repeats)
        except (InputError, OSError) as error:
            log.warning("cannot reuse the saved outputs in %s (%s): fetching every query", self.path, error)
            return self._begin_with({}, queries, emit)
        return self._rewrite(places, kept, emit)

    def _begin_with(self, found: dict[str, list[RAGOutput]], queries: Sequence[tuple[str, str]],
                    emit: Callable[[list[RAGOutput]], None]) -> set[str]:
        kept = [o for qid, _ in queries for o in found.get(qid, [])]
        self.start(kept)
        emit(kept)
        return set(found)

    def _rewrite(self, places: array[int], kept: list[tuple[int, int]], emit: Callable[[list[RAGOutput]], None]
                 ) -> set[str]:
        """The journal begun with its lines ``kept`` ((order, line number) each), in that order; each handed to
        ``emit`` as the reader builds it alone."""
        from open_rag_eval.inputs import output_to_json
        from open_rag_eval.inputs.jsonl import outputs_from_objects
        from open_rag_eval.inputs.text import Where

        reused: set[str] = set()
        kept.sort()
        try:
            with self.path.open("rb") as old, atomic_stream(self.path) as new, tallied():
                for _, number in kept:
                    old.seek(places[number - 1])
                    raw = json.loads(old.readline().decode("utf-8"))
                    output = outputs_from_objects([(Where(str(self.path), number), raw)])[0]
                    reused.add(output.query_id)
                    emit([output])
                    new.write(json.dumps(output_to_json(output), ensure_ascii=False) + "\n")
            atomic_write_text(self._identity_path, json.dumps({"identity": self.identity}) + "\n")
        except OSError as error:
            raise StorageError(f"cannot save the fetched outputs: {error.strerror}", path=self.path) from None
        return reused

    def start(self, keep: Sequence[RAGOutput]) -> None:
        """Begin the journal with the outputs being reused (and this connector's identity)."""
        from open_rag_eval.inputs import output_to_json

        try:
            atomic_write_text(self.path, "".join(json.dumps(output_to_json(o), ensure_ascii=False) + "\n"
                                                 for o in keep))
            atomic_write_text(self._identity_path, json.dumps({"identity": self.identity}) + "\n")
        except OSError as error:
            raise StorageError(f"cannot save the fetched outputs: {error.strerror}", path=self.path) from None

    def append(self, outputs: Sequence[RAGOutput]) -> None:
        from open_rag_eval.inputs import output_to_json

        text = "".join(json.dumps(output_to_json(o), ensure_ascii=False) + "\n" for o in outputs)
        try:
            append_text(self.path, text)
        except OSError as error:
            raise StorageError(f"cannot save the fetched outputs: {error.strerror}", path=self.path) from None

    def _recorded_identity(self) -> str | None:
        try:
            return str(json.loads(self._identity_path.read_text(encoding="utf-8"))["identity"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _drop_torn_line(self) -> None:
        """A last line without its line end (cut by a kill) is removed; the file read backwards a block at a time."""
        with self.path.open("rb") as handle:
            size = end = handle.seek(0, os.SEEK_END)
            keep = 0
            while end > 0:
                start = max(0, end - 65_536)
                handle.seek(start)
                found = handle.read(end - start).rfind(b"\n")
                if found >= 0:
                    keep = start + found + 1
                    break
                end = start
        if keep < size:
            os.truncate(self.path, keep)


def reusable(saved: Sequence[RAGOutput], queries: Sequence[tuple[str, str]], repeats: int) -> dict[str, list[RAGOutput]]:
    """Saved outputs per query id, for queries whose text is unchanged and whose runs 1..repeats all succeeded."""
    latest: dict[tuple[str, int], RAGOutput] = {}
    for output in saved:
        latest[(output.query_id, output.run)] = output  # a query fetched again after a failure: the last one counts
    found: dict[str, list[RAGOutput]] = {}
    for query_id, query in queries:
        runs = [latest.get((query_id, run)) for run in range(1, repeats + 1)]
        if all(o is not None and o.error is None and o.query == query for o in runs):
            found[query_id] = [o for o in runs if o is not None]
    return found


def _line_places(path: Path) -> array[int] | None:
    """Where each line of a journal starts; None when a query's lines are not contiguous (checked reading each line
    as JSON alone, ``jsonl_query_sizes``: a line that is not a JSON object raises the reader's error)."""
    from open_rag_eval.inputs.jsonl import jsonl_query_sizes

    seen: set[str] = set()
    for query_id, _, _ in jsonl_query_sizes(path):
        if query_id in seen:
            return None
        seen.add(query_id)
    places = array("q")
    with path.open("rb") as handle:
        offset = 0
        for line in handle:
            places.append(offset)
            offset += len(line)
    return places


def _reusable_lines(path: Path, queries: Sequence[tuple[str, str]], repeats: int) -> list[tuple[int, int]]:
    """(position of its query, line number) of each line ``reusable`` keeps, the journal read query by query
    (``jsonl_query_groups``: the whole-file reader's checks, since each query's lines are contiguous)."""
    from open_rag_eval.inputs.jsonl import jsonl_query_groups

    position = {query_id: (index, query) for index, (query_id, query) in enumerate(queries)}
    kept: list[tuple[int, int]] = []
    for group in jsonl_query_groups(path):
        found = reusable(group, [(group[0].query_id, position[group[0].query_id][1])], repeats) \
            if group[0].query_id in position else {}
        for output in found.get(group[0].query_id, []):
            line = int((output.source or "").rpartition(":")[2])
            kept.append((position[output.query_id][0] * (repeats + 1) + output.run, line))
    return kept
