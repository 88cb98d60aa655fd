"""Every config in configs/ and every workflow the README and docs describe, end to end, as a user runs them: the
installed console script in a subprocess, offline (a loopback simulated judge behind ``OPENAI_BASE_URL`` for the
configs that name a real model, a loopback RAG system behind ``RAG_URL``), and each workflow's key numbers compared
with its reviewed file in ``expected/`` (``cli.check_expected``).

Workflows: eval of each config (golden, bm25, trec, consistency, vectara, demo: JSONL, CSV and connector inputs),
golden from a TREC run file, retrieval-only outputs (no answer) with golden's retrieval metrics, and refused with a
metric that reads the answer, compare, report, plot, a sweep, ablate, shards + merge, and the service's
submit-and-fetch. A dripping judge and a dripping connector are in test_deadlines.py, golden against trec_eval in
test_golden_run_file.py, runs without a value in test_no_value.py.
"""

from __future__ import annotations

import csv
import io
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.cli import ROOT, SCRIPT, check_expected, environment, ok, rows, run

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

# the numbers each config's run is held to: results.csv's row count and these metrics' mean and n
KEY_METRICS = {
    "golden": ["golden.ndcg@5", "golden.recall@5", "golden.mrr", "lexical.keyword_score", "lexical.refusal_correct"],
    "bm25": ["golden.recall@10", "golden.mrr", "umbrela.mean", "citation.f1", "no_answer.answered"],
    "trec": ["umbrela.mean", "umbrela.ndcg@3", "nuggets.vital", "citation.f1", "no_answer.answered"],
    "consistency": ["umbrela.mean", "consistency.rougeL", "consistency.bertscore_f1",
                    "consistency.judge.umbrela.flip_rate"],
    "vectara": ["umbrela.mean", "nuggets.vital", "citation.f1"],
    "demo": ["umbrela.mean", "nuggets.vital", "citation.f1", "faithfulness.score", "context.recall",
             "correctness.score", "criteria.explains_cause"],
}


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str]]]:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer
    from tests.rag_server import RagServer

    root = tmp_path_factory.mktemp("acceptance")
    shutil.copytree(ROOT / "configs", root / "configs")
    with SimulatedJudgeServer() as judge, RagServer() as rag:
        yield root, environment(OPENAI_BASE_URL=judge.base_url, OPENAI_API_KEY="sk-acceptance-not-a-key",
                                RAG_URL=rag.url, RAG_API_KEY="acceptance-not-a-key", MLFLOW_DISABLE_TELEMETRY="true")


def _key_numbers(folder: Path, metrics: list[str]) -> dict[str, Any]:
    summary = {row["metric"]: row for row in rows(folder, "summary.csv")}
    missing = [m for m in metrics if m not in summary]
    assert not missing, f"{folder}: no {missing} in summary.csv"
    table = rows(folder)
    assert table, f"{folder}: results.csv has no row"
    return {"rows": len(table), **{m: [round(float(summary[m]["mean"]), 9) if summary[m]["mean"] else None,
                                      int(summary[m]["n"])] for m in metrics}}


