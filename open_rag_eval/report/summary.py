"""The report's summary: the headline panel (the few numbers that matter, coloured against targets) and every
other metric grouped by family in folded sections, with tallies (invalid, failed, fabricated ...) as a note on
their family instead of rows of zeros, and a histogram with axes per metric.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from open_rag_eval.health.rests import UNHEALTHY
from open_rag_eval.report.drilldown import esc, fmt
from open_rag_eval.report.headline import status, target_for
from open_rag_eval.core.missing import FAILED, SKIPPED, UNAVAILABLE, UNDEFINED, Missing
from open_rag_eval.core.catalogue import axis_range, display_name, family, family_title, is_tally, lower_is_better

__all__ = ["corrected_line", "headline_panel", "histogram", "metric_groups", "missing_note", "no_value", "value_text"]

_TALLY = {"n_invalid": "invalid grades", "n_failed": "failed judgments", "n_defaulted": "defaulted importances",
          "n_unparsed": "unparsed replies", "fabricated": "fabricated citations"}


def _percent(metric: str) -> bool:
    return metric == "no_answer.answered"


def value_text(metric: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{100 * value:.0f}%" if _percent(metric) else f"{value:.2f}"


def _arrow(metric: str) -> str:
    lower = lower_is_better(metric)
    return (f'<span class="dir" title="{"lower" if lower else "higher"} is better">'
            f'{"↓" if lower else "↑"}</span>')


def missing_note(metric: str, missing: Missing) -> str:
    """"2 failed · 5 undefined" for one metric (unavailable is said once for the run, in the header)."""
    parts = []
    for which in (FAILED, UNDEFINED, SKIPPED, UNAVAILABLE):
        n = missing.count(metric, which)
        if n:
            parts.append(f'<span class="miss {which}">{n} {which}</span>')
    return " · ".join(parts)


def no_value(metric: str, missing: Missing) -> str:
    for which in (UNAVAILABLE, FAILED, UNDEFINED, SKIPPED):
        if missing.count(metric, which):
            return f'<span class="miss {which}">{which}</span>'
    return "–"


def _card(stat: Mapping[str, Any], targets: Mapping[str, float], missing: Missing, shaky: Sequence[str] = ()) -> str:
    """One headline card; ``shaky``: the unhealthy judge tasks its metric rests on (the card then says "judge
    unhealthy" in place of its target verdict, never green)."""
    metric = str(stat.get("metric"))
    mean = stat.get("mean")
    target = target_for(metric, targets)
    state = "unhealthy" if shaky and mean is not None else status(metric, mean, target)
    value = value_text(metric, mean) if mean is not None else no_value(metric, missing)
    ci = (f'95% CI {value_text(metric, stat["ci95_low"])} – {value_text(metric, stat["ci95_high"])}'
          if stat.get("ci95_low") is not None else "no CI")
    sign = "≤" if lower_is_better(metric) else "≥"
    goal = f'target {sign} {value_text(metric, target)}' if target is not None else "no target set"
    if state == "unhealthy":
        goal += f': {UNHEALTHY} ({esc(", ".join(shaky))}; see Judge health)'
    note = missing_note(metric, missing)
    return (f'<div class="card {state}" data-metric="{esc(metric)}" data-status="{state}">'
            f'<div class="card-name">{esc(display_name(metric))}</div>'
            f'<div class="card-value">{value} {_arrow(metric)}</div>'
            f'<div class="card-ci">{ci} · n {fmt(stat.get("n"))}</div>{corrected_line(metric, stat.get("corrected"))}'
            f'<div class="card-goal">{goal}</div>'
            f'<div class="card-code">{esc(metric)}{" · " + note if note else ""}</div></div>')


def corrected_line(metric: str, corrected: Mapping[str, Any] | None) -> str:
    """The card's corrected estimate (people's labels, docs/calibration.md), or why there is none."""
    if not corrected:
        return ""
    if corrected.get("corrected_mean") is None:
        return f'<div class="card-corrected">not corrected: {esc(str(corrected.get("corrected_note") or ""))}</div>'
    low, high = corrected.get("corrected_ci95_low"), corrected.get("corrected_ci95_high")
    bias = corrected.get("judge_bias")
    said = f" · judge bias {'+' if bias is not None and bias > 0 else ''}{value_text(metric, bias)}"
    return (f'<div class="card-corrected" title="PPI++ mean over queries (docs/calibration.md)">corrected '
            f'{value_text(metric, corrected["corrected_mean"])} · 95% CI {value_text(metric, low)} – '
            f'{value_text(metric, high)}</div><div class="card-ci">corrected with human labels on '
            f'{fmt(corrected.get("n_labelled"))} queries{said if bias is not None else ""}</div>')


def headline_panel(summary: Mapping[str, Mapping[str, Any]], metrics: Sequence[str], targets: Mapping[str, float],
                   missing: Missing, unhealthy: Mapping[str, Sequence[str]] | None = None) -> str:
    """The headline cards; ``unhealthy``: metric -> the unhealthy judge tasks it rests on
    (``health.rests.unhealthy_metrics``)."""
    if not metrics:
        return '<p class="muted" id="headline">No headline metric in this run.</p>'
    shaky = unhealthy or {}
    cards = "".join(_card(summary.get(m) or {"metric": m}, targets, missing, shaky.get(m, ())) for m in metrics)
    return (f'<section id="headline" aria-label="headline metrics"><div class="cards">{cards}</div>'
            '<p class="legend">↑ higher is better, ↓ lower is better. Green: meets its target; amber: within a '
            'tenth of the range short of it; red: further; grey with "judge unhealthy": the judge task it rests on '
            'failed its health checks, so no verdict is given. Targets come from the config\'s <code>report.targets'
            '</code> (defaults in docs/report.md).</p></section>')


def histogram(values: Sequence[float], metric: str) -> str:
    """A 10-bin histogram with its axes: the value range below, the tallest bin's count at the left."""
    if not values:
        return ""
    low, high = axis_range(metric) or (min(values), max(values))
    if high <= low:
        high = low + 1.0
    bins = [0] * 10
    for v in values:
        bins[min(9, max(0, int((v - low) / (high - low) * 10)))] += 1
    top = max(bins)
    x0, x1, y0, y1 = 26.0, 196.0, 4.0, 40.0
    step = (x1 - x0) / 10
    bars = "".join(f'<rect x="{x0 + i * step + 1:.1f}" y="{y1 - (y1 - y0) * c / top:.1f}" width="{step - 2:.1f}" '
                   f'height="{(y1 - y0) * c / top:.1f}"><title>{c}</title></rect>' for i, c in enumerate(bins) if c)
    return (f'<svg class="hist" width="200" height="56" viewBox="0 0 200 56" role="img" '
            f'aria-label="{len(values)} values from {fmt(low)} to {fmt(high)}; tallest bin {top}">{bars}'
            f'<line x1="{x0}" y1="{y1 + 0.5}" x2="{x1}" y2="{y1 + 0.5}" class="axis"/>'
            f'<line x1="{x0 - 0.5}" y1="{y0}" x2="{x0 - 0.5}" y2="{y1}" class="axis"/>'
            f'<text x="{x0 - 3}" y="{y0 + 7}" text-anchor="end">{top}</text>'
            f'<text x="{x0 - 3}" y="{y1}" text-anchor="end">0</text>'
            f'<text x="{x0}" y="53">{fmt(low, 2)}</text><text x="{x1}" y="53" text-anchor="end">{fmt(high, 2)}</text>'
            '</svg>')


def _tallies(stats: Sequence[Mapping[str, Any]], values: Mapping[str, Sequence[float]]) -> str:
    parts, zero = [], []
    for stat in stats:
        metric = str(stat.get("metric"))
        label = _TALLY.get(metric.rsplit(".", 1)[-1], metric)
        total = math.fsum(values.get(metric) or [])
        if total:
            parts.append(f'<span class="tally warn" data-metric="{esc(metric)}">{fmt(total)} {esc(label)}</span>')
        else:
            zero.append(label)
    if zero:
        parts.append(f'<span class="tally muted">no {esc(" or ".join(zero))}</span>')
    return " · ".join(parts)


def _row(stat: Mapping[str, Any], values: Sequence[float], missing: Missing) -> str:
    metric = str(stat.get("metric"))
    mean = stat.get("mean")
    ci = f"{fmt(stat.get('ci95_low'), 2)} – {fmt(stat.get('ci95_high'), 2)}" if stat.get("ci95_low") is not None else ""
    shown = fmt(mean) if mean is not None else no_value(metric, missing)
    return (f'<tr data-metric="{esc(metric)}"><td><span class="mname">{esc(display_name(metric))}</span>'
            f'{"" if display_name(metric) == metric else f" <code>{esc(metric)}</code>"}</td>'
            f'<td class="num">{_arrow(metric)}</td><td class="num mean">{shown}</td><td class="num">{ci}</td>'
            f'<td class="num">{fmt(stat.get("n"))}</td><td class="missing">{missing_note(metric, missing)}</td>'
            f'<td class="hide-narrow">{histogram(values, metric)}</td></tr>')


def metric_groups(summary: Sequence[Mapping[str, Any]], values: Mapping[str, Sequence[float]],
                  missing: Missing) -> str:
    """One folded section per family: its metrics as rows, its tallies as a note on the section."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for stat in summary:
        groups.setdefault(family(str(stat.get("metric"))), []).append(stat)
    head = ('<thead><tr><th>metric</th><th class="num" title="better">±</th><th class="num">mean</th>'
            '<th class="num">95% CI</th><th class="num">n</th><th>missing</th><th class="hide-narrow">distribution'
            '</th></tr></thead>')
    sections = []
    for name, stats in sorted(groups.items(), key=lambda item: item[0] == "spread"):
        rows = [s for s in stats if not is_tally(str(s.get("metric")))]
        note = _tallies([s for s in stats if is_tally(str(s.get("metric")))], values)
        body = "".join(_row(s, values.get(str(s.get("metric"))) or [], missing) for s in rows)
        table = (f'<div class="scroll"><table class="metrics">{head}<tbody>{body}</tbody></table></div>'
                 if rows else "")
        sections.append(f'<details class="family" data-family="{esc(name)}"><summary><b>{esc(family_title(name))}'
                        f'</b> <span class="muted">· {len(rows)} metric{"s" if len(rows) != 1 else ""}</span>'
                        f'{" · " + note if note else ""}</summary>{table}</details>')
    return f'<div id="families">{"".join(sections)}</div>'
