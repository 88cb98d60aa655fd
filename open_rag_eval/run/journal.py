"""A connector run's fetched outputs, appended to ``outputs.jsonl`` in the fresh results folder as they arrive.

A run killed (or failed) after fetching keeps that file; the next run of the same connector (same type, options
and repeats, recorded in ``.open-rag-eval-connector.json``) reuses the saved outputs of every query whose runs all
succeeded, and fetches only the others. A line cut by a kill is dropped; a journal that cannot be read is set
aside with a warning (the queries are fetched again), never half-used.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError, StorageError
from open_rag_eval.store.fileio import append_text, atomic_write_text
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
        data = self.path.read_bytes()
        end = data.rfind(b"\n") + 1
        if end < len(data):
            os.truncate(self.path, end)


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
