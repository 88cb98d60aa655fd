"""The report comparing two or more results folders (``open-rag-eval report A B [C ...]``).

The first folder is the baseline. For each later one: its headline metrics beside the baseline's, and the
paired difference over the queries both have (``report.compare``: bootstrap CI, permutation p, Holm within the
headline metrics); when runs were evaluated with people's labels, their corrected means and, when the baseline was
too, the corrected differences (``run.corrected``: what ``compare`` writes to compare_corrected.csv). Then every
metric by family (folded) and a per-query table of the headline metrics.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from open_rag_eval.core.errors import InputError
from open_rag_eval.health.rests import UNHEALTHY
from open_rag_eval.report.compare import Comparison, compare
from open_rag_eval.report.drilldown import esc, fmt
from open_rag_eval.report.headline import headline_metrics, report_options, status, target_for
from open_rag_eval.report.html_report import RunData, _cost, _page, _relative, query_controls
from open_rag_eval.report.loader import scan_results
from open_rag_eval.report.paged import _Index, _load, _SetAside
from open_rag_eval.core.catalogue import display_name, family, family_title, is_tally, lower_is_better, short_name
from open_rag_eval.report.summary import no_value, value_text
from open_rag_eval.run.corrected import CORRECTED_FILE, CorrectedDifference, corrected_differences, read_corrected

__all__ = ["render_comparison", "write_comparison"]


def _labels(runs: Sequence[RunData]) -> list[str]:
    """Folder names, made unique with their parent's name (never a whole path)."""
    labels = [r.label for r in runs]
    for i, run in enumerate(runs):
        if labels.count(run.label) > 1:
            labels[i] = f"{run.directory.resolve().parent.name}/{run.label}"
    return [label if labels.count(label) == 1 else f"{label} #{i + 1}" for i, label in enumerate(labels)]


