"""`plot` and `load_results` over a results folder of any size: the values are read as a stream into columns on disk
(``report.data.RowValues``), the rows only when asked for; what they give is what the rows read whole give."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.config import load_config
from open_rag_eval.core.errors import InputError
from open_rag_eval.report import columns, loader, plots
from open_rag_eval.report.data import ResultSet, Row
from open_rag_eval.report.loader import load_results
from open_rag_eval.run import evaluation, pipeline
from open_rag_eval.run.spill import Spill
from open_rag_eval.store.csv_cells import read_cell

OURS = Path(__file__).parent / "data" / "results_fixture"
WORDS = "solar wind grid battery storage carbon price market coal hydro power demand".split()


def _windowed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A run of 8 queries (2 or 3 runs each, one failed output), evaluated in windows of 4 outputs: its folder."""
    lines = []
    for q in range(8):
        words = WORDS[q:q + 4]
        for run in range(1, 3 + q % 2):
            passages = [{"id": str(i), "text": f"{' '.join(words)} text {i} of query {q}, run {run}."} for i in (1, 2)]
            lines.append({"query_id": f"q{q}", "query": f"What about {words[0]}?", "run": run, "passages": passages,
                          "answer": f"{words[0].capitalize()} meets {words[run % 4]} [1]. Also {words[2]} [2].",
                          "relevant_ids": ["1"], "expected_keywords": words[:2]})
    lines[4] = {"query_id": "q1", "query": lines[4]["query"], "run": 3, "error": "timeout"}  # q1 keeps 2 runs
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    config = tmp_path / "run.yaml"
    config.write_text(
        "input: in.jsonl\noutput_dir: out\n"
        "judge:\n  model: simulated-judge\n  simulated: {latency_ms: 0, jitter_ms: 0}\n  cache: false\n"
        "evaluators:\n"
        "  - {type: trec, k_values: [1, 2], metrics: [umbrela, citation, no_answer]}\n"
        "  - {type: golden, k_values: [1, 2]}\n"
        "  - {type: consistency, metrics: [rouge, dispersion], judge_repeats: 2}\n", encoding="utf-8")
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", 4)
    windows: list[int] = []
    real_add = Spill.add
    monkeypatch.setattr(Spill, "add", lambda self, outputs, parts: (windows.append(len(outputs)),
                                                                      real_add(self, outputs, parts))[1])
    report = pipeline.run(load_config(config))
    assert len(windows) >= 4  # a run in windows, not one
    return report.output_dir


def _rows_read_whole(path: Path) -> list[Row]:
    """The rows as the loader read them before it streamed: every record, every metric cell, by hand."""
    with path.open(newline="", encoding="utf-8") as handle:
        records = list(csv.DictReader(handle))
    metrics = [c for c in records[0] if c not in ("query_id", "query", "run", "simulated_judge")
               and not c.endswith(".error")]
    rows = []
    for record in records:
        row = Row(read_cell(record["query_id"]), read_cell(record["query"]),
                  None if record["run"] == "all" else int(record["run"]))
        for metric in metrics:
            if record[metric]:
                row.scores[metric] = float(record[metric])
            elif record.get(f"{metric}.error"):
                row.scores[metric], row.errors[metric] = None, read_cell(record[f"{metric}.error"])
        rows.append(row)
    return rows


@pytest.mark.slow
def test_a_windowed_run_loads_the_values_its_rows_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = _windowed_run(tmp_path, monkeypatch)
    monkeypatch.setattr(columns, "BLOCK", 3)  # every metric's values span blocks on disk
    whole = ResultSet("whole", folder, "ours", _rows_read_whole(folder / "results.csv"))
    streamed = load_results(folder)
    assert streamed.metrics == whole.metrics and len(whole.metrics) > 20
    assert streamed.queries() == whole.queries() == {f"q{q}" for q in range(8)}
    across = [m for m in whole.metrics if whole.values(m, per_run=False)]
    assert across and "umbrela.mean" not in across  # per-query rows (consistency) and per-run ones both checked
    for metric in whole.metrics:
        for per_run in (None, True, False):
            assert streamed.values(metric, per_run=per_run) == whole.values(metric, per_run=per_run), metric
        assert streamed.per_query(metric) == whole.per_query(metric), metric
        assert list(streamed.per_query(metric)) == list(whole.per_query(metric)), metric
        assert streamed.query_means(metric) == whole.query_means(metric), metric
    failed = [row for row in streamed.rows if row.errors]
    assert ("q1", 3) in [(r.query_id, r.run) for r in failed]
    assert streamed.rows == whole.rows


