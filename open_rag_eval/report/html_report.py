"""The self-contained HTML report of one output directory (inline CSS, JS and SVG; no network).

``write_report(output_dir)`` reads results.json, summary.csv, manifest.json (results.csv when results.json is
absent) and writes ``report.html`` atomically. Missing sections are tolerated: a golden-only run has no judge,
a failed metric has empty values and reasons.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.errors import InputError
from open_rag_eval.fileio import atomic_write_text
from open_rag_eval.report.data import read_json
from open_rag_eval.report.drilldown import KEY_METRICS, esc, fmt, render_query
from open_rag_eval.report.hints import diagnose
from open_rag_eval.report.names import axis_range, display_name, is_dispersion, lower_is_better

__all__ = ["render_report", "write_report"]

_HERE = Path(__file__).parent


def _summary(directory: Path, results: dict[str, Any]) -> list[dict[str, Any]]:
    if results.get("summary"):
        return list(results["summary"])
    path = directory / "summary.csv"
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    out = []
    for row in rows:
        item: dict[str, Any] = {"metric": row.get("metric", "")}
        for key in ("mean", "std", "ci95_low", "ci95_high", "n", "n_failed"):
            text = (row.get(key) or "").strip()
            item[key] = float(text) if text else None
        out.append(item)
    return out


def _outputs_from_csv(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fallback when results.json is absent: scores only, no details."""
    from open_rag_eval.report.loader import load_results

    outputs, queries = [], []
    for row in load_results(directory).rows:
        item = {"query_id": row.query_id, "query": row.query, "run": row.run, "scores": row.scores,
                "errors": row.errors, "details": {}, "passages": [], "answer": []}
        (queries if row.run is None else outputs).append(item)
    return outputs, queries


def _histogram(values: Sequence[float], metric: str) -> str:
    if not values:
        return ""
    low, high = axis_range(metric) or (min(values), max(values) if max(values) > min(values) else min(values) + 1)
    bins = [0] * 10
    for v in values:
        bins[min(9, max(0, int((v - low) / (high - low) * 10)))] += 1
    top = max(bins)
    bars = "".join(f'<rect x="{i * 12}" y="{28 - 26 * c / top:.1f}" width="10" height="{26 * c / top:.1f}"/>'
                   for i, c in enumerate(bins) if c)
    return (f'<svg class="hist" width="120" height="30" viewBox="0 0 120 30" role="img" '
            f'aria-label="distribution from {fmt(low)} to {fmt(high)}">{bars}'
            f'<line x1="0" y1="29.5" x2="120" y2="29.5" stroke="#999"/></svg>')


def _values(outputs: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]], metric: str) -> list[float]:
    return [float(v) for item in (*outputs, *queries) if (v := (item.get("scores") or {}).get(metric)) is not None]


def _summary_rows(summary: Sequence[dict[str, Any]], outputs: Sequence[dict[str, Any]],
                  queries: Sequence[dict[str, Any]]) -> str:
    rows = []
    for s in summary:
        metric = s.get("metric", "")
        ci = (f"{fmt(s.get('ci95_low'), 2)} – {fmt(s.get('ci95_high'), 2)}" if s.get("ci95_low") is not None else "–")
        failed = int(s.get("n_failed") or 0)
        rows.append(f'<tr data-metric="{esc(metric)}"><td title="{esc(display_name(metric))}">{esc(metric)}</td>'
                    f'<td class="num">{fmt(s.get("mean"))}</td><td class="num">{ci}</td>'
                    f'<td class="num">{fmt(s.get("n"))}</td>'
                    f'<td class="num{" err" if failed else ""}">{failed}</td>'
                    f'<td class="hide-narrow">{_histogram(_values(outputs, queries, metric), metric)}</td></tr>')
    return "".join(rows)


def _summary_table(summary: Sequence[dict[str, Any]], outputs: Sequence[dict[str, Any]],
                   queries: Sequence[dict[str, Any]]) -> str:
    """Every metric; the spreads of metrics across runs (many rows) folded away below the rest."""
    head = ('<thead><tr><th>metric</th><th class="num">mean</th><th class="num">95% CI</th><th class="num">n</th>'
            '<th class="num">failed</th><th class="hide-narrow">distribution</th></tr></thead>')
    main = [s for s in summary if not is_dispersion(s.get("metric", ""))]
    spread = [s for s in summary if is_dispersion(s.get("metric", ""))]
    html = (f'<div class="scroll"><table id="summary">{head}<tbody>{_summary_rows(main, outputs, queries)}'
            '</tbody></table></div>')
    if spread:
        html += (f'<details><summary>Spread of each metric across runs ({len(spread)} statistics)</summary>'
                 f'<div class="scroll"><table id="dispersion">{head}<tbody>'
                 f'{_summary_rows(spread, outputs, queries)}</tbody></table></div></details>')
    return html


