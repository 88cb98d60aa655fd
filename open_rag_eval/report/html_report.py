"""The self-contained HTML report of one output directory (inline CSS, JS and SVG; no network).

``render_report(output_dir)`` draws the page from results.json, summary.csv, manifest.json (results.csv when
results.json is absent); ``paged.write_report`` writes ``report.html`` atomically. Missing sections are
tolerated: a golden-only run has no judge, a failed metric has empty values and reasons.

Layout: header (what was evaluated, judge, cost, coverage with failed / undefined / unavailable apart), the
headline panel, the diagnosis, every metric grouped by family (folded), the queries table, the drill-down.
Paths are shown relative (as the config named them); an absolute one shows its file name only.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath, PureWindowsPath
from typing import Any

from open_rag_eval.store.csv_cells import read_cell
from open_rag_eval.core.errors import InputError
from open_rag_eval.health.check import is_health
from open_rag_eval.report.data import read_json
from open_rag_eval.report.loader import finite_cell
from open_rag_eval.report.drilldown import KEY_METRICS, esc, fmt, missing_counts, render_query
from open_rag_eval.report.headline import headline_metrics, report_options
from open_rag_eval.report.health import SCROLL_HINT
from open_rag_eval.report.digest import Digest
from open_rag_eval.core.missing import FAILED, SKIPPED, UNAVAILABLE, UNDEFINED, Missing, scrub_paths
from open_rag_eval.core.catalogue import display_name, is_dispersion, lower_is_better, short_name
from open_rag_eval.report.summary import headline_panel, metric_groups
from open_rag_eval.run.corrected import CORRECTED_FILE

__all__ = ["RunData", "load_run", "render_report"]

_HERE = Path(__file__).parent


def _summary(directory: Path, results: dict[str, Any]) -> list[dict[str, Any]]:
    """The summary rows (results.json's, else summary.csv's), each corrected one with its estimate."""
    summary = _summary_rows(directory, results)
    _add_corrected(summary, read_json(directory / CORRECTED_FILE))
    return summary


def _summary_rows(directory: Path, results: dict[str, Any]) -> list[dict[str, Any]]:
    if results.get("summary"):
        return list(results["summary"])
    path = directory / "summary.csv"
    if not path.is_file():
        return []
    with path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    out = []
    for line, row in enumerate(rows, start=2):
        item: dict[str, Any] = {"metric": read_cell(row.get("metric", ""))}
        for key in ("mean", "std", "ci95_low", "ci95_high", "n", "n_failed", "n_undefined", "n_unavailable", "n_skipped"):
            item[key] = finite_cell(row.get(key) or "", file=str(path), line=line, field_name=key)
        out.append(item)
    return out


def _outputs_from_csv(directory: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Fallback when results.json is absent: scores only, no details."""
    outputs: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for section, item in csv_items(directory):
        (queries if section == "queries" else outputs).append(item)
    return outputs, queries