def test_literal_values_by_metric_run_and_query(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "BLOCK", 2)
    result = load_results(OURS)
    assert result.values("hhem.score") == [0.91, 0.85, 0.95, 0.12, 0.40]
    assert result.values("consistency.rougeL", per_run=False) == [0.62, 0.55]
    assert result.values("consistency.rougeL", per_run=True) == []
    assert result.values("nuggets.vital", per_run=False) == []
    assert result.per_query("nuggets.vital") == {"q1": [1.0, 0.5], "q2": [1.0, 0.0], "q3": [0.5], "q4": [0.0]}
    assert result.query_means("citation.f1") == {"q1": 0.625, "q2": 0.5, "q3": 1.0, "q4": 0.0}
    assert result.query_means("consistency.hhem.score.mean") == {"q1": 0.88, "q2": 0.535}
    assert result.metrics[:2] == ["umbrela.mean", "umbrela.mrr"] and "hhem.score" in result.metrics
    assert result.queries() == {"q1", "q2", "q3", "q4"}


def test_rows_are_read_when_first_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Path] = []
    real = loader._our_rows
    monkeypatch.setattr(loader, "_our_rows", lambda path, *rest: (calls.append(path), real(path, *rest))[1])
    result = load_results(OURS)
    result.values("hhem.score"), result.per_query("umbrela.mean"), result.metrics
    assert len(calls) == 1  # the one streamed read
    assert [(r.query_id, r.run) for r in result.rows] == [("q1", 1), ("q1", 2), ("q2", 1), ("q2", 2), ("q3", 1),
                                                          ("q4", 1), ("q1", None), ("q2", None)]
    assert result.rows[4].errors == {"hhem.score": "HHEM model weights not found",
                                     "hhem.hallucinated": "HHEM model weights not found"}
    assert len(calls) == 2  # read again once, then kept


