"""kill -9 the server in the middle of a job: on restart the job resumes and ends with the results of an
uninterrupted run, and no judgment cached before the kill is asked of the judge again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.ray_setup import CountingJudge
from tests.service_server import Service, as_served, sse_events, wait_for, wait_status
from tests.test_service_api import body, outputs_jsonl
from tests.test_service_security import _cached

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow


@pytest.fixture
def judge() -> Any:
    with CountingJudge() as server:
        yield server


@pytest.fixture
def service(tmp_path: Path, judge: Any) -> Any:
    profile = {"model": "simulated-judge", "base_url": judge.base_url, "max_concurrency": 2}
    service = Service(tmp_path / "svc", {"judge_profiles": {"external": profile}})
    yield service
    service.stop()  # however the test ended: no server left running


def test_kill_9_mid_job_resumes_with_the_same_results_and_no_judgment_paid_twice(tmp_path: Path, judge: Any,
                                                                                 service: Service) -> None:
    service.start()
    client = service.client()
    judge.hold_after = 10  # then the job waits mid-run, both of its requests held, until the server is killed
    job = client.post("/v1/jobs", json={**body(outputs_jsonl(8)), "judge_profile": "external"}).json()["id"]
    wait_for(lambda: judge.held >= 2 and _cached(service.cache()) >= 10, 120)
    # the first attempt's usage is stored with each heartbeat: wait for the one that saw every request sent
    wait_for(lambda: client.get(f"/v1/jobs/{job}").json()["usage"].get("calls") == judge.stats.requests, 60)
    service.kill()
    judge.release()  # the held requests' caller is gone: they are answered to nobody
    judge.hold_after = None
    cached_at_kill = _cached(service.cache())
    calls_before = judge.stats.requests

    service.start()
    done = wait_status(client, job, ("completed", "failed"), 300)
    assert done["status"] == "completed", done["error"]
    statuses = [e["data"] for e in sse_events(client, f"/v1/jobs/{job}/events") if e["event"] == "status"]
    assert {"status": "running", "resumed": True} in statuses
    calls_after = judge.stats.requests - calls_before
    assert done["usage"]["attempts"] == 2  # both attempts paid the judge: the usage adds them up
    assert done["usage"]["calls"] == calls_before + calls_after  # every request the judge got, both attempts
    service.stop()

    # the same job uninterrupted: the CLI on the job's config with a fresh cache, counting the judge's calls
    config = yaml.safe_load((service.job_dir(job) / "job.yaml").read_text())
    config["judge"]["cache"] = str(tmp_path / "fresh-cache.sqlite")
    fresh = tmp_path / "fresh.yaml"
    fresh.write_text(yaml.safe_dump(config))
    judge.stats.reset()
    cli = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(fresh), "--output-dir",
                          str(tmp_path / "cli")], capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stderr
    uninterrupted = judge.stats.requests
    assert cached_at_kill >= 10
    assert calls_after == uninterrupted - cached_at_kill  # every judgment cached before the kill was reused
    results = service.job_dir(job) / "results"
    for name in ("results.csv", "results.json", "summary.csv"):
        assert (results / name).read_bytes() == as_served(tmp_path / "cli" / name, service.job_dir(job)), name
