"""PNG plots: TREC metric boxplots, per-query consistency dispersion, sweep history, comparison forest plot.

Boxplots mark each set's mean with its 95% confidence interval (``scoring.stats.aggregate``: bootstrap below 30
values, clipped to the metric's range) and the share answered with the interval of that share. The consistency plot
marks the same interval twice: per query, of the mean over its runs (an error bar on the mean dash); per set, of the
mean over queries of those per-query means (a dashed line with a shaded band, its figures in the panel's corner).

matplotlib is imported inside the functions (``pip install -e '.[plot]'``), with the Agg backend.
Every figure says when the judge was simulated: its numbers are not real judgments. A box whose metric rests on a
judge task the run's health found unhealthy is hatched and says "judge unhealthy" (docs/judge-health.md).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import MissingDependency
from open_rag_eval.health.rests import UNHEALTHY, unhealthy_metrics
from open_rag_eval.report.data import ResultSet, ScoreTable
from open_rag_eval.core.catalogue import axis_range, display_name, value_bounds
from open_rag_eval.scoring.stats import aggregate

__all__ = ["mean_ci", "overall_ci", "plot_consistency", "plot_forest", "plot_history", "plot_metrics", "plot_trec", "short_label"]

COLOURS = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#9D755D", "#BAB0AC")
SIMULATED_NOTE = "SIMULATED JUDGE: these numbers are not real judgments"


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise MissingDependency("matplotlib", "plot") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def short_label(label: str, width: int = 42) -> str:
    """Shorten a long label in the middle, keeping its start and its (distinctive) end."""
    if len(label) <= width:
        return label
    keep = (width - 1) // 2
    return f"{label[:keep]}…{label[-(width - 1 - keep):]}"


def _subtitle(sets: Sequence[ResultSet]) -> tuple[str, str]:
    """(text, colour) under the title: the judge, and a warning when any set was judged by a simulator."""
    simulated = [s.label for s in sets if s.simulated]
    if simulated:
        which = "" if len(simulated) == len(sets) else " (" + ", ".join(short_label(x, 30) for x in simulated) + ")"
        return SIMULATED_NOTE + which, "#C0392B"
    models = sorted({s.judge_model for s in sets if s.judge_model})
    return ("judge: " + ", ".join(models)) if models else "", "#555555"


def _finish(fig: Any, plt: Any, sets: Sequence[ResultSet], title: str, path: Path, legend: bool,
            markers: bool = False) -> Path:
    """Title, simulated warning and legend placed in inches (so tall and short figures look alike), then save."""
    text, colour = _subtitle(sets)
    height = fig.get_figheight()
    fig.text(0.5, 1 - 0.08 / height, title, ha="center", va="top", fontsize=15, fontweight="bold")
    if text:
        fig.text(0.5, 1 - 0.42 / height, text, ha="center", va="top", fontsize=11, color=colour, fontweight="bold")
    bottom = 0.05
    if legend:
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch

        handles: list[Any] = [Patch(facecolor=COLOURS[i % len(COLOURS)], alpha=0.6, label=short_label(s.label, 60))
                              for i, s in enumerate(sets)]
        if markers:
            handles += [Line2D([], [], marker="D", color="#C0392B", linestyle="-", label="mean with 95% CI"),
                        Line2D([], [], color="black", linewidth=2, label="median")]
        ncol = min(3 if markers else 2, len(handles))
        fig.legend(handles=handles, loc="lower center", ncol=ncol, fontsize=10, frameon=False)
        bottom = 0.12 + 0.26 * math.ceil(len(handles) / ncol)
    top = 0.68 if text else 0.45
    fig.tight_layout(rect=(0, bottom / height, 1, 1 - top / height))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def mean_ci(metric: str, values: Sequence[float]) -> tuple[float, float | None, float | None]:
    """(mean, CI low, CI high) of the values: our 95% interval, within the metric's range; no CI below 2 values."""
    stats = aggregate(metric, values, bounds=value_bounds(metric))
    return float(stats.mean or 0.0), stats.ci95_low, stats.ci95_high


