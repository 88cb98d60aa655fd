"""Injected judge failures (429 with Retry-After, 500, timeouts): scores never change, never go missing.

A real loopback server (the simulated judge) fails a seeded share of the calls; the client's retries must absorb
them so every score equals the error-free run's. With every call failing the run stops (exit 4) in bounded time,
keeps what it judged, and a rerun after recovery calls the judge only for what is not cached yet.
"""

from __future__ import annotations

import csv
import json
import random
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from open_rag_eval.cli import main
from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

WORDS = ("solar wind turbine energy grid battery storage carbon emission policy price market coal nuclear "
         "hydro power plant efficiency demand supply climate heat pump electric vehicle charging station").split()

FAST_RETRIES = {"max_retries": 8, "backoff_base_s": 0.01, "backoff_cap_s": 0.05, "retry_after_cap_s": 0.05,
                "timeout_s": 2.0}


def synthetic_outputs(n_queries: int, n_passages: int = 3, runs: int = 1, seed: int = 7) -> list[dict[str, Any]]:
    """Seeded JSONL-schema outputs: passages drawn from a small vocabulary, answers citing them."""
    rng = random.Random(seed)
    outputs = []
    for q in range(n_queries):
        topic = rng.sample(WORDS, 3)
        query = f"How does {topic[0]} affect {topic[1]} and {topic[2]}?"
        for run in range(1, runs + 1):
            passages = [{"id": str(p + 1), "text": " ".join(rng.choices(WORDS + topic * 3, k=25)) + "."}
                        for p in range(n_passages)]
            if q % 7 == 6:
                answer = "NO_ANSWER"
            else:
                sentences = [f"{' '.join(rng.choices(WORDS + topic, k=8)).capitalize()} [{rng.randint(1, n_passages)}]."
                             for _ in range(3)]
                answer = " ".join(sentences)
            outputs.append({"query_id": f"q{q}", "query": query, "run": run, "passages": passages, "answer": answer})
    return outputs


def write_inputs(folder: Path, outputs: list[dict[str, Any]]) -> Path:
    path = folder / "outputs.jsonl"
    path.write_text("".join(json.dumps(o) + "\n" for o in outputs), encoding="utf-8")
    return path


