"""HTML of one query's drill-down. It opens on the evidence of each run -- passages with UMBRELA grades, the answer
with a support badge per citation, nuggets with importance and assignment, the answer's claims with their verdicts
(generation evaluator), HHEM and no-answer -- and keeps every
score, failures (red), undefined statistics (grey) and consistency across runs folded below. A metric unavailable
for the whole run (no model weights) is said once in the report's header, not here.

Every piece of content goes through ``esc`` (passages and answers may contain HTML or script).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from open_rag_eval.report.hints import answer_evidence, diagnose
from open_rag_eval.core.missing import FAILED, SKIPPED, UNAVAILABLE, UNDEFINED, item_counts, kind, scrub_paths
from open_rag_eval.core.catalogue import short_name

if TYPE_CHECKING:
    from open_rag_eval.diagnosis.options import DiagnosisOptions

__all__ = ["KEY_METRICS", "esc", "fmt", "missing_counts", "render_query"]

KEY_METRICS = ("umbrela.mean", "nuggets.vital_strict", "citation.f1", "hhem.score", "no_answer.answered")


def esc(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}".rstrip("0").rstrip(".") if value != int(value) else f"{value:.0f}"
    return esc(value)


def _grade_badge(grade: Any) -> str:
    if grade is None:
        return '<span class="grade gna" title="no grade: the judgment failed">?</span>'
    return f'<span class="grade g{int(grade)}" title="UMBRELA grade {int(grade)}">{int(grade)}</span>'


_PARSE_NOTES = {"fallback": "read only through the parser's fallback", "echo": "the reply echoed the prompt's labels"}


def _parse_note(judgment: dict[str, Any]) -> str:
    """A mark on a judgment whose reply was a fallback or an echo (docs/judge-health.md); nothing otherwise."""
    parse = judgment.get("parse")
    if parse not in _PARSE_NOTES:
        return ""
    return f' <span class="muted parse" data-parse="{esc(parse)}">[{esc(parse)}: {esc(_PARSE_NOTES[parse])}]</span>'


def _passages(output: dict[str, Any]) -> str:
    grades = {g.get("passage_id"): g for g in (output.get("details", {}).get("umbrela") or {}).get("grades", [])}
    items = []
    for passage in output.get("passages") or []:
        grade = grades.get(passage.get("id"), {})
        reason = f' <span class="muted">({esc(grade.get("reason"))})</span>' if grade.get("reason") else ""
        items.append(f'<li data-pid="{esc(passage.get("id"))}">{_grade_badge(grade.get("grade"))}'
                     f'<span class="pid">{esc(passage.get("id"))}</span>{reason}{_parse_note(grade)}'
                     f'<div class="ptext">{esc(passage.get("text"))}</div></li>')
    if not items:
        return '<p class="muted">no passages</p>'
    return f'<h3>Passages (retrieval order, UMBRELA grade 0-3)</h3><ol class="passages">{"".join(items)}</ol>'


def _cite_badge(passage_id: str, judgment: dict[str, Any] | None) -> str:
    if judgment is None:
        label, css = "not judged", "unlabelled"
    elif judgment.get("fabricated"):
        label, css = "fabricated", "fabricated"
    elif judgment.get("label") in ("FS", "PS", "NS"):
        label = css = judgment["label"]
    else:
        label, css = "unparsed", "unlabelled"
    return (f'<span class="cite {css}" data-label="{esc(label)}" title="citation of {esc(passage_id)}: {esc(label)}">'
            f'[{esc(passage_id)}] {esc(label)}</span>{_parse_note(judgment or {})}')


def _answer(output: dict[str, Any]) -> str:
    statements = (output.get("details", {}).get("citation") or {}).get("statements")
    parts = statements if statements is not None else output.get("answer") or []
    if not parts:
        return f'<h3>Answer</h3><p class="stmt">{esc(output.get("answer_text")) or "<i>empty</i>"}</p>'
    lines = []
    for part in parts:
        judgments = {j.get("passage_id"): j for j in part.get("judgments") or []}
        badges = "".join(_cite_badge(c, judgments.get(c) if statements is not None else None)
                         for c in part.get("citations") or [])
        lines.append(f'<p class="stmt">{esc(part.get("text"))}{badges}</p>')
    legend = ('<p class="legend">Support of each citation: FS full, PS partial, NS none; fabricated = cites a '
              'passage that was not retrieved.</p>') if statements is not None else ""
    return f'<h3>Answer</h3>{"".join(lines)}{_sources_note(output)}{legend}'


def _sources_note(output: dict[str, Any]) -> str:
    """The answer's Sources section when it holds the answer's only citations (support is judged per statement)."""
    data = output.get("details", {}).get("citation") or {}
    if not data.get("sources_only"):
        return ""
    listed = "; ".join(str(entry) for entry in data.get("sources_entries") or [])
    return (f'<p class="legend sources-only">This answer cites only in its Sources section ({esc(listed)}): '
            'support is judged per statement, so every statement counts as uncited. Put the citation markers '
            'in the statements.</p>')


def _nuggets(output: dict[str, Any]) -> str:
    data = output.get("details", {}).get("nuggets") or {}
    nuggets = data.get("nuggets") or []
    if not nuggets:
        return ""
    rows = []
    for n in nuggets:
        importance = n.get("importance") or "–"
        flag = "" if n.get("importance_status", "ok") == "ok" else f' ({esc(n.get("importance_status"))})'
        assignment = n.get("assignment") or "failed"
        aflag = "" if n.get("assignment_status", "ok") == "ok" else f' ({esc(n.get("assignment_status"))})'
        rows.append(f'<tr><td>{esc(n.get("text"))}</td><td class="{"vital" if importance == "vital" else ""}">'
                    f'{esc(importance)}{flag}</td><td class="asg-{esc(assignment)}">{esc(assignment)}{aflag}</td></tr>')
    return ('<h3>Nuggets</h3><div class="scroll"><table class="nuggets"><thead><tr><th>nugget</th><th>importance</th>'
            f'<th>assignment</th></tr></thead><tbody>{"".join(rows)}</tbody></table></div>')


def _verdict(supported: Any) -> str:
    text = {True: "supported", False: "not supported"}.get(supported, "not judged")
    return f'<span class="verdict" data-supported="{esc(supported)}">{esc(text)}</span>'


def _claims(output: dict[str, Any]) -> str:
    """The answer's claims (generation evaluator): sentence, citations, verdict, the passages that support it."""
    data = output.get("details", {}).get("faithfulness") or {}
    claims = data.get("claims") or []
    if not claims:
        note = "the answer is a refusal: no claim to check" if data.get("refusal") else ""
        return f'<h3>Claims</h3><p class="muted claims-none">{esc(note)}</p>' if note else ""
    rows = []
    for claim in claims:
        cited = " ".join(f"[{esc(c)}]" for c in claim.get("citations") or []) or "–"
        support = " ".join(f"[{esc(s)}]" for s in claim.get("supporting") or []) or "–"
        by_citation = "yes" if claim.get("cited_supported") else "no"
        rows.append(f'<tr><td>{esc(claim.get("claim"))}</td><td class="num">{esc(claim.get("sentence"))}</td>'
                    f'<td>{cited}</td><td>{_verdict(claim.get("supported"))}</td><td>{support}</td>'
                    f'<td>{by_citation}</td></tr>')
    failed = data.get("verification_reason")
    note = f'<p class="errors">{esc(scrub_paths(str(failed)))}</p>' if failed else ""
    return ('<h3>Claims (faithfulness)</h3>' + note + '<div class="scroll"><table class="claims"><thead><tr><th>claim'
            '</th><th>sentence</th><th>cites</th><th>verdict</th><th>supported by</th><th>by its citation</th></tr>'
            f'</thead><tbody>{"".join(rows)}</tbody></table></div>')


