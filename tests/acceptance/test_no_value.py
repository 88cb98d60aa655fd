"""A run that produced no value never says ``done``: no row is bad input (exit 3, nothing written), rows without a
single value are an incomplete run (exit 6, the files written and marked so), each with one line saying why."""

from __future__ import annotations

import json
from pathlib import Path

from tests.acceptance.cli import run


def _last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_an_input_without_a_row_is_exit_3_and_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    (tmp_path / "empty.yaml").write_text("input: empty.jsonl\noutput_dir: out\nevaluators:\n  - type: golden\n",
                                         encoding="utf-8")
    done = run("eval", "--config", "empty.yaml", cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert _last_line(done.stderr).startswith("error: ") and "empty.jsonl" in _last_line(done.stderr)
    assert not (tmp_path / "out").exists()


def test_a_config_without_input_or_rows_of_its_own_is_exit_2(tmp_path: Path) -> None:
    (tmp_path / "none.yaml").write_text("output_dir: out\nevaluators:\n  - type: golden\n", encoding="utf-8")
    done = run("eval", "--config", "none.yaml", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "input: required" in _last_line(done.stderr)
    assert not (tmp_path / "out").exists()


def test_outputs_without_any_value_are_an_incomplete_run_exit_6(tmp_path: Path) -> None:
    output = {"query_id": "q1", "query": "What is it?", "answer": "It is [1].",
              "passages": [{"id": "p1", "text": "It is a thing."}]}  # no relevance labels: no golden value
    (tmp_path / "in.jsonl").write_text(json.dumps(output) + "\n", encoding="utf-8")
    (tmp_path / "c.yaml").write_text("input: in.jsonl\noutput_dir: out\nevaluators:\n  - type: golden\n"
                                     "    metrics: [golden]\n", encoding="utf-8")
    done = run("eval", "--config", "c.yaml", cwd=tmp_path)
    assert done.returncode == 6, done.stderr
    line = _last_line(done.stderr)
    assert line.startswith("error: incomplete run: no metric has a value for any output"), line
    assert not any(line.endswith("] done") for line in done.stderr.splitlines()), done.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["complete"] is False and manifest["no_value"]
