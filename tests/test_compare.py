"""`open-rag-eval compare`: paired over shared queries, known and null differences, CI gate exit code."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.report.compare import compare, gate
from open_rag_eval.report.loader import load_results


def _write(directory: Path, values: dict[tuple[str, int], tuple[float, float | None]]) -> Path:
    """A results.csv with metrics nuggets.vital and hhem.score (None = failed)."""
    directory.mkdir(parents=True)
    with (directory / "results.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query_id", "query", "run", "nuggets.vital", "hhem.score", "hhem.score.error"])
        for (query, run), (vital, hhem) in values.items():
            writer.writerow([query, f"question {query}", run, vital, "" if hhem is None else hhem,
                             "model failed" if hhem is None else ""])
    return directory


@pytest.fixture
def pair(tmp_path: Path) -> tuple[Path, Path]:
    base = {(f"q{i}", 1): (0.2 + 0.05 * i, 0.5) for i in range(10)}
    base[("q0", 2)] = (0.4, 0.5)  # q0 has two runs in A: its value is their mean 0.3
    better = {(f"q{i}", 1): (0.2 + 0.05 * i + 0.3, 0.5) for i in range(1, 10)}  # +0.3 on q1..q9
    better[("q0", 1)] = (0.6, None)
    better[("q10", 1)] = (0.9, 0.9)  # only in B
    return _write(tmp_path / "a", base), _write(tmp_path / "b", better)


def test_known_difference_is_significant(pair: tuple[Path, Path]) -> None:
    a, b = (load_results(p) for p in pair)
    result = compare(a, b, ["nuggets.vital", "hhem.score"], seed=1, resamples=2000)
    vital, hhem = result.rows
    assert vital["n"] == 10
    assert vital["diff"] == pytest.approx(0.3)  # q0: 0.6 - mean(0.2, 0.4) = 0.3; the others +0.3
    assert vital["ci95_low"] == pytest.approx(0.3) and vital["ci95_high"] == pytest.approx(0.3)
    # only all-plus / all-minus sign patterns are as extreme (2/1024); seed 1 draws 3 of them in 2000
    assert vital["p_value"] == pytest.approx(4 / 2001)
    assert vital["significant"] and vital["better"] and vital["verdict"] == "PASS"
    assert hhem["n"] == 9 and hhem["n_missing"] == 1 and hhem["diff"] == 0.0 and not hhem["significant"]
    assert result.only_a == [] and result.only_b == ["q10"]


def test_no_difference_is_not_significant(tmp_path: Path) -> None:
    same = {(f"q{i}", 1): (0.1 * i, 0.5) for i in range(8)}
    a = load_results(_write(tmp_path / "a", same))
    b = load_results(_write(tmp_path / "b", same))
    row = compare(a, b, ["nuggets.vital"], seed=0, resamples=500).rows[0]
    assert row["diff"] == 0.0 and row["p_value"] == 1.0 and row["verdict"] == "PASS"
    assert "unchanged" in row["reason"]


def test_fail_if_worse_exit_code_and_files(pair: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    a, b = pair
    out = tmp_path / "out"
    # B is better than A: the gate passes
    assert main(["compare", str(a), str(b), "--output-dir", str(out), "--fail-if-worse", "nuggets.vital",
                 "--resamples", "500"]) == 0
    table = capsys.readouterr().out
    assert "nuggets.vital" in table and "PASS (B better)" in table and "1 queries only in B: q10" in table
    rows = list(csv.DictReader((out / "compare.csv").open()))
    assert rows[0]["metric"] == "hhem.score" or rows[0]["metric"] == "nuggets.vital"
    assert any(r["metric"] == "query_only_in_B:q10" for r in rows)
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"
    # swapped, B is worse by 0.3: fails at threshold 0.1, passes at threshold 0.5
    assert main(["compare", str(b), str(a), "--output-dir", str(out), "--fail-if-worse", "nuggets.vital:0.1",
                 "--resamples", "500"]) == 1
    assert main(["compare", str(b), str(a), "--output-dir", str(out), "--fail-if-worse", "nuggets.vital:0.5",
                 "--resamples", "500"]) == 0


def test_a_gate_on_a_metric_not_compared_is_inconclusive_never_a_pass(pair: tuple[Path, Path]) -> None:
    a, b = (load_results(p) for p in pair)
    verdict = gate(compare(a, b, ["nuggets.vital"], resamples=200), "citation.f1")
    assert verdict.outcome == "INCONCLUSIVE" and "nothing to compare" in verdict.reason


def _wide(directory: Path, shift: float, *, extra: int = 40, headline: list[str] | None = None) -> Path:
    """results.csv with two headline metrics (citation.f1 shifted by ``shift``) and ``extra`` other metrics
    equal on both sides; optionally a manifest whose config names the headline."""
    import json

    directory.mkdir(parents=True)
    others = [f"lexical.m{i}" for i in range(extra)]
    with (directory / "results.csv").open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["query_id", "query", "run", "citation.f1", "umbrela.mean", *others])
        for i in range(10):
            writer.writerow([f"q{i}", f"question {i}", 1, 0.2 + 0.05 * i + shift, 1.5, *[0.5] * extra])
    if headline is not None:
        (directory / "manifest.json").write_text(json.dumps({"config": {"report": {"headline": headline}}}))
    return directory


def test_compare_defaults_to_the_headline_metrics_with_holm_within_them(tmp_path: Path, capsys) -> None:
    a, b = _wide(tmp_path / "a", 0.0), _wide(tmp_path / "b", 0.3)
    out = tmp_path / "out"
    args = ["compare", str(a), str(b), "--output-dir", str(out), "--seed", "1", "--resamples", "2000"]
    assert main(args) == 0
    rows = [r for r in csv.DictReader((out / "compare.csv").open())]
    assert [r["metric"] for r in rows] == ["umbrela.mean", "citation.f1"]  # the headline, in its order
    f1 = rows[1]
    # p = 4/2001 (see test_known_difference_is_significant); Holm over 2 metrics: 0.004 < 0.05
    assert float(f1["p_value"]) == pytest.approx(4 / 2001) and f1["p_holm_significant"] == "yes"
    from PIL import Image

    width, height = Image.open(out / "compare.png").size
    assert width <= 1200 and height < 500  # two rows: a small picture
    capsys.readouterr()
    # every metric: Holm over 42 makes the same p-value not significant, and the picture grows with its rows
    assert main([*args, "--metrics", "all"]) == 0
    rows = [r for r in csv.DictReader((out / "compare.csv").open())]
    assert len(rows) == 42
    f1 = next(r for r in rows if r["metric"] == "citation.f1")
    assert float(f1["p_value"]) == pytest.approx(4 / 2001) and f1["p_holm_significant"] == "no"
    assert Image.open(out / "compare.png").size[1] > 2000


def test_compare_headline_set_from_the_config_and_from_metrics(tmp_path: Path) -> None:
    a = _wide(tmp_path / "a", 0.0, extra=3, headline=["lexical.m2", "citation.f1"])
    b = _wide(tmp_path / "b", 0.3, extra=3)
    out = tmp_path / "out"
    assert main(["compare", str(a), str(b), "--output-dir", str(out), "--resamples", "200"]) == 0
    assert [r["metric"] for r in csv.DictReader((out / "compare.csv").open())] == ["lexical.m2", "citation.f1"]
    assert main(["compare", str(a), str(b), "--output-dir", str(out), "--resamples", "200",
                 "--metrics", "lexical.m0,umbrela.mean"]) == 0
    assert [r["metric"] for r in csv.DictReader((out / "compare.csv").open())] == ["lexical.m0", "umbrela.mean"]


def test_compare_help_prints_percent_once() -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "compare", "--help"], capture_output=True,
                          text=True, check=True)
    text = " ".join(done.stdout.split())
    assert "95% bootstrap CI" in text and "%%" not in text
    listing = subprocess.run([sys.executable, "-m", "open_rag_eval", "--help"], capture_output=True, text=True,
                             check=True).stdout
    assert "95%" in listing and "%%" not in listing
