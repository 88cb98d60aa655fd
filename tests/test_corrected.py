"""Corrected estimates from a run's results and people's labels (run/corrected.py): which labels determine which
metric on a query, with literal numbers, and the estimate equal to the method authors' package."""

from __future__ import annotations

import csv
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import ppi_py
import pytest

from open_rag_eval.inputs.human_labels import Item
from open_rag_eval.run.corrected import CORRECTED_FILE, corrected_estimates, people_values, query_values

ROOT = Path(__file__).resolve().parent.parent
DEMO_LABELS = ROOT / "configs" / "data" / "demo_labels"


def _entry(query_id: str, grades: dict[str, int], run: int = 1, scores: dict[str, float] | None = None,
           statements: list[list[tuple[str, str, bool]]] | None = None,
           nuggets: list[tuple[str, str, str]] | None = None) -> dict[str, Any]:
    judged = [g for g in grades.values()]
    details: dict[str, Any] = {"umbrela": {"grades": [{"passage_id": p, "grade": g} for p, g in grades.items()]}}
    if statements is not None:
        details["citation"] = {"scoring": "per_statement", "statements": [
            {"judgments": [{"passage_id": p, "label": label, "fabricated": fab} for p, label, fab in row]}
            for row in statements]}
    if nuggets is not None:
        details["nuggets"] = {"nuggets": [{"text": t, "importance": i, "assignment": a} for t, i, a in nuggets]}
    return {"query_id": query_id, "run": run, "details": details,
            "scores": {"umbrela.mean": sum(judged) / len(judged), "umbrela.p@2": 0.5, **(scores or {})}}


def _grades(query_id: str, grades: dict[str, int]) -> dict[Item, Any]:
    return {Item("umbrela", query_id, None, p): g for p, g in grades.items()}


def test_umbrela_needs_every_graded_passage_labelled() -> None:
    entry = _entry("q1", {"a": 3, "b": 1, "c": 2})
    assert people_values(entry, _grades("q1", {"a": 2, "b": 0})) == {}  # c has no person's grade
    values = people_values(entry, _grades("q1", {"a": 2, "b": 0, "c": 3, "z": 1}))
    # people's grades in retrieval order 2, 0, 3: mean 5/3; relevant (>= 2) at ranks 1 and 3: P@2 = 1/2
    assert values == {"umbrela.mean": pytest.approx(5 / 3), "umbrela.p@2": 0.5}


def test_citation_over_the_labelled_statements_fabricated_and_uncited_kept() -> None:
    statements = [[("p1", "FS", False)], [("p2", "FS", False)], [("p9", "NS", True)], [], [("p3", "FS", False)]]
    entry = _entry("q1", {"p1": 3}, scores={"citation.precision": 1.0, "citation.recall": 0.8, "citation.f1": 0.9},
                   statements=statements)
    human = {Item("citation_support", "q1", 1, "1:p1"): "FS", Item("citation_support", "q1", 1, "2:p2"): "PS"}
    # statement 5 has no person's label: left out. Kept: FS (1), PS (0.5), fabricated NS (0), uncited.
    # precision = 1.5 / 3 = 0.5; recall = 1.5 / 4 = 0.375; F1 = 2 * 0.5 * 0.375 / 0.875 = 3/7
    assert people_values(entry, human) == {"citation.precision": 0.5, "citation.recall": 0.375,
                                           "citation.f1": pytest.approx(3 / 7)}
    assert people_values(entry, {}) == {}  # nothing a person labelled: no people's value


def test_nuggets_over_the_nuggets_with_both_labels() -> None:
    entry = _entry("q1", {"p1": 3}, run=2, scores={"nuggets.all": 1.0, "nuggets.vital": 1.0},
                   nuggets=[("The sky  is blue", "vital", "support"), ("grass is green", "okay", "support"),
                            ("water is wet", "okay", "support")])
    human = {Item("nugget_importance", "q1", None, "the sky is blue"): "vital",
             Item("nugget_support", "q1", 2, "the sky is blue"): "partial_support",
             Item("nugget_importance", "q1", None, "grass is green"): "okay",
             Item("nugget_support", "q1", 2, "grass is green"): "not_support",
             Item("nugget_support", "q1", 2, "water is wet"): "support"}  # no importance: left out
    # two nuggets: 0.5 + 0 over 2 = 0.25 (all); the vital one partially supported: 0.5
    assert people_values(entry, human) == {"nuggets.all": 0.25, "nuggets.vital": 0.5}


