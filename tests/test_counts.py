"""Counts that add up: failed, undefined, unavailable and skipped values are counted apart, and alike in summary.csv,
results.json, the report's header, its per-query table and its drill-down. n_failed holds failures only: an
undefined statistic or a query skipped for too few runs is no failure."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.core.types import EvalResult, Score
from open_rag_eval.report.html_report import render_report
from open_rag_eval.run.results import write_results
from open_rag_eval.run.status import run_status
from tests.generation_fakes import output

FAILED = "grade of passage d0 failed: judge call failed: 503 from the judge"
UNDEFINED = "alpha is undefined: no item has two or more labels"
SKIPPED = "skipped: 1 answered run(s), min_runs is 2"
UNAVAILABLE = "HHEM weights unavailable (not in the cache)"


def _scores() -> list[Score]:
    return [
        Score(query_id="q1", run=1, metric="umbrela.mean", value=2.0),
        Score(query_id="q2", run=1, metric="umbrela.mean", error=FAILED),
        Score(query_id="q3", run=1, metric="umbrela.mean", error=FAILED),
        Score(query_id="q1", run=1, metric="hhem.score", error=UNAVAILABLE),
        Score(query_id="q2", run=1, metric="hhem.score", error=UNAVAILABLE),
        Score(query_id="q3", run=1, metric="hhem.score", error=UNAVAILABLE),
        Score(query_id="q1", run=None, metric="consistency.rougeL", value=0.5),
        Score(query_id="q2", run=None, metric="consistency.rougeL", error=SKIPPED),
        Score(query_id="q3", run=None, metric="consistency.rougeL", error=SKIPPED),
        Score(query_id="q1", run=None, metric="consistency.judge.umbrela.alpha", error=UNDEFINED),
        Score(query_id="q2", run=None, metric="consistency.judge.umbrela.alpha", error=UNDEFINED),
        Score(query_id="q3", run=None, metric="consistency.judge.umbrela.alpha", error=SKIPPED),
    ]


def test_each_kind_is_counted_apart_in_every_view(tmp_path: Path) -> None:
    outputs = [output("q1"), output("q2"), output("q3")]
    scores = _scores()
    summary = write_results(tmp_path, outputs, EvalResult(scores=scores), RunInfo(simulated=True))
    (tmp_path / "manifest.json").write_text(json.dumps(run_status(summary, scores).manifest_fields()),
                                            encoding="utf-8")
    expected = {  # metric: (n, n_failed, n_undefined, n_unavailable, n_skipped, status)
        "umbrela.mean": ("1", "2", "0", "0", "0", "ok"),
        "hhem.score": ("0", "0", "0", "3", "0", "unavailable"),
        "consistency.rougeL": ("1", "0", "0", "0", "2", "ok"),
        "consistency.judge.umbrela.alpha": ("0", "0", "2", "0", "1", "undefined"),
    }
    rows = {r["metric"]: r for r in csv.DictReader((tmp_path / "summary.csv").open(encoding="utf-8"))}
    keys = ("n", "n_failed", "n_undefined", "n_unavailable", "n_skipped", "status")
    assert {m: tuple(rows[m][k] for k in keys) for m in expected} == expected
    document = json.loads((tmp_path / "results.json").read_text(encoding="utf-8"))
    assert {s["metric"]: tuple(str(s[k]) for k in keys) for s in document["summary"]} == expected
    # an undefined judged metric does not make the run incomplete; failures alone would
    assert run_status(summary, scores).complete

    page = render_report(tmp_path)
    coverage = re.search(r'<dd id="coverage"[^>]*>', page)
    assert coverage is not None
    assert 'data-failed="2" data-undefined="2" data-unavailable="3" data-skipped="3"' in coverage.group(0)
    assert "2 undefined</span> · <span class=\"miss skipped\">3 skipped</span>" in page
    why = re.search(r'<p class="legend" id="why-undefined">(.*?)</p>', page)
    assert why is not None and why.group(1).startswith("2 undefined: <b>consistency.judge</b> 2 (e.g.")
    assert 'id="why-skipped">3 skipped: <b>spread</b>' not in page  # rougeL is no spread: its own family
    assert 'id="why-skipped">3 skipped: <b>consistency</b> 2' in page
    table = {m.group(1): (m.group(2), m.group(3), m.group(4)) for m in re.finditer(
        r'data-v="(q\d)">.*?data-key="failed" data-v="(\d+)".*?data-key="undefined" data-v="(\d+)".*?'
        r'data-key="skipped" data-v="(\d+)"', page)}
    assert table == {"q1": ("0", "1", "0"), "q2": ("1", "1", "1"), "q3": ("1", "0", "2")}
    drill = {m.group(1): m.group(2, 3, 4) for m in re.finditer(
        r'data-qid="(q\d)" data-failed="(\d+)" data-undefined="(\d+)" data-skipped="(\d+)"', page)}
    assert drill == table
    assert sum(int(f) for f, _, _ in table.values()) == 2 and sum(int(s) for _, _, s in table.values()) == 3
