"""A run evaluated window by window (whole queries) writes the files of a run evaluated at once, byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from open_rag_eval.config import load_config
from open_rag_eval.core.errors import InputError
from open_rag_eval.core.types import EvalResult, Score
from open_rag_eval.inputs.jsonl import jsonl_query_groups, jsonl_query_sizes, read_jsonl_outputs
from open_rag_eval.run import evaluation, pipeline, source
from open_rag_eval.run.spill import Spill

FILES = ("results.csv", "results.json", "summary.csv", "outputs.jsonl")
WORDS = "solar wind grid battery storage carbon price market coal hydro power demand supply heat pump".split()


def _outputs(skipped: bool = False) -> list[dict]:
    """9 queries: 2 or 3 runs each (``skipped``: q2 and q6 have a single run, so consistency skips them), one
    failed output, labels."""
    lines = []
    for q in range(9):
        words = WORDS[q:q + 4]
        for run in range(1, 1 + (1 if skipped and q in (2, 6) else 2 + q % 2)):
            passages = [{"id": str(i), "text": f"{' '.join(words)} text {i} of query {q}, run {run}."} for i in (1, 2)]
            line = {"query_id": f"q{q}", "query": f"What about {words[0]} and {words[1]}?", "run": run,
                    "passages": passages, "answer": f"{words[0].capitalize()} meets {words[run % 4]} [1]. "
                                                    f"Also {words[2]} [2].",
                    "relevant_ids": ["1"], "expected_keywords": words[:2]}
            if (q, run) == (5, 3):
                line = {"query_id": "q5", "query": line["query"], "run": 3, "error": "timeout"}
            lines.append(line)
    return lines


def _config(tmp_path: Path, name: str, lines: list[dict]) -> Path:
    data = tmp_path / f"{name}.jsonl"
    data.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return write_config(tmp_path, data, name)


def write_config(tmp_path: Path, data: Path, name: str) -> Path:
    """The config of these runs: ``data`` through trec (the simulated judge), golden and consistency."""
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        f"input: {data.name}\noutput_dir: {name}-out\n"
        "judge:\n  model: simulated-judge\n  simulated: {latency_ms: 0, jitter_ms: 0}\n  cache: false\n"
        "evaluators:\n"
        "  - {type: trec, k_values: [1, 2], metrics: [umbrela, nuggets, citation, no_answer]}\n"
        "  - {type: golden, k_values: [1, 2]}\n"
        "  - {type: consistency, metrics: [rouge, dispersion], judge_repeats: 2}\n",
        encoding="utf-8")
    return config


def _run(config: Path, window: int, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, bytes], int]:
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", window)
    added = []
    real_add = Spill.add
    monkeypatch.setattr(Spill, "add", lambda self, outputs, parts: (added.append(len(outputs)),
                                                                      real_add(self, outputs, parts))[1])
    report = pipeline.run(load_config(config))
    return {name: (report.output_dir / name).read_bytes() for name in FILES}, len(added)


def test_a_run_in_windows_of_whole_queries_writes_the_bytes_of_a_run_in_one_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _outputs()
    config = _config(tmp_path, "data", lines)
    whole, n_whole = _run(config, 10_000, monkeypatch)
    windowed, n_windowed = _run(config, 5, monkeypatch)
    assert (n_whole, n_windowed) == (1, 5)  # q0 q1 | q2 q3 | q4 q5 | q6 q7 | q8: whole queries, <= 5 outputs
    for name in FILES:
        assert windowed[name] == whole[name], name
    document = json.loads(whole["results.json"])
    assert len(document["outputs"]) == len(lines) == 22
    assert [entry["query_id"] for entry in document["queries"]] == [f"q{q}" for q in range(9)]
    failed = next(o for o in document["outputs"] if o["error"])
    assert (failed["query_id"], failed["run"], failed["errors"]["umbrela.p@1"]) == ("q5", 3, "no output: timeout")


def test_a_run_where_consistency_skips_a_query_is_one_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    config = _config(tmp_path, "skip", _outputs(skipped=True))
    with caplog.at_level("WARNING"):
        files, n_windows = _run(config, 5, monkeypatch)
    assert n_windows == 1
    said = [r.getMessage() for r in caplog.records if "one window" in r.getMessage()]
    assert said == ["evaluating the 20 outputs as one window, every output in memory: the consistency evaluator "
                    "sees the whole run at once"]  # windows would list q2 and q6 among the others
    queries = [entry["query_id"] for entry in json.loads(files["results.json"])["queries"]]
    assert queries == ["q2", "q6", "q0", "q1", "q3", "q4", "q5", "q7", "q8"]


def test_interleaved_queries_are_one_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    lines = _outputs()
    interleaved = sorted(lines, key=lambda line: line["run"])  # every query's run 1, then every run 2, ...
    config = _config(tmp_path, "mixed", interleaved)
    with caplog.at_level("WARNING"):
        files, n_windows = _run(config, 4, monkeypatch)
    assert n_windows == 1
    said = [r.getMessage() for r in caplog.records if "one window" in r.getMessage()]
    assert said == ["evaluating the 22 outputs as one window, every output in memory: a query's outputs are not "
                    "contiguous in the input (sort it by query_id to stream it)"]
    saved = [json.loads(line) for line in files["outputs.jsonl"].decode().splitlines()]
    assert [(o["query_id"], o["run"]) for o in saved] == [(o["query_id"], o["run"]) for o in interleaved]


def test_the_streamed_reader_reads_what_the_whole_file_reader_reads(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    lines = _outputs()
    path.write_text("\n" + "".join(json.dumps(line) + "\n\n" for line in lines), encoding="utf-8")
    groups = list(jsonl_query_groups(path))
    assert [len(group) for group in groups] == [2, 3, 2, 3, 2, 3, 2, 3, 2]
    assert [o for group in groups for o in group] == read_jsonl_outputs(path)
    assert groups[0][0].source == f"{path}:2" and groups[0][0].labels.relevant_ids == {"1": 1}


@pytest.mark.parametrize("text, problem", [
    ('{"query_id": "q1", "query": "x", "answer": "a"}\n{"query_id": "q1", "query": "x"', ":2: not valid JSON"),
    # in line order
    ('{"query_id": "q1", "query": "x", "answer": 5}\n{"query_id": "q1", "query": "x"', ":1: field 'answer'"),
    ('{"query_id": "q1", "query": "x", "answer": "a"}\n{"query_id": "q1", "query": "x", "answer": "b"}\n',
     "duplicate output"),
    ('{"query_id": "q1", "query": "x", "answer": "a"}\n{"query_id": "q1", "query": "y", "run": 2, "answer": "a"}\n',
     "query text differs"),
    ("\n\n", "empty file"),
])
def test_the_streamed_reader_refuses_what_the_whole_file_reader_refuses(tmp_path: Path, text: str,
                                                                       problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as whole:
        read_jsonl_outputs(path)
    with pytest.raises(InputError) as streamed:
        list(jsonl_query_groups(path))
    assert str(streamed.value) == str(whole.value) and problem in str(whole.value)


def test_the_shape_of_a_file_read_as_json_alone_is_the_shape_of_its_outputs(tmp_path: Path) -> None:
    path = tmp_path / "shape.jsonl"
    lines = [*_outputs(), {"query_id": 7, "query": "Seven?", "answer": "Seven [1].", "error": "timeout"},
             {"question": "Contexts?", "contexts": ["one", "two"], "response": "One [1]."},
             {"question": "Contexts?", "contexts": ["one"], "response": "Two [1]."}]
    path.write_text("\n" + "".join(json.dumps(line) + "\n\n" for line in lines), encoding="utf-8")
    groups = list(jsonl_query_groups(path))
    shape = [(group[0].query_id, len(group), sum(o.error is None for o in group)) for group in groups]
    assert list(jsonl_query_sizes(path)) == shape
    assert shape[0] == ("q0", 2, 2) and shape[5] == ("q5", 3, 2) and shape[-2:] == [("7", 1, 0), (
        groups[-1][0].query_id, 2, 2)] and groups[-1][0].query_id.startswith("q_")


@pytest.mark.parametrize("text, problem", [
    ('{"query_id": "q1", "query": "x", "answer": "a"}\n{"query_id": "q1", "query": "x"', ":2: not valid JSON"),
    # in line order
    ('{"query_id": "q1", "query": "x", "answer": 5}\n{"query_id": "q1", "query": "x"', ":1: field 'answer'"),
    ('{"query_id": "q1", "query": "x", "answer": "a"}\n[1, 2]\n', ":2: a line must be a JSON object"),
    ('{"query": "x", "answer": "a"}\n', ":1: field 'query_id': missing query_id"),
    ("\n\n", "empty file"),
])
def test_reading_the_shape_refuses_a_line_that_is_not_a_json_object_with_the_file_s_first_error(
        tmp_path: Path, text: str, problem: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as whole:
        read_jsonl_outputs(path)
    with pytest.raises(InputError) as shape:
        list(jsonl_query_sizes(path))
    assert str(shape.value) == str(whole.value) and problem in str(whole.value)


def test_a_bad_field_late_in_a_file_fails_the_run_and_publishes_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = _outputs()
    config = _config(tmp_path, "late", lines)
    before, _ = _run(config, 5, monkeypatch)  # a first run's results, which the failed run must leave as they are
    lines[20]["run"] = "three"  # q8's second run, in the last window: line 21
    (tmp_path / "late.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    source.JsonlSource(tmp_path / "late.jsonl")  # valid JSON on every line: the source opens
    with pytest.raises(InputError) as failed:
        _run(config, 5, monkeypatch)
    assert str(failed.value) == f"{tmp_path / 'late.jsonl'}:21: field 'run': expected a whole number >= 0, got 'three'"
    out = tmp_path / "late-out"
    assert {name: (out / name).read_bytes() for name in FILES} == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".") or "late-out" in p.name) == ["late-out"]


def test_a_warning_about_many_outputs_is_one_line_a_kind_for_the_whole_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    lines = _outputs()
    for line in lines:
        if "answer" in line:
            line["answer"] += " Unknown [9]."  # a citation of no retrieved passage, in every window
    config = _config(tmp_path, "warn", lines)
    with caplog.at_level("WARNING"):
        _run(config, 5, monkeypatch)
    unknown = [r.getMessage() for r in caplog.records if "9)" in r.getMessage()]
    assert len(unknown) == 1 and unknown[0].startswith("21 output(s): "), unknown
    assert f"first: line 1 (9); line 2 (9); line 3 (9) and 18 more" in unknown[0]


def test_bad_bytes_late_in_a_file_fail_before_any_window(tmp_path: Path) -> None:
    path = tmp_path / "late.jsonl"
    good = "".join(json.dumps(line) + "\n" for line in _outputs())
    path.write_bytes(good.encode() + b'{"query_id": "q99", "query": "\xff"}\n')
    with pytest.raises(InputError, match="not UTF-8"):
        source.JsonlSource(path)  # opening the source checks every line


def test_the_spill_keeps_each_metric_in_order_and_the_reasons_of_a_metric_without_values() -> None:
    with Spill() as spill:
        spill.add([], [EvalResult(scores=[Score(query_id="a", run=1, metric="m", value=0.5),
                                          Score(query_id="a", run=1, metric="f", error="judge call failed: 500"),
                                          Score(query_id="a", run=2, metric="m", value=float("nan"))])])
        spill.add([], [EvalResult(scores=[Score(query_id="b", run=1, metric="m", value=0.25),
                                          Score(query_id="b", run=1, metric="f", error="judge call failed: 429")]),
                       EvalResult(scores=[Score(query_id="b", run=1, metric="f", error="judge call failed: 500")])])
        assert spill.values("m") == [0.5, 0.25] and spill.values("f") == []
        assert (spill.n_failed["m"], spill.n_failed["f"]) == (1, 3)
        assert spill.reasons["f"].most_common(1) == [("judge call failed: 500", 2)] and "m" not in spill.reasons
        assert list(spill.metrics) == ["m", "f"] and spill.errored == {"m", "f"}
        _, scores, _, sizes = next(spill.windows())
        assert scores[2].error == "not a finite number" and sizes == [(3, 0)]


def test_a_run_report_reads_its_result_back_from_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = _config(tmp_path, "data", _outputs())
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", 4)
    report = pipeline.run(load_config(config))
    scores = {(s.query_id, s.run, s.metric): s for s in report.result.scores}
    assert scores[("q5", 3, "umbrela.p@1")].error == "no output: timeout"
    assert scores[("q0", None, "consistency.rougeL")].value == pytest.approx(0.8)  # LCS 4 of 5 tokens each way
    assert report.reasons["consistency.citation.fabricated.cv"] == "cv is undefined: the mean is 0"  # no value at all
    assert [o.key for o in report.outputs] == [(line["query_id"], line["run"]) for line in _outputs()]


def test_outputs_given_in_memory_with_interleaved_queries_say_they_are_one_window(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    config = _config(tmp_path, "given", sorted(_outputs(), key=lambda line: line["run"]))
    outputs = read_jsonl_outputs(tmp_path / "given.jsonl")
    monkeypatch.setattr(evaluation, "WINDOW_OUTPUTS", 4)
    with caplog.at_level("WARNING"):
        pipeline.run(load_config(config), outputs=outputs)
    said = [r.getMessage() for r in caplog.records if "one window" in r.getMessage()]
    assert said == ["evaluating the 22 outputs as one window, every output in memory: a query's outputs are not "
                    "contiguous in the input (sort it by query_id to stream it)"]
