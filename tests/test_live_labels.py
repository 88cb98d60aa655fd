"""Labels on live runs: the connector's queries file carries the label columns into the outputs and the metrics;
another tool's query set works as the queries file; an unknown column is an error naming file, line and column,
with nothing written."""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
import sys
from pathlib import Path

from open_rag_eval.config import load_config_text
from open_rag_eval.run.fetch import fetch_outputs
from open_rag_eval.core.types import Labels
from tests.rag_server import RagServer

QUERIES = ("query_id,query,relevant_ids,expected_keywords,expected_refusal,required_citations,reference_answer,"
           "grounding_ids\n"
           "q1,What is solar power?,q1-d2,first source;wind,false,2,Power from sunlight.,q1-d1\n"
           "q2,Why is the sky blue?,,,true,,,\n")


def config(server: RagServer, queries: str) -> str:
    return f"""
connector:
  type: http
  queries: {queries}
  options: {{url: "{server.url}", body: {{query: "{{query}}", query_id: "{{query_id}}"}}}}
evaluators:
  - type: golden
    k_values: [1, 2]
"""


def eval_cli(folder: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "open_rag_eval", "eval", "--config", "run.yaml", "--output-dir", "out"]
    return subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=300)


def test_label_columns_reach_the_outputs_and_the_metrics(tmp_path: Path) -> None:
    (tmp_path / "queries.csv").write_text(QUERIES, encoding="utf-8")
    with RagServer() as server:
        (tmp_path / "run.yaml").write_text(config(server, "queries.csv"))
        done = eval_cli(tmp_path)
    assert done.returncode == 0, done.stderr
    outputs = {o["query_id"]: o for o in map(json.loads, (tmp_path / "out" / "outputs.jsonl").read_text().splitlines())}
    assert outputs["q1"]["relevant_ids"] == {"q1-d2": 1}
    assert outputs["q1"]["expected_keywords"] == ["first source", "wind"]
    assert outputs["q1"]["reference_answer"] == "Power from sunlight."
    assert outputs["q2"]["expected_refusal"] is True and "relevant_ids" not in outputs["q2"]
    rows = {row["query_id"]: row for row in csv.DictReader((tmp_path / "out" / "results.csv").open(encoding="utf-8"))}
    assert float(rows["q1"]["golden.mrr"]) == 0.5  # the server returns q1-d1, q1-d2; q1-d2 is relevant
    assert float(rows["q1"]["golden.hit@1"]) == 0.0
    assert float(rows["q1"]["lexical.keyword_coverage"]) == 0.5  # "first source" is in the answer, "wind" is not
    assert float(rows["q1"]["lexical.citation_compliance"]) == 0.5  # two passages cited, two required; no Sources
    assert float(rows["q1"]["lexical.refusal_correct"]) == 1.0
    assert float(rows["q2"]["lexical.refusal_correct"]) == 0.0  # it should have refused, and answered
    assert rows["q2"]["golden.mrr"] == ""  # no relevance labels: no retrieval rows for q2


def test_an_unknown_column_is_an_error_and_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "queries.csv").write_text("query_id,query,expected_keyword\nq1,What is solar power?,sun\n")
    with RagServer() as server:
        (tmp_path / "run.yaml").write_text(config(server, "queries.csv"))
        done = eval_cli(tmp_path)
        assert server.calls == 0
    assert done.returncode == 3, done.stderr
    assert "queries.csv:1: field 'expected_keyword': unknown column" in done.stderr
    assert not (tmp_path / "out").exists()


def test_another_tools_query_set_is_a_queries_file(tmp_path: Path) -> None:
    lines = [{"id": "q1", "query": "What is solar power?", "expected_file_ids": ["q1-d1"], "must_refuse": False,
              "required_citations_count": 1},
             {"id": "q2", "query": "What is the CEO's salary?", "expected_file_ids": [], "must_refuse": True,
              "is_out_of_scope": True}]
    (tmp_path / "set.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    with RagServer() as server:
        loaded = load_config_text(config(server, "set.jsonl"), base_dir=tmp_path)
        outputs = asyncio.run(fetch_outputs(loaded, loaded.config.connector))  # type: ignore[arg-type]
        assert sorted(request["body"]["query_id"] for request in server.requests) == ["q1", "q2"]
    assert outputs[0].labels == Labels(relevant_ids={"q1-d1": 1}, expected_refusal=False, required_citations=1)
    assert outputs[1].labels == Labels(relevant_ids={}, expected_refusal=True)
