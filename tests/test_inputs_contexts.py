"""The list-of-contexts input layout: one row / line per answer with its passages as a list (ragas-like columns)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs import read_outputs, read_queries
from open_rag_eval.inputs.contexts import derived_query_id
from open_rag_eval.core.types import AnswerPart

DATA = Path(__file__).parent / "data"
SEASONS = "What causes the seasons on Earth?"


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _jsonl(tmp_path: Path, *objects: dict) -> Path:
    return _write(tmp_path, "in.jsonl", "".join(json.dumps(o) + "\n" for o in objects))


def test_ragas_csv_json_and_python_lists_repeats_reference(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        outputs = read_outputs(DATA / "contexts_layout.csv")
    assert "ignoring unknown column(s): faithfulness" in caplog.text
    seasons = derived_query_id(SEASONS)
    assert [o.key for o in outputs] == [(seasons, 1), (derived_query_id("Who wrote the first program?"), 1),
                                        (seasons, 2)]  # a repeated question is its next run
    first = outputs[0]
    assert [p.id for p in first.passages] == ["1", "2"]
    assert first.passages[0].text.startswith("Earth's axis is tilted by about 23.4 degrees; the tilt")  # ';' kept
    assert first.answer == (AnswerPart(text="The tilt of Earth's axis causes the seasons.", citations=("1",)),
                            AnswerPart(text="Distance matters less.", citations=("2",)))
    assert first.labels.reference_answer == "The axial tilt."
    # the second cell is the Python list literal pandas writes for a list column
    assert [p.text for p in outputs[1].passages] == [
        "Ada Lovelace published the first algorithm in 1843; it ran on no machine.", "Babbage's engine was never finished."]
    assert outputs[1].source == f"{DATA / 'contexts_layout.csv'}:3"


def test_query_id_is_the_same_as_for_query_lists(tmp_path: Path) -> None:
    queries = _write(tmp_path, "q.csv", f"query\n{SEASONS}\n")
    assert read_queries(queries)[0][0] == derived_query_id(SEASONS)


def test_csv_with_ids_runs_latency_and_labels(tmp_path: Path) -> None:
    path = _write(tmp_path, "in.csv", (
        "query_id,query_run,user_input,response,retrieved_contexts,context_ids,latency_ms,relevant_ids\n"
        'q1,2,Who?,Ada [d9].,"[""Ada wrote it."", ""Babbage built it.""]",d9;d4,120,d9:2\n'
        'q2,1,Empty?,NO_ANSWER,[],,,\n'))  # [] retrieved nothing (an empty cell is unknown: an error)
    first, second = read_outputs(path)
    assert first.key == ("q1", 2) and [p.id for p in first.passages] == ["d9", "d4"]
    assert first.answer == (AnswerPart(text="Ada.", citations=("d9",)),)
    assert first.latency_ms == 120.0 and dict(first.labels.relevant_ids) == {"d9": 2}
    assert second.passages == () and second.answer_text == "NO_ANSWER"


def test_csv_passage_objects(tmp_path: Path) -> None:
    cell = json.dumps([{"id": "a", "text": "Alpha", "title": "T", "score": 2.5}, {"id": 7, "text": "Beta"}])
    path = _write(tmp_path, "in.csv", 'query,answer,contexts\nQ,"A [7].","' + cell.replace('"', '""') + '"\n')
    (output,) = read_outputs(path)
    assert [(p.id, p.title, p.score) for p in output.passages] == [("a", "T", 2.5), ("7", None, None)]
    assert output.answer[0].citations == ("7",)


def test_jsonl_contexts_and_aliases(tmp_path: Path) -> None:
    path = _jsonl(tmp_path,
                  {"question": "Who?", "answer": "Ada [1].", "contexts": ["Ada wrote it.", "Babbage built it."],
                   "ground_truth": "Ada Lovelace"},
                  {"query_id": "q9", "user_input": "Why?", "response": "Tilt [b2].",
                   "retrieved_contexts": ["Tilt.", "Distance."], "context_ids": ["a1", "b2"], "run": 3},
                  {"question": "Who?", "answer": "Lovelace [1].", "contexts": ["Ada wrote it."]},
                  {"query_id": "q1", "query": "Plain?", "passages": [{"id": "x", "text": "X"}], "answer": "X [x]."})
    first, second, third, classic = read_outputs(path)
    assert first.key == (derived_query_id("Who?"), 1) and third.key == (derived_query_id("Who?"), 2)
    assert first.answer[0].citations == ("1",) and first.labels.reference_answer == "Ada Lovelace"
    assert second.key == ("q9", 3) and [p.id for p in second.passages] == ["a1", "b2"]
    assert second.answer[0].citations == ("b2",)
    assert classic.key == ("q1", 1)  # the JSONL schema still reads as before


@pytest.mark.parametrize(("text", "line", "field", "problem"), [
    ('query,answer\nQ,A\n', 1, "contexts", "accepted names: contexts, retrieved_contexts"),
    ('question,contexts\nQ,"[""a""]"\n', 1, "generated_answer", "accepted names: generated_answer, answer, response"),
    ('question,answer,contexts\nQ,A,a; b\n', 2, "contexts", "';' is not a separator"),
    ('question,answer,contexts\nQ,A,"[1, 2]"\n', 2, "contexts[0]", "expected a passage text"),
    ('question,answer,contexts\nQ,A,"{""a"": 1}"\n', 2, "contexts", "expected a list of passages"),
    ('question,answer,contexts,context_ids\nQ,A,"[""a"", ""b""]",x\n', 2, "context_ids", "1 id(s) for 2 context(s)"),
    ('question,answer,contexts,context_ids\nQ,A,"[""a"", ""b""]",x;x\n', 2, "context_ids", "duplicate passage id 'x'"),
    ('question,query,answer,contexts\nQ,Q,A,[]\n', 1, "question", "both query and question"),
    ('question,answer,contexts\n ,A,[]\n', 2, "question", "empty query"),
    ('question,answer,contexts\nQ,A,"[{""id"": ""a"", ""text"": ""x"", ""score"": 1e999}]"\n', 2,
     "contexts[0].score", "finite number"),
    ('question,answer,contexts\nQ,A,"[{""id"": ""a"", ""text"": ""x""}, {""id"": ""a"", ""text"": ""y""}]"\n', 2,
     "contexts[1].id", "duplicate passage id 'a'"),
    ('query_id,query_run,question,answer,contexts\nq,1,Q,A,[]\nq,1,Q,B,[]\n', 3, "query_run", "duplicate output"),
])
def test_bad_csv_names_file_line_field(tmp_path: Path, text: str, line: int, field: str, problem: str) -> None:
    path = _write(tmp_path, "bad.csv", text)
    with pytest.raises(InputError) as raised:
        read_outputs(path)
    error = raised.value
    assert (error.file, error.line, error.field) == (str(path), line, field)
    assert problem in str(error)


@pytest.mark.parametrize(("obj", "field", "problem"), [
    ({"question": "Q", "answer": "A", "contexts": "not a list"}, "contexts", "expected a list"),
    ({"question": "Q", "answer": "A", "contexts": [{"text": "x"}]}, "contexts[0].id", "non-empty id"),
    ({"question": "Q", "answer": "A", "contexts": [{"id": "a", "txt": "x"}]}, "contexts[0].txt", "unknown field"),
    ({"question": "Q", "answer": "A", "contexts": ["a"], "passages": []}, "contexts", "both passages and contexts"),
    ({"question": "Q", "answer": "A", "contexts": ["a"], "context_ids": ["x", "y"]}, "context_ids", "2 id(s) for 1"),
    ({"question": "Q", "response": "A", "answer": "B", "contexts": []}, "response", "both answer and response"),
    ({"question": "Q", "answer": "A", "contexts": [], "colour": "red"}, "colour", "unknown field"),
    ({"question": 7, "answer": "A", "contexts": []}, "question", "expected a string"),
])
def test_bad_jsonl_names_file_line_field(tmp_path: Path, obj: dict, field: str, problem: str) -> None:
    path = _write(tmp_path, "bad.jsonl", '{"query_id": "ok", "query": "Q", "answer": "A"}\n' + json.dumps(obj) + "\n")
    with pytest.raises(InputError) as raised:
        read_outputs(path)
    error = raised.value
    assert (error.file, error.line, error.field) == (str(path), 2, field)
    assert problem in str(error)


def test_cli_bad_contexts_one_line_exit_3_no_output(tmp_path: Path) -> None:
    bad = _write(tmp_path, "bad.csv", 'question,answer,contexts\nQ,A,"[""a"", 2]"\n')
    out = tmp_path / "out"
    config = _write(tmp_path, "config.yaml", json.dumps(
        {"input": str(bad), "output_dir": str(out), "evaluators": [{"type": "golden", "k_values": [1]}]}))
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines == [f"error: {bad}:2: field 'contexts[1]': expected a passage text or an object {{id, text}}, "
                     "got a number"], done.stderr
    assert not out.exists()


def test_cli_evaluates_the_contexts_layout(tmp_path: Path) -> None:
    out = tmp_path / "out"
    config = _write(tmp_path, "config.yaml", json.dumps(
        {"input": str(DATA / "contexts_layout.csv"), "output_dir": str(out),
         "evaluators": [{"type": "golden", "metrics": ["lexical"]}]}))
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = (out / "outputs.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["run"] for line in lines] == [1, 1, 2]


_CELLS = st.sampled_from(["question", "answer", "contexts", "context_ids", "query_run", "[", "]", '"', '""', ",",
                          "\n", "'", "{", "}", ":", ";", "id", "text", "1", "-1", "1e999", "NaN", "null", "a", " "])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(_CELLS, max_size=40))
def test_contexts_csv_raises_only_input_errors(tmp_path: Path, pieces: list[str]) -> None:
    path = tmp_path / "fuzz.csv"
    path.write_text("question,answer,contexts,context_ids\n" + "".join(pieces), encoding="utf-8")
    try:
        read_outputs(path)
    except InputError as error:
        assert "\n" not in str(error) and str(error).startswith(str(path))


_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.sampled_from(["id", "text", "title", "score", "x"]), inner, max_size=3),
                       max_leaves=8)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.dictionaries(st.sampled_from(["question", "user_input", "answer", "response", "contexts",
                                        "retrieved_contexts", "context_ids", "ground_truth", "run", "query_id"]),
                       _VALUES, max_size=5))
def test_contexts_jsonl_raises_only_input_errors(tmp_path: Path, obj: dict) -> None:
    path = tmp_path / "fuzz.jsonl"
    path.write_text(json.dumps({"question": "Q", "answer": "A", "contexts": ["c"], **obj}) + "\n", encoding="utf-8")
    try:
        read_outputs(path)
    except InputError as error:
        assert "\n" not in str(error) and str(error).startswith(str(path))
