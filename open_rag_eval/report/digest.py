"""What the report's summary sections need of a run's items, gathered one item at a time.

``Digest.add(item, output=...)`` takes each output (and each per-query row) once, in file order; nothing of the item
is kept but its scores, on disk (``report.columns``), and a few counts: the missing values by kind and metric, the
outputs with no failed value, the metrics with a value in some output, the no-answer tally of the diagnosis. So the
header, the diagnosis and "All metrics" of a run of any size are drawn in memory that does not grow with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from open_rag_eval.core.missing import FAILED, SKIPPED, UNDEFINED, Missing
from open_rag_eval.diagnosis.trec import answer_evidence
from open_rag_eval.report.columns import Column, Columns
from open_rag_eval.report.drilldown import missing_counts

__all__ = ["Digest"]

_ANSWERED = "no_answer.answered"


class Digest:
    """The running figures of a run's items; ``close`` removes its file."""

    def __init__(self) -> None:
        self.missing = Missing(())
        self.values = Columns()  # every metric's values over outputs and per-query rows; key: the output's position
        self.n_outputs = 0
        self.scored = 0  # outputs with no failed value
        self.full = bytearray()  # per output in order: 1 when it has no failed value (a byte an output)
        self.counts = dict.fromkeys((FAILED, UNDEFINED, SKIPPED), 0)  # missing values by kind over every item
        self.per_output: dict[str, None] = {}  # metrics with a value in at least one output
        self.refusals = 0
        self._answered_sum: float = 0
        self._answered_n = 0

    def add(self, item: dict[str, Any], *, output: bool) -> None:
        self.missing.add(item)
        counts = missing_counts([item])
        for which in self.counts:
            self.counts[which] += counts[which]
        key = self.n_outputs if output else -1
        for metric, value in (item.get("scores") or {}).items():
            if value is not None:
                self.values.add(metric, key, float(value))
                if output:
                    self.per_output.setdefault(metric, None)
        if output:
            self.n_outputs += 1
            self.scored += counts[FAILED] == 0
            self.full.append(counts[FAILED] == 0)
            self._answer(item)

    def _answer(self, output: Mapping[str, Any]) -> None:
        """``diagnosis.trec.tally_answered``, one output at a time, its sum kept instead of its values."""
        value = (output.get("scores") or {}).get(_ANSWERED)
        if value is None:
            return
        if value < 0.5 and answer_evidence([output]) is False:
            self.refusals += 1
            return
        self._answered_sum += float(value)
        self._answered_n += 1

    def run_means(self, means: Mapping[str, float | None]) -> tuple[dict[str, Any], int]:
        """``diagnosis.trec.run_means`` of the outputs added: the means with correct refusals set apart."""
        adjusted = dict(means)
        if self.refusals:
            adjusted[_ANSWERED] = self._answered_sum / self._answered_n if self._answered_n else None
        return adjusted, self.refusals

    def resting_on(self, metrics: list[str]) -> tuple[int, int]:
        """(outputs holding a value of any of ``metrics``, those of them with no failed value): the outputs whose
        values rest on an unhealthy judge task, counted apart in the coverage line."""
        keys: set[int] = set()
        for metric in metrics:
            for block, _ in self.values.read(metric):
                keys.update(k for k in block if k >= 0)
        return len(keys), sum(self.full[k] for k in keys)

    def columns(self) -> dict[str, Column]:
        """metric -> its values (read from disk on each pass), for the summary's histograms and tallies."""
        return {metric: self.values.column(metric) for metric in self.values.metrics}

    def close(self) -> None:
        self.values.close()