def overall_ci(metric: str, groups: dict[str, list[float]]) -> tuple[float, float | None, float | None] | None:
    """(mean, CI low, CI high) over the queries of the per-query means (each query's runs averaged first, so a query
    counts once however many runs it has); None when no query has a value."""
    means = [math.fsum(values) / len(values) for values in groups.values() if values]
    return mean_ci(metric, means) if means else None


def _error_bar(ax: Any, x: float, mean: float, low: float | None, high: float | None, scale: float = 1.0,
               capsize: float = 7) -> None:
    if low is None or high is None:
        return
    ax.errorbar([x], [mean * scale], yerr=[[(mean - low) * scale], [(high - mean) * scale]], fmt="none",
                ecolor="#C0392B", elinewidth=1.8, capsize=capsize, capthick=1.8, zorder=6)


def _set_range(ax: Any, metric: str) -> None:
    bounds = axis_range(metric)
    if bounds:
        low, high = bounds
        pad = (high - low) * 0.04
        ax.set_ylim(low - pad, high + pad)


def _box_panel(ax: Any, metric: str, sets: Sequence[ResultSet]) -> None:
    data = [s.values(metric) for s in sets]
    ax.set_title(display_name(metric), fontsize=12)
    ax.grid(axis="y", linestyle="--", alpha=0.5)
    _set_range(ax, metric)
    if not any(data):
        ax.text(0.5, 0.5, f"no values for {metric}", transform=ax.transAxes, ha="center", va="center")
        ax.set_xticks([])
        return
    positions = list(range(1, len(sets) + 1))
    boxes = ax.boxplot([d if d else [math.nan] for d in data], positions=positions, widths=0.55, patch_artist=True,
                       medianprops={"color": "black", "linewidth": 2}, showfliers=True,
                       flierprops={"marker": "o", "markersize": 3, "alpha": 0.5})
    labels = []
    for i, (patch, values) in enumerate(zip(boxes["boxes"], data)):
        patch.set_facecolor(COLOURS[i % len(COLOURS)])
        patch.set_alpha(0.6)
        if not values:
            labels.append("no values")
            continue
        mean, low, high = mean_ci(metric, values)
        median = sorted(values)[len(values) // 2] if len(values) % 2 else \
            (sorted(values)[len(values) // 2 - 1] + sorted(values)[len(values) // 2]) / 2
        ax.scatter([positions[i]], [mean], marker="D", s=40, color="#C0392B", zorder=5)
        _error_bar(ax, positions[i], mean, low, high)
        ci = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
        shaky = unhealthy_metrics([metric], (sets[i].manifest or {}).get("health")).get(metric)
        sick = f"\n{UNHEALTHY} ({', '.join(shaky)})" if shaky else ""
        labels.append(f"mean {mean:.2f}{ci}\nmedian {median:.2f}\nn={len(values)}{sick}")
        if shaky:
            patch.set_hatch("//")
    ax.set_xticks(positions)
    ax.set_xticklabels(labels, fontsize=9)


def _answered_panel(ax: Any, sets: Sequence[ResultSet]) -> None:
    ax.set_title("% questions answered", fontsize=12)
    ax.set_ylim(0, 109)
    ax.grid(axis="y", linestyle="--", alpha=0.5)
    positions = list(range(1, len(sets) + 1))
    labels = []
    for i, result in enumerate(sets):
        values = result.values("no_answer.answered", per_run=True)
        if not values:
            labels.append("no values")
            continue
        answered = [1.0 if v >= 0.5 else 0.0 for v in values]
        mean, low, high = mean_ci("no_answer.answered", answered)
        share = 100.0 * mean
        ax.bar([positions[i]], [share], width=0.55, color=COLOURS[i % len(COLOURS)], alpha=0.75)
        _error_bar(ax, positions[i], mean, low, high, scale=100.0)
        ax.text(positions[i] + 0.3, share + 1.5, f"{share:.1f}%", ha="left", fontsize=10)
        ci = f"\n95% CI {100 * low:.0f}-{100 * high:.0f}%" if low is not None and high is not None else ""
        labels.append(f"n={len(values)}{ci}")
    ax.set_xticks(positions)
    ax.set_xticklabels(labels, fontsize=9)
    ax.set_xlim(0.3, len(sets) + 0.7)


def plot_trec(sets: Sequence[ResultSet], metrics: Sequence[str], path: Path,
              title: str = "open-rag-eval: TREC metrics") -> Path:
    """One boxplot panel per metric (one box per result set, mean and median marked) + % questions answered."""
    plt = _pyplot()
    panels = len(metrics) + 1
    ncols = min(3, panels)
    nrows = math.ceil(panels / ncols)
    width = max(4.6, 1.6 + 1.3 * len(sets))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, 4.6 * nrows + 0.4 * math.ceil(len(sets) / 2)),
                             squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, metric in zip(flat, metrics):
        _box_panel(ax, metric, sets)
    _answered_panel(flat[len(metrics)], sets)
    for ax in flat[panels:]:
        ax.set_visible(False)
    return _finish(fig, plt, sets, title, path, legend=True, markers=True)


def _order(groups: dict[str, list[float]]) -> list[str]:
    return sorted(groups, key=lambda q: (math.fsum(groups[q]) / len(groups[q]) if groups[q] else math.inf, q))


def _dispersion_panel(ax: Any, metric: str, sets: Sequence[ResultSet]) -> None:
    per_set = [s.per_query(metric) for s in sets]
    queries = _order(per_set[0]) if per_set[0] else []
    for groups in per_set[1:]:
        queries += [q for q in _order(groups) if q not in queries]
    suffix = "per query" if metric.startswith("consistency.") else "spread across runs, per query"
    ax.set_title(f"{display_name(metric)}: {suffix}", fontsize=12)
    ax.grid(axis="y", linestyle="--", alpha=0.5)
    _set_range(ax, metric)
    if not queries:
        ax.text(0.5, 0.5, f"no values for {metric}", transform=ax.transAxes, ha="center", va="center")
        ax.set_xticks([])
        return
    step = 0.8 / len(sets)
    for j, groups in enumerate(per_set):
        colour = COLOURS[j % len(COLOURS)]
        for x, query in enumerate(queries):
            values = groups.get(query) or []
            if not values:
                continue
            pos = x + (j - (len(sets) - 1) / 2) * step
            ax.vlines(pos, min(values), max(values), color=colour, linewidth=2, alpha=0.7)
            ax.scatter([pos] * len(values), values, s=12, color=colour, alpha=0.8, zorder=3)
            mean, low, high = mean_ci(metric, values)
            ax.scatter([pos], [mean], marker="_", s=120, color="black", zorder=4)
            _error_bar(ax, pos, mean, low, high, capsize=3)
        _overall_band(ax, metric, groups, colour, j)
    ax.set_xlim(-0.7, len(queries) - 0.3)
    if len(queries) <= 40:
        ax.set_xticks(range(len(queries)))
        ax.set_xticklabels([short_label(q, 14) for q in queries], rotation=60, ha="right", fontsize=8)
    else:
        ax.set_xticks([])
    ax.set_xlabel(f"{len(queries)} queries, sorted by mean; dots = runs, bar = min-max, dash = mean with 95% CI; "
                  "dashed line and band = mean over queries with 95% CI", fontsize=9)


def _overall_band(ax: Any, metric: str, groups: dict[str, list[float]], colour: str, index: int) -> None:
    overall = overall_ci(metric, groups)
    if overall is None:
        return
    mean, low, high = overall
    ax.axhline(mean, color=colour, linestyle="--", linewidth=1.2, zorder=2)
    if low is not None and high is not None:
        ax.axhspan(low, high, color=colour, alpha=0.12, zorder=1)
    ci = f" [{low:.2f}, {high:.2f}]" if low is not None and high is not None else ""
    n = sum(1 for values in groups.values() if values)
    ax.text(0.01, 0.97 - 0.09 * index, f"mean {mean:.2f}{ci}, n={n}", transform=ax.transAxes,
            ha="left", va="top", fontsize=9, color=colour, fontweight="bold")


def plot_consistency(sets: Sequence[ResultSet], metrics: Sequence[str], path: Path) -> Path:
    """One panel per metric: every query's values across its runs (dots), their range and mean."""
    plt = _pyplot()
    fig, axes = plt.subplots(len(metrics), 1, figsize=(12, 3.8 * len(metrics) + 0.4 * math.ceil(len(sets) / 2)),
                             squeeze=False)
    for ax, metric in zip((row[0] for row in axes), metrics):
        _dispersion_panel(ax, metric, sets)
    return _finish(fig, plt, sets, "open-rag-eval: consistency across runs", path, legend=True)


def _as_time(value: Any) -> Any:
    if isinstance(value, str):
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    return value


def plot_history(points: Sequence[tuple[Any, float]], baseline_index: int | None, metric: str, path: Path,
                 *, simulated: bool = False, title: str | None = None) -> Path:
    """A metric over time (sweep history): one marker per point, the baseline point and level marked.

    ``points`` are (time, value) with time a datetime, an ISO-8601 string or a number; ``baseline_index`` indexes
    ``points`` (None: no baseline).
    """
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    times = [_as_time(t) for t, _ in points]
    values = [v for _, v in points]
    ax.plot(times, values, marker="o", color=COLOURS[0], linewidth=1.6, label=display_name(metric))
    if baseline_index is not None and 0 <= baseline_index < len(points):
        base = values[baseline_index]
        ax.axhline(base, color="#C0392B", linestyle="--", linewidth=1.2, label=f"baseline {base:.3f}")
        ax.scatter([times[baseline_index]], [base], s=140, marker="*", color="#C0392B", zorder=5)
    ax.set_ylabel(metric)
    ax.grid(linestyle="--", alpha=0.5)
    _set_range(ax, metric)
    ax.legend(loc="best", fontsize=9)
    if times and isinstance(times[0], datetime):
        import matplotlib.dates as mdates

        locator = mdates.AutoDateLocator()
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    shown = [ResultSet(label="history", path=path, layout="ours", rows=[], simulated=simulated)]
    return _finish(fig, plt, shown, title or f"open-rag-eval: {display_name(metric)} over time", path, legend=False)


def plot_forest(rows: Sequence[dict[str, Any]], path: Path, *,
                sets: tuple[ResultSet | ScoreTable, ResultSet | ScoreTable]) -> Path:
    """Comparison plot of ``sets`` (A, B): per metric the mean difference (B - A) with its 95% CI; significant ones
    filled; both named simulated when either was judged by the simulated judge."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(10, 1.2 + 0.55 * max(1, len(rows))))
    for y, row in enumerate(reversed(rows)):
        colour = "#54A24B" if row["better"] else "#E45756" if row["worse"] else "#7F7F7F"
        ax.hlines(y, row["ci95_low"], row["ci95_high"], color=colour, linewidth=2.5)
        ax.scatter([row["diff"]], [y], s=60, color=colour if row["significant"] else "white", edgecolors=colour,
                   linewidths=2, zorder=3)
    ax.axvline(0, color="black", linewidth=1)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['metric']}  (p={r['p_value']:.3g}, n={r['n']})" for r in reversed(rows)], fontsize=9)
    ax.set_xlabel("mean difference B - A with 95% bootstrap CI (filled: significant after Holm)")
    ax.grid(axis="x", linestyle="--", alpha=0.5)
    simulated = any(s.simulated for s in sets)
    shown = [ResultSet(label=s.label, path=path, layout="ours", rows=[], simulated=simulated) for s in sets]
    title = f"B = {short_label(sets[1].label, 40)}  vs  A = {short_label(sets[0].label, 40)}"
    return _finish(fig, plt, shown, title, path, legend=False)


def plot_metrics(sets: Sequence[ResultSet], metrics: Sequence[str], path: Path, title: str) -> Path:
    """One boxplot panel per metric, one box per result set (an ablation's variants, say), mean marked."""
    plt = _pyplot()
    ncols = min(3, max(1, len(metrics)))
    nrows = math.ceil(max(1, len(metrics)) / ncols)
    width = max(4.6, 1.6 + 1.3 * len(sets))
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, 4.6 * nrows + 0.4 * math.ceil(len(sets) / 2)),
                             squeeze=False)
    flat = [ax for row in axes for ax in row]
    for ax, metric in zip(flat, metrics):
        _box_panel(ax, metric, sets)
    for ax in flat[len(metrics):]:
        ax.set_visible(False)
    return _finish(fig, plt, sets, title, path, legend=True, markers=True)
