"""Values of many rows, metric by metric, kept on disk: what a report or a comparison of a run of any size needs of
its scores without holding its rows.

``Columns.add(metric, key, value)`` appends one value with an integer key (a row's or a query's position);
``Columns.read(metric)`` gives them back in the order added, in blocks of ``BLOCK`` (keys, values). Memory holds
the last block of each metric; the rest is in a temporary file, removed on ``close``.
"""

from __future__ import annotations

import math
import tempfile
from array import array
from collections.abc import Iterator, Sequence
from typing import IO, overload

__all__ = ["BLOCK", "Column", "Columns"]

BLOCK = 4096  # values a metric holds in memory before they go to the file


class Columns:
    """Per metric, (key, value) pairs in the order added; metrics in the order first seen."""

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile()
        self._open: dict[str, tuple[array[int], array[float]]] = {}
        self._blocks: dict[str, list[tuple[int, int]]] = {}  # metric -> (offset, count) of its blocks on disk
        self._counts: dict[str, int] = {}

    @property
    def metrics(self) -> list[str]:
        return list(self._open)

    def count(self, metric: str) -> int:
        return self._counts.get(metric, 0)

    def add(self, metric: str, key: int, value: float) -> None:
        if metric not in self._open:
            self._open[metric] = (array("q"), array("d"))
            self._blocks[metric], self._counts[metric] = [], 0
        keys, values = self._open[metric]
        keys.append(key)
        values.append(value)
        self._counts[metric] += 1
        if len(keys) == BLOCK:
            self._blocks[metric].append((self._file.seek(0, 2), len(keys)))
            keys.tofile(self._file)
            values.tofile(self._file)
            del keys[:], values[:]

    def read(self, metric: str) -> Iterator[tuple[array[int], array[float]]]:
        """The metric's (keys, values), block by block, in the order added."""
        for offset, count in self._blocks.get(metric, []):
            self._file.seek(offset)
            keys, values = array("q"), array("d")
            keys.fromfile(self._file, count)
            values.fromfile(self._file, count)
            yield keys, values
        if metric in self._open and self._open[metric][0]:
            yield self._open[metric]

    def means(self, metric: str, groups: int, group_of: array[int] | None = None, shift: int = 0) -> array[float]:
        """Per group: the mean of its values of ``metric`` (``math.fsum`` over their count), NaN without a value.
        A value's group is its key (shifted right by ``shift`` bits), or ``group_of[key]``; negative keys are left
        out."""
        import numpy as np

        means = array("d", [math.nan]) * groups
        blocks = list(self.read(metric))
        if not blocks:
            return means
        keys = np.concatenate([np.frombuffer(k, dtype=np.int64) for k, _ in blocks])
        values = np.concatenate([np.frombuffer(v, dtype=np.float64) for _, v in blocks])
        del blocks
        kept = keys >= 0
        keys, values = keys[kept], values[kept]
        if shift:
            keys = keys >> shift
        if group_of is not None:
            keys = np.frombuffer(group_of, dtype=np.dtype(group_of.typecode))[keys].astype(np.int64)
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]).tolist()
        for start, stop in zip(starts, [*starts[1:], len(keys)]):
            means[int(keys[start])] = math.fsum(values[start:stop].tolist()) / (stop - start)
        return means

    def column(self, metric: str) -> Column:
        return Column(self, metric)

    def close(self) -> None:
        self._file.close()


class Column(Sequence[float]):
    """One metric's values as a sequence read from disk on each pass (``len``, ``min``, ``max``, iteration, a
    ``math.fsum``), for code written for a list."""

    def __init__(self, columns: Columns, metric: str) -> None:
        self._columns, self._metric = columns, metric

    def __len__(self) -> int:
        return self._columns.count(self._metric)

    def __iter__(self) -> Iterator[float]:
        for _, values in self._columns.read(self._metric):
            yield from values

    @overload
    def __getitem__(self, index: int) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[float]: ...

    def __getitem__(self, index: int | slice) -> float | Sequence[float]:
        raise TypeError("a Column is read in order, not by position")
