"""report.html: self-contained, escaped, tolerant of missing sections; diagnosis hints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.core.errors import InputError
from open_rag_eval.report import render_report, write_report
from open_rag_eval.report.hints import diagnose




def test_write_report_is_self_contained_and_escaped(results: Path) -> None:
    path = write_report(results)
    assert path == results / "report.html"
    page = path.read_text(encoding="utf-8")
    assert page.count("<script") == 1  # ours; the passage's script is text
    assert "&lt;script&gt;window.__pwned = 1;" in page
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", page)  # nothing loaded from a network
    assert '<span class="badge sim">SIMULATED</span>' in page
    assert "none (simulated judge) · 57 calls, 12 cached" in page
    assert "5 / 6 outputs fully scored" in page
    assert "OPENAI_API_KEY" not in page  # config is not shown at all


def test_drilldown_content_of_a_known_query(results: Path) -> None:
    page = render_report(results)
    q1 = page[page.index('id="q-1"'):page.index('id="q-2"')]
    run1 = q1[q1.index('data-run="1"'):q1.index('data-run="2"')]
    assert re.findall(r'class="grade g(\d)"', run1) == ["3", "0", "3"]
    assert re.findall(r'class="cite (\w+)" data-label="(\w+)"', run1) == [("FS", "FS"), ("PS", "PS")]
    assert '<td class="vital">vital</td><td class="asg-support">support</td>' in run1
    assert '<b class="hhem">0.91</b>' in run1
    q2 = page[page.index('id="q-2"'):page.index('id="q-3"')]
    assert 'data-label="fabricated"' in q2
    q3 = page[page.index('id="q-3"'):page.index('id="q-4"')]
    assert "<b>hhem.score</b>: HHEM model weights not found" in q3
    assert 'class="grade gna"' in q3 and "(unparsable reply)" in q3
    q4 = page[page.index('id="q-4"'):]
    hints = q4[q4.index('<ul class="hints">'):q4.index("</ul>")]
    assert "declined to answer" in q4 and "a correct refusal" in hints  # nothing retrieved holds an answer
    assert "retrieval" not in hints


def test_summary_and_diagnosis(results: Path) -> None:
    page = render_report(results)
    row = page[page.index('<tr data-metric="hhem.score">'):]
    row = row[:row.index("</tr>")]
    assert '<td class="num mean">0.646</td><td class="num">0.19 – 1.1</td><td class="num">5</td>' in row
    assert '<span class="miss failed">1 failed</span>' in row
    assert "2 values failed" in page
    assert "citations to passages that were not retrieved (0.17 per answer)" in page


def test_tolerates_a_golden_only_run_without_judge_or_results_json(results: Path) -> None:
    (results / "results.json").unlink()
    manifest = json.loads((results / "manifest.json").read_text())
    for key in ("judge", "accounting", "simulated"):
        manifest.pop(key)
    (results / "manifest.json").write_text(json.dumps(manifest))
    page = render_report(results)
    assert 'id="judge">none' in page and "SIMULATED" not in page
    assert '<dd id="cost">–</dd>' in page
    assert 'id="q-4"' in page  # queries still listed, from results.csv


def _query_hints(page: str, number: int) -> str:
    """The text of query ``number``'s hint list in the drill-down ('' when it has none)."""
    end = page.find(f'id="q-{number + 1}"')
    block = page[page.index(f'id="q-{number}"'):end if end > 0 else len(page)]
    block = block[:block.index("<section")]
    return re.sub(r"<[^>]+>", "", block[block.index('<ul class="hints">'):]) if 'class="hints"' in block else ""


def test_per_query_hints_use_the_runs_configured_thresholds(results: Path) -> None:
    default = render_report(results)
    assert "citations to passages that were not retrieved (0.50 per answer)" in _query_hints(default, 2)  # > 0.0
    assert "HHEM" not in _query_hints(default, 1)  # its mean over runs, 0.88, is not under 0.5
    assert "a correct refusal" in _query_hints(default, 4)
    manifest = json.loads((results / "manifest.json").read_text())
    manifest["config"]["diagnosis"] = {"thresholds": {"trec_fabricated_citations.fabricated": 0.6,
                                                      "trec_hhem.hhem": 0.95},
                                       "disable": ["trec_declines"]}
    (results / "manifest.json").write_text(json.dumps(manifest))
    configured = render_report(results)
    q2 = _query_hints(configured, 2)
    assert "citations to passages" not in q2 and "low HHEM factual consistency (0.53)" in q2  # 0.50 <= 0.6; 0.53
    assert "low HHEM factual consistency (0.88)" in _query_hints(configured, 1)  # 0.88 < 0.95
    assert _query_hints(configured, 4) == ""  # the rule is disabled
    manifest["config"]["diagnosis"] = {"enabled": False}
    (results / "manifest.json").write_text(json.dumps(manifest))
    assert [_query_hints(render_report(results), n) for n in (1, 2, 3, 4)] == ["", "", "", ""]


def test_hints_follow_the_documented_patterns() -> None:
    assert [a for a, _ in diagnose({"umbrela.mean": 0.6})] == ["retrieval"]
    assert [a for a, _ in diagnose({"umbrela.mean": 2.1, "nuggets.vital_strict": 0.3})] == ["generation"]
    assert [a for a, _ in diagnose({"citation.precision": 0.4, "hhem.score": 0.3})] == ["citations", "support"]
    assert diagnose({"umbrela.mean": 1.2, "nuggets.vital_strict": 0.3, "citation.precision": 0.9, "hhem.score": 0.9}) == []
    area, text = diagnose({"no_answer.answered": 0.7, "umbrela.mean": 2.0})[0]
    assert area == "no answer" and text.startswith("30% of answers decline") and "too cautious" in text


def test_report_command(results: Path, tmp_path: Path) -> None:
    (results / "report.html").unlink(missing_ok=True)
    assert main(["report", str(results)]) == 0
    assert (results / "report.html").stat().st_size > 10_000
    assert main(["report", str(tmp_path / "missing")]) == 3
    with pytest.raises(InputError):
        render_report(tmp_path / "missing")
