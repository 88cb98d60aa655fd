"""A small run of the CLI for the tracking tests: the minimal CSV, the simulated judge, a ``tracking:`` section."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

DATA = Path(__file__).parent / "data"

__all__ = ["run_eval", "write_config"]


def write_config(tmp_path: Path, tracking: str = "", metrics: str = "[umbrela, citation, no_answer, hhem]") -> Path:
    shutil.copy(DATA / "minimal.csv", tmp_path / "minimal.csv")
    config = tmp_path / "eval.yaml"
    config.write_text(f"input: minimal.csv\noutput_dir: out\njudge:\n  simulated: {{seed: 1}}\n  cache: false\n"
                      f"evaluators:\n  - type: trec\n    metrics: {metrics}\n{tracking}", encoding="utf-8")
    return config


def run_eval(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", "eval.yaml", *extra],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**(env or os.environ), "MLFLOW_DISABLE_TELEMETRY": "true"})
