"""Uploads over real HTTP: list (tenant-scoped, newest first, paged), look up, delete; 409 while an unfinished job
names the upload; another tenant's upload is a 404 for every verb; keys and scopes.

The server only queues (``runner.jobs: 0``), so a job naming an upload stays queued for as long as the test needs.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.service_server import Service
from tests.test_service_api import TREC, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with Service(tmp_path_factory.mktemp("uploads"), {"auth": True, "runner": {"jobs": 0}}) as running:
        yield running


def _upload(client: Any, name: str, n: int = 2) -> dict[str, Any]:
    reply = client.post("/v1/uploads", params={"format": "jsonl", "filename": name}, content=outputs_jsonl(n))
    assert reply.status_code == 201, reply.text
    return reply.json()  # type: ignore[no-any-return]


def _all_pages(client: Any, limit: int) -> tuple[list[str], int]:
    ids: list[str] = []
    pages, before = 0, None
    while True:
        page = client.get("/v1/uploads", params={"limit": limit, **({"before": before} if before else {})})
        assert page.status_code == 200, page.text
        ids += [item["id"] for item in page.json()["uploads"]]
        pages += 1
        before = page.json()["next_before"]
        if before is None:
            return ids, pages


def test_uploads_are_listed_newest_first_paged_looked_up_and_deleted(service: Service) -> None:
    carol = service.client(service.new_key("carol"))
    made = [_upload(carol, f"part-{i}.jsonl", n=i + 1) for i in range(5)]
    first = carol.get("/v1/uploads", params={"limit": 2}).json()
    assert [u["id"] for u in first["uploads"]] == [made[4]["id"], made[3]["id"]]
    assert first["uploads"][0] == {**made[4], "created": first["uploads"][0]["created"],
                                   "links": {"self": f"/v1/uploads/{made[4]['id']}"}}
    assert first["next_before"] == first["uploads"][1]["created"]
    ids, pages = _all_pages(carol, 2)
    assert ids == [u["id"] for u in reversed(made)] and pages == 3  # 2 + 2 + 1, no upload twice or left out

    one = made[0]
    assert carol.get(f"/v1/uploads/{one['id']}").json()["filename"] == "part-0.jsonl"
    stored = service.folder / "data" / "tenants" / "carol" / "uploads" / f"{one['id']}.jsonl"
    assert stored.is_file() and stored.stat().st_size == one["size"]
    assert carol.delete(f"/v1/uploads/{one['id']}").status_code == 204
    assert not stored.exists()
    for reply in (carol.get(f"/v1/uploads/{one['id']}"), carol.delete(f"/v1/uploads/{one['id']}")):
        assert reply.status_code == 404 and reply.json()["code"] == "not_found"
    assert one["id"] not in _all_pages(carol, 100)[0]
    job = carol.post("/v1/jobs", json={"config": TREC, "upload_id": one["id"], "judge_profile": "sim"})
    assert job.status_code == 422 and job.json()["code"] == "bad_input"  # a deleted upload is gone for new jobs


def test_an_upload_an_unfinished_job_names_is_not_deleted(service: Service) -> None:
    dave = service.client(service.new_key("dave"))
    upload = _upload(dave, "big.jsonl")["id"]
    other = _upload(dave, "other.jsonl")["id"]
    job = dave.post("/v1/jobs", json={"config": TREC, "upload_id": upload, "judge_profile": "sim"}).json()["id"]
    assert dave.get(f"/v1/jobs/{job}").json()["status"] == "queued"  # this server only queues
    busy = dave.delete(f"/v1/uploads/{upload}")
    assert busy.status_code == 409 and busy.json()["code"] == "upload_in_use" and job in busy.json()["detail"]
    assert dave.get(f"/v1/uploads/{upload}").status_code == 200  # still there
    assert dave.delete(f"/v1/uploads/{other}").status_code == 204  # an upload no job names goes at once
    assert dave.post(f"/v1/jobs/{job}/cancel").json()["status"] == "cancelled"
    assert dave.delete(f"/v1/uploads/{upload}").status_code == 204  # the job that named it is finished


def test_another_tenants_upload_is_404_and_scopes_hold(service: Service) -> None:
    alice, bob = service.client(service.new_key("alice")), service.client(service.new_key("bob"))
    mine = _upload(alice, "alice.jsonl")["id"]
    assert mine not in _all_pages(bob, 100)[0]
    for reply in (bob.get(f"/v1/uploads/{mine}"), bob.delete(f"/v1/uploads/{mine}")):
        assert reply.status_code == 404 and reply.json()["code"] == "not_found"
        assert reply.json()["detail"] == alice.get("/v1/uploads/0123456789abcdef").json()["detail"].replace(
            "0123456789abcdef", mine)  # word for word what a missing upload gets
    assert alice.get(f"/v1/uploads/{mine}").status_code == 200  # bob's delete did nothing
    assert service.client().get("/v1/uploads").status_code == 401
    reader = service.client(service.new_key("alice", "read"))
    assert [u["id"] for u in reader.get("/v1/uploads").json()["uploads"]] == [mine]
    refused = reader.delete(f"/v1/uploads/{mine}")
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert alice.get(f"/v1/uploads/{mine}").status_code == 200
