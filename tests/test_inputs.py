"""Input readers (open_rag_eval/inputs/): the peer's CSV layout, JSONL, query lists, round trip, bad inputs."""

from __future__ import annotations

import hashlib
import json
import logging
import subprocess
import tempfile
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from open_rag_eval.core.errors import InputError, exit_code
from open_rag_eval.inputs import MAX_CELL_CHARS, output_to_json, read_outputs, read_queries
from open_rag_eval.core.types import AnswerPart, Labels, Passage

DATA = Path(__file__).parent / "data"
BAD = DATA / "bad"
CASES: list[dict[str, Any]] = yaml.safe_load((BAD / "inputs_cases.yaml").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- the peer's CSV layout


def test_peer_layout_bom_crlf_numeric_ids_repeats_refusal() -> None:
    raw = (DATA / "peer_layout.csv").read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf") and b"\r\n" in raw  # the fixture really has a BOM and CRLF
    outputs = read_outputs(DATA / "peer_layout.csv")
    assert [o.key for o in outputs] == [("1", 1), ("1", 2), ("2", 1), ("3", 1)]
    assert [o.source for o in outputs] == [f"{DATA / 'peer_layout.csv'}:{n}" for n in (2, 7, 9, 11)]
    first = outputs[0]
    assert first.query == "What causes the seasons on Earth?"
    assert [p.id for p in first.passages] == ["1", "2", "3"]  # "[1]" normalised
    assert first.passages[1].text.startswith("When a hemisphere is tilted toward the Sun, sunlight")
    assert first.answer_text.endswith("year [1][2].\n\nSources: [1], [2]")  # multi-line cell, CRLF -> LF
    assert first.answer == (
        AnswerPart(text="The seasons are caused by the tilt of Earth's axis, which is about 23.4 degrees.",
                   citations=("1",)),
        AnswerPart(text="Because of the tilt, each hemisphere receives more direct sunlight for part of the year.",
                   citations=("1", "2")),
    )
    assert first.latency_ms == 812.5 and outputs[1].latency_ms == 640.0
    assert [p.id for p in outputs[1].passages] == ["1", "3"]
    assert outputs[2].answer == (AnswerPart(text="Ada Lovelace wrote it in 1843.", citations=("1", "2")),
                                 AnswerPart(text="Dr. Charles Babbage designed the engine itself.", citations=("2",)))


def test_no_answer_is_kept_as_a_refusal() -> None:
    refusal = read_outputs(DATA / "peer_layout.csv")[3]
    assert refusal.answer_text == "NO_ANSWER"
    assert refusal.answer == (AnswerPart(text="NO_ANSWER"),)
    assert refusal.plain_answer == "NO_ANSWER"


def test_labels_are_per_query_from_any_row() -> None:
    outputs = read_outputs(DATA / "peer_layout.csv")
    seasons = Labels(relevant_ids={"1": 2, "2": 1}, expected_keywords=("axis", "tilt"), expected_refusal=False)
    assert outputs[0].labels == outputs[1].labels == seasons  # run 2's rows carry no labels: same query
    assert outputs[2].labels == Labels(relevant_ids={"1": 1, "2": 1}, expected_keywords=("Lovelace",),
                                       expected_refusal=False)
    assert outputs[3].labels == Labels(expected_refusal=True)


def test_layout_without_query_run_and_unknown_citation(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="open_rag_eval.inputs"):
        outputs = read_outputs(DATA / "minimal.csv")
    assert [o.key for o in outputs] == [("q1", 1), ("q2", 1)]
    assert outputs[0].answer == (AnswerPart(text="Water boils at 100 °C at sea level", citations=("1",)),
                                 AnswerPart(text="It boils at lower temperatures at altitude", citations=("2",)))
    assert outputs[1].answer[1] == AnswerPart(text="It was completed in 1889.", citations=("4",))  # kept
    messages = [r.getMessage() for r in caplog.records]
    assert messages == ["1 output(s): citations that name no retrieved passage (kept, counted as fabricated) in "
                        f"{DATA / 'minimal.csv'}; first: line 4 (4)"]


def test_optional_columns_and_label_syntaxes(tmp_path: Path) -> None:
    path = tmp_path / "labels.csv"
    path.write_text(
        "query_id,query,passage_id,passage,passage_title,passage_score,generated_answer,relevant_ids,"
        "grounding_ids,required_citations,reference_answer,expected_refusal,extra\n"
        'q1,Why?,d1,Text one.,Title one,0.75,Because [1].,"{""d1"": 3, ""[d2]"": 0}",d1; d2,2, Because. ,YES,x\n'
        "q1,Why?,d2,Text two.,,,,,,,,,\n"
        'q2,How?,d1,Text.,,,"So [1]","[""d1"", ""d3""]","[""d1""]",0,,0,\n', encoding="utf-8")
    first, second = read_outputs(path)
    assert first.passages == (Passage(id="d1", text="Text one.", title="Title one", score=0.75),
                              Passage(id="d2", text="Text two."))
    assert first.labels == Labels(relevant_ids={"d1": 3, "d2": 0}, grounding_ids=("d1", "d2"), required_citations=2,
                                  reference_answer="Because.", expected_refusal=True)
    assert second.labels == Labels(relevant_ids={"d1": 1, "d3": 1}, grounding_ids=("d1",), required_citations=0,
                                   expected_refusal=False)


def test_a_passage_less_query_is_kept_and_an_empty_answer_left_to_the_run(tmp_path: Path) -> None:
    """An empty answer is an output without an answer: the reader keeps it; the run refuses it only when a
    configured metric reads the answer (``evaluators.base.check_answers``, tests/test_answerless.py)."""
    from open_rag_eval.evaluators.base import check_answers
    from open_rag_eval.evaluators.trec import TrecEvaluator

    path = tmp_path / "sparse.csv"
    path.write_text("query_id,query,passage_id,passage,generated_answer\nq1,Why?,,,NO_ANSWER\nq2,How?,1,P.,Yes.\n")
    outputs = read_outputs(path)
    assert [(o.passages, o.answer_text) for o in outputs] == [((), "NO_ANSWER"), ((Passage(id="1", text="P."),), "Yes.")]
    path.write_text("query_id,query,passage_id,passage,generated_answer\nq1,Why?,,,NO_ANSWER\nq2,How?,1,P.,\n")
    outputs = read_outputs(path)
    assert [o.answer_text for o in outputs] == ["NO_ANSWER", ""]
    with pytest.raises(InputError, match=r"sparse.csv:3: field 'answer': no answer: the trec evaluator's metric "
                                         r"'nuggets' reads the answer"):
        check_answers([TrecEvaluator()], outputs)


def test_repeated_answer_on_every_row_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "repeat.csv"
    path.write_text("query_id,query,passage_id,passage,generated_answer\nq1,Why?,1,A.,Yes [2].\nq1,Why?,2,B.,Yes [2].\n")
    assert read_outputs(path)[0].answer == (AnswerPart(text="Yes.", citations=("2",)),)


# ---------------------------------------------------------------- JSONL


def test_jsonl_outputs() -> None:
    first, second, third = read_outputs(DATA / "outputs.jsonl")
    assert first.key == ("q1", 1) and second.key == ("q1", 2) and third.key == ("7", 1)
    assert first.passages[0] == Passage(id="d1", text="Tides are caused mainly by the Moon's gravity.", title="Tides",
                                        score=0.91)
    assert first.answer[1] == AnswerPart(text="The Sun contributes too.", citations=("d2", "d9"))
    assert first.answer_text == "Tides are caused mainly by the Moon's gravity. [d1] The Sun contributes too. [d2] [d9]"
    assert first.latency_ms == 120.0
    assert second.answer == (AnswerPart(text="The Moon's gravity causes tides.", citations=("d1",)),
                             AnswerPart(text="Nothing else matters.", citations=("2",)))
    assert first.labels == second.labels == Labels(relevant_ids={"d1": 2, "d2": 1},
                                                   expected_keywords=("Moon", "gravity"))
    assert third.answer == (AnswerPart(text="NO_ANSWER"),) and third.passages == ()
    assert third.labels == Labels(expected_refusal=True, required_citations=0)
    assert [o.source for o in (first, second, third)] == [f"{DATA / 'outputs.jsonl'}:{n}" for n in (1, 3, 4)]


def test_jsonl_error_outputs_are_kept(tmp_path: Path) -> None:
    path = tmp_path / "failed.jsonl"
    path.write_text(json.dumps({"query_id": "q1", "query": "Why?", "error": "HTTP 503 after 3 attempts"}) + "\n")
    (output,) = read_outputs(path)
    assert output.error == "HTTP 503 after 3 attempts" and output.answer == () and output.answer_text == ""


def test_round_trip_through_the_jsonl_schema(tmp_path: Path) -> None:
    originals = [*read_outputs(DATA / "peer_layout.csv"), *read_outputs(DATA / "outputs.jsonl")]
    path = tmp_path / "outputs.jsonl"
    path.write_text("".join(json.dumps(output_to_json(o), allow_nan=False) + "\n" for o in originals))
    again = read_outputs(path)
    assert [o.model_copy(update={"source": None}) for o in again] == [
        o.model_copy(update={"source": None}) for o in originals]
    assert [output_to_json(o) for o in again] == [output_to_json(o) for o in originals]
    assert "source" not in output_to_json(originals[0])


# ---------------------------------------------------------------- query lists


def test_read_queries_with_bom_and_ids() -> None:
    assert read_queries(DATA / "queries.csv") == [("id_1", "What is the meaning of life?"),
                                                  ("id_2", "Which planet is largest, and why?")]


def test_read_queries_generates_stable_ids(tmp_path: Path) -> None:
    def expected(query: str) -> str:
        return "q_" + hashlib.sha256(query.encode()).hexdigest()[:12]

    queries = read_queries(DATA / "queries_noid.csv")
    assert queries == [(expected("How do vaccines work?"), "How do vaccines work?"),
                       (expected("What is photosynthesis?"), "What is photosynthesis?")]
    reordered = tmp_path / "reordered.csv"
    reordered.write_text("query\nWhat is photosynthesis?\nHow do vaccines work?\n")
    assert read_queries(reordered) == queries[::-1]


# ---------------------------------------------------------------- bad inputs


def _read(case: dict[str, Any], path: Path) -> None:
    (read_queries if case["reader"] == "queries" else read_outputs)(path)


@pytest.mark.parametrize("case", CASES, ids=[case["file"] for case in CASES])
def test_bad_input(case: dict[str, Any]) -> None:
    path = BAD / case["file"]
    with pytest.raises(InputError) as caught:
        _read(case, path)
    error, message = caught.value, str(caught.value)
    assert exit_code(error) == case["exit_code"] == 3
    assert case["message"] in message
    assert "\n" not in message and "Traceback" not in message
    assert message.startswith(str(path) + (f":{case['line']}:" if case["line"] is not None else ":"))
    assert (error.line, error.field or None) == (case["line"], case["field"])
    if case["field"]:
        assert f"field '{case['field']}'" in message


def test_bad_corpus_is_large_and_covers_both_formats() -> None:
    suffixes = [Path(case["file"]).suffix for case in CASES]
    assert len(CASES) >= 20 and suffixes.count(".csv") >= 10 and suffixes.count(".jsonl") >= 10
    assert len({case["file"] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_huge_cell(tmp_path: Path, suffix: str) -> None:
    huge = "x" * (MAX_CELL_CHARS + 1)
    path = tmp_path / f"huge{suffix}"
    if suffix == ".csv":
        path.write_text(f"query_id,query,passage_id,passage,generated_answer\nq1,Why?,1,{huge},A.\n")
    else:
        path.write_text(json.dumps({"query_id": "q1", "query": "Why?", "passages": [{"id": "1", "text": huge}]}))
    with pytest.raises(InputError) as caught:
        read_outputs(path)
    field = "passage" if suffix == ".csv" else "passages[0].text"
    assert str(caught.value) == (f"{path}:{2 if suffix == '.csv' else 1}: field '{field}': value of 1,000,001 "
                                 "characters exceeds the limit of 1,000,000")


def test_cell_at_the_limit_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    path.write_text(f"query_id,query,passage_id,passage,generated_answer\nq1,Why?,1,{'x' * MAX_CELL_CHARS},A.\n")
    assert len(read_outputs(path)[0].passages[0].text) == MAX_CELL_CHARS


def test_missing_file() -> None:
    with pytest.raises(InputError, match="cannot read the file"):
        read_outputs(DATA / "does_not_exist.csv")


@pytest.mark.parametrize("name", ["unclosed_quote.csv", "binary.jsonl", "duplicate_passage.csv"])
def test_cli_one_line_exit_3_no_output(tmp_path: Path, name: str) -> None:
    config = tmp_path / "config.yaml"
    out = tmp_path / "out"
    config.write_text(yaml.safe_dump({"input": str(BAD / name), "output_dir": str(out),
                                      "evaluators": [{"type": "golden", "k_values": [1]}]}))
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {BAD / name}:") and "Traceback" not in done.stderr
    assert not out.exists()


# ---------------------------------------------------------------- robustness


_CSV_PIECES = st.sampled_from(["query_id", "query", "query_run", "passage_id", "passage", "generated_answer",
                               "relevant_ids", "latency_ms", ",", "\n", "\r\n", '"', "q1", "[1]", "1", "2", "-1",
                               "1e400", "NO_ANSWER", "A [1].", ";", ":", "{", "}", "\ufeff", "\x00", " "])
_JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                            | st.text(max_size=8) | st.sampled_from(["q1", "[1]", "A [1]. B [2]."]),
                            lambda inner: st.lists(inner, max_size=3)
                            | st.dictionaries(st.sampled_from(["id", "text", "citations", "title", "score", "x"]),
                                              inner, max_size=3), max_leaves=8)
_JSON_OBJECTS = st.dictionaries(st.sampled_from(["query_id", "query", "run", "passages", "answer", "answer_text",
                                                 "latency_ms", "error", "relevant_ids", "expected_keywords",
                                                 "expected_refusal", "required_citations", "grounding_ids", "x"]),
                                _JSON_VALUES, max_size=4).map(
    lambda changes: {"query_id": "q1", "query": "Why?", "passages": [{"id": "1", "text": "t"}], "answer": "A [1].",
                     **changes})


def _only_input_errors(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        outputs = read_outputs(path)
    except InputError as error:
        assert "\n" not in str(error) and str(error).startswith(str(path))
    else:
        for output in outputs:
            json.dumps(output_to_json(output), allow_nan=False)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=200) | st.lists(_CSV_PIECES, max_size=40).map(lambda xs: "".join(xs).encode()))
def test_csv_reader_raises_only_input_errors(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _only_input_errors(Path(folder) / "fuzz.csv", data)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=100) | st.lists(_JSON_OBJECTS, max_size=3).map(
    lambda objs: "\n".join(json.dumps(obj) for obj in objs).encode()))
def test_jsonl_reader_raises_only_input_errors(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _only_input_errors(Path(folder) / "fuzz.jsonl", data)


def test_unclosed_quote_names_the_open_cell_after_escaped_quotes(tmp_path: Path) -> None:
    path = tmp_path / "open.csv"
    path.write_text('query_id,query,query_run,passage_id,passage,generated_answer\n'
                    'q1,Why?,1,1,"He said ""hi, there"", ok.",A [1].\n'
                    'q1,Why?,1,2,"She said ""no"".","Unclosed, [1].\nq2,How?,1,1,P.,B.\n')
    with pytest.raises(InputError) as caught:
        read_outputs(path)
    assert str(caught.value) == f"{path}:3: field 'generated_answer': unclosed quote: the quoted cell never ends"
