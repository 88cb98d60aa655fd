"""Running jobs share the judge round-robin, at server level: one huge job fills the profile's judge slots, a small job
submitted after it still finishes while the huge job runs.

Deterministic, not timed: the judge holds every request of the huge job until the test lets one through, so the
huge job progresses only one judge call per step the test takes, while the small job's requests are answered at once.
Each step frees one slot; round-robin hands it to the small job whenever the small job has a call waiting, so the
small job needs about as many steps as it has judge calls. First-come-first-served would first hand every slot to
the huge job's calls queued ahead of the small job's (hundreds of steps).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gated_judge import GatedJudge
from tests.service_server import Service, wait_for, wait_status
from tests.test_service_api import body, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow

SLOTS = 2
MARKER = "zebrahuge"  # in every judge request of the huge job, in no request of the small one
HUGE_OUTPUTS = 100  # 3 passages each: 300 relevance calls queued at once
MAX_STEPS = 150  # the small job makes ~15 calls; first-come-first-served would take ~300 steps to reach them


def test_a_small_job_finishes_while_a_huge_job_holds_the_judge(tmp_path: Path) -> None:
    with GatedJudge(gate=MARKER.encode()) as judge:
        profile = {"model": "simulated-judge", "base_url": judge.base_url, "max_concurrency": SLOTS,
                   "timeout_s": 600}
        with Service(tmp_path, {"judge_profiles": {"gated": profile}, "runner": {"jobs": 2, "poll_s": 0.1},
                                "limits": {"max_active_jobs": 10}}) as service:
            client = service.client()
            huge_data = outputs_jsonl(HUGE_OUTPUTS).replace("topic", f"{MARKER} topic")
            huge = client.post("/v1/jobs", json={**body(huge_data), "judge_profile": "gated"}).json()["id"]
            wait_for(lambda: judge.holding == SLOTS, 300)  # the huge job alone fills every judge slot
            small = client.post("/v1/jobs", json={**body(outputs_jsonl(1)), "judge_profile": "gated"}).json()["id"]

            # the small job is under way and at its judging stage: its first call waits for a slot (or soon will)
            wait_for(lambda: client.get(f"/v1/jobs/{small}").json()["progress"].get("stage") == "trec", 300)
            steps = 0
            while True:
                # quiet: both slots are held huge-job requests, so nothing moves until the next step
                wait_for(lambda: judge.holding == SLOTS, 300)
                view = client.get(f"/v1/jobs/{small}").json()
                if view["status"] in ("completed", "failed"):
                    break
                assert steps < MAX_STEPS, (f"the small job still {view['status']} after {steps} huge-job calls: "
                                           "it is starved")
                judge.allow(1)
                steps += 1
                wait_for(lambda: judge.passed == steps, 300)

            assert view["status"] == "completed", view["error"]
            small_calls = view["usage"]["calls"]
            assert small_calls > 0 and sum(judge.answered.values()) == judge.answered_gated + small_calls
            huge_view = client.get(f"/v1/jobs/{huge}").json()
            assert huge_view["status"] == "running"  # the huge job is still under way ...
            assert judge.answered_gated == steps  # ... having made one call per step

            assert client.post(f"/v1/jobs/{huge}/cancel").status_code == 202  # end it quickly
            judge.open()
            assert wait_status(client, huge, ("cancelled", "completed"), 300)["status"] in ("cancelled", "completed")


def _ended(client: object, job: str) -> bool:
    return client.get(f"/v1/jobs/{job}").json()["status"] in ("completed", "failed")  # type: ignore[attr-defined]