def _criteria(output: dict[str, Any]) -> str:
    """The user's criteria (``type: criteria``): each one's grade on its scale, the judge's reason, how it was scored
    and, with ``evaluation_steps``, the steps the judge wrote for it."""
    rows = ((output.get("details") or {}).get("criteria") or {}).get("criteria") or []
    if not rows:
        return ""
    body = []
    for row in rows:
        grade = row.get("grade")
        shown = esc(row.get("error") or "") if grade is None else f"<b>{esc(grade)}</b> ({esc(row.get('scale'))})"
        steps = row.get("steps")
        steps_html = ("<details><summary>steps</summary><ol>" + "".join(f"<li>{esc(s)}</li>" for s in steps)
                      + "</ol></details>") if steps else ""
        body.append(f'<tr data-criterion="{esc(row.get("criterion"))}"><td>{esc(row.get("criterion"))}</td>'
                    f'<td>{shown}</td><td>{esc(row.get("reason") or "")}{steps_html}</td>'
                    f'<td class="muted">{esc(row.get("scoring") or "")}</td></tr>')
    return ('<h3>Your criteria</h3><div class="scroll"><table class="criteria"><thead><tr><th>criterion</th>'
            '<th>grade</th><th>the judge\'s reason</th><th>scored by</th></tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table></div>')