def write_config(folder: Path, input_path: Path, judge: dict[str, Any], name: str = "config.yaml",
                 output_dir: str = "out") -> Path:
    config = {"input": str(input_path), "output_dir": output_dir,
              "judge": {"model": "simulated-judge", "api_key_env": "OPEN_RAG_EVAL_TEST_NO_KEY", **judge},
              "evaluators": [{"type": "trec", "k_values": [1, 3],
                              "metrics": ["umbrela", "nuggets", "citation", "no_answer"]}]}
    path = folder / name
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def rows(out: Path) -> list[dict[str, str]]:
    with (out / "results.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def score_cells(out: Path) -> dict[tuple[str, str, str], str]:
    """(query, run, column) -> cell for every score column."""
    return {(r["query_id"], r["run"], k): v for r in rows(out) for k, v in r.items()
            if k not in ("query_id", "query", "run")}


def cache_rows(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM completions").fetchone()[0])


def run_cli(config: Path, out: Path) -> int:
    return main(["-q", "eval", "--config", str(config), "--output-dir", str(out)])


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The error-free run: its score cells and the number of distinct judge calls it needs."""
    folder = tmp_path_factory.mktemp("baseline")
    data = write_inputs(folder, synthetic_outputs(7, runs=2))
    with SimulatedJudgeServer(SimulatedServerConfig()) as server:
        config = write_config(folder, data, {"base_url": server.base_url, "cache": str(folder / "cache.sqlite")})
        assert run_cli(config, folder / "out") == 0
        calls = server.stats.requests
    manifest = json.loads((folder / "out" / "manifest.json").read_text())
    return {"data": data, "cells": score_cells(folder / "out"), "calls": calls, "manifest": manifest}


def test_baseline_is_complete(baseline: dict[str, Any]) -> None:
    cells = baseline["cells"]
    assert {key[:2] for key in cells} == {(f"q{q}", str(r)) for q in range(7) for r in (1, 2)}
    assert not [key for key, value in cells.items() if key[2].endswith(".error") and value]
    assert baseline["manifest"]["accounting"]["total"]["calls"] == baseline["calls"] > 0


@pytest.mark.parametrize("rate", [0.05, 0.20])
def test_injected_errors_change_no_score(tmp_path: Path, baseline: dict[str, Any], rate: float) -> None:
    faults = SimulatedServerConfig(error_rate=rate * 2 / 3, timeout_rate=rate / 3, hang_s=5.0, retry_after_s=0.02,
                                   seed=int(rate * 100))
    with SimulatedJudgeServer(faults) as server:
        config = write_config(tmp_path, baseline["data"], {"base_url": server.base_url, "cache": False,
                                                           **FAST_RETRIES, "timeout_s": 0.5})
        assert run_cli(config, tmp_path / "out") == 0
        outcomes = [record.outcome for record in server.stats.log]
        statuses = {record.status for record in server.stats.log}
    faults_seen = outcomes.count("error") + outcomes.count("hang")
    assert faults_seen >= (3 if rate < 0.1 else 15)
    if rate >= 0.1:  # enough draws for every kind of fault
        assert {0, 429, 500} <= statuses
    assert score_cells(tmp_path / "out") == baseline["cells"]
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["accounting"]["total"]["failures"] == 0 and manifest["accounting"]["total"]["retries"] > 0


class _DiesAfter(SimulatedJudgeServer):
    """A healthy server that fails every call once it has answered ``healthy`` requests."""

    def __init__(self, healthy: int, **knobs: Any) -> None:
        super().__init__(SimulatedServerConfig(retry_after_s=0.01, **knobs))
        self.healthy = healthy

    async def _complete(self, request: Any, record: Any) -> Any:
        if self.stats.requests > self.healthy:
            self.config.error_rate = 1.0
        return await super()._complete(request, record)


def test_total_outage_exits_4_keeps_judged_work_and_resumes(tmp_path: Path, baseline: dict[str, Any],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    cache = tmp_path / "cache.sqlite"
    out = tmp_path / "out"
    judge = {"cache": str(cache), **FAST_RETRIES, "max_retries": 2, "max_concurrency": 4,
             "outage_after_failures": 5}
    with _DiesAfter(healthy=25) as server:
        config = write_config(tmp_path, baseline["data"], {"base_url": server.base_url, **judge})
        started = time.monotonic()
        with caplog.at_level("ERROR"):
            assert run_cli(config, out) == 4
        elapsed = time.monotonic() - started
        failing_requests = server.stats.requests
        assert elapsed < 60  # bounded: the breaker stops the run, it does not grind through every call
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert errors[-1].startswith("error: ") and "judge calls failed within" in errors[-1]
        assert errors[-1].endswith("re-run the same command to resume)")
        assert failing_requests < baseline["calls"] * 3
        cached = cache_rows(cache)
        assert 0 < cached <= 25 < baseline["calls"]
        assert not (out / "results.csv").exists()  # no half result pretending to be complete
        server.healthy, server.config.error_rate = 10**9, 0.0  # the endpoint recovers
        server.stats.reset()
        assert run_cli(config, out) == 0
        resumed_calls = server.stats.requests
    assert resumed_calls == baseline["calls"] - cached  # calls only for what was missing
    assert score_cells(out) == baseline["cells"]


def test_endpoint_that_never_answers_stops_in_bounded_time(tmp_path: Path, baseline: dict[str, Any],
                                                           caplog: pytest.LogCaptureFixture) -> None:
    """Every request hangs: timeouts, retries, then the breaker -- exit 4 long before the calls run out."""
    out = tmp_path / "out"
    judge = {"cache": str(tmp_path / "cache.sqlite"), **FAST_RETRIES, "timeout_s": 0.3, "max_retries": 1,
             "max_concurrency": 4, "outage_after_failures": 4}
    with SimulatedJudgeServer(SimulatedServerConfig(timeout_rate=1.0, hang_s=30.0)) as server:
        config = write_config(tmp_path, baseline["data"], {"base_url": server.base_url, **judge})
        started = time.monotonic()
        with caplog.at_level("ERROR"):
            assert run_cli(config, out) == 4
        elapsed = time.monotonic() - started
        requests = server.stats.requests
    assert elapsed < 30
    # retries go before new calls, so the breaker sees 4 failed calls after about concurrency x attempts x 2
    # requests -- however many calls are queued (the run has over a hundred); the controls' calls, asked beside
    # them, never count toward the breaker and may hold a slot each meanwhile (concurrency x attempts more)
    assert requests <= 4 * 2 * 2 + 4 * 2 < baseline["calls"]
    assert "timed out after 0.3s" in caplog.records[-1].getMessage()
    assert cache_rows(tmp_path / "cache.sqlite") == 0 and not (out / "results.csv").exists()


def test_chunked_evaluation_equals_the_single_pass(tmp_path: Path, baseline: dict[str, Any],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Large runs are evaluated in chunks of whole queries (memory); the scores must not notice."""
    from open_rag_eval.evaluators import trec

    monkeypatch.setattr(trec, "CHUNK_OUTPUTS", 3)  # 7 queries x 2 runs -> chunks of one query
    with SimulatedJudgeServer(SimulatedServerConfig()) as server:
        config = write_config(tmp_path, baseline["data"], {"base_url": server.base_url, "cache": False})
        assert run_cli(config, tmp_path / "out") == 0
        assert server.stats.requests == baseline["calls"]
    assert score_cells(tmp_path / "out") == baseline["cells"]
    assert [r["query_id"] for r in rows(tmp_path / "out")] == [f"q{q}" for q in range(7) for _ in (1, 2)]