def _unavailable(summary: Sequence[dict[str, Any]]) -> set[str]:
    """Metrics with no value at all (e.g. HHEM without its weights): reported once, not as per-output failures."""
    return {s["metric"] for s in summary if not s.get("n") and s.get("n_failed") and not is_dispersion(s["metric"])}


def _header(manifest: dict[str, Any], results: dict[str, Any], outputs: Sequence[dict[str, Any]],
            unavailable: set[str]) -> str:
    judge = manifest.get("judge") or {}
    simulated = bool(results.get("simulated", manifest.get("simulated", judge.get("simulated"))))
    total = ((manifest.get("accounting") or {}).get("total")) or {}
    scored = sum(1 for o in outputs if not o.get("error") and not _failures(o, unavailable))
    calls = (f"{fmt(total.get('calls'))} calls, {fmt(total.get('cache_hits'))} cached · "
             f"{fmt(total.get('prompt_tokens'))}+{fmt(total.get('completion_tokens'))} tokens")
    if simulated:
        cost = f"none (simulated judge) · {calls}"
    elif total.get("cost_usd") is not None:
        cost = f"${float(total['cost_usd']):.4f} · {calls}"
    else:
        cost = f"unknown (no price for this model) · {calls}" if total else "–"
    badge = ' <span class="badge sim">SIMULATED</span>' if simulated else ""
    items = [("evaluated", (manifest.get("input") or {}).get("path") or "–"),
             ("created", manifest.get("created") or "–"),
             ("tool version", manifest.get("tool_version") or "–")]
    cells = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in items)
    cells += f'<div><dt>judge</dt><dd id="judge">{esc(judge.get("model") or "none")}{badge}</dd></div>'
    cells += f'<div><dt>cost</dt><dd id="cost">{esc(cost)}</dd></div>'
    cells += (f'<div><dt>coverage</dt><dd id="coverage">{scored} / {len(outputs)} outputs fully scored</dd></div>')
    banner = ('<p class="banner">The judge was simulated: these numbers test the pipeline, they are not real '
              'judgments.</p>') if simulated else ""
    return f'<h1>open-rag-eval report</h1>{banner}<dl class="meta">{cells}</dl>'


def _query_means(outputs: Sequence[dict[str, Any]]) -> dict[str, float | None]:
    sums: dict[str, list[float]] = {}
    for o in outputs:
        for metric, value in (o.get("scores") or {}).items():
            if value is not None:
                sums.setdefault(metric, []).append(float(value))
    return {m: math.fsum(v) / len(v) for m, v in sums.items()}


def _grouped(outputs: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]]) -> list[tuple[str, str, list, Any]]:
    order: dict[str, tuple[str, list]] = {}
    for o in outputs:
        order.setdefault(str(o.get("query_id")), (o.get("query") or "", []))[1].append(o)
    cross = {str(q.get("query_id")): q for q in queries}
    for qid, q in cross.items():
        order.setdefault(qid, (q.get("query") or "", []))
    return [(qid, query, sorted(runs, key=lambda o: o.get("run") or 0), cross.get(qid))
            for qid, (query, runs) in order.items()]


def _failures(item: dict[str, Any] | None, unavailable: set[str]) -> int:
    """Missing values of one row that are its own failures (not a metric unavailable everywhere, not a spread)."""
    return len([m for m in ((item or {}).get("errors") or {}) if m not in unavailable and not is_dispersion(m)])


