"""The judge-health panel of the report's header: one self-contained piece of HTML (its own inline styles).

``health_panel(manifest, results)`` reads manifest.json's ``health`` section and returns ``""`` when the run used no
judge (or predates the section), so any report layout can place it without knowing more.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

from open_rag_eval.health.check import verdict_line

__all__ = ["SCROLL_HINT", "health_panel", "injection_panel", "render_health_panel"]

# said above a table wider than its box (report.js shows it only then: a phone, a narrow window)
SCROLL_HINT = ('<p class="scroll-hint" hidden style="font-size:.8em;color:#5b6475;margin:2px 0">'
               '&#8644; the table scrolls sideways: more columns to the right</p>')

# the share that parsed cleanly and the share with no reply first: what a narrow screen shows beside the task
_COLUMNS = ("clean", "failed", "invalid", "fallback", "echo", "reasked")
_BAD = {"fallback": "max_fallback_rate", "echo": "max_echo_rate", "invalid": "max_invalid_rate",
        "failed": "max_failed_rate"}
_VERDICT_STYLE = {"fail": "color:#b00020;font-weight:bold", "weak": "color:#8a5a00"}
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
        top = (f"{escape(repr(row['top_label']))} {float(row['top_label_share']):.0%} of {int(row['n_labels'])}"
               if row.get("n_labels") else "")
        rows.append(f'<tr><td>{escape(str(task))}</td><td style="text-align:right;padding:0 .5em">'
                    f'{int(row.get("judgments", 0))}</td>{"".join(cells)}<td style="padding:0 .5em">{top}</td></tr>')
    problems = "".join(f"<li>{escape(str(p))}</li>" for p in health.get("problems") or [])
    problems += "".join(f'<li style="list-style:circle">{escape(str(n))}</li>' for n in health.get("notes") or [])
    verdict = ("healthy: replies parsed within the thresholds, labels varied, controls told apart" if healthy else
               "UNHEALTHY: the judge, not the system, may explain these scores")
    style = _STYLE.format(border="#2e7d32" if healthy else "#b00020", background="#f4fbf4" if healthy else "#fff4f4")
    return (f'<section id="judge-health" style="{style}" data-healthy="{str(healthy).lower()}">'
            f'<strong>Judge health</strong> — {escape(verdict)}'
            f'{SCROLL_HINT}<div class="scroll" style="overflow-x:auto;max-width:100%">'
            f'<table style="border-collapse:collapse;margin-top:.3em"><thead><tr><th style="text-align:left">task</th>'
            f'<th style="text-align:right;padding:0 .5em">n</th>{head}<th>top label</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>{_controls(health.get("controls"))}'
            f'{f"<ul>{problems}</ul>" if problems else ""}'
            f'{_format(health.get("reply_format"))}'
            '<small>Share of judgments per parse class, the commonest label and its share; controls are judgments '
            'whose answer is known, kept out of the metrics; thresholds in judge.health. See docs/judge-health.md.'
            '</small></section>')


def _format(reply_format: Any) -> str:
    """Structured replies (judge.structured) said beside the table: the parse rates are theirs."""
    if not reply_format or reply_format == "text":
        return ""
    return f'<p id="reply-format">Replies asked as {escape(str(reply_format))} (judge.structured).</p>'


def _controls(controls: Any) -> str:
    """One line per task: the verdict, the share of pairs told apart with its 95% CI, the accuracy."""
    if not isinstance(controls, Mapping):
        return ""
    if controls.get("state") != "run":
        return f'<p id="judge-controls">Controls: {escape(str(controls.get("state")))}</p>'
    items = []
    for task, c in (controls.get("tasks") or {}).items():
        colour = _VERDICT_STYLE.get(str(c.get("verdict")), "")
        items.append(f'<li data-verdict="{escape(str(c.get("verdict")))}" style="{colour}">'
                     f'{escape(verdict_line(str(task), c))}</li>')
    return f'<div id="judge-controls">Controls:<ul>{"".join(items)}</ul></div>' if items else ""


def injection_panel(directory: Path) -> str:
    """The injection probe's headline (``calibrate --injection`` wrote injection.json beside the results); "" when
    the probe did not run here."""
    try:
        probe = json.loads((directory / "injection.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    lines = [str(line) for line in probe.get("headline") or []] if isinstance(probe, Mapping) else []
    if not lines:
        return ""
    items = "".join(f"<li>{escape(line)}</li>" for line in lines)
    style = _STYLE.format(border="#b26a00", background="#fff8ec")
    return (f'<section id="injection-probe" style="{style}"><strong>Injection probe</strong> — can text inside the '
            f'judged material move the judge? (calibrate --injection; injection.csv)<ul>{items}</ul></section>')