def test_the_query_is_the_unit_and_a_people_value_needs_the_judges() -> None:
    entries = [_entry("q1", {"a": 3, "b": 1}), _entry("q1", {"a": 1, "b": 1}, run=2), _entry("q2", {"a": 0, "b": 2})]
    values = query_values(entries, _grades("q1", {"a": 2, "b": 2}))
    assert values["umbrela.mean"].judge == {"q1": 1.5, "q2": 1.0}  # q1's runs (2 and 1) averaged
    assert values["umbrela.mean"].people == {"q1": 2.0}


def test_too_few_labelled_queries_is_a_missing_estimate_with_its_reason() -> None:
    [mean, p2] = corrected_estimates([_entry("q1", {"a": 3}), _entry("q2", {"a": 1})], _grades("q1", {"a": 2}))
    assert mean.metric == "umbrela.mean" and mean.estimate is None and "at least 2" in mean.note
    assert mean.row()["corrected_mean"] is None and (mean.n_labelled, mean.n_unlabelled) == (1, 1)


def test_corrected_umbrela_mean_and_citation_f1_equal_the_method_authors_package() -> None:
    rng = np.random.default_rng(5)
    entries: list[dict[str, Any]] = []
    human: dict[Item, Any] = {}
    for q in range(60):
        people = rng.integers(0, 4, size=4)
        judge = np.clip(people + rng.integers(0, 2, size=4), 0, 3)
        grades = {f"p{i}": int(g) for i, g in enumerate(judge)}
        labels = ["FS" if g >= 2 else "NS" for g in people]
        statements = [[(f"p{i}", "FS" if g >= 1 else "NS", False)] for i, g in enumerate(judge)]
        judged = [1.0 if row[0][1] == "FS" else 0.0 for row in statements]
        f1 = sum(judged) / 4
        entries.append(_entry(f"q{q}", grades, scores={"citation.f1": f1}, statements=statements))
        if q < 20:
            human |= _grades(f"q{q}", {f"p{i}": int(g) for i, g in enumerate(people)})
            human |= {Item("citation_support", f"q{q}", 1, f"{i + 1}:p{i}"): label for i, label in enumerate(labels)}
    found = {c.metric: c for c in corrected_estimates(entries, human)}
    values = query_values(entries, human)
    for metric in ("umbrela.mean", "citation.f1"):
        by_query = values[metric]
        labelled = sorted(by_query.people)
        y = np.array([by_query.people[q] for q in labelled])
        yhat = np.array([by_query.judge[q] for q in labelled])
        unlabelled = np.array([v for q, v in by_query.judge.items() if q not in by_query.people])
        assert (len(y), len(unlabelled)) == (20, 40)
        low, high = ppi_py.ppi_mean_ci(y, yhat, unlabelled, alpha=0.05)
        estimate = found[metric].estimate
        assert estimate is not None
        point = float(np.ravel(ppi_py.ppi_mean_pointestimate(y, yhat, unlabelled))[0])
        assert abs(estimate.corrected.value - point) < 1e-9
        bounds = (0.0, 3.0) if metric == "umbrela.mean" else (0.0, 1.0)
        assert abs(estimate.corrected.low - max(float(low[0]), bounds[0])) < 1e-9
        assert abs(estimate.corrected.high - min(float(high[0]), bounds[1])) < 1e-9


def test_corrected_difference_pairs_queries_labelled_in_both_runs() -> None:
    from open_rag_eval.run.corrected import QueryValues, corrected_differences
    from open_rag_eval.scoring.ppi import Z95

    a = {"umbrela.mean": QueryValues({"q1": 1.0, "q2": 2.0, "q3": 1.0, "q4": 2.0}, {"q1": 1.0, "q2": 1.0, "q3": 0.0})}
    b = {"umbrela.mean": QueryValues({"q1": 2.0, "q2": 2.0, "q3": 2.0, "q4": 2.0, "q5": 3.0}, {"q1": 2.0, "q2": 1.0})}
    [d] = corrected_differences(a, b)
    # labelled in both: q1, q2 (people's differences 1, 0; judge's 1, 0); q3 (labelled in A only) and q4 unlabelled,
    # q5 (B only) left out. lam = 0.25 / (2 * 1/3) = 0.375; diff = 0.375 * 0.5 + mean(0.625, 0) = 0.5
    assert (d.n_labelled, d.n_unlabelled) == (2, 2) and d.lam == pytest.approx(0.375)
    assert d.diff is not None and d.diff.value == pytest.approx(0.5)
    # var: (0.375 * std(1, 0))^2 / 2 + std(0.625, 0)^2 / 2 = 0.017578125 + 0.048828125
    assert d.diff.high - d.diff.value == pytest.approx(Z95 * math.sqrt(0.06640625))
    assert d.judge_diff == pytest.approx(0.5)  # (1 + 0 + 1 + 0) / 4
    assert d.p_value == pytest.approx(2 * (1 - NormalDist().cdf(0.5 / math.sqrt(0.06640625))))