def _queries_table(groups: list[tuple[str, str, list, Any]], metrics: Sequence[str], unavailable: set[str]) -> str:
    head = "".join(f'<th class="num" data-sort="{esc(m)}">{esc(m)}</th>' for m in metrics)
    rows = []
    for index, (qid, query, runs, cross) in enumerate(groups, start=1):
        means = _query_means(runs)
        failed = sum(_failures(o, unavailable) for o in runs) + _failures(cross, unavailable)
        cells = "".join(f'<td class="num" data-key="{esc(m)}" data-v="{"" if means.get(m) is None else means[m]}">'
                        f'{fmt(means.get(m))}</td>' for m in metrics)
        rows.append(f'<tr data-failed="{failed}"><td data-key="id" data-v="{esc(qid)}"><a class="open" '
                    f'href="#q-{index}">{esc(qid)}</a></td><td class="q">{esc(query)}</td>'
                    f'<td class="num" data-key="runs" data-v="{len(runs)}">{len(runs)}</td>{cells}'
                    f'<td class="num" data-key="failed" data-v="{failed}">{failed}</td></tr>')
    options = "".join(f'<option value="{esc(m)}" data-lower-better="{int(lower_is_better(m))}">worst by {esc(m)}'
                      f'</option>' for m in metrics)
    controls = ('<div class="controls"><input id="filter" type="search" placeholder="filter queries" '
                f'aria-label="filter queries"><select id="worst" aria-label="sort"><option value="">sort…</option>'
                f'{options}</select><label><input id="only-failed" type="checkbox"> with failures only</label>'
                f'<span class="muted"><span id="shown">{len(groups)}</span> shown</span></div>')
    return (f'{controls}<div class="scroll"><table id="queries"><thead><tr><th data-sort="id">query id</th>'
            f'<th>query</th><th class="num" data-sort="runs">runs</th>{head}<th class="num" data-sort="failed">'
            f'failed</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
            '<p class="legend">Values are means over a query\'s runs. Click a column to sort; "worst by" puts '
            'the weakest queries first.</p>')


def render_report(output_dir: Path) -> str:
    """The report's HTML for one output directory."""
    directory = Path(output_dir)
    if not directory.is_dir():
        raise InputError("no such results directory", file=str(directory))
    manifest, results = read_json(directory / "manifest.json"), read_json(directory / "results.json")
    if results:
        outputs, queries = list(results.get("outputs") or []), list(results.get("queries") or [])
    else:
        outputs, queries = _outputs_from_csv(directory)
    summary = _summary(directory, results)
    unavailable = _unavailable(summary)
    groups = _grouped(outputs, queries)
    present = {m for o in outputs for m, v in (o.get("scores") or {}).items() if v is not None}
    metrics = [m for m in KEY_METRICS if m in present]
    means = {s.get("metric"): s.get("mean") for s in summary}
    hints = "".join(f'<li><span class="hint-area">{esc(a)}</span>: {esc(t)}</li>' for a, t in diagnose(means))
    failures = sum(int(s.get("n_failed") or 0) for s in summary
                   if s.get("metric") not in unavailable and not is_dispersion(s.get("metric", "")))
    if failures:
        hints += (f'<li><span class="hint-area">failures</span>: {failures} scores are missing (failed judgments '
                  'or models); each query below gives the reasons. They are left out of the means, never guessed.</li>')
    reasons: dict[str, list[str]] = {}  # one line per reason: the metrics of one family usually share it
    for metric in sorted(unavailable):
        reason = next((o["errors"][metric] for o in (*outputs, *queries) if metric in (o.get("errors") or {})), "")
        reasons.setdefault(reason, []).append(metric)
    for reason, names in reasons.items():
        hints += (f'<li><span class="hint-area">unavailable</span>: {esc(", ".join(names))} '
                  f'{"has" if len(names) == 1 else "have"} no value for any output: {esc(reason)}</li>')
    drill = "".join(render_query(i, qid, q, runs, cross, _query_means(runs))
                    for i, (qid, q, runs, cross) in enumerate(groups, start=1))
    body = (f'{_header(manifest, results, outputs, unavailable)}'
            f'<h2>Diagnosis</h2><ul class="hints" id="hints">{hints or "<li>no clear pattern</li>"}</ul>'
            f'<h2>Summary</h2>{_summary_table(summary, outputs, queries)}'
            f'<h2>Queries</h2>{_queries_table(groups, metrics, unavailable)}'
            f'<h2>Drill-down</h2>{drill}')
    css = (_HERE / "report.css").read_text(encoding="utf-8")
    js = (_HERE / "report.js").read_text(encoding="utf-8").replace("</", "<\\/")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f'<title>open-rag-eval report</title><style>{css}</style></head>'
            f'<body><main>{body}</main><script>{js}</script></body></html>\n')


def write_report(output_dir: Path) -> Path:
    """Write ``report.html`` into ``output_dir`` (atomically) and return its path."""
    path = Path(output_dir) / "report.html"
    atomic_write_text(path, render_report(Path(output_dir)))
    return path
