"""The judge-health panel of the report's header: one self-contained piece of HTML (its own inline styles).

``health_panel(manifest, results)`` reads manifest.json's ``health`` section and returns ``""`` when the run used no
judge (or predates the section), so any report layout can place it without knowing more.
"""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

__all__ = ["health_panel", "render_health_panel"]

_COLUMNS = ("clean", "fallback", "echo", "invalid", "failed", "reasked")
_BAD = {"fallback": "max_fallback_rate", "echo": "max_echo_rate", "invalid": "max_invalid_rate",
        "failed": "max_failed_rate"}
_STYLE = ("border:1px solid {border};border-radius:6px;padding:.5em .8em;margin:.8em 0;background:{background};"
          "font-size:.9em")


def health_panel(manifest: Mapping[str, Any], results: Mapping[str, Any] | None = None) -> str:
    """The panel for the report's header (``results`` is accepted for the layout's call; the manifest has it all)."""
    return render_health_panel(manifest)


def render_health_panel(manifest: Mapping[str, Any]) -> str:
    health = manifest.get("health")
    if not isinstance(health, Mapping) or not health.get("tasks"):
        return ""
    healthy = bool(health.get("healthy"))
    limits = health.get("thresholds") or {}
    head = "".join(f'<th style="text-align:right;padding:0 .5em">{c}</th>' for c in _COLUMNS)
    rows = []
    for task, row in health["tasks"].items():
        cells = []
        for column in _COLUMNS:
            rate = float((row.get("rates") or {}).get(column, 0.0))
            over = column in _BAD and rate > float(limits.get(_BAD[column], 1.0))
            style = "text-align:right;padding:0 .5em" + (";color:#b00020;font-weight:bold" if over else "")
            cells.append(f'<td style="{style}">{rate:.0%}</td>')
        rows.append(f'<tr><td>{escape(str(task))}</td><td style="text-align:right;padding:0 .5em">'
                    f'{int(row.get("judgments", 0))}</td>{"".join(cells)}</tr>')
    problems = "".join(f"<li>{escape(str(p))}</li>" for p in health.get("problems") or [])
    verdict = ("healthy: every task's replies parsed within the thresholds" if healthy else
               "UNHEALTHY: the judge, not the system, may explain these scores")
    style = _STYLE.format(border="#2e7d32" if healthy else "#b00020", background="#f4fbf4" if healthy else "#fff4f4")
    return (f'<section id="judge-health" style="{style}" data-healthy="{str(healthy).lower()}">'
            f'<strong>Judge health</strong> — {escape(verdict)}'
            f'<table style="border-collapse:collapse;margin-top:.3em"><thead><tr><th style="text-align:left">task</th>'
            f'<th style="text-align:right;padding:0 .5em">n</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody>'
            f'</table>{f"<ul>{problems}</ul>" if problems else ""}'
            '<small>Share of judgments per parse class; thresholds in judge.health. See docs/judge-health.md.'
            '</small></section>')