def _eval(tmp_path: Path, name: str, seed: int, *extra: str,
          labels_key: bool = False) -> subprocess.CompletedProcess[str]:
    config = tmp_path / f"{name}.yaml"
    labels = (f"labels: [{DEMO_LABELS / 'umbrela_qrels.txt'}, {DEMO_LABELS / 'citation_support.tsv'}]\n"
              if labels_key else "")
    config.write_text(f"input: {ROOT / 'configs' / 'data' / 'demo.csv'}\noutput_dir: {tmp_path / name}\n{labels}"
                      f"judge:\n  model: simulated-judge\n  simulated: {{noise_rate: 0.2, seed: {seed}}}\n"
                      "  cache: false\nevaluators:\n  - type: trec\n    metrics: [umbrela, citation]\n")
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config), *extra],
                          capture_output=True, text=True, timeout=600)


def test_eval_with_the_demo_labels_corrects_summary_report_and_compare(tmp_path: Path) -> None:
    first = _eval(tmp_path, "a", 1, labels_key=True)  # the config's labels: key
    assert first.returncode == 0, first.stderr
    done = _eval(tmp_path, "b", 2, "--labels", str(DEMO_LABELS / "umbrela_qrels.txt"),
                 "--labels", str(DEMO_LABELS / "citation_support.tsv"))
    assert done.returncode == 0, done.stderr
    rows = {r["metric"]: r for r in csv.DictReader((tmp_path / "a" / "summary.csv").open())}
    mean = rows["umbrela.mean"]
    # every demo query's passages are graded by people: the corrected mean is theirs, 45 / 30 grades
    assert float(mean["corrected_mean"]) == pytest.approx(1.5)
    assert (mean["n_labelled"], mean["n_unlabelled"], mean["lambda"]) == ("6", "0", "0.0")
    assert rows["citation.f1"]["n_labelled"] == "5" and rows["umbrela.n_failed"]["corrected_mean"] == ""
    # the console's headline: the corrected value with its interval beside the judged one
    line = next(row for row in first.stdout.splitlines() if row.strip().startswith("umbrela.mean"))
    assert f"{float(mean['mean']):.3f}  [{float(mean['ci95_low']):.3f}" in line
    assert "corrected 1.500 [1.243, 1.757] (6 labelled)" in line
    report = (tmp_path / "a" / "report.html").read_text()
    assert "corrected 1.50 · 95% CI 1.24 – 1.76" in report and "corrected with human labels on 6 queries" in report
    saved = json.loads((tmp_path / "a" / "corrected.json").read_text())
    assert saved["labels"] == ["umbrela_qrels.txt", "citation_support.tsv"] and str(ROOT) not in json.dumps(saved)
    compared = subprocess.run([sys.executable, "-m", "open_rag_eval", "compare", str(tmp_path / "a"),
                               str(tmp_path / "b"), "-o", str(tmp_path / "cmp")],
                              capture_output=True, text=True, timeout=300)
    assert compared.returncode == 0, compared.stderr
    diffs = {r["metric"]: r for r in csv.DictReader((tmp_path / "cmp" / "compare_corrected.csv").open())}
    # the same people's grades on both runs' passages: whatever the two judges said, no corrected difference
    assert float(diffs["umbrela.mean"]["corrected_diff"]) == 0.0 and diffs["umbrela.mean"]["n_labelled"] == "6"
    assert "corrected B - A" in compared.stdout
    page = subprocess.run([sys.executable, "-m", "open_rag_eval", "report", str(tmp_path / "a"), str(tmp_path / "b"),
                           "-o", str(tmp_path / "compare.html")], capture_output=True, text=True, timeout=300)
    assert page.returncode == 0, page.stderr
    html = (tmp_path / "compare.html").read_text()
    # the page shows what compare_corrected.csv holds: each run's corrected mean, the corrected difference with its
    # interval and the labels it rests on, in the headline table and in a table of every corrected metric
    assert html.count("corrected 1.50 [1.24, 1.76]") == 2
    assert ("corrected Δ +0.000 [+0.000, +0.000] <span class=\"muted\">· corrected with people's labels on 6 "
            "queries") in html
    section = html[html.index('id="corrected-compare"'):]
    row = section[section.index('data-metric="citation.f1"'):].split("</tr>")[0]
    f1 = diffs["citation.f1"]
    cells = (f'{float(f1["corrected_diff"]):+.3f} [{float(f1["ci95_low"]):+.3f}, {float(f1["ci95_high"]):+.3f}]',
             f'{float(f1["judge_diff"]):+.3f}', f'>{f1["n_labelled"]}<')
    assert all(cell in row for cell in cells), (row, cells)
    assert 'id="not-corrected"' not in html
    # a candidate evaluated without labels: the baseline's corrected means, and the page says why B has no difference
    shutil.copytree(tmp_path / "b", tmp_path / "plain")
    (tmp_path / "plain" / CORRECTED_FILE).unlink()
    from open_rag_eval.report.comparison import render_comparison

    html = render_comparison([tmp_path / "a", tmp_path / "plain"], resamples=200)
    assert html.count("corrected 1.50 [1.24, 1.76]") == 1 and "corrected Δ" not in html
    assert 'id="corrected-compare"' not in html
    assert "No corrected difference for run B: it was not evaluated with people's labels" in html


