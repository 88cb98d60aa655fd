"""Input text and numbers that cannot be written back: lone surrogates, undecodable bytes, absurd numbers.

A JSON escape of half a UTF-16 pair (``"\\ud800"``) decodes to a string that no UTF-8 file or terminal can hold; it
used to pass the reader and crash when written. Through the real CLI each is one error line naming file, line and
field, exit 3, and nothing written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
GOOD = {"query_id": "q1", "query": "what is a heat pump?", "passages": [{"id": "1", "text": "It moves heat."}],
        "answer": "It moves heat [1]."}


def run(folder: Path, data: bytes, name: str = "in.jsonl", command: str = "eval") -> tuple[int, list[str]]:
    (folder / name).write_bytes(data)
    config = {"input": name, "output_dir": "out",
              "evaluators": [{"type": "golden", "metrics": ["lexical.keyword_score"]}]}
    (folder / "config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "-q", command, "--config", "config.yaml"],
                          cwd=folder, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, timeout=120)
    stderr = done.stderr.decode("utf-8")  # must be valid UTF-8 itself
    return done.returncode, [line for line in stderr.splitlines() if line.strip()]


def jsonl(*lines: str) -> bytes:
    return "".join(line + "\n" for line in lines).encode("utf-8")


def line_with(**fields: object) -> str:
    return json.dumps({**GOOD, **fields})


@pytest.mark.parametrize("raw, field, problem", [
    (line_with(query="\ud800 what is it?"), "query", "a lone surrogate \\ud800 at character 0"),
    (line_with(query_id="q\udfff"), "query_id", "a lone surrogate \\udfff at character 1"),
    (line_with(passages=[{"id": "1", "text": "half a pair \ud83d"}]), "passages[0].text", "lone surrogate \\ud83d"),
    (line_with(answer=[{"text": "ok", "citations": ["\udc80"]}]), "answer[0].citations[0]", "lone surrogate \\udc80"),
    (line_with(expected_keywords=["heat", "\ud800"]), "expected_keywords[1]", "lone surrogate \\ud800"),
    (json.dumps(GOOD)[:-1] + ', "bad\\ud800key": 1}', "bad\\ud800key", "a field name with a lone surrogate"),
    (line_with(run=10**30), "run", "expected a whole number of at most 1,000,000,000"),
    (json.dumps(GOOD)[:-1] + ', "latency_ms": 1e999}', "latency_ms", "expected a finite number >= 0"),
    (line_with(passages=[{"id": "1", "text": "t", "score": 7}]).replace('"score": 7', '"score": -1e999'),
     "passages[0].score", "expected a finite number, got '-inf'"),
    (line_with(required_citations=10**40), "required_citations", "expected a whole number of at most 1,000,000,000"),
])
def test_bad_jsonl_text_and_numbers(tmp_path: Path, raw: str, field: str, problem: str) -> None:
    code, lines = run(tmp_path, jsonl(json.dumps(GOOD), raw))
    assert code == 3, lines
    assert len(lines) == 1 and "Traceback" not in lines[0], lines
    assert lines[0].startswith("error: ") and f"in.jsonl:2: field '{field}': " in lines[0], lines
    assert problem in lines[0], lines
    assert not (tmp_path / "out").exists()


def test_non_finite_constants_are_not_json(tmp_path: Path) -> None:
    code, lines = run(tmp_path, jsonl(json.dumps(GOOD), line_with(latency_ms=float("nan"))))
    assert code == 3 and len(lines) == 1, lines
    assert "in.jsonl:2: not valid JSON: NaN is not a number in strict JSON" in lines[0], lines


def test_undecodable_bytes_name_the_field(tmp_path: Path) -> None:
    data = jsonl(json.dumps(GOOD)) + b'{"query_id": "q2", "query": "bad \xff byte", "answer": "a"}\n'
    code, lines = run(tmp_path, data)
    assert code == 3 and len(lines) == 1, lines
    assert "in.jsonl:2: field 'query': undecodable bytes (not UTF-8)" in lines[0], lines


def test_a_valid_surrogate_pair_is_text(tmp_path: Path) -> None:
    code, lines = run(tmp_path, jsonl(line_with(query="heat pumps \ud83d\ude00?")), command="validate")
    assert code == 0, lines


def test_csv_whole_numbers_are_bounded(tmp_path: Path) -> None:
    data = ("query_id,query,query_run,passage_id,passage,generated_answer\n"
            "q1,what?,1e30,1,text,answer [1]\n").encode("utf-8")
    code, lines = run(tmp_path, data, name="in.csv")
    assert code == 3 and len(lines) == 1, lines
    assert "field 'query_run': expected a whole number of at most 1,000,000,000, got '1e30'" in lines[0], lines
