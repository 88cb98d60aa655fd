"""What structured replies did to a real small judge's labels: the recorded UMBRELA replies of two real models
(tests/data/real_judge/, a 0.5B and a 1.5B model on llama-cpp-python's server), read as the run reads them, text
against schema (docs/judge-health.md, "Structured replies")."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from open_rag_eval.judge.replies import error_fields, format_rejected

DATA = Path(__file__).parent / "data" / "real_judge"
EXCHANGES = DATA / "qwen2.5-coder-umbrela-text-and-schema.jsonl"


def _bench() -> ModuleType:
    path = Path(__file__).resolve().parent.parent / "bench" / "judge_replies.py"
    spec = importlib.util.spec_from_file_location("judge_replies", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _means() -> dict[str, dict[str, tuple[float, int]]]:
    bench = _bench()
    records, rows, groups = bench.load(EXCHANGES, DATA / "judged-trec-data.csv", DATA / "judged-trec-passage-groups.json")
    found = bench.read(records, rows, groups)
    assert {run: {task: (t.replies, t.parsed, t.errors) for task, t in tasks.items()} for run, tasks in found.items()} == {
        "trec": {"umbrela": (18, 18, 0)}, "trec-jsx": {"umbrela": (18, 18, 0)}, "trec15": {"umbrela": (18, 18, 0)},
        "trec15-jsx": {"umbrela": (18, 18, 0)}, "trec-js": {"no_answer": (0, 0, 1)}}
    return {run: {group: (round(sum(g) / len(g), 2), len(g)) for group, g in t.grades.items()}
            for run, tasks in found.items() for t in tasks.values() if t.grades}


def test_every_reply_parses_with_or_without_the_schema_but_the_schema_moves_the_labels() -> None:
    means = _means()
    # the 0.5B model is a constant judge either way: 2 for every passage
    assert means["trec"] == means["trec-jsx"] == {"on": (2.0, 9), "off": (2.0, 7), "near": (2.0, 2)}
    # the 1.5B model tells on-topic from off-topic passages as text, less well when asked by the schema
    assert means["trec15"] == {"on": (2.11, 9), "off": (0.14, 7), "near": (0.0, 2)}
    assert means["trec15-jsx"] == {"on": (2.11, 9), "off": (1.0, 7), "near": (0.5, 2)}


def test_the_server_s_answer_to_openai_s_form_is_read_as_a_rejected_form_with_the_setting_to_use() -> None:
    rejected = [json.loads(line) for line in EXCHANGES.read_text(encoding="utf-8").splitlines()
                if json.loads(line)["status"] == 500]
    assert len(rejected) == 1
    exchange = rejected[0]
    _, param, message = error_fields(500, json.dumps(exchange["response"]))
    failure = format_rejected(500, param, message, exchange["request"]["response_format"])
    assert failure is not None and failure.kind == "down"
    assert failure.reason.startswith('the judge endpoint does not take response_format {"type": "json_schema", '
                                     "\"json_schema\": ...} (OpenAI's form) (HTTP 500: 1 validation error:")
    assert "set judge.structured: json_object" in failure.reason


@pytest.mark.parametrize(("run", "structured", "off_mean"), [("trec15", None, 0.14), ("trec15-jsx", "json_object", 1.0)])
def test_the_run_reads_the_real_replies_it_is_given_as_text_or_by_the_schema(tmp_path: Path, run: str,
                                                                              structured: str | None,
                                                                              off_mean: float) -> None:
    """The recorded 1.5B replies served back to a run of the same data (the controls were never recorded: they fail,
    said as such): every grade of the run's own passages is the recorded one, read through the schema when the run
    asks by it."""
    from open_rag_eval.cli import main
    from tests.recorded_judge import RecordedJudge

    config = tmp_path / "c.yaml"
    extra = f"  structured: {structured}\n" if structured else ""
    with RecordedJudge(EXCHANGES, runs=(run,)) as server:
        config.write_text(f"input: {DATA / 'judged-trec-data.csv'}\noutput_dir: out\njudge:\n  model: qwen\n"
                          f"  base_url: {server.base_url}\n  cache: false\n  max_retries: 0\n{extra}"
                          "evaluators:\n  - type: trec\n    metrics: [umbrela]\n", encoding="utf-8")
        code = main(["-q", "eval", "--config", str(config)])
        asked = [seen.body for seen in server.completions]
    assert code == 0 and server.hits == 18
    assert all(("response_format" in body) == (structured is not None) for body in asked)
    groups = json.loads((DATA / "judged-trec-passage-groups.json").read_text(encoding="utf-8"))
    results = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    off = [g["grade"] for o in results["outputs"] for g in o["details"]["umbrela"]["grades"]
           if groups[f"{o['query_id']}/[{g['passage_id']}]"] == "off"]
    assert len(off) == 7 and round(sum(off) / len(off), 2) == off_mean
