"""The eval pipeline and CLI end to end with a judge-free evaluator: files, exit codes, dry run, limit."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from open_rag_eval.cli import main

CSV = """query_id,query,query_run,passage_id,passage,generated_answer
q1,What is x?,1,[1],X is a letter.,X is a letter [1]. It is also a variable [2].
q1,What is x?,1,[2],Variables are named x.,
q1,What is x?,2,[1],X is a letter.,X is a letter [1].
q2,What is y?,1,[1],Y is a letter.,NO_ANSWER
"""


def write_config(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "answers.csv").write_text(CSV, encoding="utf-8")
    config = tmp_path / "config.yaml"
    config.write_text(
        "input: answers.csv\noutput_dir: out\nevaluators:\n"
        f"  - type: 'tests.plain_evaluator:CountEvaluator'\n{extra}",
        encoding="utf-8",
    )
    return config


def test_eval_writes_every_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path, "    fail_query: q2\n")
    assert main(["eval", "--config", str(config)]) == 0
    out = tmp_path / "out"
    names = {p.name for p in out.iterdir()}
    assert {"manifest.json", "outputs.jsonl", "results.csv", "results.json", "summary.csv"} <= names
    assert not [name for name in names if name.startswith(".")]  # no temp file left behind
    rows = list(csv.DictReader((out / "results.csv").open(encoding="utf-8")))
    assert [(r["query_id"], r["run"], r["count.statements"]) for r in rows] == [
        ("q1", "1", "2.0"), ("q1", "2", "1.0"), ("q2", "1", "")
    ]
    assert rows[2]["count.statements.error"] == "told to fail"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["n_outputs"] == 3 and manifest["n_queries"] == 2
    assert manifest["judge"] is None and manifest["simulated"] is False
    assert manifest["config"]["input"] == "answers.csv"
    assert len(manifest["input"]["sha256"]) == 64
    saved = [json.loads(line) for line in (out / "outputs.jsonl").read_text().splitlines()]
    assert [(o["query_id"], o["run"]) for o in saved] == [("q1", 1), ("q1", 2), ("q2", 1)]
    shown = capsys.readouterr().out
    assert "count.statements" in shown and "results:" in shown


def test_output_dir_and_limit_flags(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert main(["eval", "--config", str(config), "--output-dir", str(tmp_path / "other"), "--limit", "1"]) == 0
    rows = list(csv.DictReader((tmp_path / "other" / "results.csv").open(encoding="utf-8")))
    assert {r["query_id"] for r in rows} == {"q1"}
    assert not (tmp_path / "out").exists()


def test_dry_run_calls_nothing_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    assert main(["eval", "--config", str(config), "--dry-run"]) == 0
    assert "planned judge calls: 0" in capsys.readouterr().out
    assert not (tmp_path / "out").exists()


def test_validate(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = write_config(tmp_path)
    with caplog.at_level("INFO"):
        assert main(["validate", "--config", str(config)]) == 0
    assert "valid (3 outputs of 2 queries" in caplog.text


def test_exit_codes_and_nothing_half_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bad_config = tmp_path / "bad.yaml"
    bad_config.write_text("input: a.csv\nevaluators: [{type: nosuch}]\n")
    assert main(["eval", "--config", str(bad_config)]) == 2
    config = write_config(tmp_path)
    (tmp_path / "answers.csv").write_text("query_id,query\nq1,\n", encoding="utf-8")
    assert main(["eval", "--config", str(config)]) == 3
    assert not (tmp_path / "out").exists()
    assert main(["eval", "--config", str(tmp_path / "missing.yaml")]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 3 and all("\n" not in e for e in errors)
    assert "Traceback" not in caplog.text


def test_python_dash_m_and_fast_help() -> None:
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "--help"], capture_output=True, text=True, check=True)
    assert "eval" in done.stdout and "validate" in done.stdout
    heavy = subprocess.run(
        [sys.executable, "-c", "import sys, open_rag_eval.cli as c; c._parser(); "
         "print(sorted(m for m in ('torch', 'transformers', 'matplotlib', 'openai', 'bert_score', 'fastapi', 'sqlalchemy', 'uvicorn') if m in sys.modules))"],
        capture_output=True, text=True, check=True,
    )
    assert heavy.stdout.strip() == "[]"