@pytest.mark.parametrize("name", sorted(KEY_METRICS))
def test_every_config_runs_and_gives_its_numbers(name: str, sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    ok(run("eval", "--config", f"configs/{name}.yaml", "--output-dir", f"results/{name}", cwd=root, env=env))
    check_expected(f"config_{name}", _key_numbers(root / "results" / name, KEY_METRICS[name]))


def test_every_config_file_is_covered() -> None:
    covered = set(KEY_METRICS) | {"sweep", "serve"}  # sweep.yaml: test_a_sweep; serve.yaml: the service's test
    assert {path.stem for path in (ROOT / "configs").glob("*.yaml")} == covered


def test_golden_from_a_run_file(sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    text = (root / "configs" / "golden.yaml").read_text(encoding="utf-8")
    for old, new in (("    qrels: data/golden_qrels.txt", ""), ("    # run: data/", "    run: data/"),
                     ("    # qrels: data/golden_trec", "    qrels: data/golden_trec")):
        text = text.replace(old, new)
    assert "\n    run: " in text and "\n    qrels: data/golden_trec_qrels.txt" in text, "configs/golden.yaml changed"
    (root / "configs" / "golden-run.yaml").write_text(text.replace("input: data/golden_outputs.jsonl", ""),
                                                      encoding="utf-8")
    ok(run("eval", "--config", "configs/golden-run.yaml", "--output-dir", "results/golden-run", cwd=root, env=env))
    table = rows(root / "results" / "golden-run")
    check_expected("golden_run_file", {row["query_id"]: {k: v for k, v in row.items() if k.startswith("golden.")
                                                          and k.endswith(("ap", "@3", "mrr"))} for row in table})


def _retrieval_only(root: Path) -> Path:
    """The golden outputs as a retriever gives them: passages and relevance labels, no answer."""
    lines = (root / "configs" / "data" / "golden_outputs.jsonl").read_text(encoding="utf-8").splitlines()
    kept = []
    for line in lines:
        output = json.loads(line)
        for field in ("answer", "answer_text", "refused"):
            output.pop(field, None)
        kept.append(json.dumps(output))
    path = root / "retrieval-only.jsonl"
    path.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return path


def test_retrieval_only_outputs_are_scored_by_retrieval_metrics(sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    inputs = _retrieval_only(root)
    (root / "retrieval.yaml").write_text(f"input: {inputs.name}\noutput_dir: results/retrieval\nevaluators:\n"
                                         "  - type: golden\n    k_values: [1, 3, 5]\n    metrics: [golden]\n"
                                         "    qrels: configs/data/golden_qrels.txt\n    doc_id_separator: \"#\"\n",
                                         encoding="utf-8")
    ok(run("eval", "--config", "retrieval.yaml", cwd=root, env=env))
    check_expected("retrieval_only", _key_numbers(root / "results" / "retrieval",
                                                  ["golden.ndcg@5", "golden.recall@3", "golden.mrr", "golden.p@1"]))
    (root / "lexical.yaml").write_text((root / "retrieval.yaml").read_text().replace("[golden]", "[golden, lexical]")
                                       .replace("results/retrieval", "results/lexical"), encoding="utf-8")
    done = run("eval", "--config", "lexical.yaml", cwd=root, env=env)
    assert done.returncode == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "retrieval-only.jsonl:1" in last and "lexical." in last, last
    assert not (root / "results" / "lexical").exists()


def test_compare_report_and_plot(sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    for name in ("trec", "vectara"):
        if not (root / "results" / name / "results.csv").exists():
            ok(run("eval", "--config", f"configs/{name}.yaml", "--output-dir", f"results/{name}", cwd=root, env=env))
    compared = ok(run("compare", "results/vectara", "results/trec", "-o", "compared", cwd=root, env=env))
    assert "umbrela.mean" in compared.stdout
    assert rows(root / "compared", "compare.csv")
    ok(run("report", "results/trec", cwd=root, env=env))
    report = (root / "results" / "trec" / "report.html").read_text(encoding="utf-8")
    assert "umbrela.mean" in report
    ok(run("plot", "-e", "trec", "results/trec", "--output", "plot.png", cwd=root, env=env))
    assert (root / "plot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_shards_and_merge_write_the_local_runs_files(sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    if not (root / "results" / "trec" / "results.csv").exists():
        ok(run("eval", "--config", "configs/trec.yaml", "--output-dir", "results/trec", cwd=root, env=env))
    for index in range(2):
        ok(run("eval", "--config", "configs/trec.yaml", "--shard", f"{index}/2", "--output-dir", f"shards/{index}",
               cwd=root, env=env))
    ok(run("merge", "shards/0", "shards/1", "--output-dir", "results/merged", cwd=root, env=env))
    assert (root / "results/merged/results.csv").read_bytes() == (root / "results/trec/results.csv").read_bytes()
    # summary.csv's metrics equal too (the judge-health rows differ: a merge runs no controls)
    merged, local = ({row["metric"]: row for row in rows(root / "results" / name, "summary.csv")
                      if not row["metric"].startswith("health.")} for name in ("merged", "trec"))
    assert merged == local
    check_expected("shards_merge", _key_numbers(root / "results" / "merged", KEY_METRICS["trec"]))


def test_a_sweep(sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    ok(run("sweep", "--config", "configs/sweep.yaml", cwd=root, env=env))
    sweeps = sorted((root / "results" / "sweeps-out" / "sweeps").iterdir())
    assert len(sweeps) == 1
    check_expected("sweep", _key_numbers(sweeps[-1], ["lexical.has_sources", "consistency.rougeL"]))


def test_ablate(sandbox: tuple[Path, dict[str, str]]) -> None:
    root, env = sandbox
    done = ok(run("ablate", "--config", "configs/bm25.yaml", cwd=root, env=env))
    assert "top_k" in done.stdout
    folder = root / "results" / "bm25" / "ablation"
    variants = sorted(path for path in folder.iterdir() if (path / "summary.csv").is_file())
    assert len(variants) == 3
    check_expected("ablate", {path.name: _key_numbers(path, ["golden.recall@10", "golden.mrr"]) for path in variants})


def test_the_service_submit_and_fetch(sandbox: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """serve configs/serve.yaml's simulated profile; a job of inline JSONL outputs, and a job of a server-side
    config with a TREC run file and no inputs; each fetched as results.csv."""
    from tests.service_server import Service, wait_status

    root, env = sandbox
    served = (root / "configs" / "serve.yaml").read_text(encoding="utf-8")
    assert "simulated:" in served
    run_config = root / "configs" / "golden-run-served.yaml"
    run_config.write_text("evaluators:\n  - type: golden\n    k_values: [1, 3, 5]\n    run: data/golden_trec_run.txt\n"
                          "    qrels: data/golden_trec_qrels.txt\n", encoding="utf-8")

    class Served(Service):
        def command(self, *args: str) -> list[str]:
            return [str(SCRIPT), *args]

    settings = {"judge_profiles": {"simulated": {"model": "simulated-judge", "simulated": {"latency_ms": 1}}},
                "configs": {"golden-run": str(run_config)}, "inline_evaluators": ["trec", "golden"]}
    with Served(tmp_path / "service", settings, env=env) as service:
        client = service.client()
        outputs = (root / "configs" / "data" / "golden_outputs.jsonl").read_text(encoding="utf-8")
        jobs = {
            "inline": client.post("/v1/jobs", json={"config": {"evaluators": [{"type": "golden", "k_values": [1, 3]}]},
                                                   "inputs": {"format": "jsonl", "data": outputs}}),
            "run-file": client.post("/v1/jobs", json={"config_name": "golden-run"}),
        }
        found: dict[str, Any] = {}
        metric = {"inline": "lexical.keyword_score", "run-file": "golden.mrr"}
        for name, reply in jobs.items():
            assert reply.status_code in (200, 201, 202), reply.text
            job = wait_status(client, reply.json()["id"], ("completed", "failed", "incomplete"))
            assert job["status"] == "completed", job
            text = client.get(f"/v1/jobs/{reply.json()['id']}/results", params={"format": "csv"}).text
            table = list(csv.DictReader(io.StringIO(text)))
            assert table, f"{name}: no row"
            found[name] = {"rows": len(table), metric[name]: [row[metric[name]] for row in table]}
    check_expected("service", found)
