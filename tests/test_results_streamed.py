"""results.json written output by output, and the small Score / Detail records a large run holds."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from open_rag_eval.core.runinfo import RunInfo
from open_rag_eval.run.results import write_results
from open_rag_eval.core.types import Detail, EvalResult, Passage, RAGOutput, Score


def _outputs() -> list[RAGOutput]:
    return [
        RAGOutput(query_id="q1", query="first?", run=1, passages=(Passage(id="1", text="é [x]", score=0.5),),
                  answer_text="Yes [1]."),
        RAGOutput(query_id="q1", query="first?", run=2),
        RAGOutput(query_id="q2", query="second?", run=1, error="timeout"),
    ]


def _result() -> EvalResult:
    return EvalResult(
        scores=[
            Score(query_id="q1", run=1, metric="m.a", value=0.5),
            Score(query_id="q1", run=2, metric="m.a", error="judge call failed"),
            Score(query_id="q9", run=1, metric="m.a", value=1.0),  # a query without an output
            Score(query_id="q1", run=None, metric="c.x", value=float("inf")),  # across runs; not finite
            Score(query_id="q1", run=1, metric="m.b", value=2),
        ],
        details=[Detail(query_id="q1", run=1, section="m", data={"grades": [{"g": 3, "s": [1, 2]}], "e": {}, "l": []}),
                 Detail(query_id="q1", run=None, section="c", data={"pairs": [[1, 2]], "nan": float("nan")})],
    )


def _expected() -> dict:
    empty = {"scores": {}, "errors": {}, "details": {}}
    return {
        "simulated": True,
        "outputs": [
            {"query_id": "q1", "query": "first?", "run": 1, "source": None, "error": None, "answer_text": "Yes [1].",
             "passages": [{"id": "1", "text": "é [x]", "score": 0.5}], "answer": [{"text": "Yes.", "citations": ["1"]}],
             "scores": {"m.a": 0.5, "m.b": 2.0}, "errors": {},
             "details": {"m": {"grades": [{"g": 3, "s": [1, 2]}], "e": {}, "l": []}}},
            {"query_id": "q1", "query": "first?", "run": 2, "source": None, "error": None, "answer_text": "",
             "passages": [], "answer": [], "scores": {}, "errors": {"m.a": "judge call failed"}, "details": {}},
            {"query_id": "q2", "query": "second?", "run": 1, "source": None, "error": "timeout", "answer_text": "",
             "passages": [], "answer": [], **empty},
        ],
        "queries": [
            {"query_id": "q9", "query": "", "runs": [], "scores": {"m.a": 1.0}, "errors": {}, "details": {}},
            {"query_id": "q1", "query": "first?", "runs": [1, 2], "scores": {}, "errors": {"c.x": "not a finite number"},
             "details": {"c": {"pairs": [[1, 2]], "nan": None}}},
        ],
    }


def test_results_json_is_byte_for_byte_one_indented_json_dump_of_the_whole_document(tmp_path: Path) -> None:
    write_results(tmp_path, _outputs(), _result(), RunInfo(simulated=True))
    text = (tmp_path / "results.json").read_text(encoding="utf-8")
    document = json.loads(text)
    summary = document.pop("summary")
    assert [row["metric"] for row in summary] == ["c.x", "m.a", "m.b"]
    assert document == _expected()
    assert text == json.dumps({**document, "summary": summary}, indent=2, ensure_ascii=False) + "\n"


def test_results_json_of_a_run_without_outputs_or_scores_writes_empty_lists(tmp_path: Path) -> None:
    write_results(tmp_path, [], EvalResult(), RunInfo(simulated=False))
    text = (tmp_path / "results.json").read_text(encoding="utf-8")
    assert text == '{\n  "simulated": false,\n  "outputs": [],\n  "queries": [],\n  "summary": []\n}\n'


def test_a_score_is_a_frozen_record_with_exactly_one_of_value_and_error() -> None:
    score = Score(query_id="q", run=1, metric="m", value=1)
    assert score.value == 1.0 and isinstance(score.value, float)
    assert score == Score(query_id="q", run=1, metric="m", value=1.0) and len({score, pickle.loads(pickle.dumps(score))}) == 1
    with pytest.raises(AttributeError, match="frozen"):
        score.value = 2.0  # type: ignore[misc]
    with pytest.raises(ValueError, match="exactly one of value and error"):
        Score(query_id="q", run=1, metric="m")
    with pytest.raises(ValueError, match="exactly one of value and error"):
        Score(query_id="q", run=1, metric="m", value=1.0, error="x")
    with pytest.raises(TypeError):
        Score(query_id="q", run="1", metric="m", value=1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Score(query_id="q", run=1, metric="m", value=1.0, extra=1)  # type: ignore[call-arg]


def test_scores_and_details_dump_and_validate_inside_an_eval_result() -> None:
    whole = _result()
    result = EvalResult(scores=whole.scores[:3], details=whole.details[:1])  # finite: JSON has no infinity
    again = EvalResult.model_validate_json(result.model_dump_json())
    assert again.scores == result.scores and again.details == result.details
    assert result.model_dump()["scores"][0] == {"query_id": "q1", "run": 1, "metric": "m.a", "value": 0.5, "error": None}
    assert EvalResult(scores=[{"query_id": "a", "run": None, "metric": "x", "error": "e"}]).scores[0].error == "e"
    assert pickle.loads(pickle.dumps(result)).details == result.details


def test_a_detail_reads_back_equal_data_and_keeps_what_json_would_change_as_given() -> None:
    data = {"grades": [{"grade": 3, "samples": [3, 3]}], "note": "é"}
    detail = Detail(query_id="q", run=1, section="umbrela", data=data)
    assert detail.data == data and detail.data is not data  # packed, decoded at each read
    assert detail.data == detail.data
    for kept in ({"ids": (1, 2)}, {1: "int key"}, {"x": float("nan")}, {"o": object()}):
        assert Detail(query_id="q", run=1, section="s", data=kept).data is kept
    with pytest.raises(AttributeError, match="frozen"):
        detail.section = "x"  # type: ignore[misc]
