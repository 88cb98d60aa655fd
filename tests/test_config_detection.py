"""Errors that point the right way: a config's ``evaluator:`` holding our evaluator list is a typo of
``evaluators:`` (never a vectara-style config that drops ``input:`` and ``output_dir:``), at the CLI, the Python API
and the service; an unknown key names the nearest known one; vectara's own shapes are still translated."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval import evaluate
from open_rag_eval.cli import main
from open_rag_eval.config.peer import is_peer_config
from open_rag_eval.core.errors import ConfigError

ANSWERS = "query_id,query,passage_id,passage,generated_answer\nq1,What is x?,1,x is y.,x is y [1].\n"
OURS = [{"type": "trec", "metrics": ["citation"]}]


@pytest.mark.parametrize(("config", "key", "nearest"), [
    ({"input": "answers.csv", "output_dir": "out", "evaluator": OURS}, "evaluator", "evaluators"),
    ({"input": "answers.csv", "output_dir": "out", "evaluator": OURS[0]}, "evaluator", "evaluators"),
    ({"input": "answers.csv", "output-dir": "out", "evaluators": OURS}, "output-dir", "output_dir"),
    ({"inputs": "answers.csv", "output_dir": "out", "evaluators": OURS}, "inputs", "input"),
    ({"input": "answers.csv", "evaluator": [{"type": "trec"}]}, "evaluator", "evaluators"),
])
def test_an_unknown_top_level_key_names_the_nearest_known_one(config: dict[str, Any], key: str, nearest: str,
                                                              tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "answers.csv").write_text(ANSWERS)
    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({**config, "judge": {"simulated": {"seed": 1}, "cache": False}}))
    for command in ("validate", "eval"):
        caplog.clear()
        with caplog.at_level("INFO"):
            assert main(["-q", command, "--config", str(path)]) == 2
        errors = [r.getMessage() for r in caplog.records if r.levelno >= 40]
        assert len(errors) == 1 and f"c.yaml: {key}: unknown key (did you mean '{nearest}'?); valid keys here: " \
            in errors[0], errors
        assert "results/answers.csv" not in caplog.text and "translated the config layout" not in caplog.text
    with pytest.raises(ConfigError) as caught:
        evaluate(tmp_path / "answers.csv", config=path)
    assert caught.value.path == key and f"did you mean '{nearest}'?" in str(caught.value)


@pytest.mark.parametrize("evaluator", [
    {"name": "trecrag", "options": {"k_values": [1, 3]}},
    [{"name": "trecrag", "options": {}}, {"name": "consistency", "options": {"metrics": ["rouge"]}}],
    [{"type": "TRECEvaluator", "model": {"type": "OpenAIModel", "name": "gpt-4o-mini",
                                         "api_key": "${oc.env:OPENAI_API_KEY}"}, "options": {"k_values": [1]}}],
    {"type": "ConsistencyEvaluator", "options": {}},
])
def test_vectara_s_own_evaluator_shapes_are_still_its_layout(evaluator: Any) -> None:
    assert is_peer_config({"evaluator": evaluator})
    assert is_peer_config({"results_folder": "r/", "evaluator": OURS})  # one of its own keys says so


@pytest.mark.parametrize("evaluator", [OURS, OURS[0], [{"type": "trec"}], [{"name": "trecrag"}],
                                       [{"name": "trecrag", "options": {}, "metrics": ["x"]}], "trec", []])
def test_an_evaluator_section_not_of_vectara_s_shape_is_not_its_layout(evaluator: Any) -> None:
    assert not is_peer_config({"input": "a.csv", "evaluator": evaluator})


@pytest.mark.slow
def test_the_service_names_the_nearest_key_too(tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the [server] extra is not installed")
    from tests.service_server import Service

    with Service(tmp_path / "svc", {"runner": {"jobs": 0}}) as service:
        reply = service.client().post("/v1/jobs", json={"config": {"evaluator": OURS}, "judge_profile": "sim",
                                                          "inputs": {"format": "csv", "data": ANSWERS}})
    assert reply.status_code == 422, reply.text
    problem = reply.json()
    assert problem["path"] == "config.evaluator" and "did you mean 'evaluators'?" in problem["detail"], problem


@pytest.mark.parametrize(("section", "path", "nearest"), [
    ({"judge": {"modle": "x"}, "evaluators": OURS}, "judge.modle", "model"),
    ({"evaluators": [{"type": "trec", "metric": ["citation"]}]}, "evaluators[0].metric", "metrics"),
])
def test_a_nested_unknown_key_names_the_nearest_known_one_too(section: dict[str, Any], path: str, nearest: str,
                                                              tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "answers.csv").write_text(ANSWERS)
    (tmp_path / "c.yaml").write_text(json.dumps({"input": "answers.csv", "output_dir": "out", **section}))
    with caplog.at_level("INFO"):
        assert main(["-q", "validate", "--config", str(tmp_path / "c.yaml")]) == 2
    assert f"c.yaml: {path}: unknown key (did you mean '{nearest}'?); valid keys here: " in caplog.text