def csv_items(directory: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``_outputs_from_csv`` one item at a time: (section, item), the outputs first, then the per-query rows (two
    passes over results.csv)."""
    from open_rag_eval.report.loader import iter_rows

    for section in ("outputs", "queries"):
        for row in iter_rows(directory):
            if (row.run is None) == (section == "queries"):
                yield section, {"query_id": row.query_id, "query": row.query, "run": row.run, "scores": row.scores,
                                "errors": row.errors, "details": {}, "passages": [], "answer": []}


def digest_of(outputs: Sequence[dict[str, Any]], queries: Sequence[dict[str, Any]]) -> Digest:
    digest = Digest()
    for item in outputs:
        digest.add(item, output=True)
    for item in queries:
        digest.add(item, output=False)
    return digest


@dataclass
class RunData:
    """One results directory as the report reads it: its files' small parts and the digest of its items
    (``outputs`` and ``queries`` themselves only when the whole run was read into memory)."""

    directory: Path
    manifest: dict[str, Any]
    results: dict[str, Any]
    outputs: list[dict[str, Any]]
    queries: list[dict[str, Any]]
    summary: list[dict[str, Any]]
    digest: Digest | None = None

    def __post_init__(self) -> None:
        if self.digest is None:
            self.digest = digest_of(self.outputs, self.queries)

    @property
    def items(self) -> Digest:
        assert self.digest is not None
        return self.digest

    @property
    def missing(self) -> Missing:
        return self.items.missing

    @property
    def label(self) -> str:
        return self.directory.name or "results"

    @property
    def stats(self) -> dict[str, dict[str, Any]]:
        return {str(s.get("metric")): s for s in self.summary}

    @property
    def simulated(self) -> bool:
        judge = self.manifest.get("judge") or {}
        return bool(self.results.get("simulated", self.manifest.get("simulated", judge.get("simulated"))))

    @property
    def unhealthy(self) -> dict[str, list[str]]:
        """metric -> the unhealthy judge tasks it rests on (docs/judge-health.md)."""
        from open_rag_eval.health.rests import unhealthy_metrics

        return unhealthy_metrics([*self.stats, *self.items.values.metrics], self.manifest.get("health"))

    def headline(self) -> tuple[list[str], dict[str, float]]:
        chosen, targets = report_options(self.manifest)
        present = [m for m in self.stats if not is_dispersion(m) and not is_health(m)]
        return headline_metrics(present, chosen), targets


def load_run(output_dir: Path) -> RunData:
    """Read one output directory (results.json, else results.csv; summary; manifest)."""
    directory = Path(output_dir)
    if not directory.is_dir():
        raise InputError("no such results directory", file=str(directory))
    manifest, results = read_json(directory / "manifest.json"), read_json(directory / "results.json")
    if results:
        outputs, queries = list(results.get("outputs") or []), list(results.get("queries") or [])
    else:
        outputs, queries = _outputs_from_csv(directory)
    return RunData(directory, manifest, results, outputs, queries, _summary(directory, results))


def _add_corrected(summary: list[dict[str, Any]], corrected: dict[str, Any]) -> None:
    """Each summary row of a metric corrected with people's labels carries its estimate (corrected.json)."""
    rows = {str(row.get("metric")): row for row in corrected.get("metrics") or [] if isinstance(row, dict)}
    for item in summary:
        if str(item.get("metric")) in rows:
            item["corrected"] = rows[str(item.get("metric"))]


def _relative(path: Any) -> str:
    """The input as the config named it; an absolute path shows its file name only (no machine's folders)."""
    text = str(path or "")
    if not text:
        return "–"
    return PurePath(text).name if PurePath(text).is_absolute() or PureWindowsPath(text).is_absolute() else text


def _cost(run: RunData) -> str:
    total = ((run.manifest.get("accounting") or {}).get("total")) or {}
    calls = (f"{fmt(total.get('calls'))} calls, {fmt(total.get('cache_hits'))} cached · "
             f"{fmt(total.get('prompt_tokens'))}+{fmt(total.get('completion_tokens'))} tokens")
    if run.simulated:
        return f"none (simulated judge) · {calls}"
    if total.get("cost_usd") is not None:
        return f"${float(total['cost_usd']):.4f} · {calls}"
    if total.get("usage_unknown"):
        return f"unknown ({fmt(total['usage_unknown'])} replies reported no valid token usage) · {calls}"
    return f"unknown (no price for this model) · {calls}" if total else "–"


def _coverage(run: RunData) -> tuple[int, dict[str, int]]:
    """(outputs with no failed value, missing values by kind over every row) -- the numbers the table and the
    drill-down add up to."""
    counts = dict(run.items.counts)
    counts[UNAVAILABLE] = run.missing.total(UNAVAILABLE)
    return run.items.scored, counts


def _unavailable_note(run: RunData) -> str:
    """Metrics unavailable in this run, said once: one line per reason (a family's metrics share it)."""
    reasons: dict[str, list[str]] = {}
    for metric, reason in sorted(run.missing.unavailable.items()):
        reasons.setdefault(scrub_paths(reason), []).append(metric)
    items = "".join(f'<li><b>{esc(", ".join(names))}</b>: {esc(reason)}</li>' for reason, names in reasons.items())
    return (f'<div class="unavail-note" id="unavailable"><b>Not available in this run</b> (no value for any output; '
            f'not counted as failures)<ul>{items}</ul></div>') if items else ""


def _header(run: RunData) -> str:
    judge = run.manifest.get("judge") or {}
    scored, counts = _coverage(run)
    badge = ' <span class="badge sim">SIMULATED</span>' if run.simulated else ""
    items = [("evaluated", _relative((run.manifest.get("input") or {}).get("path"))),
             ("created", run.manifest.get("created") or "–"),
             ("tool version", run.manifest.get("tool_version") or "–")]
    cells = "".join(f"<div><dt>{esc(k)}</dt><dd>{esc(v)}</dd></div>" for k, v in items)
    cells += f'<div><dt>judge</dt><dd id="judge">{esc(judge.get("model") or "none")}{badge}</dd></div>'
    cells += f'<div><dt>cost</dt><dd id="cost">{esc(_cost(run))}</dd></div>'
    skipped = (f' · <span class="miss skipped">{counts[SKIPPED]} skipped</span>' if counts[SKIPPED] else "")
    cells += (f'<div><dt>coverage</dt><dd id="coverage" data-failed="{counts[FAILED]}" '
              f'data-undefined="{counts[UNDEFINED]}" data-unavailable="{counts[UNAVAILABLE]}" '
              f'data-skipped="{counts[SKIPPED]}"{_unhealthy_cover(run, scored)}'
              f'<br>{_tally(counts[FAILED], FAILED, "failed")} · '
              f'{_tally(counts[UNDEFINED], UNDEFINED, "undefined")}{skipped} · '
              f'{_tally(len(run.missing.unavailable), UNAVAILABLE, "metrics unavailable")}</dd></div>')
    return (f'<dl class="meta">{cells}</dl>'
            f'<p class="legend">failed: a judgment or model call went wrong for that value; undefined: the statistic '
            'does not exist for those values (a spread over one run, α with no variation); skipped: a query left out '
            'on purpose (fewer answered runs than min_runs); unavailable: the metric cannot be computed here at all. '
            'None of them is ever counted as a score, nor as a failure.</p>'
            f'{_why_missing(run, UNDEFINED)}{_why_missing(run, SKIPPED)}{_unavailable_note(run)}{_health(run)}')


def _tally(n: int, which: str, label: str) -> str:
    """A count of missing values in the colour of its kind; a zero in a neutral one (nothing went wrong)."""
    return f'<span class="miss {which if n else "zero"}">{n} {label}</span>'


def _unhealthy_cover(run: RunData, scored: int) -> str:
    """The coverage line's count of fully scored outputs, with those resting on an unhealthy judge task apart (the
    rest of the ``dd`` tag's attributes first)."""
    shaky = run.unhealthy
    n = run.items.n_outputs
    if not shaky:
        return f'>{scored} / {n} outputs fully scored'
    resting, resting_full = run.items.resting_on(sorted(shaky))
    tasks = ", ".join(dict.fromkeys(t for found in shaky.values() for t in found))
    return (f' data-unhealthy="{resting}">{scored - resting_full} / {n} outputs fully scored on a healthy judge'
            f'<br><span class="miss unhealthy">{resting} outputs hold values from an unhealthy judge task '
            f'({esc(tasks)}): counted apart</span>')


def _why_missing(run: RunData, which: str) -> str:
    """Where the header's undefined (or skipped) values are: the largest families, each with one reason."""
    ranked = run.missing.explain(which)
    if not ranked:
        return ""
    total = run.missing.total(which)
    parts = "; ".join(f'<b>{esc(name)}</b> {n} (e.g. “{esc(scrub_paths(reason))}”)' for name, n, reason in ranked)
    more = " …" if len(run.missing.why[which]) > len(ranked) else ""
    return f'<p class="legend" id="why-{which}">{total} {which}: {parts}{more}</p>'


def _health(run: RunData) -> str:
    """The injection probe's result when it ran on these results (first), then the judge-health panel
    (docs/judge-health.md); empty when the run had no judge."""
    from open_rag_eval.report.health import health_panel, injection_panel

    return injection_panel(run.directory) + health_panel(run.manifest, run.results)


def _without_health(summary: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The judge-health rates have their own panel; they are not metrics of the system."""
    return [s for s in summary if not is_health(str(s.get("metric", "")))]


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


def query_controls(metrics: Sequence[str], sort_label: str, shown: int) -> str:
    """The filter box, sort menu and failure toggle above a queries table (report.js drives them)."""
    options = "".join(f'<option value="{esc(m)}" data-lower-better="{int(lower_is_better(m))}">{sort_label} '
                      f'{esc(short_name(m))}</option>' for m in metrics)
    return ('<div class="controls"><input id="filter" type="search" placeholder="filter queries" '
            f'aria-label="filter queries"><select id="worst" aria-label="sort"><option value="">sort…</option>'
            f'{options}</select><label><input id="only-failed" type="checkbox"> with failures only</label>'
            f'<span class="muted"><span id="shown">{shown}</span> shown</span></div>')


def _queries_table(groups: list[tuple[str, str, list, Any]], metrics: Sequence[str]) -> str:
    head = "".join(f'<th class="num" data-sort="{esc(m)}" title="{esc(display_name(m))} ({esc(m)})">'
                   f'{esc(short_name(m))}</th>' for m in metrics)
    rows = []
    for index, (qid, query, runs, cross) in enumerate(groups, start=1):
        means = _query_means(runs)
        counts = missing_counts([*runs, cross])
        cells = "".join(f'<td class="num" data-key="{esc(m)}" data-v="{"" if means.get(m) is None else means[m]}">'
                        f'{fmt(means.get(m), 2)}</td>' for m in metrics)
        rows.append(f'<tr data-failed="{counts[FAILED]}"><td data-key="id" data-v="{esc(qid)}"><a class="open" '
                    f'href="#q-{index}">{esc(qid)}</a></td><td class="q">{esc(query)}</td>{cells}'
                    f'<td class="num" data-key="runs" data-v="{len(runs)}">{len(runs)}</td>'
                    f'<td class="num{" err" if counts[FAILED] else ""}" data-key="failed" data-v="{counts[FAILED]}">'
                    f'{counts[FAILED]}</td><td class="num muted" data-key="undefined" data-v="{counts[UNDEFINED]}">'
                    f'{counts[UNDEFINED]}</td><td class="num muted" data-key="skipped" data-v="{counts[SKIPPED]}">'
                    f'{counts[SKIPPED]}</td></tr>')
    controls = query_controls(metrics, "worst by", len(groups))
    # the columns a narrow screen shows first: the query, then its headline metrics; the counts after them
    return (f'{controls}{SCROLL_HINT}<div class="scroll"><table id="queries"><thead><tr><th data-sort="id">query id'
            f'</th><th>query</th>{head}<th class="num" data-sort="runs">runs</th><th class="num" data-sort="failed">'
            'failed</th><th class="num" data-sort="undefined">undef.</th><th class="num" data-sort="skipped">'
            'skipped</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>'
            '<p class="legend">Values are means over a query\'s runs. Click a column to sort; "worst by" puts '
            'the weakest queries first; click a query id to open its evidence below.</p>')


def _diagnosis(run: RunData) -> str:
    from open_rag_eval.diagnosis import diagnose, options_from_manifest, unchecked_summary

    means, refusals = run.items.run_means({m: s.get("mean") for m, s in run.stats.items()})
    options = options_from_manifest(run.manifest)
    found = diagnose(means, options, health=run.manifest.get("health"),  # an unhealthy judge is named first
                     unavailable={m: scrub_paths(why) for m, why in run.missing.unavailable.items()})
    hints = f'<li><span class="hint-area">judge</span>: {esc(found.judge)}</li>' if found.judge else ""
    hints += "".join(f'<li data-rule="{esc(f.rule)}"><span class="hint-area">{esc(f.area)}</span>: {esc(f.text)}'
                     f'{f" ({esc(f.uncertain)})" if f.uncertain else ""} <span class="muted">[{esc(f.rule)}; '
                     f'{esc(f.source)}]</span></li>' for f in found.findings)
    if refusals:
        hints += (f'<li><span class="hint-area">correct refusals</span>: {refusals} output(s) declined to answer '
                  'with no retrieved passage holding the answer (no UMBRELA grade 3); they are left out of '
                  'the share of declines above.</li>')
    failed = _coverage(run)[1][FAILED]
    if failed:
        hints += (f'<li><span class="hint-area">failures</span>: {failed} values failed (judgments or model calls '
                  'that went wrong); each query below gives the reasons. They are left out of the means, never '
                  'guessed.</li>')
    if not options.enabled:
        return '<p class="muted" id="hints">Diagnosis is off (diagnosis.enabled: false).</p>'
    unchecked = "".join(f"<li>{esc(line)}</li>" for line in unchecked_summary(found))
    unchecked = (f'<details id="unchecked"><summary>{len(found.unchecked)} rules could not be checked (their '
                 f'metrics are missing or have no value)</summary><ul>{unchecked}</ul></details>') if unchecked else ""
    return f'<ul class="hints" id="hints">{hints or "<li>no clear pattern</li>"}</ul>{unchecked}'


def _page(title: str, body: str) -> str:
    css = (_HERE / "report.css").read_text(encoding="utf-8")
    js = (_HERE / "report.js").read_text(encoding="utf-8").replace("</", "<\\/")
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "script-src 'unsafe-inline'; img-src data:\">"
            f'<title>{esc(title)}</title><style>{css}</style></head>'
            f'<body><main>{body}</main><script>{js}</script></body></html>\n')


def _incomplete_banner(incomplete: Sequence[dict[str, Any]]) -> str:
    """An incomplete run (a judged metric failed for every output) says so first, with the commonest reason."""
    if not incomplete:
        return ""
    items = "".join(f'<li><b>{esc(item.get("metric"))}</b> failed for all {esc(item.get("n_failed"))} rows: '
                    f'{esc(scrub_paths(str(item.get("reason") or "no reason recorded")))}</li>' for item in incomplete)
    return (f'<div class="banner" id="incomplete"><b>Incomplete run</b>: these judged metrics failed for every '
            f'output (failed, not unavailable: the judge did not give a usable reply). Their means are missing, '
            f'not zero.<ul>{items}</ul></div>')


def _columns(run: RunData) -> list[str]:
    headline, _ = run.headline()
    per_output = run.items.per_output
    return [m for m in headline if m in per_output] or [m for m in KEY_METRICS if m in per_output]


def _drill(groups: Sequence[tuple[str, str, list, Any]], columns: Sequence[str], manifest: dict[str, Any]) -> str:
    """Every query in full; its hints use the run's configured diagnosis (thresholds, disabled rules)."""
    from open_rag_eval.diagnosis import options_from_manifest

    options = options_from_manifest(manifest)
    return "".join(render_query(i, qid, q, runs, cross, _query_means(runs), columns, options)
                   for i, (qid, q, runs, cross) in enumerate(groups, start=1))


def _render(run: RunData, groups: Sequence[tuple[str, str, list, Any]], columns: Sequence[str],
            every_query: str = "") -> str:
    """The page: ``groups`` are the queries shown in full (all of them, or the chosen ones of a paged report)."""
    headline, targets = run.headline()
    banner = ('<p class="banner">The judge was simulated: these numbers test the pipeline, they are not real '
              'judgments.</p>') if run.simulated else ""
    banner += _incomplete_banner(run.manifest.get("incomplete") or [])
    body = (f'<h1>open-rag-eval report</h1>{banner}{headline_panel(run.stats, headline, targets, run.missing, run.unhealthy)}'
            f'{_header(run)}'
            f'<h2>Diagnosis</h2>{_diagnosis(run)}'
            f'<h2>All metrics</h2><p class="legend">Grouped by family; click a family to open it. Counts of '
            f'what went wrong are noted on the family.</p>'
            f'{metric_groups(_without_health(run.summary), run.items.columns(), run.missing)}'
            f'{every_query}<h2>Queries</h2>{_queries_table(list(groups), columns)}'
            f'<h2>Drill-down</h2>{_drill(groups, columns, run.manifest)}')
    return _page("open-rag-eval report", body)


def render_report(output_dir: Path) -> str:
    """The report's HTML for one output directory, every query in full (the whole run is read into memory; see
    ``write_report`` for a run of any size)."""
    run = load_run(Path(output_dir))
    try:
        return _render(run, _grouped(run.outputs, run.queries), _columns(run))
    finally:
        run.items.close()