def test_without_labels_nothing_changes_and_bad_labels_stop_before_any_call(tmp_path: Path) -> None:
    done = _eval(tmp_path, "plain", 1)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "plain" / "corrected.json").exists()
    assert "corrected_mean" not in (tmp_path / "plain" / "summary.csv").read_text()
    bad = tmp_path / "bad.tsv"
    bad.write_text("task\tquery_id\tpassage_id\tlabel\numbrela\tq1\t1\tseven\n")
    refused = _eval(tmp_path, "refused", 1, "--labels", str(bad))
    assert refused.returncode == 3 and "bad.tsv:2" in refused.stderr and "label" in refused.stderr
    assert not (tmp_path / "refused").exists()


def test_the_python_api_takes_labels_as_a_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval import evaluate

    monkeypatch.chdir(tmp_path)  # a relative labels path: from the working folder, as for a dict config's input
    (tmp_path / "grades.txt").write_text((DEMO_LABELS / "umbrela_qrels.txt").read_text())
    results = evaluate(str(ROOT / "configs" / "data" / "demo.csv"),
                       {"judge": {"model": "simulated-judge", "simulated": {"latency_ms": 1}, "cache": False},
                        "evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}, labels=["grades.txt"])
    row = next(r for r in results.summary_rows() if r["metric"] == "umbrela.mean")
    assert (row["corrected_mean"], row["n_labelled"], row["n_unlabelled"]) == (pytest.approx(1.5), 6.0, 0.0)
    assert math.isnan(next(r for r in results.summary_rows() if r["metric"] == "umbrela.n_failed")["lambda"])


def test_calibrate_corrects_each_results_folder_apart(tmp_path: Path) -> None:
    from open_rag_eval.calibration.run import corrected_of, load_results, write_calibration

    folders = []
    for name, shift in (("base", 0), ("lenient", 1)):
        folder = tmp_path / name
        folder.mkdir()
        entries = [_entry(f"q{i}", {"a": min(3, i % 4 + shift), "b": min(3, (i + 1) % 4 + shift)}) for i in range(6)]
        (folder / "results.json").write_text(json.dumps({"outputs": entries}))
        folders.append(folder)
    human = _grades("q0", {"a": 0, "b": 1}) | _grades("q1", {"a": 1, "b": 2}) | _grades("q2", {"a": 2, "b": 3})
    found = corrected_of(human, load_results(folders), folders)
    means = {source: c for source, c in found if c.metric == "umbrela.mean"}
    assert set(means) == {"base", "lenient"}
    # the base judge agrees with people on q0-q2 (means 0.5, 1.5, 2.5): no bias; the lenient one is +1, +1 and
    # +0.5 there (its grades stop at 3)
    assert means["base"].estimate is not None and means["base"].estimate.bias.value == 0.0
    assert means["lenient"].estimate is not None and means["lenient"].estimate.bias.value == pytest.approx(5 / 6)
    assert means["base"].estimate.people == means["lenient"].estimate.people  # the same people's values
    write_calibration(tmp_path / "out", [], {}, found)
    rows = list(csv.DictReader((tmp_path / "out" / "calibrate.csv").open()))
    assert {r["statistic"] for r in rows} >= {"base:umbrela.mean", "lenient:umbrela.mean"}
    assert all(r["task"] == "corrected" and r["n"] == "3" and r["n_unlabelled"] == "3" for r in rows)


def test_a_dry_run_reads_the_labels_too(tmp_path: Path) -> None:
    bad = tmp_path / "bad.tsv"
    bad.write_text("task\tquery_id\tpassage_id\tlabel\numbrela\tq1\t1\t2\numbrela\tq1\t1\t3\n")
    refused = _eval(tmp_path, "dry", 1, "--dry-run", "--labels", str(bad))
    assert refused.returncode == 3 and "bad.tsv:3" in refused.stderr and "twice" in refused.stderr
    fine = _eval(tmp_path, "dry", 1, "--dry-run", "--labels", str(DEMO_LABELS / "umbrela_qrels.txt"))
    assert fine.returncode == 0, fine.stderr
