"""Sweep verdicts beyond the paired test: INCONCLUSIVE when it cannot reach alpha with this many queries (exit 7),
and fail_if_drop, an absolute rule that trips whatever p says (exit 1)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.config import SweepOptions
from open_rag_eval.sweeps.history import History, SweepRecord
from open_rag_eval.sweeps.run import compare, min_p_value
from open_rag_eval.core.types import Score
from tests.rag_server import RagBehaviour, RagServer
from tests.test_sweep import sweep_config


def _history(tmp_path: Path, before: list[float], after: list[float], metric: str = "consistency.rougeL") -> History:
    history = History(tmp_path / "h.sqlite")
    for sweep_id, values in (("s0", before), ("s1", after)):
        history.append(SweepRecord(
            id=sweep_id, started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:01:00+00:00",
            system="x", config_digest="d", output_dir="o", n_queries=len(values), n_outputs=len(values),
            n_failed_outputs=0, simulated=False,
            scores=[Score(query_id=f"q{i}", run=None, metric=metric, value=v) for i, v in enumerate(values)]))
    return history


def test_smallest_p_value_of_the_sign_flip_test() -> None:
    assert [min_p_value(n) for n in (0, 1, 2, 5, 6)] == [1.0, 1.0, 0.5, 0.0625, 0.03125]


def test_rouge_falling_on_every_one_of_five_queries_is_inconclusive_not_stable(tmp_path: Path) -> None:
    # the case: ROUGE-L 1.00 -> 0.34 on every query; 5 queries: p >= 2/2^5 = 0.0625 > alpha 0.05
    with _history(tmp_path, [1.0] * 5, [0.34] * 5) as history:
        (c,) = compare(history, "s0", "s1", SweepOptions(thresholds={"consistency.rougeL": 0.1}))
    assert c.delta == pytest.approx(-0.66) and c.n == 5 and c.min_p == 0.0625
    assert c.p_value is not None and c.p_value >= 0.05
    assert (c.regression, c.inconclusive, c.state) == (False, True, "inconclusive")
    assert "5 paired queries cannot reach alpha 0.05 (smallest possible p 0.0625)" in c.note


def test_six_queries_can_reach_significance(tmp_path: Path) -> None:
    with _history(tmp_path, [1.0] * 6, [0.34] * 6) as history:
        (c,) = compare(history, "s0", "s1", SweepOptions(thresholds={"consistency.rougeL": 0.1}))
    assert c.min_p == 0.03125 and c.p_value is not None and c.p_value < 0.05
    assert c.state == "regression"


def test_within_the_threshold_is_ok_even_with_few_queries(tmp_path: Path) -> None:
    with _history(tmp_path, [1.0, 0.9], [0.95, 0.9]) as history:
        (c,) = compare(history, "s0", "s1", SweepOptions(thresholds={"consistency.rougeL": 0.1}))
    assert c.state == "ok" and c.min_p == 1.0  # one query changed


def test_fail_if_drop_trips_whatever_p_says(tmp_path: Path) -> None:
    with _history(tmp_path, [1.0] * 3, [0.7] * 3) as history:
        options = SweepOptions(thresholds={"consistency.rougeL": 0.1}, fail_if_drop={"consistency.rougeL": 0.2})
        (c,) = compare(history, "s0", "s1", options)
    assert c.state == "regression" and c.p_value is not None and c.p_value > 0.05
    assert "more than fail_if_drop 0.2" in c.note


def test_fail_if_drop_alone_and_a_smaller_drop(tmp_path: Path) -> None:
    with _history(tmp_path, [1.0, 1.0], [0.9, 0.9]) as history:
        (c,) = compare(history, "s0", "s1", SweepOptions(fail_if_drop={"consistency.rougeL": 0.2}))
    assert c.threshold is None and c.fail_if_drop == 0.2 and c.state == "ok"  # dropped 0.1, allowed 0.2


def test_fail_if_drop_upwards_for_lower_is_better(tmp_path: Path) -> None:
    with _history(tmp_path, [100.0], [400.0], metric="latency.ms") as history:
        (c,) = compare(history, "s0", "s1", SweepOptions(fail_if_drop={"latency.ms": 200}))
    assert c.lower_is_better and c.state == "regression"  # latency rose by 300 ms, allowed 200


def test_one_paired_query_beyond_the_threshold_is_inconclusive(tmp_path: Path) -> None:
    with _history(tmp_path, [1.0], [0.2]) as history:
        (c,) = compare(history, "s0", "s1", SweepOptions(thresholds={"consistency.rougeL": 0.1}))
    assert c.p_value is None and c.state == "inconclusive"


def _config(tmp_path: Path, url: str, rules: str) -> Path:
    return sweep_config(tmp_path, url, queries=3, metrics="[rouge]", rules=rules)


@pytest.mark.parametrize(("rules", "code", "verdict"), [
    ("thresholds: {consistency.rougeL: 0.1}", 7, "verdict: INCONCLUSIVE in consistency.rougeL"),
    ("thresholds: {consistency.rougeL: 0.1}\n  fail_if_drop: {consistency.rougeL: 0.3}", 1,
     "verdict: REGRESSION in consistency.rougeL"),
])
def test_sweep_exit_codes_with_three_queries(tmp_path: Path, capsys: pytest.CaptureFixture[str], rules: str,
                                             code: int, verdict: str) -> None:
    with RagServer() as server:
        config = _config(tmp_path, server.url, rules)
        assert main(["sweep", "--config", str(config)]) == 0
        server.behaviour = RagBehaviour(mode="unstable")
        capsys.readouterr()
        assert main(["sweep", "--config", str(config)]) == code
    out = capsys.readouterr().out
    assert verdict in out
    with History(tmp_path / "history.sqlite") as history:
        assert history.sweeps()[-1].verdict == verdict.split()[1].lower()


# ---------------------------------------------------------------- validate warnings


def test_never_trips_names_too_few_queries_and_impossible_amounts() -> None:
    from open_rag_eval.sweeps.run import never_trips

    options = SweepOptions(thresholds={"consistency.rougeL": 0.1, "nuggets.vital": 1.0},
                           fail_if_drop={"nuggets.vital": 0.2, "consistency.bertscore_f1": 1.5})
    problems = never_trips(options, 5)
    assert len(problems) == 3
    assert problems[0].startswith("sweep.thresholds.consistency.rougeL: with 5 queries the paired test can never "
                                  "reach alpha 0.05 (smallest possible p 0.0625)")
    assert "Use at least 6 queries" in problems[0]
    assert "sweep.thresholds.nuggets.vital: 1 can never trip: the metric lies in [0, 1]" in problems[1]
    assert problems[2].startswith("sweep.fail_if_drop.consistency.bertscore_f1: 1.5 can never trip")
    assert never_trips(SweepOptions(thresholds={"consistency.rougeL": 0.1}), 6) == []
    assert never_trips(SweepOptions(thresholds={"latency.ms": 5000.0}, alpha=0.01), 8) == []  # 2/2^8 < 0.01


def _validate(tmp_path: Path, text: str, caplog: pytest.LogCaptureFixture) -> str:
    config = tmp_path / "config.yaml"
    config.write_text(text)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="open_rag_eval"):
        assert main(["validate", "--config", str(config)]) == 0
    assert "valid (" in caplog.text
    return caplog.text


JUDGED = """
input: {input}
judge: {judge}
evaluators:
  - type: trec
    metrics: [no_answer]
