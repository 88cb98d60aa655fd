"""The HHEM metric through the CLI: missing weights leave the run going with one actionable message."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "configs" / "data" / "demo.csv"


def run_eval(tmp_path: Path, hallucination: str = "") -> tuple[subprocess.CompletedProcess[str], Path]:
    config = tmp_path / "config.yaml"
    config.write_text(
        f"input: {DEMO}\noutput_dir: {tmp_path / 'out'}\n"
        "judge:\n  model: simulated-judge\n  simulated: {}\n  cache: false\n"
        f"evaluators:\n  - type: trec\n    metrics: [hhem]\n{hallucination}",
        encoding="utf-8",
    )
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "empty-hf-home")}
    env.pop("HF_HUB_CACHE", None)
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config)],
                          check=False, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    return done, tmp_path / "out"


def rows(out: Path) -> list[dict[str, str]]:
    with open(out / "results.csv", newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_missing_weights_the_run_writes_its_rows_says_where_to_put_them_and_is_incomplete(tmp_path: Path) -> None:
    done, out = run_eval(tmp_path)
    # HHEM is this run's only metric: with no value anywhere the run is incomplete (exit 6, files written), and its
    # one error line gives the weights' reason as the commonest
    assert done.returncode == 6, done.stderr
    assert done.stderr.count("HHEM weights unavailable") == 2
    assert "error: incomplete run: no metric has a value for any output: commonest reason: HHEM weights" in done.stderr
    assert "hallucination.model_path" in done.stderr and "HF_HOME" in done.stderr
    table = rows(out)
    assert table and all(row["hhem.score"] == "" and row["hhem.hallucinated"] == "" for row in table)
    assert all("HHEM weights unavailable" in row["hhem.score.error"] for row in table if row["run"] != "all")


@pytest.mark.slow
def test_a_local_model_path_scores_every_answered_output(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    from open_rag_eval.hhem.tiny import write_tiny_hhem

    model = write_tiny_hhem(tmp_path / "tiny-hhem")
    done, out = run_eval(tmp_path, f"    hallucination:\n      model_path: {model}\n      batch_size: 4\n")
    assert done.returncode == 0, done.stderr
    assert "HHEM weights unavailable" not in done.stderr
    scored = [row for row in rows(out) if row["hhem.score"]]
    assert len(scored) >= 5
    for row in scored:
        assert 0 < float(row["hhem.score"]) < 1
        assert float(row["hhem.hallucinated"]) == (1.0 if float(row["hhem.score"]) < 0.5 else 0.0)
    details = [o["details"]["hhem"] for o in json.loads((out / "results.json").read_text())["outputs"]
               if "hhem" in o["details"]]
    assert len(details) == len(scored) and all(d["backend"] == "hhem" and d["n_chunks"] >= 1 for d in details)
