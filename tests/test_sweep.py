"""Scheduled sweeps end to end against the loopback RAG server: history, baseline comparison, exit codes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.sweeps.history import History, SweepRecord
from open_rag_eval.scoring.stats import Aggregate
from open_rag_eval.core.catalogue import lower_is_better
from open_rag_eval.core.types import Score
from tests.rag_server import RagBehaviour, RagServer

QUERIES = [f"What is topic number {i} about" for i in range(8)]


def sweep_config(tmp_path: Path, url: str, *, repeats: int = 3, queries: int = len(QUERIES),
                 metrics: str = "[rouge, dispersion]", rules: str = "thresholds: {consistency.rougeL: 0.1}") -> Path:
    """A sweep over ``queries`` queries asked ``repeats`` times of the RAG server at ``url``."""
    rows = "".join(f"t{i},{q}\n" for i, q in enumerate(QUERIES[:queries]))
    (tmp_path / "queries.csv").write_text("query_id,query\n" + rows)
    path = tmp_path / "sweep.yaml"
    path.write_text(f"""
output_dir: out
connector:
  type: http
  queries: queries.csv
  repeats: {repeats}
  options: {{url: "{url}", body: {{query: "{{query}}", query_id: "{{query_id}}"}}, backoff_s: 0}}
evaluators:
  - type: consistency
    metrics: {metrics}
sweep:
  history: history.sqlite
  system: demo
  {rules}
  seed: 7