"""


@pytest.mark.parametrize(("judge", "env", "warned"), [
    ("{model: gpt-4o, api_key_env: MY_JUDGE_KEY}", {}, True),
    ("{model: gpt-4o, api_key_env: MY_JUDGE_KEY}", {"MY_JUDGE_KEY": "sk-test"}, False),
    ("{model: llama, base_url: 'http://127.0.0.1:8080/v1', api_key_env: MY_JUDGE_KEY}", {}, False),
    ("{model: llama, base_urls: ['http://127.0.0.1:8080/v1', 'http://localhost:8081/v1'], api_key_env: MY_JUDGE_KEY}",
     {}, False),
    ("{model: llama, base_urls: ['http://127.0.0.1:8080/v1', 'https://judge.example/v1'], api_key_env: MY_JUDGE_KEY}",
     {}, True),
    ("{model: simulated, simulated: {}}", {}, False),
])
def test_validate_says_when_the_judge_key_variable_is_unset(tmp_path: Path, caplog: pytest.LogCaptureFixture,
                                                            monkeypatch: pytest.MonkeyPatch, judge: str,
                                                            env: dict[str, str], warned: bool) -> None:
    monkeypatch.delenv("MY_JUDGE_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    data = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"
    err = _validate(tmp_path, JUDGED.format(input=data, judge=judge), caplog)
    assert ("judge.api_key_env: the environment variable MY_JUDGE_KEY is not set" in err) is warned
    assert "sk-test" not in err


def test_validate_warns_about_sweep_thresholds_that_never_trip(tmp_path: Path,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    config = _config(tmp_path, "http://127.0.0.1:9/q", "thresholds: {consistency.rougeL: 0.1}")
    err = _validate(tmp_path, config.read_text(), caplog)
    assert "sweep.thresholds.consistency.rougeL: with 3 queries the paired test can never reach alpha" in err
    config = _config(tmp_path, "http://127.0.0.1:9/q",
                     "thresholds: {consistency.rougeL: 0.1}\n  fail_if_drop: {consistency.rougeL: 0.3}")
    assert "never" not in _validate(tmp_path, config.read_text(), caplog)
