"""Server paths stay on the server: a client config naming a file or folder is a 422 naming the field, the answer
the same whatever the path; served results.json and manifest.json name the job's files relatively and the judge by
its profile (never its URL, key variable, the data folder or the tenant's cache)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.core.errors import ConfigError
from open_rag_eval.service.paths import check_client_paths, relative_text, served_files

JUDGE_KEY = "sk-sim-made-up-judge-key-5b1d0e7a22"  # made up: the external simulated judge's key


@pytest.mark.parametrize(("entry", "field"), [
    ({"type": "consistency", "results_dir": "../0123456789abcdef/results"}, "config.evaluators[0].results_dir"),
    ({"type": "golden", "qrels": "/etc/passwd"}, "config.evaluators[0].qrels"),
    ({"type": "golden", "labels": "labels.csv"}, "config.evaluators[0].labels"),
    ({"type": "trec", "hallucination": {"model_path": "/srv/models/hhem"}},
     "config.evaluators[0].hallucination.model_path"),
    ({"type": "trec", "hallucination": {"cache_dir": "/tmp"}}, "config.evaluators[0].hallucination.cache_dir"),
    ({"type": "trec", "hallucination": {"vectara": {"base_url": "http://10.0.0.1/"}}},
     "config.evaluators[0].hallucination.vectara.base_url"),
    ({"type": "trec", "hallucination": {"vectara": {"api_key_env": "HOME"}}},
     "config.evaluators[0].hallucination.vectara.api_key_env"),
    ({"type": "trec", "hallucination": {"model_name": "../../data/tenants/a"}},
     "config.evaluators[0].hallucination.model_name"),
    ({"type": "consistency", "bertscore": {"model_type": "/opt/models/roberta"}},
     "config.evaluators[0].bertscore.model_type"),
    ({"type": "generation", "answer_similarity": {"model": "~/models/minilm"}},
     "config.evaluators[0].answer_similarity.model"),
    ({"type": "consistency", "trec": {"hallucination": {"model_path": "x"}}},
     "config.evaluators[0].trec.hallucination.model_path"),
])
def test_every_path_valued_option_of_a_client_config_is_refused_naming_its_field(entry: dict[str, Any],
                                                                                 field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        check_client_paths([entry], {0: ("results_dir",)})
    assert caught.value.path == field
    assert "server" in str(caught.value)


def test_hub_model_ids_and_other_options_pass() -> None:
    check_client_paths([{"type": "generation", "answer_similarity": {"model": "sentence-transformers/all-MiniLM-L6-v2"}},
                        {"type": "trec", "hallucination": {"model_name": "vectara/hallucination_evaluation_model"}},
                        {"type": "consistency", "bertscore": {"model_type": "roberta-large"}, "results_dir": None}],
                       {})


def test_relative_text_strips_the_longest_folder_first() -> None:
    text = "cannot read /srv/data/jobs/ab12/input.jsonl (line 3) under /srv/data and /srv/data/jobs/ab12"
    assert relative_text(text, ["/srv/data", "/srv/data/jobs/ab12"]) == (
        "cannot read input.jsonl (line 3) under . and .")


def test_served_files_name_the_job_relatively_and_the_judge_by_its_profile(tmp_path: Path) -> None:
    job = tmp_path / "data" / "jobs" / "ab12"
    results = job / "results"
    results.mkdir(parents=True)
    cache = str(tmp_path / "data" / "tenants" / "acme" / "judge-cache.sqlite")
    judge = {"model": "m", "base_url": "http://judge.internal:8000/v1", "api_key_env": "ACME_JUDGE_KEY", "cache": cache}
    manifest = {"config": {"input": f"{job}/input.jsonl", "output_dir": f"{results}", "judge": judge},
                "input": {"path": f"{job}/input.jsonl"}, "judge": {k: v for k, v in judge.items() if k != "cache"}}
    (results / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    (results / "results.json").write_text(json.dumps({"outputs": [{"source": f"{job}/input.jsonl:1"}]}, indent=2)
                                          + "\n", encoding="utf-8")
    served_files(results, [job, job, tmp_path / "data"], "acme-gpt")
    served = json.loads((results / "manifest.json").read_text(encoding="utf-8"))
    assert served["config"]["input"] == "input.jsonl" and served["input"]["path"] == "input.jsonl"
    assert served["config"]["output_dir"] == "results"
    assert served["judge"] == {"model": "m", "profile": "acme-gpt"}
    assert served["config"]["judge"] == {"model": "m", "profile": "acme-gpt"}
    assert json.loads((results / "results.json").read_text(encoding="utf-8"))["outputs"][0]["source"] == (
        "input.jsonl:1")
    for name in ("manifest.json", "results.json"):
        text = (results / name).read_text(encoding="utf-8")
        assert str(tmp_path) not in text and "judge.internal" not in text and "ACME_JUDGE_KEY" not in text
    assert sorted(p.name for p in results.iterdir()) == ["manifest.json", "results.json"]  # nothing half-written


@pytest.fixture(scope="module")
def judge() -> Any:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

    server = SimulatedJudgeServer(SimulatedServerConfig(api_key=JUDGE_KEY, latency_ms=1))
    url = server.start()
    yield url
    server.stop()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, judge: str) -> Any:
    pytest.importorskip("fastapi", reason="the [server] extra is not installed")
    pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")
    from tests.service_server import Service

    profiles = {"keyed": {"model": "simulated-judge", "base_url": judge, "api_key_env": "PATHS_JUDGE_KEY"}}
    settings = {"auth": True, "judge_profiles": profiles, "inline_evaluators": ["trec", "consistency", "golden"],
                "runner": {"jobs": 2, "poll_s": 0.1, "heartbeat_s": 0.5}}
    with Service(tmp_path_factory.mktemp("paths"), settings, env={"PATHS_JUDGE_KEY": JUDGE_KEY}) as running:
        yield running


@pytest.mark.slow
def test_tenant_b_cannot_read_tenant_a_results_through_a_path(service: Any, judge: str) -> None:
    from tests.service_server import wait_status
    from tests.test_service_api import body

    alice, bob = service.client(service.new_key("alice")), service.client(service.new_key("bob"))
    job = alice.post("/v1/jobs", json=body(judge_profile="keyed"))
    assert job.status_code == 202, job.text
    job_id = job.json()["id"]
    assert wait_status(alice, job_id, ("completed", "failed"))["status"] == "completed"
    replies = []
    for where in (f"../{job_id}/results", f"../../jobs/{job_id}/results", "/etc", "/nonexistent"):
        config = {"evaluators": [{"type": "consistency", "metrics": ["rouge"], "results_dir": where}]}
        reply = bob.post("/v1/jobs", json={**body(judge_profile="keyed"), "config": config})
        assert reply.status_code == 422, reply.text
        assert reply.headers["content-type"] == "application/problem+json"
        assert reply.json()["path"] == "config.evaluators[0].results_dir"
        replies.append(reply.content)
    assert len(set(replies)) == 1  # the same answer whatever the path: no probing the server's disk
    assert bob.get("/v1/jobs").json()["jobs"] == []
    assert [p.name for p in (service.folder / "data" / "jobs").iterdir()] == [job_id]  # nothing of bob's kept

    manifest = alice.get(f"/v1/jobs/{job_id}/manifest")
    results = alice.get(f"/v1/jobs/{job_id}/results", params={"format": "json"})
    assert manifest.status_code == results.status_code == 200
    assert manifest.json()["judge"]["profile"] == "keyed"
    assert manifest.json()["config"]["judge"]["profile"] == "keyed"
    assert manifest.json()["input"]["path"] == "input.jsonl"
    assert results.json()["outputs"][0]["source"].startswith("input.jsonl:")
    for served in (manifest.text, results.text, alice.get(f"/v1/jobs/{job_id}").text):
        assert str(service.folder) not in served and "data/tenants" not in served
        assert judge not in served and judge.split("//")[1] not in served
        assert "PATHS_JUDGE_KEY" not in served and JUDGE_KEY not in served
