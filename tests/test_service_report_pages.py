"""A job of more than ``INLINE_QUERIES`` queries over real HTTP: every link of its report (and of the dashboard's
iframe, the same URL) reaches a page of ``report-queries/``, only for the job's own tenant; any other name,
``../`` or an encoded traversal is refused."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urljoin, urlsplit

import pytest

from tests.report_links import large_items, relative_links
from tests.service_server import SIMULATED, Service, sse_events

pytest.importorskip("fastapi", reason="the [server] extra is not installed")

TREC = {"evaluators": [{"type": "trec", "metrics": ["umbrela", "citation"]}]}


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """(the service, the owner's key, the job id) of a completed large job."""
    folder = tmp_path_factory.mktemp("pages")
    settings = {"auth": True, "judge_profiles": {"sim": SIMULATED}}
    with Service(folder, settings) as service:
        key = service.new_key("owner")
        data = "".join(json.dumps(item) + "\n" for item in large_items())
        created = service.client(key).post("/v1/jobs", json={"config": TREC, "judge_profile": "sim",
                                                             "inputs": {"format": "jsonl", "data": data}})
        assert created.status_code == 202, created.text
        job_id = created.json()["id"]
        events = sse_events(service.client(key), f"/v1/jobs/{job_id}/events")  # ends when the job does
        statuses = [event["data"]["status"] for event in events if event["event"] == "status"]
        assert statuses[-1] == "completed", events[-3:]
        yield service, key, job_id


def _raw_get(service: Service, path: str, key: str) -> tuple[int, bytes]:
    """GET ``path`` exactly as written (no client-side normalisation of ``..`` or of escapes)."""
    connection = http.client.HTTPConnection(service.host, service.port, timeout=60)
    try:
        connection.putrequest("GET", path, skip_accept_encoding=True)
        connection.putheader("Authorization", f"Bearer {key}")
        connection.endheaders()
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_every_link_of_a_large_jobs_report_is_served(job: Any) -> None:
    service, key, job_id = job
    client = service.client(key)
    report_url = f"/v1/jobs/{job_id}/report"
    report = client.get(report_url)
    assert report.status_code == 200
    pages = [urljoin(report_url, link) for link in relative_links(report.text)]
    assert len(pages) == -(-len(large_items()) // 100) and all("/report-queries/page-" in p for p in pages), pages
    seen: set[str] = set()
    for page in pages:
        answer = client.get(page)
        assert answer.status_code == 200, (page, answer.text)
        assert answer.headers["content-type"].startswith("text/html")
        assert 'class="query"' in answer.text  # a page of queries, not the report again
        for link in relative_links(answer.text):  # back to the report, previous / next page
            target = urljoin(page, link)
            if target not in seen:
                seen.add(target)
                followed = client.get(target)
                assert followed.status_code == 200, (page, link, target)
                assert followed.headers["content-type"].startswith("text/html")
    assert f"/v1/jobs/{job_id}/report.html" in seen  # the pages' way back
    dashboard = service.client()
    dashboard.cookies.set("ore_key", key)
    assert f"src='{report_url}'" in dashboard.get(f"/dashboard/jobs/{job_id}").text  # the iframe: the same URL
    assert dashboard.get(pages[-1]).status_code == 200  # and its links open with the dashboard's cookie alone


def test_pages_belong_to_the_jobs_tenant(job: Any) -> None:
    service, _, job_id = job
    page = f"/v1/jobs/{job_id}/report-queries/page-0001.html"
    assert service.client().get(page).status_code == 401
    other = service.client(service.new_key("other")).get(page)
    assert other.status_code == 404 and other.json()["code"] == "not_found"  # as absent as a missing job


@pytest.mark.parametrize("name", ["page-9999.html", "manifest.json", "page-0001.htm", "page-1.html", ".page-0001.html",
                                  "..%2Fmanifest.json", "..%2F..%2F..%2Fserver.yaml", "%2E%2E%2Freport.html",
                                  "..%252Fmanifest.json", "page-0001.html%00", "..", "%2E%2E"])
def test_any_other_name_or_a_traversal_is_refused(job: Any, name: str) -> None:
    service, key, job_id = job
    status, body = _raw_get(service, f"/v1/jobs/{job_id}/report-queries/{name}", key)
    assert status in (404, 422) and b"<html" not in body.lower() and b"open-rag-eval report" not in body, (status, body)


@pytest.mark.parametrize("path", ["report-queries/../manifest", "report-queries/../../../../server.yaml",
                                  "report-queries/./../report-queries/../results"])
def test_a_literal_dot_dot_path_never_reaches_another_file(job: Any, path: str) -> None:
    service, key, job_id = job
    status, body = _raw_get(service, f"/v1/jobs/{job_id}/{path}", key)
    assert status == 404 and b"judge_profiles" not in body and b'"outputs"' not in body, (status, body[:200])
