"""Outputs without an answer (a retriever's output: passages and relevance labels, before any generation).

Whether they are scored is decided by the evaluators' declared contracts (``evaluators.base.Contract``), not by the
input reader: accepted when no configured metric reads an answer (golden's retrieval metrics, UMBRELA), refused
naming the metric and the row when one does (exit 3 at the CLI, ``InputError`` in the API), at every door.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

from open_rag_eval import evaluate
from open_rag_eval.core.errors import InputError
from open_rag_eval.core.types import RAGOutput
from open_rag_eval.evaluators.base import answer_reader, check_answers, needs_judge
from open_rag_eval.evaluators.consistency import ConsistencyEvaluator, ConsistencyOptions
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.evaluators.golden import GoldenEvaluator, GoldenOptions
from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
from open_rag_eval.inputs import read_outputs

ROWS = [
    {"query_id": "q1", "query": "What is solar power?", "relevant_ids": {"d1": 1},
     "passages": [{"id": "d1", "text": "Solar power is energy from the sun."}, {"id": "d2", "text": "Wind."}]},
    {"query_id": "q2", "query": "Why is the sky blue?", "relevant_ids": {"d4": 2},
     "passages": [{"id": "d3", "text": "Oceans."}, {"id": "d4", "text": "Rayleigh scattering."}]},
]
CSV = ("query_id,query,passage_id,passage,generated_answer,relevant_ids\n"
       "q1,What is solar power?,d1,Solar power is energy from the sun.,,d1\nq1,What is solar power?,d2,Wind.,,d1\n"
       "q2,Why is the sky blue?,d3,Oceans.,,d4:2\nq2,Why is the sky blue?,d4,Rayleigh scattering.,,d4:2\n")
# q1 ranks its relevant document first, q2 second (of two): literal trec_eval values
EXPECTED = {"q1": {"golden.p@1": 1.0, "golden.recall@2": 1.0, "golden.mrr": 1.0, "golden.ndcg@2": 1.0},
            "q2": {"golden.p@1": 0.0, "golden.recall@2": 1.0, "golden.mrr": 0.5, "golden.ndcg@2": 0.6309297536}}
GOLDEN = "  - type: golden\n    metrics: [golden]\n    k_values: [1, 2]\n"
TREC = "  - type: trec\n    metrics: [umbrela, citation]\n"
JUDGE = "judge:\n  simulated: {seed: 1}\n  cache: false\n"


def _write_input(folder: Path, kind: str) -> str:
    if kind == "jsonl":
        (folder / "in.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS), encoding="utf-8")
    else:
        (folder / "in.csv").write_text(CSV, encoding="utf-8")
    return f"in.{kind}"


def _eval(folder: Path, kind: str, evaluators: str) -> subprocess.CompletedProcess[str]:
    name = _write_input(folder, kind)
    (folder / "c.yaml").write_text(f"input: {name}\noutput_dir: out\n{JUDGE}evaluators:\n{evaluators}",
                                   encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "-q", "eval", "--config", "c.yaml"],
                          capture_output=True, text=True, cwd=folder, timeout=600)


def _flat(values: dict[str, dict[str, float]]) -> dict[str, float]:
    return {f"{query} {metric}": value for query, found in values.items() for metric, value in found.items()}


def _values(path: Path) -> dict[str, float]:
    with path.open(newline="", encoding="utf-8") as handle:
        return _flat({row["query_id"]: {m: float(row[m]) for m in EXPECTED["q1"]} for row in csv.DictReader(handle)})


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_retrieval_only_outputs_score_with_golden_retrieval_metrics_at_the_cli(tmp_path: Path, kind: str) -> None:
    done = _eval(tmp_path, kind, GOLDEN)
    assert done.returncode == 0, done.stderr
    assert _values(tmp_path / "out" / "results.csv") == pytest.approx(_flat(EXPECTED), abs=1e-9)


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_metric_that_reads_the_answer_refuses_them_naming_it_and_the_row(tmp_path: Path, kind: str) -> None:
    done = _eval(tmp_path, kind, GOLDEN + TREC)
    assert done.returncode == 3, done.stderr
    where = "in.jsonl:1" if kind == "jsonl" else "in.csv:2"
    assert f"{where}: field 'answer': no answer: the trec evaluator's metric 'citation' reads the answer" \
        in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_umbrela_alone_reads_no_answer_so_a_judged_run_scores_them(tmp_path: Path) -> None:
    done = _eval(tmp_path, "jsonl", GOLDEN + "  - type: trec\n    metrics: [umbrela]\n")
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out" / "results.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["query_id"] for row in rows] == ["q1", "q2"]
    assert all(row["umbrela.p@1"] != "" for row in rows)


def test_the_api_scores_them_and_refuses_them_as_the_cli_does() -> None:
    results = evaluate(ROWS, evaluators=[{"type": "golden", "metrics": ["golden"], "k_values": [1, 2]}])
    by_query = {row["query_id"]: {m: float(row[m]) for m in EXPECTED["q1"]} for row in results.rows()}
    assert _flat(by_query) == pytest.approx(_flat(EXPECTED), abs=1e-9)
    with pytest.raises(InputError, match=r"data\[0\]: field 'answer': no answer: the golden evaluator's metric "
                                         r"'lexical.groundedness' reads the answer"):
        evaluate(ROWS, evaluators=[{"type": "golden"}])


def test_the_reader_keeps_an_output_without_an_answer(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text(CSV, encoding="utf-8")
    outputs = read_outputs(path)
    assert [(o.query_id, o.answer_text, [p.id for p in o.passages]) for o in outputs] == [
        ("q1", "", ["d1", "d2"]), ("q2", "", ["d3", "d4"])]


def test_the_contracts_name_what_reads_the_answer() -> None:
    retrieval = GoldenEvaluator(GoldenOptions(metrics=["golden"]))
    assert retrieval.contract().answer_metrics == () and not retrieval.contract().needs_judge
    assert GoldenEvaluator(GoldenOptions(metrics=["golden", "latency"])).contract().answer_metrics == ()
    assert GoldenEvaluator(GoldenOptions(metrics=["lexical.has_sources"])).contract().answer_metrics == (
        "lexical.has_sources",)
    umbrela = TrecEvaluator(TrecOptions(metrics=["umbrela"]))
    assert umbrela.contract().answer_metrics == () and umbrela.contract().judge_tasks == ("umbrela",)
    assert TrecEvaluator().contract().answer_metrics == ("nuggets", "citation", "no_answer")
    assert GenerationEvaluator(GenerationOptions(metrics=["context_relevance"])).contract().answer_metrics == ()
    dispersion = ConsistencyEvaluator(ConsistencyOptions(metrics=["dispersion"]))
    assert dispersion.contract().answer_metrics == () and not needs_judge([dispersion, retrieval])
    assert answer_reader([retrieval, umbrela, TrecEvaluator()]) == "the trec evaluator's metric 'nuggets'"
    outputs = [RAGOutput(query_id="a", query="x", source="f.jsonl:7")]
    check_answers([retrieval, umbrela], outputs)  # nothing reads the answer: accepted
    with pytest.raises(InputError, match=r"^f.jsonl:7: field 'answer': no answer: the trec evaluator's metric"):
        check_answers([retrieval, TrecEvaluator()], outputs)
    failed = RAGOutput(query_id="a", query="x", error="timeout")  # a failed output has no answer by design
    check_answers([TrecEvaluator()], [failed])


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_the_service_takes_them_for_umbrela_alone_and_refuses_them_at_submit_for_a_metric_reading_answers(
        tmp_path: Path, kind: str) -> None:
    pytest.importorskip("fastapi", reason="the [server] extra is not installed")
    from tests.service_server import Service

    data = "".join(json.dumps(row) + "\n" for row in ROWS) if kind == "jsonl" else CSV
    umbrela = {"evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}  # a client config takes trec only
    trec = {"evaluators": [{"type": "trec", "metrics": ["umbrela", "citation"]}]}
    with Service(tmp_path, {"runner": {"jobs": 0}}) as service:  # jobs stay queued: only the door is tested
        client = service.client()
        accepted = client.post("/v1/jobs", json={"config": umbrela, "inputs": {"format": kind, "data": data},
                                                 "judge_profile": "sim"})
        refused = client.post("/v1/jobs", json={"config": trec, "inputs": {"format": kind, "data": data},
                                                "judge_profile": "sim"})
    assert accepted.status_code in (201, 202), accepted.text
    assert refused.status_code == 422, refused.text
    problem = refused.json()
    assert problem["field"] == "answer" and problem["line"] == (1 if kind == "jsonl" else 2), problem
    assert "the trec evaluator's metric 'citation' reads the answer" in problem["detail"], problem