""")
    return path


def test_sweep_detects_a_change_in_behaviour(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RagServer() as server:
        config = sweep_config(tmp_path, server.url)
        assert main(["sweep", "--config", str(config)]) == 0
        assert "verdict: FIRST SWEEP" in capsys.readouterr().out
        assert main(["sweep", "--config", str(config)]) == 0  # unchanged behaviour: stable
        out = capsys.readouterr().out
        assert "verdict: STABLE" in out and "consistency.rougeL" in out
        server.behaviour = RagBehaviour(mode="unstable")  # the system starts answering differently each time
        assert main(["sweep", "--config", str(config)]) == 1
        out = capsys.readouterr().out
    assert "verdict: REGRESSION in consistency.rougeL" in out
    with History(tmp_path / "history.sqlite") as history:
        sweeps = history.sweeps()
        assert [s.verdict for s in sweeps] == ["first", "stable", "regression"]
        assert all(s.n_queries == 8 and s.n_outputs == 24 and s.system == "demo" for s in sweeps)
        trend = history.trend("consistency.rougeL")
        assert [round(agg.mean, 6) for _, agg in trend if agg] [:2] == [1.0, 1.0]
        assert trend[2][1] is not None and trend[2][1].mean < 0.5
        per_query, failed = history.per_query(sweeps[0].id, "consistency.rougeL")
        assert len(per_query) == 8 and failed == 0
    assert (tmp_path / "out" / "sweeps" / sweeps[0].id / "outputs.jsonl").exists()
    assert main(["history", "--config", str(config)]) == 0
    listing = capsys.readouterr().out
    assert listing.count("demo") == 3 and "regression" in listing
    assert main(["history", "--db", str(tmp_path / "history.sqlite"), "--metric", "consistency.rougeL"]) == 0
    assert "consistency.rougeL" in capsys.readouterr().out


def test_sweep_needs_repeats(tmp_path: Path) -> None:
    config = sweep_config(tmp_path, "http://127.0.0.1:9/q", repeats=1)
    assert main(["sweep", "--config", str(config)]) == 2


def test_sweep_with_an_unreachable_system_is_an_error_not_a_regression(tmp_path: Path) -> None:
    config = sweep_config(tmp_path, "http://127.0.0.1:9/q")  # port 9 (discard): nothing answers
    config.write_text(config.read_text().replace("backoff_s: 0", "backoff_s: 0, retries: 0"))
    assert main(["sweep", "--config", str(config)]) == 5


def test_failed_metric_is_a_regression(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with RagServer() as server:
        config = sweep_config(tmp_path, server.url, repeats=2)
        config.write_text(config.read_text().replace("backoff_s: 0", "backoff_s: 0, retries: 0"))
        assert main(["sweep", "--config", str(config)]) == 0
        # one of the two calls of every query now fails: no query has two answers, consistency has no value at all
        server.behaviour = RagBehaviour(fail={f"t{i}": [500] for i in range(8)})
        assert main(["sweep", "--config", str(config)]) == 1
    assert "consistency.rougeL (no value" in capsys.readouterr().out


def test_history_store_roundtrip(tmp_path: Path) -> None:
    with History(tmp_path / "h.sqlite") as history:
        for i, value in enumerate((0.5, 0.7)):
            history.append(SweepRecord(
                id=f"s{i}", started_at="2026-01-01T00:00:00+00:00", finished_at="2026-01-01T00:01:00+00:00",
                system="x", config_digest="d", output_dir="o", n_queries=1, n_outputs=2, n_failed_outputs=0,
                simulated=False, scores=[Score(query_id="q", run=1, metric="m", value=value),
                                         Score(query_id="q", run=2, metric="m", value=value + 0.1),
                                         Score(query_id="q", run=None, metric="c", error="skipped")],
                summary=[Aggregate("m", value, None, None, None, 2, 0)]))
        assert history.previous("s1", "x").id == "s0"  # type: ignore[union-attr]
        assert history.previous("s0", "x") is None
        assert history.per_query("s1", "m") == ({"q": pytest.approx(0.75)}, 0)
        assert history.per_query("s1", "c") == ({}, 1)
        assert [agg.mean for _, agg in history.trend("m")] == [0.5, 0.7]  # type: ignore[union-attr]
    with pytest.raises(sqlite3.IntegrityError):
        with History(tmp_path / "h.sqlite") as history:
            history.append(SweepRecord(id="s0", started_at="", finished_at="", system="x", config_digest="",
                                       output_dir="", n_queries=0, n_outputs=0, n_failed_outputs=0, simulated=False))


def test_direction_of_metrics() -> None:
    assert lower_is_better("consistency.umbrela.mean.std") and lower_is_better("latency.ms")
    assert not lower_is_better("consistency.rougeL") and not lower_is_better("nuggets.vital")


def test_history_trend_bars_start_at_zero() -> None:
    """A 17% drop shows as a 17% shorter bar, not as a collapse from the longest bar to the shortest."""
    from open_rag_eval.cli.commands.history import BAR, bar_scale

    assert bar_scale("citation.f1", [0.60, 0.50]) == (0.0, 1.0)
    assert bar_scale("umbrela.mean", [2.0, 1.5]) == (0.0, 3.0)
    assert bar_scale("latency.ms", [800.0, 1000.0]) == (0.0, 1000.0)  # no fixed range: zero to the largest
    assert bar_scale("consistency.judge.support.alpha", [0.4, -0.2]) == (-0.2, 1.0)
    low, high = bar_scale("citation.f1", [0.60, 0.498])
    bars = [round(BAR * (m - low) / (high - low)) for m in (0.60, 0.498)]
    assert bars == [12, 10]  # min-max scaling drew 20 and 1


def _null_judge_sweep(tmp_path: Path, url: str, judge_url: str, rules: str) -> Path:
    """A sweep whose criteria judge answers every request with a null content: criteria.polite fails everywhere."""
    config = sweep_config(tmp_path, url, queries=3, rules=rules)
    text = config.read_text().replace("evaluators:\n", (
        f"judge: {{model: gpt-4o-mini, base_url: '{judge_url}', api_key_env: OPEN_RAG_EVAL_TEST_NO_KEY, cache: false, "
        "backoff_base_s: 0.001, backoff_cap_s: 0.002}\nevaluators:\n"
        "  - {type: criteria, criteria: [{name: polite, question: 'Is the answer polite?'}]}\n"))
    config.write_text(text)
    return config


def test_a_sweep_whose_run_is_incomplete_exits_6_unless_it_regressed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    from tests.openai_server import Reply, ScriptedServer

    with RagServer() as server, ScriptedServer(default=Reply.shaped({"role": "assistant", "content": None})) as judge:
        config = _null_judge_sweep(tmp_path, server.url, judge.base_url, "thresholds: {consistency.rougeL: 0.1}")
        assert main(["sweep", "--config", str(config)]) == 6  # the first sweep: nothing to compare, yet incomplete
        out = capsys.readouterr().out
        assert "INCOMPLETE RUN: criteria.polite failed for every output; commonest reason: " in out
        assert "verdict: FIRST SWEEP" in out
        assert "error: incomplete run: criteria.polite failed for every output" in caplog.text
        assert main(["sweep", "--config", str(config)]) == 6  # stable on consistency, still incomplete
        assert "verdict: STABLE" in capsys.readouterr().out
        # a threshold on the metric that failed: no value in this sweep is a regression, and a regression's 1 wins
        config = _null_judge_sweep(tmp_path, server.url, judge.base_url, "thresholds: {criteria.polite: 0.1}")
        assert main(["sweep", "--config", str(config)]) == 1
        assert "verdict: REGRESSION in criteria.polite (no value" in capsys.readouterr().out
    with History(tmp_path / "history.sqlite") as history:
        assert [s.verdict for s in history.sweeps()] == ["first", "stable", "regression"]
