"""The report's layout: headline panel with targets, families folded, tallies as notes, failed / undefined /
unavailable counted apart and consistently, relative paths only, histograms with axes, correct refusals."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from open_rag_eval.report import render_report
from open_rag_eval.report.headline import headline_metrics, status
from open_rag_eval.report.hints import answer_evidence, diagnose, run_means
from open_rag_eval.core.missing import FAILED, SKIPPED, UNAVAILABLE, UNDEFINED, kind, scrub_paths
from open_rag_eval.report.summary import histogram
from tests.conftest import RESULTS_FIXTURE as FIXTURE




def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")


def test_headline_comes_first_with_direction_targets_and_ci(results: Path) -> None:
    page = render_report(results)
    assert page.index('id="headline"') < page.index('class="meta"') < page.index('id="families"')
    cards = re.findall(r'<div class="card (\w+)" data-metric="([\w.@]+)"', page)
    # the fixture has no strict nugget score: the headline keeps the order of the defaults it has
    assert [m for _, m in cards] == ["umbrela.mean", "nuggets.weighted", "citation.f1", "hhem.score",
                                     "no_answer.answered"]
    states = dict((m, s) for s, m in cards)
    assert states["umbrela.mean"] == "good"  # 2.0 (fixture mean) >= 1.5
    card = page[page.index('data-metric="umbrela.mean" data-status'):]
    card = card[:card.index('</div></div>')]
    assert "↑" in card and "95% CI" in card and "target ≥ 1.50" in card


def test_config_targets_and_headline_recolour_the_panel(results: Path) -> None:
    def configure(manifest: dict) -> None:
        manifest["config"]["report"] = {"headline": ["citation.fabricated", "umbrela.mean"],
                                        "targets": {"umbrela.mean": 2.5, "citation.fabricated": 0.0}}

    _edit(results / "manifest.json", configure)
    page = render_report(results)
    cards = re.findall(r'<div class="card (\w+)" data-metric="([\w.@]+)"', page)
    assert cards == [("below", "citation.fabricated"), ("below", "umbrela.mean")]
    fabricated = page[page.index('data-metric="citation.fabricated" data-status'):]
    assert "↓" in fabricated[:400] and "target ≤ 0.00" in fabricated[:600]


def test_status_against_targets_follows_direction_and_range() -> None:
    assert status("umbrela.mean", 1.5, 1.5) == "good"
    assert status("umbrela.mean", 1.25, 1.5) == "near"  # a tenth of 0-3 is 0.3
    assert status("umbrela.mean", 1.1, 1.5) == "below"
    assert status("citation.f1", 0.65, 0.7) == "near" and status("citation.f1", 0.55, 0.7) == "below"
    assert status("citation.fabricated", 0.0, 0.0) == "good" and status("citation.fabricated", 0.5, 0.0) == "below"
    assert status("citation.f1", None, 0.7) == "none" and status("citation.f1", 0.5, None) == "none"
    present = ["umbrela.mean", "golden.ndcg@5", "golden.ndcg@10", "golden.ndcg@20", "golden.recall@100",
               "nuggets.vital_strict"]
    assert headline_metrics(present) == ["umbrela.mean", "nuggets.vital_strict", "golden.ndcg@10",
                                         "golden.recall@100"]
    # '@¹' passes str.isdigit but is no cutoff (int() raises on it): ignored, not a crash
    assert headline_metrics(["golden.ndcg@\u00b9", "golden.ndcg@\u0663", "golden.ndcg@5"]) == ["golden.ndcg@5"]


def test_families_are_folded_and_tallies_are_notes_not_rows(results: Path) -> None:
    page = render_report(results)
    families = re.findall(r'<details class="family" data-family="([\w.]+)">', page)  # no "open": folded
    assert families[:3] == ["umbrela", "nuggets", "citation"] and families[-1] == "spread"
    assert '<tr data-metric="citation.fabricated">' not in page  # a tally, not a row
    citation = page[page.index('data-family="citation"'):]
    summary = citation[:citation.index("</summary>")]
    assert 'class="tally warn" data-metric="citation.fabricated">1 fabricated citations' in summary


def _kinds_fixture(results: Path) -> None:
    def change(data: dict) -> None:
        q1 = data["outputs"][0]
        q1["scores"]["citation.f1"] = None
        q1["errors"]["citation.f1"] = "judge reply could not be parsed"
        for item in data["outputs"]:
            item["errors"]["lexical.x"] = "BERTScore model 'x' is not installed; install it with: pip install x"
        cross = data["queries"][0]
        cross["scores"]["consistency.judge.support.alpha"] = None
        cross["errors"]["consistency.judge.support.alpha"] = ("alpha is undefined: every judgment gave the same "
                                                              "label (no variation to compare against)")
        data["summary"].append({"metric": "consistency.judge.support.alpha", "mean": None, "n": 0, "n_failed": 2})

    _edit(results / "results.json", change)


def test_failed_undefined_unavailable_are_counted_apart_and_consistently(results: Path) -> None:
    _kinds_fixture(results)
    page = render_report(results)
    coverage = re.search(r'id="coverage" data-failed="(\d+)" data-undefined="(\d+)" data-unavailable="(\d+)"', page)
    assert coverage is not None
    failed, undefined, unavailable = map(int, coverage.groups())
    assert (failed, undefined, unavailable) == (3, 1, 6)  # q1's citation + q3's two HHEM; alpha; 6 outputs x 1
    table_failed = sum(map(int, re.findall(r'data-key="failed" data-v="(\d+)"', page)))
    table_undefined = sum(map(int, re.findall(r'data-key="undefined" data-v="(\d+)"', page)))
    drill_failed = sum(map(int, re.findall(r'<details class="query" [^>]*data-failed="(\d+)"', page)))
    drill_undefined = sum(map(int, re.findall(r'<details class="query" [^>]*data-undefined="(\d+)"', page)))
    assert table_failed == drill_failed == failed and table_undefined == drill_undefined == undefined
    assert "4 / 6 outputs fully scored" in page
    # the unavailable metric is said once, never per output
    assert page.count("is not installed; install it with") == 1
    assert "<b>lexical.x</b>" in page[page.index('id="unavailable"'):page.index("<h2>Diagnosis")]
    # alpha with no variation reads "undefined", never 0
    alpha = page[page.index('<tr data-metric="consistency.judge.support.alpha">'):]
    alpha = alpha[:alpha.index("</tr>")]
    assert '<td class="num mean"><span class="miss undefined">undefined</span></td>' in alpha
    q1 = page[page.index('id="q-1"'):page.index('id="q-2"')]
    assert '<span class="miss failed">1 failed</span>' in q1[:q1.index("</summary>")]
    assert "Undefined (not failures)" in q1 and "alpha is undefined" in q1


def test_reason_kinds() -> None:
    assert kind("skipped: 1 answered run(s), min_runs is 2") == SKIPPED  # counted apart, never as failed
    assert kind("cv is undefined: the mean is 0") == UNDEFINED
    assert kind("no relevant documents") == UNDEFINED
    assert kind("HHEM weights unavailable (not in the cache)") == UNAVAILABLE
    assert kind("the environment variable VECTARA_KEY holding the Vectara API key is not set") == UNAVAILABLE
    assert kind("judge reply was empty") == FAILED and kind("something new") == FAILED


def test_no_absolute_path_in_the_report(results: Path) -> None:
    _edit(results / "manifest.json", lambda m: m["input"].update(path="/home/someone/project/data/answers.csv"))

    def change(data: dict) -> None:
        data["outputs"][0]["errors"]["citation.f1"] = "cannot read /home/someone/project/prompts/x.txt: gone"
        data["outputs"][0]["scores"]["citation.f1"] = None

    _edit(results / "results.json", change)
    page = render_report(results)
    assert "/home/someone" not in page
    assert "<dd>answers.csv</dd>" in page and "cannot read .../x.txt: gone" in page
    assert scrub_paths("see C:\\Users\\me\\a.csv or http://host/a/b") == "see .../a.csv or http://host/a/b"


def test_histogram_has_axes_and_range() -> None:
    svg = histogram([0.0, 0.5, 0.5, 1.0], "citation.f1")
    assert svg.count('class="axis"') == 2
    labels = re.findall(r"<text[^>]*>([^<]+)</text>", svg)
    assert labels == ["2", "0", "0", "1"]  # tallest bin, zero, range low, range high
    assert 'aria-label="4 values from 0 to 1; tallest bin 2"' in svg
    assert "0</text>" in histogram([0.0, 3.0], "umbrela.mean") and ">3</text>" in histogram([3.0], "umbrela.mean")


def test_a_correct_refusal_is_never_called_a_retrieval_problem() -> None:
    declined = {"no_answer.answered": 0.0, "umbrela.mean": 0.4}
    assert [a for a, _ in diagnose(declined)] == ["no answer"]
    assert "correct refusal" in diagnose(declined)[0][1]
    # graded evidence decides over the mean: a 3 among the passages means the answer was there to give
    area, text = diagnose({"no_answer.answered": 0.0, "umbrela.mean": 1.0}, evidence=True)[0]
    assert area == "no answer" and "too cautious" in text
    assert "correct refusal" in diagnose({"no_answer.answered": 0.0, "umbrela.mean": 1.2}, evidence=False)[0][1]
    outputs = [{"scores": {"no_answer.answered": 0.0}, "details": {"umbrela": {"grades": [{"grade": 1}, {"grade": 0}]}}},
               {"scores": {"no_answer.answered": 1.0}, "details": {"umbrela": {"grades": [{"grade": 3}]}}},
               {"scores": {"no_answer.answered": 0.0}, "details": {"umbrela": {"grades": [{"grade": 2}]}}}]
    assert answer_evidence(outputs[:1]) is False and answer_evidence(outputs[1:2]) is True
    assert answer_evidence(outputs[2:]) is False  # a 2 is a passage about the subject, not the answer to give
    assert answer_evidence([{"details": {}}]) is None
    means, refusals = run_means(outputs, {"no_answer.answered": 1 / 3})
    assert refusals == 2 and means["no_answer.answered"] == 1.0


def test_config_report_section_is_validated(tmp_path: Path) -> None:
    from open_rag_eval.config import load_config_text
    from open_rag_eval.core.errors import ConfigError

    base = "input: a.csv\nevaluators: [{type: trec}]\njudge: {model: m}\n"
    loaded = load_config_text(base + "report: {headline: [umbrela.mean], targets: {umbrela.mean: 2}}\n",
                              base_dir=tmp_path)
    assert loaded.config.report is not None and loaded.config.report.targets == {"umbrela.mean": 2.0}
    for bad in ("report: {targets: {umbrela.mean: .nan}}\n", "report: {targets: {umbrela.mean: high}}\n",
                "report: {colours: {}}\n"):
        with pytest.raises(ConfigError, match="report"):
            load_config_text(base + bad, base_dir=tmp_path)


def _candidate(tmp_path: Path, name: str = "candidate") -> Path:
    """A copy of the fixture whose citation F1 is 0.3 higher on every output."""
    directory = tmp_path / name
    shutil.copytree(FIXTURE, directory)

    def better(data: dict) -> None:
        for item in data["outputs"]:
            if item["scores"].get("citation.f1") is not None:
                item["scores"]["citation.f1"] = min(1.0, item["scores"]["citation.f1"] + 0.3)

    _edit(directory / "results.json", better)
    lines = (directory / "results.csv").read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    column = header.index("citation.f1")
    rows = []
    for line in lines[1:]:
        cells = line.split(",")
        if cells[column]:
            cells[column] = str(min(1.0, float(cells[column]) + 0.3))
        rows.append(",".join(cells))
    (directory / "results.csv").write_text("\n".join([lines[0], *rows]) + "\n", encoding="utf-8")
    return directory


def test_report_of_two_runs_compares_headline_metrics(results: Path, tmp_path: Path) -> None:
    from open_rag_eval.cli import main

    candidate = _candidate(tmp_path)
    out = tmp_path / "cmp.html"
    assert main(["report", str(results), str(candidate), "-o", str(out)]) == 0
    page = out.read_text(encoding="utf-8")
    assert str(tmp_path) not in page  # folder names only
    assert "<b>A</b> results" in page and "<b>B</b> candidate" in page
    rows = re.findall(r'<tr data-metric="([\w.@]+)"><td><span class="mname">', page)
    assert rows == ["umbrela.mean", "nuggets.weighted", "citation.f1", "hhem.score", "no_answer.answered"]
    f1 = page[page.index('<tr data-metric="citation.f1"><td><span class="mname">'):]
    f1 = f1[:f1.index("</tr>")]
    assert re.search(r'class="diff (\w+)" data-verdict="\1">Δ \+0\.\d\d', f1)
    umbrela = page[page.index('<tr data-metric="umbrela.mean"><td><span class="mname">'):]
    assert 'data-verdict="same">Δ +0.00' in umbrela[:umbrela.index("</tr>")]
    assert page.count('<details class="family"') >= 5 and 'id="queries"' in page
    q1 = page[page.index('<td data-key="id" data-v="q1">'):]
    delta = re.search(r'data-key="citation.f1" data-v="([\d.]+)">0.62 → 0.9<', q1[:q1.index("</tr>")])
    assert delta is not None and float(delta.group(1)) == pytest.approx(0.9 - 0.625)  # (1.0 + 0.8) / 2 - 0.625
    # one folder, -o elsewhere: the single report
    single = tmp_path / "single.html"
    assert main(["report", str(results), "-o", str(single)]) == 0
    assert 'id="headline"' in single.read_text(encoding="utf-8")
    assert main(["report", str(results), str(tmp_path / "missing"), "-o", str(out)]) == 3


def test_no_absolute_source_path_and_no_citation_hint_for_a_refusal(results: Path) -> None:
    def change(data: dict) -> None:
        for item in data["outputs"]:
            item["source"] = f"/home/someone/project/answers.csv:{item['run']}"

    _edit(results / "results.json", change)
    page = render_report(results)
    assert "/home/someone" not in page and ".../answers.csv:1" in page
    # a refusal has no facts or citations to judge: only the refusal is diagnosed
    declined = {"no_answer.answered": 0.0, "umbrela.mean": 1.0, "citation.precision": 0.0, "hhem.score": 0.1,
                "nuggets.vital_strict": 0.0}
    assert [a for a, _ in diagnose(declined, evidence=True)] == ["no answer"]


def test_the_demo_refusal_about_a_future_race_is_a_correct_refusal(tmp_path: Path) -> None:
    """The demo's q5 (who won the 2031 Tour de France) declines twice; its passages describe the race and two of them
    share the query's words, which the simulated judge grades 2: a passage about the subject, not the answer. Its
    drill-down calls it a correct refusal, never "the generator is too cautious"; q3 (whose passages the judge grades
    3) is still told the generator declined what the passages answer when a decline is judged there."""
    from open_rag_eval.config import load_config_text
    from open_rag_eval.run.pipeline import run

    demo = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"
    loaded = load_config_text(f"input: {demo}\noutput_dir: out\njudge: {{model: simulated-judge, cache: false, "
                              "simulated: {latency_ms: 0, seed: 1}, health: {controls: false}}\nevaluators: [{type: "
                              "trec, metrics: [umbrela, no_answer]}]\n", base_dir=tmp_path)
    report = run(loaded)
    page = render_report(report.output_dir)
    q5 = page[page.index('id="q-5"'):page.index('id="q-6"')]
    hints = re.sub(r"<[^>]+>", "", q5[q5.index('<ul class="hints">'):q5.index("</ul>")])
    assert "declined to answer" in hints and "a correct refusal" in hints and "too cautious" not in hints
    assert re.findall(r'class="grade g(\d)"', q5).count("2") >= 2  # the judge did grade passages 2
    assert "too cautious" in diagnose({"no_answer.answered": 0.5, "umbrela.mean": 1.0}, evidence=True)[0][1]