def test_a_bad_cell_anywhere_fails_the_load_naming_file_line_and_field(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "BLOCK", 2)
    good = "".join(f"q{i},Q,1,{i / 10}\n" for i in range(6))
    bad = tmp_path / "results.csv"
    bad.write_text("query_id,query,run,umbrela.mean\n" + good + "q9,Q,1,nan\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"results.csv:8: field 'umbrela.mean': not a finite number"):
        load_results(bad)
    bad.write_text("query_id,query,run,umbrela.mean\n" + good + "q9,Q,first,0.5\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"results.csv:8: field 'run'"):
        load_results(bad, metrics=["umbrela.mean"])
    bad.write_text("query_id,query,run,umbrela.mean,hhem.score\n" + "q1,Q,1,0.5,high\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"results.csv:2: field 'hhem.score'"):  # not plotted, still checked
        load_results(bad, metrics=["umbrela.mean"])


def test_plot_reads_only_the_metrics_it_draws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    drawn: dict[str, Any] = {}

    def capture(sets: list[ResultSet], metrics: list[str], path: Path, title: str) -> Path:
        drawn.update(metrics=metrics, values=[[s.values(m) for m in metrics] for s in sets],
                     answered=[s.values("no_answer.answered", per_run=True) for s in sets])
        with pytest.raises(KeyError, match="umbrela.mean"):
            sets[0].values("umbrela.mean")
        return path

    monkeypatch.setattr(plots, "plot_trec", capture)
    argv = ["plot", str(OURS), "-e", "trec", "--metrics-to-plot", "hhem.score,nuggets.vital", "-o",
            str(tmp_path / "x.png")]
    assert main(argv) == 0
    assert drawn == {"metrics": ["hhem.score", "nuggets.vital"],
                     "values": [[[0.91, 0.85, 0.95, 0.12, 0.40], [1.0, 0.5, 1.0, 0.0, 0.5, 0.0]]],
                     "answered": [[1.0, 1.0, 1.0, 1.0, 1.0, 0.0]]}


@pytest.mark.slow
@pytest.mark.parametrize("evaluator", ["trec", "consistency"])
def test_the_streamed_plot_is_the_plot_of_the_rows_read_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             evaluator: str) -> None:
    """The PNG drawn from the streamed set is the one drawn from every row in memory, byte for byte."""
    streamed = tmp_path / "streamed.png"
    assert main(["plot", str(OURS), "-e", evaluator, "-o", str(streamed)]) == 0
    real = loader.load_results

    def whole(path: Path, label: str | None = None, **_: Any) -> ResultSet:
        result = real(path, label)
        result.rows = _rows_read_whole(OURS / "results.csv")  # the set as it was: its rows in memory
        return result

    monkeypatch.setattr(loader, "load_results", whole)
    before = tmp_path / "whole.png"
    assert main(["plot", str(OURS), "-e", evaluator, "-o", str(before)]) == 0
    assert streamed.read_bytes() == before.read_bytes() and len(before.read_bytes()) > 20_000


def test_results_answer_without_building_the_whole_run() -> None:
    """``Results``: ``simulated`` from the manifest (results.json is not parsed), rows one at a time, repr's count
    from the CSV, compare from results.csv's text read as a stream."""
    from open_rag_eval.api.results import Results

    text = (OURS / "results.csv").read_text(encoding="utf-8")
    files = {"results.csv": text, "summary.csv": (OURS / "summary.csv").read_text(encoding="utf-8"),
             "manifest.json": json.dumps({"simulated": True}), "results.json": "{not parsed"}
    results = Results(files)
    assert results.simulated is True
    assert [(r["query_id"], r["run"], r["hhem.score"]) for r in results.iter_rows()][:3] == \
        [("q1", 1, 0.91), ("q1", 2, 0.85), ("q2", 1, 0.95)]
    assert len(results.rows()) == 8 and results.rows()[4]["hhem.score.error"] == "HHEM model weights not found"
    assert repr(results).startswith("Results(8 rows, ")
    loaded = results.result_set("new")
    assert loaded.label == "new" and loaded.simulated is True
    assert loaded.values("hhem.score") == [0.91, 0.85, 0.95, 0.12, 0.40]
    assert [(r.query_id, r.run) for r in loaded.rows][-2:] == [("q1", None), ("q2", None)]
    with pytest.raises(json.JSONDecodeError):
        results.details()


@pytest.mark.parametrize(("document", "problem"), [
    ({"simulated": False, "queries": []}, r"not a results.json written by open-rag-eval \(no 'outputs' list\)"),
    ({"outputs": [{"query_id": "q1", "run": 1}, {"run": 2}]}, r"outputs\[1\] is malformed"),
    ('{"outputs": [{"query_id": "q1", "scores": {"m": NaN}}]}', r"not a results.json .*not a finite number: NaN"),
])
def test_a_results_dir_read_as_a_stream_names_its_problem(tmp_path: Path, document: Any, problem: str) -> None:
    from open_rag_eval.evaluators.consistency import load_results_dir

    text = document if isinstance(document, str) else json.dumps(document)
    (tmp_path / "results.json").write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=problem) as error:
        load_results_dir(tmp_path)
    assert str(error.value).startswith(str(tmp_path / "results.json"))
    with pytest.raises(InputError, match="cannot read results: No such file"):
        load_results_dir(tmp_path / "gone")


def test_a_results_dir_gives_its_outputs_and_scores_in_file_order(tmp_path: Path) -> None:
    from open_rag_eval.evaluators.consistency import load_results_dir

    entries = [{"query_id": "q2", "run": 2, "answer_text": "b", "scores": {"m": 0.25, "n": None},
                "errors": {"n": "judge call failed"}},
               {"query_id": "q1", "query": "Q?", "run": 1, "answer": [{"text": "a", "citations": ["1"]}],
                "passages": [{"id": 1, "text": "p"}], "scores": {"m": 1}}]
    (tmp_path / "results.json").write_text(json.dumps({"simulated": True, "outputs": entries, "queries": [
        {"query_id": "q1", "scores": {"consistency.x": 0.5}}]}), encoding="utf-8")
    outputs, scores = load_results_dir(tmp_path)
    assert [(o.query_id, o.run, o.answer_text, o.passages[0].id if o.passages else None) for o in outputs] == \
        [("q2", 2, "b", None), ("q1", 1, "", "1")]
    assert [(s.query_id, s.run, s.metric, s.value, s.error) for s in scores] == [
        ("q2", 2, "m", 0.25, None), ("q2", 2, "n", None, "judge call failed"), ("q1", 1, "m", 1.0, None)]


def test_results_from_a_folder_read_its_files_when_asked(tmp_path: Path) -> None:
    """``Results.from_folder`` holds no file's text: each is read when asked for, and one replaced or removed since
    is an error naming it; ``evaluate``'s results hold theirs (``dict(files)``), as before."""
    import shutil

    from open_rag_eval.api.results import FolderFiles, Results
    from open_rag_eval.core.errors import StorageError

    folder = tmp_path / "run"
    shutil.copytree(OURS, folder)
    held = Results(dict(FolderFiles(folder)))
    lazy = Results.from_folder(folder)
    assert isinstance(held.files, dict) and not isinstance(lazy.files, dict)
    assert dict(lazy.files) == {p.name: p.read_text(encoding="utf-8") for p in folder.iterdir()}
    assert lazy.rows() == held.rows() and len(lazy.rows()) == 8 and repr(lazy) == repr(held)
    assert lazy.summary_rows() == held.summary_rows()
    assert lazy.result_set("b").values("hhem.score") == [0.91, 0.85, 0.95, 0.12, 0.40]
    changes = lazy.compare(held, ["citation.f1", "nuggets.vital"], resamples=200)
    assert changes["diff"].tolist() == [0.0, 0.0] and changes["n"].tolist() == [4, 4]
    (folder / "results.json").unlink()
    assert lazy.summary_rows() == held.summary_rows()  # what it asks for is still there
    with pytest.raises(StorageError, match=r"results.json: replaced or removed since Results.from_folder"):
        lazy.details()
    (folder / "results.csv").write_text("query_id,query,run\n", encoding="utf-8")
    with pytest.raises(StorageError, match=r"results.csv: replaced or removed"):
        lazy.rows()
    assert held.details()["outputs"] and len(held.rows()) == 8  # the held text outlives the folder
    saved = held.save(folder)
    again = Results.from_folder(saved)
    assert again.rows() == held.rows() and again.details() == held.details()
    again.save(saved)  # over its own folder: it reads the files it wrote
    assert again.rows() == held.rows() and again.mean("hhem.score") == held.mean("hhem.score")
