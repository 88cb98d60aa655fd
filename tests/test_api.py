"""The Python API: evaluate/aevaluate on DataFrames, lists and paths, through real event loops and the simulated
judge; plain answer text segmented like CSV input; unscorable data refused; Results views; assert_metrics."""

from __future__ import annotations

import asyncio
import csv
import json
import math
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

pd = pytest.importorskip("pandas", reason="pandas (the 'api' extra) is not installed")

from open_rag_eval import RAGOutput, Results, aevaluate, evaluate  # noqa: E402
from open_rag_eval.core.errors import ConfigError, InputError  # noqa: E402
from open_rag_eval.inputs import read_outputs  # noqa: E402
from open_rag_eval.testing import assert_metrics  # noqa: E402

DATA = Path(__file__).parent / "data"
JUDGE = {"simulated": {"seed": 1}, "cache": False}


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def _cli(tmp_path: Path, data: Path) -> Path:
    shutil.copy(data, tmp_path / data.name)
    (tmp_path / "cli.yaml").write_text(f"input: {data.name}\noutput_dir: cli\njudge:\n  simulated: {{seed: 1}}\n"
                                       "  cache: false\nevaluators:\n  - type: trec\n", encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", "cli.yaml"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return tmp_path / "cli"


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _same_values(frame: pd.DataFrame, rows: list[dict[str, str]], skip: tuple[str, ...]) -> int:
    assert list(frame.columns) == list(rows[0])
    assert len(frame) == len(rows)
    checked = 0
    for (_, got), want in zip(frame.iterrows(), rows, strict=True):
        for column, cell in want.items():
            if column in skip or column.endswith(".error"):
                assert str(got[column]).lower() == cell.lower() or got[column] == cell, column
            elif cell == "":
                assert math.isnan(got[column]), column
            else:
                assert got[column] == float(cell), (column, got[column], cell)
                checked += 1
    return checked


# ---------------------------------------------------------------- DataFrames, paths, loops


def test_a_dataframe_in_the_csv_layout_scores_as_the_cli_scores_the_file(tmp_path: Path) -> None:
    results = evaluate(pd.read_csv(DATA / "minimal.csv"), judge=JUDGE)
    cli = _cli(tmp_path, DATA / "minimal.csv")
    assert _same_values(results.to_pandas(), _csv(cli / "results.csv"),
                        ("query_id", "query", "run", "simulated_judge")) > 30
    assert _same_values(results.summary(), _csv(cli / "summary.csv"), ("metric", "status", "simulated_judge")) > 100
    details = results.details()
    assert [o["query_id"] for o in details["outputs"]] == ["q1", "q2"]
    assert details["outputs"][0]["source"] == "DataFrame row 0" and details["simulated"] is True
    assert results.simulated and results.complete


def test_a_dataframe_in_the_list_of_contexts_layout_with_list_cells(tmp_path: Path) -> None:
    frame = pd.DataFrame({"user_input": ["What causes the seasons?", "Who wrote the first program?"],
                          "response": ["The tilt of the axis causes the seasons [1].", "Ada Lovelace did [2]."],
                          "retrieved_contexts": [["The axis tilt causes the seasons.", "Distance varies a little."],
                                                 ["Babbage designed the engine.", "Ada Lovelace wrote the program."]]})
    table = evaluate(frame, judge=JUDGE).to_pandas()
    assert table["query_id"].str.startswith("q_").all() and table["run"].tolist() == [1, 1]
    assert table["citation.f1"].tolist() == [1.0, 1.0]


def test_a_path_is_read_like_input(tmp_path: Path) -> None:
    from_path = evaluate(str(DATA / "outputs.jsonl"), judge=JUDGE).to_pandas()
    from_rows = evaluate([json.loads(line) for line in (DATA / "outputs.jsonl").read_text().splitlines()
                          if line.strip()], judge=JUDGE).to_pandas()
    assert from_path.equals(from_rows) and len(from_path) > 1


def test_evaluate_inside_a_running_event_loop_and_aevaluate() -> None:
    frame = pd.read_csv(DATA / "minimal.csv")
    seen: dict[str, object] = {}

    async def notebook() -> tuple[Results, Results]:
        seen["loop"] = asyncio.get_running_loop()
        sync = evaluate(frame, judge=JUDGE)  # no "asyncio.run() cannot be called from a running event loop"
        awaited = await aevaluate(frame, judge=JUDGE)
        seen["thread"] = threading.current_thread()
        return sync, awaited

    sync, awaited = asyncio.run(notebook())
    assert seen["thread"] is threading.main_thread()
    assert sync.to_pandas().equals(awaited.to_pandas())
    assert sync.mean("citation.f1") == awaited.mean("citation.f1") is not None


def test_an_event_loop_left_running_in_another_thread_is_not_reused() -> None:
    loop = asyncio.new_event_loop()
    runner = threading.Thread(target=loop.run_forever, daemon=True)
    runner.start()
    try:
        future = asyncio.run_coroutine_threadsafe(asyncio.to_thread(
            evaluate, pd.read_csv(DATA / "minimal.csv"), judge=JUDGE), loop)
        assert future.result(timeout=120).mean("no_answer.answered") == 1.0
    finally:
        loop.call_soon_threadsafe(loop.stop)
        runner.join(10)
        loop.close()


# ---------------------------------------------------------------- plain text is segmented; unscorable is an error


def test_a_ragoutput_built_with_plain_text_scores_like_the_csv() -> None:
    from_csv = read_outputs(DATA / "minimal.csv")
    built = [RAGOutput(query_id=o.query_id, query=o.query, passages=o.passages, answer=o.answer_text)
             for o in from_csv]
    as_text = [RAGOutput(query_id=o.query_id, query=o.query, passages=o.passages, answer_text=o.answer_text)
               for o in from_csv]
    for csv_output, plain, text in zip(from_csv, built, as_text, strict=True):
        assert plain.answer == text.answer == csv_output.answer and len(plain.answer) == 2
        assert plain.answer_text == csv_output.answer_text
    assert built[0].answer[0].citations == ("1",)
    csv_results, api_results = evaluate(DATA / "minimal.csv", judge=JUDGE), evaluate(built, judge=JUDGE)
    for metric in ("citation.f1", "no_answer.answered", "nuggets.vital"):
        assert api_results.mean(metric) == csv_results.mean(metric), metric
    assert api_results.mean("no_answer.answered") == 1.0  # before: every plain-text output scored as a refusal
    assert api_results.mean("citation.f1") == 0.5


def test_plain_text_and_a_different_answer_text_is_refused() -> None:
    with pytest.raises(ValueError, match="answer_text differs"):
        RAGOutput(query_id="q", query="x", answer="one [1].", answer_text="another")


def test_the_literal_refusal_is_a_refusal() -> None:
    output = RAGOutput(query_id="q", query="x", answer="NO_ANSWER")
    assert [part.text for part in output.answer] == ["NO_ANSWER"]


@pytest.mark.parametrize(("data", "message"), [
    ([{"query_id": "a", "query": "x", "answer": "ok"}, object()],
     "data[1]: expected a dict or a RAGOutput, got object: it cannot be scored"),
    ([{"query_id": "a", "query": "x", "answer": 5}],
     "data[0]: field 'answer': expected a list of statements or a string, got a number"),
    ([{"query": "x", "answer": "ok"}], "data[0]: field 'query_id': missing query_id"),
    ([{"query_id": "a", "query": "x", "passages": [{"id": "1"}], "answer": "ok"}],
     "data[0]: field 'passages[0].text'"),
    ([RAGOutput(query_id="a", query="x", answer="ok"), RAGOutput(query_id="b", query="y")],
     "data[1]: field 'answer': no answer: the trec evaluator's metric 'nuggets' reads the answer"),
    ([{"query_id": "a", "query": "x", "answer": "ok"}] * 2,
     "data[1]: field 'run': duplicate output for query_id 'a' run 1 (first at data[0])"),
    ([], "data: no RAG outputs to evaluate"),
    (42, "data: expected a pandas DataFrame, a list of dicts or RAGOutputs, or a path"),
])
def test_data_that_cannot_be_scored_is_an_input_error_naming_item_and_field(data: object, message: str) -> None:
    with pytest.raises(InputError) as caught:
        evaluate(data, judge=JUDGE)
    assert message in str(caught.value)


@pytest.mark.parametrize(("frame", "message"), [
    (pd.DataFrame({"question": ["q", "r"], "answer": ["a [1]", "b"], "contexts": [["x"], 5]}),
     "DataFrame row 1: field 'contexts': expected a list of passages, got a number"),
    (pd.DataFrame({"question": ["q", "r"], "answer": ["a [1]", None], "contexts": [["x"], ["y"]]}),
     "DataFrame row 1: field 'answer': no answer"),
    (pd.DataFrame({"query_id": ["a"], "query": ["q"], "passage_id": ["1"], "passage": ["p"]}),
     "DataFrame: field 'generated_answer': missing column"),
    (pd.DataFrame({"query_id": ["a", "a"], "query": ["q", "q"], "passage_id": ["1", "1"], "passage": ["p", "p"],
                   "generated_answer": ["yes [1].", None]}), "DataFrame row 1: field 'passage_id': duplicate passage id"),
    (pd.DataFrame(columns=["question", "answer", "contexts"]), "DataFrame: the DataFrame has no rows"),
])
def test_a_dataframe_problem_names_the_row_and_column(frame: pd.DataFrame, message: str) -> None:
    with pytest.raises(InputError) as caught:
        evaluate(frame, judge=JUDGE)
    assert message in str(caught.value)


# ---------------------------------------------------------------- config and options


def test_config_path_dict_and_options(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("input: not-read.csv\njudge:\n  model: gpt-4o-mini\n  cache: false\n"
                                     "evaluators:\n  - type: trec\n", encoding="utf-8")
    outputs = read_outputs(DATA / "minimal.csv")
    from_path = evaluate(outputs, tmp_path / "c.yaml", judge=JUDGE)  # the option replaces the judge section
    from_dict = evaluate(outputs, {"judge": JUDGE, "evaluators": [{"type": "trec"}]})
    assert from_path.to_pandas().equals(from_dict.to_pandas())
    assert from_dict.manifest["config"]["judge"]["simulated"] == {"seed": 1}
    no_judge = evaluate(outputs, evaluators=[{"type": "golden"}])  # no judge needed: nothing is asked
    assert not any(m.startswith("citation.") for m in no_judge.metrics)
    with pytest.raises(ConfigError, match="judge.modle"):
        evaluate(outputs, judge={"modle": "x"})
    with pytest.raises(ConfigError, match="config must be None, a path to a YAML file or a dict"):
        evaluate(outputs, 5)


def test_a_config_path_that_cannot_be_read_names_the_file(tmp_path: Path) -> None:
    outputs = read_outputs(DATA / "minimal.csv")
    (tmp_path / "latin1.yaml").write_bytes(b"judge: {model: caf\xe9}\n")
    for name, problem in (("missing.yaml", "cannot read config: No such file"),
                          ("latin1.yaml", "config is not UTF-8 text")):
        with pytest.raises(ConfigError) as caught:
            evaluate(outputs, tmp_path / name)
        assert caught.value.file == str(tmp_path / name) and caught.value.problem.startswith(problem)


# ---------------------------------------------------------------- Results


def test_save_report_output_dir_and_from_folder(tmp_path: Path) -> None:
    results = evaluate(DATA / "minimal.csv", judge=JUDGE, output_dir=tmp_path / "kept")
    names = {"outputs.jsonl", "results.csv", "summary.csv", "results.json", "manifest.json", "report.html"}
    assert {p.name for p in (tmp_path / "kept").iterdir()} == names
    (tmp_path / "saved").mkdir()
    (tmp_path / "saved" / "notes.txt").write_text("mine")
    folder = results.save(tmp_path / "saved")
    assert {p.name for p in folder.iterdir()} == names | {"notes.txt"}
    for name in names:
        assert (folder / name).read_text() == (tmp_path / "kept" / name).read_text(), name
    assert Results.from_folder(folder).to_pandas().equals(results.to_pandas())
    page = results.report(tmp_path / "r.html")
    assert page.read_text().lstrip().lower().startswith("<!doctype html")
    assert "Results(2 rows" in repr(results)


# ---------------------------------------------------------------- assert_metrics


def _outputs(cite_right: bool, n: int = 10) -> list[dict[str, object]]:
    subjects = ["granite", "copper", "maple", "falcon", "glacier", "saffron", "walrus", "quartz", "tundra", "lagoon",
                "marble", "cobalt"]
    items = []
    for i in range(n):
        word = subjects[i]
        items.append({
            "query_id": f"q{i:02d}", "query": f"What is known about the {word}?",
            "passages": [{"id": "d1", "text": f"The {word} is studied in the museum of natural history."},
                         {"id": "d2", "text": "Tickets for the concert are sold at the door on Fridays."}],
            "answer": f"The {word} is studied in the museum of natural history [{'d1' if cite_right else 'd2'}].",
        })
    return items


@pytest.fixture(scope="module")
def good_and_bad(tmp_path_factory: pytest.TempPathFactory) -> tuple[Results, Results]:
    cwd = Path.cwd()
    try:
        import os

        os.chdir(tmp_path_factory.mktemp("gates"))
        return evaluate(_outputs(True), judge=JUDGE), evaluate(_outputs(False), judge=JUDGE)
    finally:
        os.chdir(cwd)


def test_assert_metrics_passes_within_thresholds(good_and_bad: tuple[Results, Results]) -> None:
    good, bad = good_and_bad
    assert good.mean("citation.f1") == 1.0 and bad.mean("citation.f1") == 0.0
    assert_metrics(good, {"citation.f1": 1.0, "citation.fabricated": 0.0, "no_answer.answered": 1.0})
    assert_metrics(good, {"citation.f1": 0.9}, baseline=bad)  # better than the baseline is fine
    assert_metrics(bad, {}, baseline=bad)


def test_assert_metrics_threshold_failures_are_readable(good_and_bad: tuple[Results, Results]) -> None:
    good, bad = good_and_bad
    with pytest.raises(AssertionError) as caught:
        assert_metrics(bad, {"citation.f1": 0.5, "no_answer.answered": 1.0, "citation.f1_strct": 0.5})
    message = str(caught.value)
    assert message.startswith("2 metric gate(s) failed:")
    assert "citation.f1 = 0.0000, threshold >= 0.5; worst queries: q00 (0), q01 (0), q02 (0)" in message
    assert "citation.f1_strct: no such metric in the results; did you mean citation.f1_strict" in message
    assert "no_answer.answered" not in message


def test_assert_metrics_lower_is_better() -> None:
    with_fabricated = [dict(o, answer=str(o["answer"]).replace("[d1]", "[d9]")) for o in _outputs(True, 4)]
    results = evaluate(with_fabricated + _outputs(True, 6)[4:], judge=JUDGE)
    assert results.mean("citation.fabricated") == pytest.approx(4 / 6)
    assert_metrics(results, {"citation.fabricated": 0.7})
    with pytest.raises(AssertionError) as caught:
        assert_metrics(results, {"citation.fabricated": 0.1})
    assert "citation.fabricated = 0.6667, threshold <= 0.1; worst queries: q00 (1), q01 (1), q02 (1)" in str(caught.value)


def test_assert_metrics_no_worse_than_baseline(good_and_bad: tuple[Results, Results], tmp_path: Path) -> None:
    good, bad = good_and_bad
    baseline = good.save(tmp_path / "main")
    with pytest.raises(AssertionError) as caught:
        assert_metrics(bad, {"citation.f1": 0.0}, baseline=baseline)  # the threshold passes, the baseline does not
    message = str(caught.value)
    assert message.startswith("1 metric gate(s) failed:")
    assert "REGRESSION citation.f1: dropped 1.000, more than the 0 allowed, significantly (95% CI of the change " \
           "-1.000 .. -1.000" in message
    assert "(new against the baseline); worst queries: q00 (0)" in message
    assert_metrics(bad, {"citation.f1": 0.0}, baseline=baseline, max_drop=1.0)
    frame = bad.compare(good, ["citation.f1"])
    assert frame.loc[0, "verdict"] == "REGRESSION" and frame.loc[0, "diff"] == -1.0 and frame.loc[0, "n"] == 10


def test_assert_metrics_rejects_a_threshold_that_is_not_a_number(good_and_bad: tuple[Results, Results]) -> None:
    with pytest.raises(ValueError, match="finite number"):
        assert_metrics(good_and_bad[0], {"citation.f1": float("nan")})


# ---------------------------------------------------------------- imports


def test_the_api_is_re_exported_lazily() -> None:
    import open_rag_eval

    assert open_rag_eval.__all__ == sorted(open_rag_eval.__all__)
    for name in open_rag_eval.__all__:
        assert getattr(open_rag_eval, name) is not None
    probe = ("import sys, open_rag_eval, open_rag_eval.cli as c; c._parser(); a = sorted(m for m in ('pandas', "
             "'open_rag_eval.api', 'pydantic') if m in sys.modules); from open_rag_eval import evaluate; "
             "print(a, 'pandas' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[] False"


# ---------------------------------------------------------------- distribution


def test_the_distribution_name_is_ours_and_install_lines_install_this_checkout() -> None:
    root = Path(__file__).resolve().parent.parent
    setup = (root / "setup.py").read_text(encoding="utf-8")
    assert 'NAME = "open-rag-eval-trec"' in setup and "name=NAME" in setup
    assert '"open-rag-eval=open_rag_eval.cli:main"' in setup
    lines = [line.strip() for doc in (root / "README.md", *sorted((root / "docs").glob("*.md")))
             for line in doc.read_text(encoding="utf-8").splitlines() if line.strip().startswith("pip install")]
    assert lines
    for line in lines:
        assert line.startswith(("pip install -e '.[", "pip install -e .", "pip install 'dist/open_rag_eval_trec-")), line


def test_a_run_cell_is_a_number_only_when_it_is_ascii_digits() -> None:
    from open_rag_eval.api.results import _typed

    assert _typed({"run": "2"}, numbers=[]) == {"run": 2}
    assert _typed({"run": "\u00b2"}, numbers=[]) == {"run": "\u00b2"}  # '²'.isdigit() is true; int('²') raises
