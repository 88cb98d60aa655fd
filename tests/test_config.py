"""Config loading: interpolation, validation errors with YAML paths, the peer's layout."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from open_rag_eval.config import load_config, load_config_text
from open_rag_eval.core.errors import ConfigError

COUNT = "tests.plain_evaluator:CountEvaluator"


def load(text: str, tmp_path: Path):
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return load_config(path)


def test_minimal_config_resolves_paths_against_its_folder(tmp_path: Path) -> None:
    loaded = load(f"input: data/a.csv\nevaluators: [{{type: '{COUNT}'}}]\n", tmp_path)
    assert loaded.resolve_path(loaded.config.input) == tmp_path / "data" / "a.csv"
    assert loaded.config.output_dir == "results"
    assert loaded.evaluators[0].type == COUNT
    assert loaded.judge.max_concurrency == 32 and loaded.judge.max_retries == 6


@pytest.mark.parametrize("spelling", ["${MY_INPUT}", "${oc.env:MY_INPUT}"])
def test_env_interpolation_both_spellings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str) -> None:
    monkeypatch.setenv("MY_INPUT", "answers.csv")
    loaded = load(f"input: {spelling}\nevaluators: [{{type: '{COUNT}'}}]\n", tmp_path)
    assert loaded.config.input == "answers.csv"
    assert loaded.raw["input"] == spelling  # the manifest keeps the reference, never the value


def test_an_evaluator_class_without_the_contract_is_a_config_error_naming_what_it_lacks(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"evaluators\[0\]\.type: the evaluator class "
                                          r"'tests.plain_evaluator:UndeclaredEvaluator' lacks contract, forget"):
        load("input: a.csv\nevaluators: [{type: 'tests.plain_evaluator:UndeclaredEvaluator'}]\n", tmp_path)


def test_env_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NOPE_NOT_SET", raising=False)
    loaded = load(f"input: ${{NOPE_NOT_SET:-fallback.csv}}\nevaluators: [{{type: '{COUNT}'}}]\n", tmp_path)
    assert loaded.config.input == "fallback.csv"


def test_digest_is_stable_and_changes_with_content(tmp_path: Path) -> None:
    a = load(f"input: a.csv\nevaluators: [{{type: '{COUNT}'}}]\n", tmp_path).digest
    b = load(f"input: a.csv\nevaluators: [{{type: '{COUNT}'}}]\n", tmp_path).digest
    c = load(f"input: b.csv\nevaluators: [{{type: '{COUNT}'}}]\n", tmp_path).digest
    assert a == b != c


BAD = [
    # (config text, fragment of the message)
    ("input: a.csv\nevaluators: [{type: '%s'}]\nbogus: 1\n" % COUNT, "bogus: unknown key; valid keys here:"),
    ("input: a.csv\nevaluators: [{type: nosuch}]\n", "evaluators[0].type: unknown evaluator 'nosuch'; valid choices:"),
    ("input: a.csv\nevaluators: []\n", "evaluators: List should have at least 1 item"),
    ("input: a.csv\n", "evaluators: Field required"),
    ("evaluators: [{type: '%s'}]\n" % COUNT, "input: required"),
    ("input: a.csv\njudge: {max_concurrency: lots}\nevaluators: [{type: '%s'}]\n" % COUNT, "judge.max_concurrency:"),
    ("input: a.csv\njudge: {max_concurrency: 0}\nevaluators: [{type: '%s'}]\n" % COUNT, "greater than or equal to 1"),
    ("input: a.csv\njudge: {temperature: 0}\nevaluators: [{type: '%s'}]\n" % COUNT, "judge.temperature: unknown key"),
    ("input: a.csv\nevaluators: [{type: '%s', colour: red}]\n" % COUNT, "evaluators[0].colour: unknown key; valid keys here: fail_query"),
    ("input: a.csv\nevaluators: [{k_values: [1]}]\n", "evaluators[0]: missing 'type'"),
    ("input: ${UNSET_VARIABLE_FOR_TEST}\nevaluators: [{type: '%s'}]\n" % COUNT, "input: environment variable UNSET_VARIABLE_FOR_TEST is not set"),
    ("input: a.csv\nevaluators: [{type: 'no_such_module:X'}]\n", "cannot import evaluator module 'no_such_module'"),
    ("input: [a.csv\n", "invalid YAML"),
    ("- just\n- a list\n", "a config must be a YAML mapping"),
    ("input: a.csv\nconnector: {type: http}\nevaluators: [{type: '%s'}]\n" % COUNT, "connector.queries: Field required"),
]


@pytest.mark.parametrize("text,fragment", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_bad_configs_fail_with_the_yaml_path(tmp_path: Path, text: str, fragment: str, monkeypatch) -> None:
    monkeypatch.delenv("UNSET_VARIABLE_FOR_TEST", raising=False)
    with pytest.raises(ConfigError) as caught:
        load(text, tmp_path)
    message = str(caught.value)
    assert fragment in message
    assert str(tmp_path / "config.yaml") in message
    assert "\n" not in message


def test_yaml_error_names_the_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config.yaml:2: invalid YAML"):
        load("input: a.csv\n\tevaluators: 1\n", tmp_path)


PEER_VECTARA = """\
input_queries: "queries.csv"
results_folder: "results/"
generated_answers: "answers.csv"
eval_results_file: "results.csv"
metrics_file: "metrics.png"
evaluator:
  type: "TRECEvaluator"
  model:
    type: "OpenAIModel"
    name: "gpt-4o-mini"
    api_key: ${oc.env:OPENAI_API_KEY}
  options:
    k_values: [1, 3, 5]
    run_consistency: True
    metrics_to_run_consistency: ["mean_umbrela_score", "vital_nuggetizer_score"]
"""


def test_peer_config_is_translated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval.config.peer import translate_peer_config
    import yaml

    ours = translate_peer_config(yaml.safe_load(PEER_VECTARA), file="peer.yaml")
    assert ours["input"] == "results/answers.csv"
    assert ours["output_dir"] == "results"
    assert ours["judge"] == {"model": "gpt-4o-mini", "api_key_env": "OPENAI_API_KEY"}
    assert ours["evaluators"][0] == {"type": "trec", "k_values": [1, 3, 5], "runs": "all"}
    assert ours["evaluators"][1] == {"type": "consistency", "dispersion_of": ["umbrela.mean", "nuggets.vital"]}


def test_peer_literal_api_key_is_refused(tmp_path: Path) -> None:
    text = PEER_VECTARA.replace("${oc.env:OPENAI_API_KEY}", "sk-literal-key-in-config")
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, base_dir=tmp_path, file="peer.yaml")
    assert "evaluator[0].model.api_key" in str(caught.value)
    assert "sk-literal" not in str(caught.value)


def test_peer_unknown_evaluator_lists_choices(tmp_path: Path) -> None:
    text = PEER_VECTARA.replace("TRECEvaluator", "GoldenAnswerEvaluator")
    with pytest.raises(ConfigError, match="valid: TRECEvaluator, ConsistencyEvaluator"):
        load_config_text(text, base_dir=tmp_path, file="peer.yaml")
