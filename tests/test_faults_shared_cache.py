"""Two processes, overlapping inputs, one cache file, at the same time: both finish, the cache is intact, and a
judgment is paid twice only when both processes asked for it at the same moment (nothing to find in the cache yet).
"""

from __future__ import annotations

import csv
import hashlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
from tests.test_faults_api_errors import synthetic_outputs

ROOT = Path(__file__).resolve().parent.parent
# between the server's reply and the other process's cache write: the reply still has to reach that process, be
# parsed and be written through SQLite; on a loaded 2-core machine that took over 0.1 s. A client that looked in
# the cache only when it queued a request (not when it sends it) would still pay seconds-old answers again.
CACHE_WRITE_SLACK_S = 0.5


class _RecordingServer(SimulatedJudgeServer):
    """Remembers which request body each logged request carried."""

    def __init__(self, config: SimulatedServerConfig) -> None:
        super().__init__(config)
        self.bodies: list[tuple[str, Any]] = []

    async def _complete(self, request: Any, record: Any) -> Any:
        self.bodies.append((hashlib.sha256(request.body).hexdigest(), record))
        return await super()._complete(request, record)


def _write(folder: Path, name: str, outputs: list[dict[str, Any]], base_url: str, cache: Path) -> Path:
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps(o) + "\n" for o in outputs), encoding="utf-8")
    config = {"input": str(data), "output_dir": str(folder / name),
              "judge": {"model": "simulated-judge", "base_url": base_url, "max_concurrency": 4, "cache": str(cache)},
              "evaluators": [{"type": "trec", "k_values": [1, 3],
                              "metrics": ["umbrela", "nuggets", "citation", "no_answer"]}]}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _rows(out: Path) -> dict[tuple[str, str], dict[str, str]]:
    with (out / "results.csv").open(encoding="utf-8") as handle:
        return {(r["query_id"], r["run"]): r for r in csv.DictReader(handle)}


def _avoidable_duplicates(bodies: list[tuple[str, Any]]) -> int:
    """Successful requests for a body whose earlier successful answer was already out (and cached) when sent."""
    answered: dict[str, float] = {}
    avoidable = 0
    for digest, record in sorted(bodies, key=lambda item: item[1].start):
        if record.status != 200:
            continue
        first_end = answered.get(digest)
        if first_end is not None and record.start > first_end + CACHE_WRITE_SLACK_S:
            avoidable += 1
        answered[digest] = min(first_end or record.end, record.end)
    return avoidable


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Processes a (q0..q7) and b (q4..q11, so q4..q7 in both) started together on one cache file."""
    tmp_path = tmp_path_factory.mktemp("shared")
    everything = synthetic_outputs(12, runs=2, seed=5)
    first = [o for o in everything if int(o["query_id"][1:]) < 8]
    second = [o for o in everything if int(o["query_id"][1:]) >= 4]
    cache = tmp_path / "shared.sqlite"
    with _RecordingServer(SimulatedServerConfig(latency_ms=20, jitter_ms=10)) as server:
        configs = [_write(tmp_path, "a", first, server.base_url, cache),
                   _write(tmp_path, "b", second, server.base_url, cache)]
        processes = [subprocess.Popen([sys.executable, "-m", "open_rag_eval", "-q", "eval", "--config", str(c)],
                                      cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                     for c in configs]
        finished = [p.communicate(timeout=300) for p in processes]
        bodies = list(server.bodies)
    return {"folder": tmp_path, "cache": cache, "bodies": bodies,
            "codes": [p.returncode for p in processes], "stderr": [err for _, err in finished]}


@pytest.mark.slow
def test_two_processes_share_one_cache(shared_run: dict[str, Any]) -> None:
    folder, bodies = shared_run["folder"], shared_run["bodies"]
    assert shared_run["codes"] == [0, 0], shared_run["stderr"]
    for stderr in shared_run["stderr"]:
        assert "Traceback" not in stderr and "database is locked" not in stderr

    with sqlite3.connect(shared_run["cache"]) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        cached = int(db.execute("SELECT COUNT(*) FROM completions").fetchone()[0])
    distinct = {digest for digest, record in bodies if record.status == 200}
    assert cached == len(distinct)  # every distinct judgment stored once

    manifests = [json.loads((folder / name / "manifest.json").read_text(encoding="utf-8")) for name in "ab"]
    totals = [m["accounting"]["total"] for m in manifests]
    assert sum(t["calls"] for t in totals) == len([1 for _, record in bodies if record.status == 200])
    assert sum(t["cache_hits"] for t in totals) > 0  # the overlap was (partly) served from the other's work

    rows_a, rows_b = _rows(folder / "a"), _rows(folder / "b")
    overlap = sorted(set(rows_a) & set(rows_b))
    assert [key[0] for key in overlap] == [f"q{q}" for q in range(4, 8) for _ in (1, 2)]
    assert all(rows_a[key] == rows_b[key] for key in overlap)  # same judgments, same scores
    assert not [k for row in [*rows_a.values(), *rows_b.values()] for k, v in row.items()
                if k.endswith(".error") and v]


@pytest.mark.slow
def test_no_duplicate_paid_when_the_other_process_had_cached_it(shared_run: dict[str, Any]) -> None:
    assert _avoidable_duplicates(shared_run["bodies"]) == 0
