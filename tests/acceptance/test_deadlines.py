"""Deadlines that hold, against real loopback servers that drip a valid reply one byte a second: ``timeout_s`` is
the whole attempt for the judge and for a connector. The judge with the settings of docs/reliability.md's bound
(``timeout_s: 5``, ``max_retries: 2``, ``max_concurrency: 4``, ``outage_after_failures: 4``) stops the run with
exit 4 (about 45 s; uncut, each attempt would take minutes); a connector's every output fails with its timeout and
the run, which has no value, is exit 6. The subprocess's own timeout is the hang detector, generous for a loaded
machine: the run's length is set by its deadlines, not by the CPU."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from tests.acceptance.cli import ROOT, run
from tests.openai_server import Reply, ScriptedServer
from tests.rag_server import RagBehaviour, RagServer

pytestmark = pytest.mark.slow

HANG_S = 150  # far above the ~45 s these runs take: only a deadline that does not hold reaches it
JUDGE = {"timeout_s": 5, "max_retries": 2, "max_concurrency": 4, "outage_after_failures": 4}


def _write(folder: Path, config: dict[str, object]) -> Path:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    return path


def test_a_judge_dripping_its_replies_stops_the_run_with_exit_4(tmp_path: Path) -> None:
    with ScriptedServer(default=Reply.dripping(1.0)) as server:
        config = _write(tmp_path, {
            "input": str(ROOT / "configs" / "data" / "demo.csv"), "output_dir": "out",
            "judge": {"model": "test-model", "base_url": server.base_url, "api_key_env": "OPEN_RAG_EVAL_NO_KEY",
                      "cache": "cache.sqlite", **JUDGE},
            "evaluators": [{"type": "trec", "k_values": [1, 3], "metrics": ["umbrela", "no_answer"]}]})
        started = time.monotonic()
        done = run("eval", "--config", config, cwd=tmp_path, timeout=HANG_S)
        took = time.monotonic() - started
    assert done.returncode == 4, f"exit {done.returncode} after {took:.0f}s\n{done.stderr[-3000:]}"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: 4 judge calls failed") and "timed out 3 times (deadlines 5s, 5s, 10s)" in last
    assert not (tmp_path / "out").exists()  # nothing half-written
    assert server.completions, "the judge was asked"


def test_a_connector_dripping_its_replies_fails_every_output_at_its_deadline(tmp_path: Path) -> None:
    queries = [f"q{i}" for i in range(4)]
    (tmp_path / "queries.csv").write_text("query_id,query\n" + "".join(f"{q},question {q}\n" for q in queries),
                                          encoding="utf-8")
    with RagServer(RagBehaviour(hostile=dict.fromkeys(queries, "drip"), drip_s=1.0)) as server:
        config = _write(tmp_path, {
            "output_dir": "out",
            "connector": {"type": "http", "queries": "queries.csv",
                          "options": {"url": server.url, "timeout_s": 5, "retries": 2, "concurrency": 4,
                                      "body": {"query": "{query}", "query_id": "{query_id}"}}},
            "judge": {"model": "simulated-judge", "simulated": {}, "cache": False},
            "evaluators": [{"type": "trec", "metrics": ["umbrela"], "k_values": [1]}]})
        started = time.monotonic()
        done = run("eval", "--config", config, cwd=tmp_path, timeout=HANG_S)
        took = time.monotonic() - started
    assert done.returncode == 6, f"exit {done.returncode} after {took:.0f}s\n{done.stderr[-3000:]}"
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("error: incomplete run: no metric has a value for any output"), last
    saved = [json.loads(line) for line in (tmp_path / "out" / "outputs.jsonl").read_text().splitlines()]
    assert [o["error"] for o in saved] == ["timed out after 5s after 3 attempts"] * len(queries)