def _runs_table(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    rows = []
    for letter, (run, label) in enumerate(zip(runs, labels)):
        judge = (run.manifest.get("judge") or {}).get("model") or "none"
        badge = ' <span class="badge sim">SIMULATED</span>' if run.simulated else ""
        role = "baseline" if letter == 0 else "candidate"
        rows.append(f'<tr data-run="{esc(label)}"><td><b>{chr(65 + letter)}</b> {esc(label)} '
                    f'<span class="muted">({role})</span></td>'
                    f'<td>{esc(_relative((run.manifest.get("input") or {}).get("path")))}</td>'
                    f'<td>{esc(run.manifest.get("created") or "–")}</td><td>{esc(judge)}{badge}</td>'
                    f'<td class="num">{run.items.n_outputs}</td><td>{esc(_cost(run))}</td></tr>')
    return ('<div class="scroll"><table id="runs"><thead><tr><th>run</th><th>evaluated</th><th>created</th>'
            '<th>judge</th><th class="num">outputs</th><th>cost</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def _diff(row: dict[str, Any] | None, metric: str, reason: str | None) -> str:
    if row is None:
        return f'<div class="diff muted">not compared{": " + esc(reason) if reason else ""}</div>'
    verdict = "better" if row["better"] else "worse" if row["verdict"] == "REGRESSION" else "same"
    text = row["verdict"] + (" (better)" if row["better"] else "")  # the gates' words (scoring.verdict)
    scale = 100.0 if metric == "no_answer.answered" else 1.0
    unit = " pts" if scale == 100.0 else ""
    return (f'<div class="diff {verdict}" data-verdict="{verdict}">Δ {scale * row["diff"]:+.2f}{unit} '
            f'<span class="muted">[{scale * row["ci95_low"]:+.2f}, {scale * row["ci95_high"]:+.2f}] · '
            f'p {row["p_value"]:.3g} · n {row["n"]}</span> <b title="{esc(row["reason"])}">{esc(text)}</b></div>')


Differences = dict[str, CorrectedDifference]  # metric -> a later run's corrected difference from the baseline


def _corrected_differences(directories: Sequence[Path]) -> list[Differences | None]:
    """Per later run, its corrected differences from the baseline when both runs were evaluated with people's
    labels (corrected.json in both folders); None when either was not."""
    base = read_corrected(Path(directories[0]))
    found: list[Differences | None] = []
    for directory in directories[1:]:
        other = read_corrected(Path(directory))
        found.append(None if base is None or other is None
                     else {d.metric: d for d in corrected_differences(base, other)})
    return found


def _interval(value: float, low: float, high: float) -> str:
    return f"{value:+.3f} [{low:+.3f}, {high:+.3f}]"


def _corrected(metric: str, stat: dict[str, Any], diff: CorrectedDifference | None) -> str:
    """A cell's corrected mean (people's labels) and, for a later run, its corrected difference from the baseline."""
    mine = stat.get("corrected") or {}
    text = ""
    if mine.get("corrected_mean") is not None:
        text = (f'<div class="corrected">corrected {value_text(metric, mine["corrected_mean"])} '
                f'[{value_text(metric, mine["corrected_ci95_low"])}, {value_text(metric, mine["corrected_ci95_high"])}]'
                '</div>')
    if diff is not None and diff.diff is not None:
        text += (f'<div class="corrected">corrected Δ {_interval(diff.diff.value, diff.diff.low, diff.diff.high)} '
                 f'<span class="muted">· corrected with people\'s labels on {diff.n_labelled} queries</span></div>')
    elif diff is not None:
        text += f'<div class="corrected muted">not corrected: {esc(diff.note)}</div>'
    return text


def _corrected_table(labels: Sequence[str], found: Sequence[Differences | None], labelled: bool) -> str:
    """Every corrected difference of each later run from the baseline (compare_corrected.csv's rows), and why a run
    has none when some of the runs (``labelled``) were evaluated with people's labels."""
    rows, missing = [], [chr(66 + i) for i, diffs in enumerate(found) if diffs is None]
    for i, diffs in enumerate(found):
        for d in (diffs or {}).values():
            cell = "–" if d.diff is None else _interval(d.diff.value, d.diff.low, d.diff.high)
            p = "–" if d.p_value is None else f"{d.p_value:.3g}"
            rows.append(f'<tr data-metric="{esc(d.metric)}"><td>{chr(66 + i)} {esc(labels[i + 1])}</td>'
                        f'<td>{esc(d.metric)}</td><td class="num">{cell}</td><td class="num">{p}</td>'
                        f'<td class="num">{"–" if d.judge_diff is None else f"{d.judge_diff:+.3f}"}</td>'
                        f'<td class="num">{d.n_labelled}</td><td class="num">{d.n_unlabelled}</td>'
                        f'<td>{esc(d.note)}</td></tr>')
    note = (f'<p class="legend" id="not-corrected">No corrected difference for run {", ".join(missing)}: '
            f'{"it was" if len(missing) == 1 else "they were"} not evaluated with people\'s labels, or the baseline '
            'was not (eval --labels).</p>' if missing and labelled else "")
    if not rows:
        return note
    return ('<h2>Corrected differences</h2><div class="scroll"><table id="corrected-compare"><thead><tr><th>run</th>'
            '<th>metric</th><th class="num">corrected Δ [95% CI]</th><th class="num">p</th>'
            '<th class="num">judge Δ</th><th class="num">labelled</th><th class="num">unlabelled</th><th>note</th>'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>{note}'
            '<p class="legend">Each later run against A, corrected with people\'s labels (PPI++ on the per-query '
            'differences, docs/calibration.md): the labelled queries are those labelled in both runs, the judge\'s '
            'difference on the others is the prediction; judge Δ is the judge\'s own difference over the same '
            'queries.</p>')


def _headline_table(runs: Sequence[RunData], labels: Sequence[str], metrics: Sequence[str],
                    targets: dict[str, float], comparisons: Sequence[Comparison],
                    corrected: Sequence[Differences | None]) -> str:
    head = "".join(f'<th>{chr(65 + i)} {esc(label)}</th>' for i, label in enumerate(labels))
    rows = []
    for metric in metrics:
        target = target_for(metric, targets)
        cells = []
        for i, run in enumerate(runs):
            stat = run.stats.get(metric) or {}
            mean = stat.get("mean")
            ci = (f'<div class="muted">[{value_text(metric, stat["ci95_low"])}, '
                  f'{value_text(metric, stat["ci95_high"])}]</div>' if stat.get("ci95_low") is not None else "")
            diff, fixed = "", None
            if i > 0:
                found = next((r for r in comparisons[i - 1].rows if r["metric"] == metric), None)
                diff = _diff(found, metric, comparisons[i - 1].skipped.get(metric))
                fixed = (corrected[i - 1] or {}).get(metric)
            shown = value_text(metric, mean) if mean is not None else no_value(metric, run.missing)
            shaky = run.unhealthy.get(metric) if mean is not None else None  # never green on a sick judge
            state = "unhealthy" if shaky else status(metric, mean, target)
            sick = f'<div class="sick">{UNHEALTHY} ({esc(", ".join(shaky))})</div>' if shaky else ""
            fixed_text = _corrected(metric, stat, fixed)
            cells.append(f'<td class="cmp {state}"><b>{shown}</b>{sick}{ci}{diff}{fixed_text}</td>')
        sign = "≤" if lower_is_better(metric) else "≥"
        goal = f"target {sign} {value_text(metric, target)}" if target is not None else "no target"
        rows.append(f'<tr data-metric="{esc(metric)}"><td><span class="mname">{esc(display_name(metric))}</span> '
                    f'<span class="dir">{"↓" if lower_is_better(metric) else "↑"}</span><div class="muted">'
                    f'{esc(metric)} · {goal}</div></td>{"".join(cells)}</tr>')
    return (f'<div class="scroll"><table id="headline-compare"><thead><tr><th>metric</th>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>'
            '<p class="legend">Each later run against A (the baseline) over the queries both have, a query\'s value '
            'being the mean over its runs: Δ with its 95% bootstrap CI and permutation p-value, and the verdict '
            '<code>compare</code> and the gates give: REGRESSION (a drop significant at 0.05 after Holm correction '
            'across the metrics of this table, or whose whole CI is a drop), INCONCLUSIVE (a drop the test cannot '
            'confirm with these queries), PASS (no drop); "better" when significantly better. Cell colour: '
            'the run\'s value against the metric\'s target; grey with "judge unhealthy": the judge task it rests on '
            'failed its health checks in that run, so no colour is given.</p>')


def _families(runs: Sequence[RunData], labels: Sequence[str]) -> str:
    metrics: dict[str, None] = {}
    for run in runs:
        metrics.update(dict.fromkeys(m for m in run.stats if not is_tally(m)))
    groups: dict[str, list[str]] = {}
    for metric in metrics:
        groups.setdefault(family(metric), []).append(metric)
    head = "".join(f'<th class="num">{chr(65 + i)}</th>' for i in range(len(labels)))
    sections = []
    for name, names in sorted(groups.items(), key=lambda item: item[0] == "spread"):
        body = "".join(f'<tr data-metric="{esc(m)}"><td>{esc(m)}</td><td class="num"><span class="dir">'
                       f'{"↓" if lower_is_better(m) else "↑"}</span></td>'
                       + "".join(f'<td class="num">{fmt((run.stats.get(m) or {}).get("mean"))}</td>' for run in runs)
                       + "</tr>" for m in names)
        sections.append(f'<details class="family" data-family="{esc(name)}"><summary><b>{esc(family_title(name))}'
                        f'</b> <span class="muted">· {len(names)} metrics</span></summary><div class="scroll">'
                        f'<table class="metrics"><thead><tr><th>metric</th><th class="num">±</th>{head}</tr>'
                        f'</thead><tbody>{body}</tbody></table></div></details>')
    return f'<div id="families">{"".join(sections)}</div>'


def _queries(runs: Sequence[RunData], indexes: Sequence[_Index], metrics: Sequence[str]) -> str:
    means = [{m: index.means(run.items, m) for m in metrics} for run, index in zip(runs, indexes)]
    order = list(dict.fromkeys(q for index in indexes for q in index.ids))
    rows = []
    for qid in order:
        where = [index.position(qid) for index in indexes]
        query = next(index.text(p) for index, p in zip(indexes, where) if p is not None)
        failed = sum(index.failed_in_full(p) for index, p in zip(indexes, where) if p is not None)
        cells = []
        for metric in metrics:
            values = [None if p is None or math.isnan(m[metric][p]) else m[metric][p] for m, p in zip(means, where)]
            first, last = values[0], values[-1]
            delta = "" if first is None or last is None else last - first
            cells.append(f'<td class="num" data-key="{esc(metric)}" data-v="{delta}">'
                         f'{" → ".join(fmt(v, 2) for v in values)}</td>')
        rows.append(f'<tr data-failed="{failed}"><td data-key="id" data-v="{esc(qid)}">{esc(qid)}</td>'
                    f'<td class="q">{esc(query)}</td>{"".join(cells)}'
                    f'<td class="num" data-key="failed" data-v="{failed}">{failed}</td></tr>')
    head = "".join(f'<th class="num" data-sort="{esc(m)}" title="{esc(display_name(m))}">{esc(short_name(m))}</th>'
                   for m in metrics)
    controls = query_controls(metrics, "largest drop in", len(order))
    return (f'{controls}<div class="scroll"><table id="queries"><thead><tr><th data-sort="id">query id</th>'
            f'<th>query</th>{head}<th class="num" data-sort="failed">failed</th></tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div><p class="legend">Each cell: the query\'s mean in A → B '
            '(→ ...); sorting uses the change from the first run to the last.</p>')


def render_comparison(directories: Sequence[Path], *, seed: int = 0, resamples: int = 10_000) -> str:
    """The HTML page comparing two or more results folders (the first is the baseline). Each folder is read as a
    stream, as the report reads one (``report.paged``): its items set aside on disk, its values by metric."""
    with contextlib.ExitStack() as stack:
        runs, indexes = [], []
        for directory in map(Path, directories):
            if not directory.is_dir():
                raise InputError("no such results directory", file=str(directory))
            aside = _SetAside()
            stack.callback(aside.close)
            run, index = _load(directory, aside)
            stack.callback(run.items.close)
            runs.append(run)
            indexes.append(index)
        labels = _labels(runs)
        chosen, targets = report_options(runs[0].manifest)
        present = [m for run in runs for m in run.stats]
        metrics = headline_metrics(present, chosen or None)
        sets = []
        for directory in directories:
            sets.append(scan_results(Path(directory)))
            stack.callback(sets[-1].close)
        comparisons = [compare(sets[0], other, metrics, seed=seed, resamples=resamples) for other in sets[1:]]
        corrected = _corrected_differences(directories)
        labelled = any((Path(d) / CORRECTED_FILE).is_file() for d in directories)
        per_output = {m for run in runs for m in run.items.per_output}
        banner = ('<p class="banner">At least one of these runs used the simulated judge: its numbers test the '
                  'pipeline, they are not real judgments.</p>') if any(r.simulated for r in runs) else ""
        body = (f'<h1>open-rag-eval comparison</h1>{banner}'
                f'{_headline_table(runs, labels, metrics, targets, comparisons, corrected)}'
                f'{_corrected_table(labels, corrected, labelled)}'
                f'<h2>Runs</h2>{_runs_table(runs, labels)}'
                f'<h2>All metrics</h2>{_families(runs, labels)}'
                f'<h2>Queries</h2>{_queries(runs, indexes, [m for m in metrics if m in per_output])}')
        return _page("open-rag-eval comparison", body)


def write_comparison(directories: Sequence[Path], path: Path, **kwargs: Any) -> Path:
    """Write the comparison page to ``path`` (atomically) and return it."""
    from open_rag_eval.store.fileio import atomic_write_text

    atomic_write_text(Path(path), render_comparison(directories, **kwargs))
    return Path(path)