def _chips(scores: dict[str, Any]) -> str:
    chips = [f'<span class="chip" data-metric="{esc(m)}">{esc(m)} <b>{fmt(v)}</b></span>'
             for m, v in scores.items() if v is not None]
    return f'<div class="chips">{"".join(chips)}</div>' if chips else ""


def _facts(output: dict[str, Any]) -> str:
    details, scores, errors = output.get("details", {}), output.get("scores", {}), output.get("errors") or {}
    facts = []
    unavailable = kind(str(errors.get("hhem.score", ""))) == UNAVAILABLE
    if ("hhem.score" in scores or "hhem" in details) and not unavailable:
        hhem = details.get("hhem") or {}
        extra = f' (threshold {fmt(hhem.get("threshold"))}, {esc(hhem.get("backend"))})' if hhem else ""
        value = scores.get("hhem.score")
        shown = fmt(value) if value is not None else "failed (see below)"
        facts.append(f'<li>HHEM factual consistency: <b class="hhem">{shown}</b>{extra}</li>')
    if "no_answer" in details:
        label = (details["no_answer"] or {}).get("label")
        text = {"yes": "answered", "no": "declined to answer"}.get(label or "", "unknown (judgment failed)")
        facts.append(f'<li>No-answer check: <b class="no-answer" data-label="{esc(label)}">{esc(text)}</b></li>')
    return f'<ul class="facts">{"".join(facts)}</ul>' if facts else ""


def _reasons(errors: dict[str, str], which: str) -> list[str]:
    return [f"<li><b>{esc(m)}</b>: {esc(scrub_paths(str(r)))}</li>" for m, r in errors.items() if kind(str(r)) == which]


def _errors(errors: dict[str, str], output: dict[str, Any]) -> str:
    """Failures in red; undefined statistics apart, in grey; unavailable metrics are said once for the run."""
    failed = _reasons(errors, FAILED)
    if output.get("error"):
        failed.insert(0, f"<li><b>system output</b>: {esc(scrub_paths(str(output['error'])))}</li>")
    undefined, skipped = _reasons(errors, UNDEFINED), _reasons(errors, SKIPPED)
    html = f'<h4>Failures</h4><ul class="errors">{"".join(failed)}</ul>' if failed else ""
    if undefined:
        html += f'<h4>Undefined (not failures)</h4><ul class="undefined muted">{"".join(undefined)}</ul>'
    if skipped:
        html += f'<h4>Skipped (not failures)</h4><ul class="skipped muted">{"".join(skipped)}</ul>'
    return html


def missing_counts(items: Sequence[dict[str, Any] | None]) -> dict[str, int]:
    """Missing values of these rows by kind: failed (a failed system output counts once), undefined, skipped."""
    total = dict.fromkeys((FAILED, UNDEFINED, SKIPPED), 0)
    for item in items:
        counts = item_counts(item)
        total[FAILED] += counts[FAILED] + (1 if (item or {}).get("error") else 0)
        total[UNDEFINED] += counts[UNDEFINED]
        total[SKIPPED] += counts[SKIPPED]
    return total


