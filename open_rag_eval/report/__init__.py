"""Plots (matplotlib, imported lazily), paired comparisons and the static HTML report."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.report.data import ResultSet, Row
from open_rag_eval.report.html_report import render_report
from open_rag_eval.report.loader import load_results
from open_rag_eval.report.paged import write_report

__all__ = ["ResultSet", "Row", "load_results", "plot_history", "render_report", "write_report"]


def plot_history(points: Sequence[tuple[Any, float]], baseline_index: int | None, metric: str, path: Path,
                 *, simulated: bool = False, title: str | None = None) -> Path:
    """Sweep history trend PNG; see ``open_rag_eval.report.plots.plot_history`` (matplotlib loads only here)."""
    from open_rag_eval.report.plots import plot_history as _plot_history

    return _plot_history(points, baseline_index, metric, path, simulated=simulated, title=title)
