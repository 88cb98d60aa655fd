"""Result views: results.csv, summary.csv, results.json -- and their atomic writing."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.store.fileio import atomic_write, atomic_write_text
from open_rag_eval.run.results import metric_order, summarize, write_results
from open_rag_eval.scoring.stats import aggregate
from open_rag_eval.core.types import Detail, EvalResult, Passage, RAGOutput, Score


def outputs() -> list[RAGOutput]:
    return [
        RAGOutput(query_id="q1", query="first?", run=1, passages=(Passage(id="1", text="a"),)),
        RAGOutput(query_id="q1", query="first?", run=2),
        RAGOutput(query_id="q2", query="second, with \"quotes\"\nand a newline?", run=1),
    ]


def result() -> EvalResult:
    return EvalResult(
        scores=[
            Score(query_id="q1", run=1, metric="umbrela.p@10", value=0.5),
            Score(query_id="q1", run=1, metric="umbrela.p@3", value=1 / 3),
            Score(query_id="q1", run=2, metric="umbrela.p@3", error="judge call failed: 500"),
            Score(query_id="q2", run=1, metric="umbrela.p@3", value=1.0),
            Score(query_id="q1", run=None, metric="consistency.rougeL", value=0.75),
            Score(query_id="q2", run=1, metric="hhem.score", value=float("nan")),
        ],
        details=[Detail(query_id="q1", run=1, section="umbrela", data={"grades": [{"grade": 3, "x": float("inf")}]})],
    )


def test_metric_order_is_by_family_then_natural() -> None:
    names = ["consistency.rougeL", "umbrela.p@10", "citation.f1", "umbrela.p@3", "umbrela.mean", "custom.x"]
    assert metric_order(names) == [
        "umbrela.mean", "umbrela.p@3", "umbrela.p@10", "citation.f1", "consistency.rougeL", "custom.x"
    ]


def test_aggregate_literal_numbers() -> None:
    values = [0.0, 1.0] * 20  # n = 40: t interval
    a = aggregate("m", values, n_failed=1)
    assert a.mean == pytest.approx(0.5)
    std = (10 / 39) ** 0.5  # sum of squares 40 * 0.25 over n - 1
    assert a.std == pytest.approx(std)
    assert a.ci95_low == pytest.approx(0.5 - 1.96 * std / 40 ** 0.5)
    assert (a.n, a.n_failed) == (40, 1)
    assert aggregate("m", [], n_failed=2).mean is None


def test_small_samples_get_a_bootstrap_ci_inside_the_data_range() -> None:
    a = aggregate("m", [0.0, 1.0, 1.0, 1.0])
    assert a.mean == pytest.approx(0.75)
    assert 0.0 <= a.ci95_low < 0.75 < a.ci95_high <= 1.0
    assert aggregate("m", [0.0, 1.0, 1.0, 1.0]) == a  # seeded: the same values, the same CI


def test_summary_counts_failures_and_never_averages_them() -> None:
    summary = {a.metric: a for a in summarize(result().scores)}
    assert summary["umbrela.p@3"].n == 2 and summary["umbrela.p@3"].n_failed == 1
    assert summary["umbrela.p@3"].mean == pytest.approx((1 / 3 + 1.0) / 2)


def test_files(tmp_path: Path) -> None:
    write_results(tmp_path, outputs(), result(), RunInfo(simulated=True))
    rows = list(csv.DictReader((tmp_path / "results.csv").open(encoding="utf-8")))
    assert [(r["query_id"], r["run"]) for r in rows] == [("q1", "1"), ("q1", "2"), ("q1", "all"), ("q2", "1")]
    assert list(rows[0])[:5] == ["query_id", "query", "run", "umbrela.p@3", "umbrela.p@10"]
    assert rows[1]["umbrela.p@3"] == "" and rows[1]["umbrela.p@3.error"] == "judge call failed: 500"
    assert rows[2]["consistency.rougeL"] == "0.75"
    assert rows[3]["query"] == "second, with \"quotes\"\nand a newline?"
    assert rows[3]["hhem.score"] == "" and rows[3]["hhem.score.error"] == "not a finite number"
    assert {r["simulated_judge"] for r in rows} == {"true"}
    summary = list(csv.DictReader((tmp_path / "summary.csv").open(encoding="utf-8")))
    assert summary[0]["metric"] == "umbrela.p@3" and summary[0]["n_failed"] == "1"
    text = (tmp_path / "results.json").read_text(encoding="utf-8")
    assert "NaN" not in text and "Infinity" not in text
    data = json.loads(text)
    assert data["simulated"] is True
    first = data["outputs"][0]
    assert first["scores"]["umbrela.p@3"] == pytest.approx(1 / 3)
    assert first["details"]["umbrela"]["grades"][0]["x"] is None
    assert data["outputs"][1]["errors"]["umbrela.p@3"] == "judge call failed: 500"
    assert data["queries"][0]["query_id"] == "q1" and data["queries"][0]["runs"] == [1, 2]
    assert data["queries"][0]["scores"]["consistency.rougeL"] == 0.75


def test_atomic_write_leaves_old_file_when_writing_fails(tmp_path: Path) -> None:
    target = tmp_path / "results.csv"
    atomic_write_text(target, "old\n")

    def half_then_boom(handle) -> None:  # type: ignore[no-untyped-def]
        handle.write("new, half written")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        atomic_write(target, half_then_boom)
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["results.csv"]
    assert oct(target.stat().st_mode & 0o777) != oct(0o600)  # an ordinary file, not mkstemp's private mode


def test_summary_quantiles_interpolate_like_numpy() -> None:
    a = aggregate("latency.ms", [100.0, 200.0, 300.0, 400.0, 1000.0])
    assert (a.min, a.median, a.max) == (100.0, 300.0, 1000.0)
    assert a.p95 == pytest.approx(880.0)  # 400 + 0.8 * 600
    one = aggregate("latency.ms", [5.0])
    assert (one.median, one.p95, one.ci95_low) == (5.0, 5.0, None)
