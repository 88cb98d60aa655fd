"""`open-rag-eval plot` and the results loader: our directories and the peer's CSV layouts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.cli import main
from open_rag_eval.core.errors import InputError
from open_rag_eval.report.loader import load_results
from open_rag_eval.report.peer import metric_name

DATA = Path(__file__).parent / "data"
OURS = DATA / "results_fixture"
PEER_TREC = DATA / "peer" / "trec_results.csv"
PEER_LONG = DATA / "peer" / "trec_results_three_runs_with_a_very_long_configuration_name_for_labels.csv"
PEER_CONS = DATA / "peer" / "consistency_results.csv"


def _png_ok(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # axes, boxes and labels, not an empty canvas


def test_loads_our_directory_with_failures_and_manifest() -> None:
    result = load_results(OURS)
    assert result.layout == "ours" and result.simulated is True and result.judge_model == "sim-judge"
    assert result.values("hhem.score") == [0.91, 0.85, 0.95, 0.12, 0.40]  # q3 failed: missing, not a number
    q3 = next(row for row in result.rows if row.query_id == "q3")
    assert q3.scores["hhem.score"] is None and q3.errors["hhem.score"] == "HHEM model weights not found"
    assert result.per_query("nuggets.vital") == {"q1": [1.0, 0.5], "q2": [1.0, 0.0], "q3": [0.5], "q4": [0.0]}
    assert result.values("consistency.rougeL", per_run=False) == [0.62, 0.55]


def test_loads_peer_trec_csv_json_cells() -> None:
    result = load_results(PEER_TREC)
    assert result.layout == "peer-trec" and result.simulated is None
    assert result.values("umbrela.mean") == [2.5, 1.5, 0.5]  # q4's empty cell stays missing
    assert result.values("no_answer.answered") == [1.0, 1.0, 0.0, 1.0]
    assert result.values("nuggets.vital") == [1.0, 0.5, 0.0, 1.0]
    assert result.values("umbrela.p@3") == [0.5, 0.5, 0.5, 0.5]
    runs = load_results(PEER_LONG).per_query("hhem.score")
    assert runs == {"q1": [0.95, 0.85, 0.9], "q2": [0.7, 0.2, 0.5], "q3": [0.4, 0.4, 0.4]}


def test_loads_peer_consistency_csv() -> None:
    result = load_results(PEER_CONS)
    assert result.layout == "peer-consistency"
    assert result.per_query("hhem.score") == {"q1": [0.95, 0.85, 0.9], "q2": [0.7, 0.2, 0.5]}
    q1 = result.rows[0].scores
    assert q1["consistency.bertscore_f1"] == pytest.approx(0.906667, abs=1e-6)
    assert q1["consistency.hhem.score.mean"] == pytest.approx(0.9)


def test_peer_metric_names_map_to_ours() -> None:
    assert metric_name("retrieval_score_mean_umbrela_score") == "umbrela.mean"
    assert metric_name("consistency_bert_score") == "consistency.bertscore_f1"
    assert metric_name("nuggets.vital") == "nuggets.vital"


def test_bad_input_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(InputError, match="x.csv:1: field 'query_id'"):
        load_results(bad)
    broken = tmp_path / "results.csv"
    broken.write_text("query_id,query,run,umbrela.mean\nq1,Q,1,high\n")
    with pytest.raises(InputError, match="results.csv:2: field 'umbrela.mean'"):
        load_results(broken)


@pytest.mark.slow
def test_plot_trec_one_and_several_files(tmp_path: Path) -> None:
    one = tmp_path / "one.png"
    assert main(["plot", str(OURS), "--evaluator", "trec", "--output-file", str(one)]) == 0
    _png_ok(one)
    several = tmp_path / "several.png"
    argv = ["plot", str(OURS), str(PEER_TREC), str(PEER_LONG), "-e", "trec", "-o", str(several),
            "--metrics-to-plot", "retrieval_score_mean_umbrela_score,nuggets.vital", "citation.f1"]
    assert main(argv) == 0
    _png_ok(several)


@pytest.mark.slow
def test_plot_consistency_and_history(tmp_path: Path) -> None:
    out = tmp_path / "cons.png"
    assert main(["plot", str(OURS), str(PEER_CONS), "-e", "consistency", "-o", str(out)]) == 0
    _png_ok(out)
    from open_rag_eval.report import plot_history

    trend = plot_history([("2025-01-01T00:00:00", 0.61), ("2025-01-02T00:00:00", 0.64),
                          ("2025-01-03T00:00:00", 0.58)], 0, "nuggets.vital", tmp_path / "trend.png", simulated=True)
    _png_ok(trend)


def test_plot_missing_file_is_an_input_error(tmp_path: Path) -> None:
    assert main(["plot", str(tmp_path / "nope"), "-e", "trec", "-o", str(tmp_path / "x.png")]) == 3


def test_plot_reads_a_results_directory_written_by_eval(tmp_path: Path) -> None:
    """The files eval writes (simulated_judge column included) are what plot and compare read."""
    from open_rag_eval.report.loader import load_results
    from open_rag_eval.run.results import write_results
    from open_rag_eval.core.types import EvalResult, RAGOutput, Score

    outputs = [RAGOutput(query_id=q, query=f"{q}?") for q in ("q1", "q2")]
    scores = [Score(query_id="q1", run=1, metric="umbrela.mean", value=2.0),
              Score(query_id="q2", run=1, metric="umbrela.mean", error="judge call failed")]
    write_results(tmp_path, outputs, EvalResult(scores=scores), RunInfo(simulated=True))
    loaded = load_results(tmp_path)
    assert loaded.simulated is True
    assert [row.scores for row in loaded.rows] == [{"umbrela.mean": 2.0}, {"umbrela.mean": None}]
    assert loaded.rows[1].errors == {"umbrela.mean": "judge call failed"}


def _runs(tmp_path: Path, label: str, runs: dict[str, list[float]], metric: str = "citation.f1") -> Any:
    from open_rag_eval.report.data import ResultSet, Row

    rows = [Row(query_id=qid, query="", run=run, scores={metric: value})
            for qid, values in runs.items() for run, value in enumerate(values, start=1)]
    return ResultSet(label=label, path=tmp_path, layout="ours", rows=rows)


def test_consistency_cis_by_hand() -> None:
    from open_rag_eval.report import plots

    # three runs 0.2, 0.4, 0.6: a bootstrap mean is 0.2 (or 0.6) with probability 1/27 = 3.7% > 2.5%, so the
    # percentile interval is the whole (0.2, 0.6); equal runs give (0.5, 0.5); one run gives none
    assert plots.mean_ci("citation.f1", [0.2, 0.4, 0.6]) == pytest.approx((0.4, 0.2, 0.6))
    assert plots.mean_ci("citation.f1", [0.5, 0.5, 0.5]) == pytest.approx((0.5, 0.5, 0.5))
    assert plots.mean_ci("citation.f1", [0.9]) == (0.9, None, None)
    # over queries: the per-query means 0.4, 0.5, 0.9 (a query counts once) -> mean 0.6, interval (0.4, 0.9)
    groups = {"q1": [0.2, 0.4, 0.6], "q2": [0.5, 0.5, 0.5], "q3": [0.9], "q4": []}
    assert plots.overall_ci("citation.f1", groups) == pytest.approx((0.6, 0.4, 0.9))
    assert plots.overall_ci("citation.f1", {"q": []}) is None
    # 30 queries (t interval from 30 values): means 0 and 1, 15 each -> s = sqrt(30 * 0.25 / 29) = 0.5085476,
    # 0.5 +- t(29) 2.045 (the table's three decimals) * 0.5085476 / sqrt(30) = 0.5 +- 0.1898735
    thirty = {f"q{i}": [float(i % 2)] * 2 for i in range(30)}
    assert plots.overall_ci("citation.f1", thirty) == pytest.approx((0.5, 0.3101265, 0.6898735), abs=1e-7)


def test_consistency_plot_draws_those_intervals(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib (the plot extra)")
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    from open_rag_eval.report import plots

    results = _runs(tmp_path, "a", {"q1": [0.2, 0.4, 0.6], "q2": [0.5, 0.5, 0.5], "q3": [0.9]})
    fig, ax = plt.subplots()
    plots._dispersion_panel(ax, "citation.f1", [results])
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    spans = sorted(float(y) for c in bars for y in c.lines[2][0].get_segments()[0][:, 1])
    assert spans == pytest.approx([0.2, 0.5, 0.5, 0.6])  # q1 (0.2, 0.6), q2 (0.5, 0.5); q3, one run: none
    band = [patch for patch in ax.patches if patch.get_alpha() == pytest.approx(0.12)]
    assert len(band) == 1
    extent = band[0].get_path().transformed(band[0].get_patch_transform()).get_extents()
    assert (extent.y0, extent.y1) == pytest.approx((0.4, 0.9))
    assert [line.get_ydata()[0] for line in ax.get_lines() if line.get_linestyle() == "--"] == pytest.approx([0.6])
    assert "mean 0.60 [0.40, 0.90], n=3" in [text.get_text() for text in ax.texts]
    plt.close(fig)
    path = plots.plot_consistency([results, _runs(tmp_path, "b", {"q1": [0.1, 0.3]})], ["citation.f1"],
                                  tmp_path / "cons.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
