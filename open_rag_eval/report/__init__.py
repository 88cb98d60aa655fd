"""Plots (matplotlib, imported lazily), paired comparisons and the static HTML report."""

from open_rag_eval.report.data import ResultSet, Row
from open_rag_eval.report.html_report import render_report, write_report
from open_rag_eval.report.loader import load_results

__all__ = ["ResultSet", "Row", "load_results", "plot_history", "render_report", "write_report"]


def plot_history(*args, **kwargs):  # type: ignore[no-untyped-def]
    """See ``open_rag_eval.report.plots.plot_history`` (kept lazy: matplotlib loads only when called)."""
    from open_rag_eval.report.plots import plot_history as _plot_history

    return _plot_history(*args, **kwargs)
