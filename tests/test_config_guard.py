"""Hostile configs: alias bombs, recursive anchors, deep nesting and numbers that are not finite or not sane.

Each one is a one-line error naming the file (and line or YAML path) with exit 2, before any work starts; the
property tests throw random anchor/alias graphs and random numbers at the loader: a valid config or a
``ConfigError``, never a traceback or a hang (bounded by the generous pytest timeout, not by timing asserts).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from open_rag_eval.config import load_config_text
from open_rag_eval.config.guard import MAX_ALIASES, check_numbers
from open_rag_eval.core.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent

BILLION_LAUGHS = "".join(
    ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n']
    + [f"{b}: &{b} [{','.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")]
)
BASE = "input: in.jsonl\nevaluators: [{type: trec}]\n"


def cli(folder: Path, text: str, *args: str, command: str = "validate") -> subprocess.CompletedProcess[str]:
    (folder / "in.jsonl").write_text('{"query_id": "q1", "query": "q", "answer": "a", "passages": []}\n')
    config = folder / "config.yaml"
    config.write_text(text, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "-q", command, "--config", str(config), *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=folder)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert "Traceback" not in done.stderr
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: "), lines
    return lines[0]


def test_billion_laughs_fails_fast_with_one_line(tmp_path: Path) -> None:
    assert len(BILLION_LAUGHS) < 600  # 9 levels of 9 aliases: 9^9 strings once expanded
    done = cli(tmp_path, BASE + BILLION_LAUGHS)
    assert done.returncode == 2
    line = one_line_error(done)
    assert "config.yaml:" in line and "aliases expand to more than 100,000 values" in line


@pytest.mark.parametrize("text, line", [
    ("x: &a [1, *a]\n", 3),
    ("x: &a {k: *a}\n", 3),
    ("x: &a\n  - y: &b [*a]\n", 3),
    ("x: &a {<<: *a, k: 1}\n", 3),
])
def test_recursive_anchor_is_refused(tmp_path: Path, text: str, line: int) -> None:
    done = cli(tmp_path, BASE + text)
    assert done.returncode == 2
    message = one_line_error(done)
    assert "contains itself (a recursive alias)" in message and f"config.yaml:{line}:" in message


def test_too_many_aliases(tmp_path: Path) -> None:
    text = BASE + "x: &a 1\ny: [" + ", ".join(["*a"] * (MAX_ALIASES + 1)) + "]\n"
    done = cli(tmp_path, text)
    assert done.returncode == 2
    assert f"more than {MAX_ALIASES} aliases" in one_line_error(done)


@pytest.mark.parametrize("text", ["x: " + "[" * 5000 + "]" * 5000 + "\n", "x: " + "{a: " * 3000 + "1" + "}" * 3000])
def test_deep_nesting_is_refused(tmp_path: Path, text: str) -> None:
    done = cli(tmp_path, BASE + text)
    assert done.returncode == 2
    assert "nested deeper than 64 levels" in one_line_error(done)


def test_a_few_aliases_still_work(tmp_path: Path) -> None:
    text = ("input: in.jsonl\njudge: &j {model: m, timeout_s: 5}\nevaluators:\n  - &t {type: trec, k_values: [1, 3]}\n"
            "sweep: {thresholds: &th {umbrela.mean: 0.1}}\n")
    loaded = load_config_text(text, base_dir=tmp_path)
    assert loaded.judge.timeout_s == 5 and loaded.evaluators[0].options.k_values == [1, 3]


NUMBERS = [
    ("judge: {timeout_s: .inf}", "judge.timeout_s", "finite"),
    ("judge: {timeout_s: 1e999}", "judge.timeout_s", "finite"),
    ("judge: {timeout_s: .nan}", "judge.timeout_s", "finite"),
    ("judge: {timeout_s: 100000}", "judge.timeout_s", "less than or equal to 86400"),
    ("judge: {requests_per_minute: .inf}", "judge.requests_per_minute", "finite"),
    ("judge: {tokens_per_minute: -.inf}", "judge.tokens_per_minute", "finite"),
    ("judge: {requests_per_minute: 'inf'}", "judge.requests_per_minute", "finite"),
    ("judge: {tokens_per_minute: '${TPM:-nan}'}", "judge.tokens_per_minute", "Input should be a finite number"),
    ("judge: {tokens_per_minute: 1e300}", "judge.tokens_per_minute", "out of range"),
    ("judge: {max_concurrency: -4}", "judge.max_concurrency", "greater than or equal to 1"),
    ("judge: {prices: {input: 1, output: .inf}}", "judge.prices.output", "finite"),
    ("judge: {prices: {m: {input: .nan, output: 1}}}", "judge.prices.m.input", "finite"),
    ("judge: {params: {temperature: .inf}}", "judge.params.temperature", "finite"),
    ("judge: {params: {logit_bias: {'50256': -.inf}}}", "judge.params.logit_bias.50256", "finite"),
    ("judge: {backoff_cap_s: 1e12}", "judge.backoff_cap_s", "less than or equal to 3600"),
    ("judge: {outage_after_s: .inf}", "judge.outage_after_s", "finite"),
    ("sweep: {thresholds: {umbrela.mean: .nan}}", "sweep.thresholds.umbrela.mean", "finite"),
    ("sweep: {thresholds: {umbrela.mean: -0.1}}", "sweep.thresholds.umbrela.mean", "greater than or equal to 0"),
    ("sweep: {alpha: .inf}", "sweep.alpha", "finite"),
]


@pytest.mark.parametrize("section, path, problem", NUMBERS)
def test_config_numbers_are_finite_and_in_range(tmp_path: Path, section: str, path: str, problem: str) -> None:
    done = cli(tmp_path, BASE + section + "\n")
    assert done.returncode == 2
    line = one_line_error(done)
    assert f"config.yaml: {path}: " in line and problem in line, line


@pytest.mark.parametrize("evaluator, path, problem", [
    ("{type: trec, k_values: [1, 1000000000000000000000000000000]}", "evaluators[0].k_values[1]", "out of range"),
    ("{type: trec, k_values: [1, 1001]}", "evaluators[0].k_values", "at most 1000"),
    ("{type: trec, k_values: [0]}", "evaluators[0].k_values", "at most 1000"),
    ("{type: golden, k_values: [5, 1001]}", "evaluators[0].k_values", "at most 1000"),
    ("{type: golden, alpha: .nan}", "evaluators[0].alpha", "finite"),
    ("{type: trec, hallucination: {threshold: .inf}}", "evaluators[0].hallucination.threshold", "finite"),
    ("{type: trec, hallucination: {vectara: {timeout_s: 'inf'}}}", "evaluators[0].hallucination.vectara.timeout_s",
     "less than or equal to 86400"),
])
def test_evaluator_numbers(tmp_path: Path, evaluator: str, path: str, problem: str) -> None:
    done = cli(tmp_path, f"input: in.jsonl\nevaluators: [{evaluator}]\n")
    assert done.returncode == 2
    line = one_line_error(done)
    assert f"config.yaml: {path}" in line and problem in line, line


@pytest.mark.parametrize("option, path", [("timeout_s: .inf", "timeout_s"), ("timeout_s: 'nan'", "timeout_s"),
                                          ("concurrency: -1", "concurrency"), ("backoff_s: 1e400", "backoff_s")])
def test_connector_numbers(tmp_path: Path, option: str, path: str) -> None:
    (tmp_path / "queries.csv").write_text("query\nq\n")
    text = (f"connector: {{type: http, queries: queries.csv, options: {{url: 'http://127.0.0.1:9/q', {option}}}}}\n"
            "evaluators: [{type: trec}]\n")
    done = cli(tmp_path, text)
    assert done.returncode == 2
    assert f"config.yaml: connector.options.{path}: " in one_line_error(done)


def test_an_infinite_price_writes_nothing(tmp_path: Path) -> None:
    done = cli(tmp_path, BASE + "output_dir: out\njudge: {prices: {input: .inf, output: 1}}\n", command="eval")
    assert done.returncode == 2 and "judge.prices.input" in one_line_error(done)
    assert not (tmp_path / "out").exists()


# -- properties ----------------------------------------------------------------------------------------------------

@st.composite
def alias_documents(draw: st.DrawFn) -> str:
    """A config whose extra sections are random graphs of anchors and aliases (back, forward and self references)."""
    names = [f"n{i}" for i in range(draw(st.integers(1, 8)))]
    lines = [BASE.rstrip("\n")]
    for index, name in enumerate(names):
        refs = draw(st.lists(st.sampled_from(names), max_size=12))  # any name: later ones are undefined aliases
        scalars = draw(st.lists(st.sampled_from(["1", "x", ".inf", "~", "{}", "[]"]), max_size=3))
        items = [f"*{ref}" for ref in refs] + scalars
        merge = draw(st.booleans())
        if merge and refs:
            body = "{<<: [" + ", ".join(f"*{ref}" for ref in refs) + "], k" + str(index) + ": 1}"
        else:
            body = "[" + ", ".join(items) + "]"
        lines.append(f"{name}: &{name} {body}")
    where = draw(st.sampled_from(["top", "judge", "params", "sweep"]))
    target = draw(st.sampled_from(names))
    if where == "judge":
        lines.append(f"judge: *{target}")
    elif where == "params":
        lines.append(f"judge: {{params: {{p: *{target}}}}}")
    elif where == "sweep":
        lines.append(f"sweep: {{thresholds: *{target}}}")
    return "\n".join(lines) + "\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(alias_documents())
@example(BASE + BILLION_LAUGHS)
@example(BASE + "a: &a [*a]\n")
@pytest.mark.timeout(600)
def test_alias_graphs_load_or_fail_cleanly(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    try:
        loaded = load_config_text(text, base_dir=Path("."), file="c.yaml")
    except ConfigError as error:
        assert str(error).startswith("c.yaml") and "\n" not in str(error)
    else:
        json.dumps(loaded.raw)  # the accepted document is a finite tree


NUMERIC_PATHS = [("judge", "timeout_s"), ("judge", "requests_per_minute"), ("judge", "tokens_per_minute"),
                 ("judge", "backoff_base_s"), ("judge", "outage_after_s"), ("judge", "max_concurrency"),
                 ("judge", "max_retries"), ("sweep", "alpha"), ("judge.params", "temperature")]
ANY_NUMBER = (st.floats(allow_nan=True, allow_infinity=True) | st.integers(-10**40, 10**40)
              | st.sampled_from([".inf", "-.inf", ".nan", "1e999", "'inf'", "'nan'", "'1e999'", "0", "-0.0"]))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(NUMERIC_PATHS), ANY_NUMBER)
@example(("judge", "timeout_s"), float("inf"))
@example(("judge.params", "temperature"), float("nan"))
def test_config_numbers_finite_or_config_error(where: tuple[str, str], number: Any) -> None:
    section, name = where
    literal = number if isinstance(number, str) else yaml.safe_dump(number).splitlines()[0]
    if section == "judge.params":
        text = BASE + f"judge: {{params: {{{name}: {literal}}}}}\n"
    else:
        text = BASE + f"{section}: {{{name}: {literal}}}\n"
    try:
        loaded = load_config_text(text, base_dir=Path("."), file="c.yaml")
    except ConfigError as error:
        assert error.path.startswith(f"{section}.{name}") or error.path == section, str(error)
        return
    node: Any = loaded.config
    for part in f"{section}.{name}".split("."):
        node = node[part] if isinstance(node, dict) else getattr(node, part)
    if section == "judge.params" and isinstance(node, str):
        return  # YAML 1.1 reads 1e999 (no dot) as text: passed through as text
    assert isinstance(node, (int, float)) and math.isfinite(node) and abs(node) <= 1e15


def test_check_numbers_walks_lists_and_models() -> None:
    with pytest.raises(ConfigError, match=r"x\.y\[2\]: must be a finite number"):
        check_numbers({"x": {"y": [1, 2.5, float("-inf")]}}, "", "f")
    check_numbers({"x": [True, None, "inf", 10**15]}, "", "f")


# -- evaluators listed twice, thresholds naming nothing -------------------------------------------------------------

@pytest.mark.parametrize("evaluators", [
    "[{type: trec}, {type: trec, metrics: [citation]}]",
    "[{type: golden}, {type: consistency}, {type: 'open_rag_eval.evaluators.golden:GoldenEvaluator'}]",
])
def test_an_evaluator_listed_twice_is_refused(tmp_path: Path, evaluators: str) -> None:
    done = cli(tmp_path, f"input: in.jsonl\nevaluators: {evaluators}\n")
    assert done.returncode == 2
    line = one_line_error(done)
    assert "is listed twice (also evaluators[0]): its values would be counted twice" in line, line
    assert "config.yaml: evaluators[" in line


def test_a_threshold_naming_no_metric_is_refused_by_validate(tmp_path: Path) -> None:
    text = ("input: in.jsonl\nevaluators: [{type: golden, metrics: [lexical, latency]}, "
            "{type: consistency, metrics: [rouge]}]\nsweep: {thresholds: {consistency.rogueL: 0.1}}\n")
    done = cli(tmp_path, text)
    assert done.returncode == 2
    line = one_line_error(done)
    assert "sweep.thresholds.consistency.rogueL: no evaluator in this config produces 'consistency.rogueL'" in line
    assert "did you mean 'consistency.rougeL'?" in line and "latency.ms" in line and "consistency.rouge1" in line


def test_a_fail_if_drop_naming_no_metric_is_refused(tmp_path: Path) -> None:
    text = "input: in.jsonl\nevaluators: [{type: golden}]\nsweep: {fail_if_drop: {latency.msec: 100}}\n"
    with pytest.raises(ConfigError, match=r"sweep\.fail_if_drop\.latency\.msec: .*did you mean 'latency\.ms'\?"):
        load_config_text(text, base_dir=tmp_path)


@pytest.mark.parametrize("evaluators, metric", [
    ("[{type: golden, metrics: [lexical, latency]}, {type: consistency}]", "latency.ms"),
    ("[{type: golden, metrics: [lexical, latency]}, {type: consistency}]", "consistency.lexical.groundedness.std"),
    ("[{type: trec, k_values: [1, 10]}, {type: consistency, metrics: [dispersion]}]",
     "consistency.umbrela.ndcg@10.std"),
    ("[{type: trec}, {type: consistency, judge_repeats: 3, metrics: [rouge]}]", "consistency.judge.umbrela.flip_rate"),
    ("[{type: golden, k_values: [5]}]", "golden.ndcg@5"),
    ("[{type: consistency, results_dir: old}]", "consistency.anything.mean"),  # names come from a folder
])
def test_thresholds_on_produced_metrics_are_accepted(tmp_path: Path, evaluators: str, metric: str) -> None:
    text = f"input: in.jsonl\nevaluators: {evaluators}\nsweep: {{thresholds: {{'{metric}': 0.1}}}}\n"
    loaded = load_config_text(text, base_dir=tmp_path)
    assert loaded.config.sweep is not None and metric in loaded.config.sweep.thresholds


@pytest.mark.parametrize("prices, path, problem", [
    ("{input: 'nan', output: 1}", "judge.prices.input", "finite number"),
    ("{m: {input: 'inf', output: 1}}", "judge.prices.m.input", "finite number"),
    ("{m: {input: -1, output: 1}}", "judge.prices.m.input", "greater than or equal to 0"),
    ("{input: 1, output: 2, bogus: 3}", "judge.prices.bogus", "unknown key; valid keys here: input, output"),
])
def test_price_errors_name_the_yaml_path_not_the_union_branch(prices: str, path: str, problem: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config_text(BASE + f"judge: {{prices: {prices}}}\n", base_dir=Path("."), file="c.yaml")
    assert raised.value.path == path and problem in raised.value.problem, str(raised.value)
