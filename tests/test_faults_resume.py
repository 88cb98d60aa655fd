"""Crash and resume: SIGKILL the CLI at seeded points of a run, rerun the same command.

The rerun's results equal an uninterrupted run's (timestamps aside), it asks the judge only for judgments that were
not cached when the process died, and no half-written file is ever left in the output directory (a run writes into
the fresh folder ``.<out>.partial`` beside it and swaps it in at the end).
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_faults_api_errors import synthetic_outputs, write_inputs

ROOT = Path(__file__).resolve().parent.parent
RESULT_FILES = ("results.csv", "summary.csv", "results.json", "manifest.json")


def _config(folder: Path, data: Path, cache: Path, latency_ms: int = 15) -> Path:
    """A run's config; the simulated judge's latency changes how long it takes, never what it answers."""
    config = {"input": str(data), "output_dir": "out",
              "judge": {"model": "simulated-judge", "max_concurrency": 4, "cache": str(cache),
                        "simulated": {"latency_ms": latency_ms, "jitter_ms": 5, "seed": 3}},
              "evaluators": [{"type": "trec", "k_values": [1, 3],
                              "metrics": ["umbrela", "nuggets", "citation", "no_answer"]}]}
    path = folder / f"{cache.stem}-{latency_ms}ms.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _command(config: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "open_rag_eval", "-q", "eval", "--config", str(config), "--output-dir", str(out)]


def _cached(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{cache}?mode=ro", uri=True, timeout=0.05) as db:
            return int(db.execute("SELECT COUNT(*) FROM completions").fetchone()[0])
    except sqlite3.OperationalError:  # the table is not created yet, or the writer holds the lock just now
        return 0


def _run(config: Path, out: Path) -> dict[str, Any]:
    done = subprocess.run(_command(config, out), cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def _kill_when(config: Path, out: Path, cache: Path, rows: int) -> None:
    """Start the run and SIGKILL it as soon as the cache holds ``rows`` judgments (0: once outputs are saved)."""
    process = subprocess.Popen(_command(config, out), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and process.poll() is None:
            saved = (out.parent / f".{out.name}.partial" / "outputs.jsonl").exists()
            if (rows == 0 and saved) or (rows > 0 and _cached(cache) >= rows):
                break
            time.sleep(0.002)
        assert process.poll() is None, "the run finished before the kill point"
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=30)


def _strip_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_times(v) for k, v in value.items() if k not in ("created", "wall_time_s", "timestamp")}
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


def _assert_whole_files(out: Path) -> None:
    """Every file in the output directory is complete: no temp file, JSON parses, JSONL lines parse."""
    if not out.exists():  # killed before its first results were swapped in
        return
    for path in out.iterdir():
        assert not path.name.startswith("."), f"half-written temp file left behind: {path.name}"
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            json.loads(text)
        elif path.suffix == ".jsonl":
            assert text.endswith("\n")
            for line in text.splitlines():
                json.loads(line)
        elif path.suffix == ".csv":
            assert text.endswith("\n")


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("uninterrupted")
    data = write_inputs(folder, synthetic_outputs(8, runs=2, seed=11))
    manifest = _run(_config(folder, data, folder / "cache.sqlite"), folder / "out")
    return {"data": data, "calls": manifest["accounting"]["total"]["calls"], "out": folder / "out"}


def _comparable(out: Path) -> dict[str, Any]:
    return {"results.csv": (out / "results.csv").read_text(encoding="utf-8"),
            "summary.csv": (out / "summary.csv").read_text(encoding="utf-8"),
            "results.json": _strip_times(json.loads((out / "results.json").read_text(encoding="utf-8"))),
            "outputs.jsonl": (out / "outputs.jsonl").read_text(encoding="utf-8")}


def _kill_points(total: int, seed: int = 20261121) -> list[int]:
    rng = random.Random(seed)
    return [0, rng.randint(1, total // 3), rng.randint(total // 3 + 1, total - 5)]


@pytest.mark.slow
def test_kill_and_resume(tmp_path: Path, uninterrupted: dict[str, Any]) -> None:
    total = uninterrupted["calls"]
    expected = _comparable(uninterrupted["out"])
    figures = []
    for point in _kill_points(total):
        cache, out = tmp_path / f"cache{point}.sqlite", tmp_path / f"out{point}"
        # the killed run is slow (~4 s of judging) so that a loaded machine still reaches the kill point mid-run
        _kill_when(_config(tmp_path, uninterrupted["data"], cache, latency_ms=120), out, cache, point)
        _assert_whole_files(out)
        assert not any((out / name).exists() for name in RESULT_FILES)  # no results pretending to be complete
        cached = _cached(cache)
        assert cached >= point
        manifest = _run(_config(tmp_path, uninterrupted["data"], cache), out)
        calls = manifest["accounting"]["total"]["calls"]
        figures.append((point, cached, total - cached, calls))
        assert calls <= total - cached  # only what was not judged yet
        assert manifest["accounting"]["total"]["cache_hits"] >= cached
        _assert_whole_files(out)
        assert _comparable(out) == expected
    assert [f[0] for f in figures] == _kill_points(total)
    logging.getLogger(__name__).info("kill point, cached, missing, rerun calls: %s", figures)


@pytest.mark.slow
def test_rerun_clears_a_temp_file_left_by_a_kill_during_a_write(tmp_path: Path,
                                                                uninterrupted: dict[str, Any]) -> None:
    """A kill between an atomic write's temp file and its rename leaves '.<name>.<random>.tmp' behind."""
    cache, out = uninterrupted["out"].parent / "cache.sqlite", tmp_path / "out"  # warm: only the files matter
    out.mkdir()
    (out / ".results.json.k3j2_x.tmp").write_text('{"half": ', encoding="utf-8")
    (out / "notes.txt").write_text("the user's own file", encoding="utf-8")
    _run(_config(tmp_path, uninterrupted["data"], cache), out)
    assert (out / "notes.txt").read_text(encoding="utf-8") == "the user's own file"
    assert not (out / ".results.json.k3j2_x.tmp").exists()
    _assert_whole_files(out)
