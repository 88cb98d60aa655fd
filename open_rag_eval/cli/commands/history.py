"""`open-rag-eval history [--config FILE | --db PATH] [--metric M]`: the recorded sweeps and a metric's trend."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from open_rag_eval.cli.commands.eval import positive_int
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.cli.terminal import echo

if TYPE_CHECKING:
    from open_rag_eval.sweeps.history import History

HELP = "list recorded sweeps, or the trend of one metric across them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", type=Path, help="the sweep config (its sweep.history file)")
    where.add_argument("--db", type=Path, help="the history SQLite file")
    parser.add_argument("--metric", help="show this metric's mean per sweep (e.g. consistency.rougeL)")
    parser.add_argument("--system", help="only sweeps of this system label")
    parser.add_argument("--limit", type=positive_int, default=50, metavar="N", help="the last N sweeps (default 50)")


def _db_path(args: argparse.Namespace) -> tuple[Path, str | None]:
    if args.db is not None:
        return args.db, args.system
    from open_rag_eval.config import SweepOptions, load_config

    from open_rag_eval.sweeps.history import HISTORY_DB
    from open_rag_eval.store.sqlite import db_path

    loaded = load_config(args.config)
    options = loaded.config.sweep or SweepOptions()
    return db_path(options.history, loaded.base_dir, HISTORY_DB), args.system or options.system


def run(args: argparse.Namespace) -> int:
    from open_rag_eval.sweeps.history import History

    path, system = _db_path(args)
    with History(path, create=False) as history:
        if args.metric is None:
            text = _sweeps_table(history, system, args.limit)
        else:
            if args.metric not in history.metrics():
                known = ", ".join(m for m in history.metrics() if not m.startswith("consistency.")) or "none"
                raise ConfigError(f"no sweep recorded metric '{args.metric}'; e.g. consistency.rougeL, {known}",
                                  path="--metric")
            text = _trend_table(history, args.metric, system, args.limit)
    echo(text, end="")
    return 0


def _sweeps_table(history: History, system: str | None, limit: int) -> str:
    sweeps = history.sweeps(system, limit)
    if not sweeps:
        return "no sweeps recorded\n"
    lines = [f"{'sweep':<24} {'started (UTC)':<26} {'system':<12} {'queries':>7} {'outputs':>7} {'failed':>6}  verdict"]
    for s in sweeps:
        verdict = (s.verdict or "-") + (" (simulated judge)" if s.simulated else "")
        lines.append(f"{s.id:<24} {s.started_at:<26} {s.system:<12} {s.n_queries:>7} {s.n_outputs:>7} "
                     f"{s.n_failed_outputs:>6}  {verdict}")
    return "\n".join(lines) + "\n"


BAR = 20  # characters of a bar at the top of its scale


def bar_scale(metric: str, means: list[float]) -> tuple[float, float]:
    """The trend bars' scale: from zero (or the metric's lowest possible value) to the top of its range, so a bar's
    length is the value itself and a 17% drop looks like one; for a metric with no fixed range, zero to the largest
    mean; a mean outside the range (a negative alpha) widens it."""
    from open_rag_eval.core.catalogue import axis_range  # noqa: PLC0415

    low, high = axis_range(metric) or (0.0, 0.0)
    return min(low, *means) if means else low, max(high, *means) if means else high


def _trend_table(history: History, metric: str, system: str | None, limit: int) -> str:
    header = f"{'sweep':<24} {'system':<12} {'mean':>8} {'ci95':>17} {'n':>5} {'failed':>6} {'change':>8}  trend"
    lines = [metric, header]
    trend = history.trend(metric, system, limit)
    means = [agg.mean for _, agg in trend if agg is not None and agg.mean is not None]
    low, high = bar_scale(metric, means)
    previous: float | None = None
    for sweep, agg in trend:
        if agg is None or agg.mean is None:
            lines.append(f"{sweep.id:<24} {sweep.system:<12} {'-':>8}")
            continue
        ci = "-" if agg.ci95_low is None else f"[{agg.ci95_low:.3f}, {agg.ci95_high:.3f}]"
        change = "-" if previous is None else f"{agg.mean - previous:+.3f}"
        bar = "#" * round(BAR * (agg.mean - low) / (high - low)) if high > low else ""
        lines.append(f"{sweep.id:<24} {sweep.system:<12} {agg.mean:>8.3f} {ci:>17} {agg.n:>5} {agg.n_failed:>6} "
                     f"{change:>8}  {bar}")
        previous = agg.mean
    return "\n".join(lines) + "\n"