def _count_label(counts: dict[str, int]) -> str:
    bits = [f'<span class="miss {k}">{n} {k}</span>' for k, n in counts.items() if n]
    return " · ".join(bits)


def _run(output: dict[str, Any]) -> str:
    errors = output.get("errors") or {}
    scores = output.get("scores") or {}
    counts = _count_label(missing_counts([output]))
    system_error = (f'<p class="errors">system output failed: {esc(scrub_paths(str(output["error"])))}</p>'
                    if output.get("error") else "")
    more = (f'<details class="more"><summary>Every score of this run ({sum(v is not None for v in scores.values())})'
            f'{" · " + counts if counts else ""}</summary>{_chips(scores)}{_errors(errors, {})}</details>')
    return (f'<section class="run" data-run="{esc(output.get("run"))}"><h3>Run {esc(output.get("run"))}'
            f' <span class="muted">{esc(scrub_paths(str(output.get("source") or "")))}</span></h3>{system_error}'
            f'{_facts(output)}{_passages(output)}{_answer(output)}{_nuggets(output)}{_claims(output)}{_criteria(output)}{more}</section>')


def _consistency(outputs: Sequence[dict[str, Any]], cross: dict[str, Any] | None, key: Sequence[str]) -> str:
    if len(outputs) < 2 and not cross:
        return ""
    metrics = [m for m in key if any((o.get("scores") or {}).get(m) is not None for o in outputs)]
    head = "".join(f'<th class="num">{esc(short_name(m))}</th>' for m in metrics)
    body = "".join(f'<tr><td>run {esc(o.get("run"))}</td>'
                   + "".join(f'<td class="num">{fmt((o.get("scores") or {}).get(m))}</td>' for m in metrics)
                   + "</tr>" for o in outputs)
    table = (f'<div class="scroll"><table class="across"><thead><tr><th>run</th>{head}</tr></thead>'
             f'<tbody>{body}</tbody></table></div>') if len(outputs) > 1 else ""
    scores = (cross or {}).get("scores") or {}
    counts = _count_label(missing_counts([cross]))
    return (f'<details class="more consistency"><summary>Consistency across runs and judge test-retest '
            f'({sum(v is not None for v in scores.values())} statistics){" · " + counts if counts else ""}</summary>'
            f'{table}{_chips(scores)}{_errors((cross or {}).get("errors") or {}, {})}</details>')


def render_query(index: int, query_id: str, query: str, outputs: Sequence[dict[str, Any]],
                 cross: dict[str, Any] | None, means: dict[str, float | None],
                 key: Sequence[str] = KEY_METRICS, options: DiagnosisOptions | None = None) -> str:
    """One ``<details>`` element opening on the evidence; ``means`` are the query's metric means over runs,
    ``key`` the metrics its one-line summary shows, ``options`` the run's diagnosis settings (thresholds, disabled
    rules) its hints follow (None: the defaults)."""
    counts = missing_counts([*outputs, cross])
    summary_bits = " · ".join(f"{short_name(m)} {fmt(means.get(m), 2)}" for m in key
                              if means.get(m) is not None)
    label = _count_label(counts)
    hints = "".join(f'<li><span class="hint-area">{esc(area)}</span>: {esc(text)}</li>'
                    for area, text in diagnose(means, evidence=answer_evidence(outputs), options=options))
    hint_html = f'<ul class="hints">{hints}</ul>' if hints else ""
    runs = "".join(_run(o) for o in outputs)
    return (f'<details class="query" id="q-{index}" data-qid="{esc(query_id)}" data-failed="{counts[FAILED]}" '
            f'data-undefined="{counts[UNDEFINED]}" data-skipped="{counts[SKIPPED]}"><summary><b>{esc(query_id)}</b> '
            f'{esc(query)} <span class="muted">· {len(outputs)} run(s) · {summary_bits}</span>'
            f'{" · " + label if label else ""}</summary>'
            f'<div class="qbody">{hint_html}{runs}{_consistency(outputs, cross, key)}</div></details>')
