"""Sweeps through the service (definition, runs a scheduler triggers, verdicts and trend from the CLI sweep's own
history and test), and the dashboard in headless Chromium: jobs list, a job's live progress then its report, a
sweep's trend and verdicts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import chromium
from tests.rag_server import RagBehaviour, RagServer
from tests.service_server import Service, wait_for, wait_status
from tests.test_service_api import body, outputs_jsonl
from tests.test_sweep import QUERIES

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = pytest.mark.slow



@pytest.fixture(scope="module")
def rag() -> Iterator[RagServer]:
    with RagServer() as server:
        yield server


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, rag: RagServer) -> Iterator[Service]:
    prefix = rag.url.rsplit("/", 1)[0] + "/"
    profiles = {"sim": {"model": "simulated-judge", "simulated": {"latency_ms": 1}},
                "slow": {"model": "simulated-judge", "simulated": {"latency_ms": 120}, "max_concurrency": 2}}
    with Service(tmp_path_factory.mktemp("sweeps"), {"judge_profiles": profiles, "connector_allow": [prefix],
                                                     "inline_evaluators": ["trec", "consistency"]}) as running:
        yield running


def sweep_body(url: str) -> dict[str, Any]:
    return {"name": "nightly", "judge_profile": "sim",
            "queries": "query_id,query\n" + "".join(f"t{i},{q}\n" for i, q in enumerate(QUERIES)),
            "config": {"connector": {"type": "http", "repeats": 3, "options": {
                "url": url, "body": {"query": "{query}", "query_id": "{query_id}"}, "backoff_s": 0}},
                "evaluators": [{"type": "consistency", "metrics": ["rouge", "dispersion"]}],
                "sweep": {"system": "demo", "thresholds": {"consistency.rougeL": 0.1}, "seed": 7}}}


def test_sweep_runs_give_first_stable_then_regression_with_the_trend(service: Service, rag: RagServer) -> None:
    client = service.client()
    created = client.post("/v1/sweeps", json=sweep_body(rag.url))
    assert created.status_code == 201, created.text
    sweep = created.json()["id"]
    assert client.get("/v1/sweeps").json()["sweeps"][0]["thresholds"] == ["consistency.rougeL"]

    def run_once() -> dict[str, Any]:
        reply = client.post(f"/v1/sweeps/{sweep}/runs")
        assert reply.status_code == 202, reply.text
        return wait_status(client, reply.json()["id"], ("completed", "failed"), 300)

    verdicts = [run_once()["verdict"], run_once()["verdict"]]
    rag.behaviour = RagBehaviour(mode="unstable")
    try:
        verdicts.append(run_once()["verdict"])
    finally:
        rag.behaviour = RagBehaviour()
    assert verdicts == ["first", "stable", "regression"]
    runs = client.get(f"/v1/sweeps/{sweep}/runs").json()
    assert [p["verdict"] for p in runs["history"]] == ["first", "stable", "regression"]
    means = [p["metrics"]["consistency.rougeL"]["mean"] for p in runs["history"]]
    assert means[0] == pytest.approx(1.0) and means[1] == pytest.approx(1.0) and means[2] < 0.5
    assert len(runs["runs"]) == 3 and all(r["kind"] == "sweep" for r in runs["runs"])
    job = runs["runs"][0]["id"]
    assert client.get(f"/v1/jobs/{job}/results", params={"format": "csv"}).status_code == 200


def test_a_sweep_needs_an_allowed_connector_and_repeats(service: Service) -> None:
    client = service.client()
    off_list = sweep_body("http://169.254.169.254/latest")
    assert client.post("/v1/sweeps", json=off_list).json()["path"] == "config.connector.options.url"
    assert client.get("/v1/sweeps/0123456789abcdef/runs").status_code == 404


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    with chromium(tmp_path / "profile") as driver:
        yield driver


def test_dashboard_shows_jobs_live_progress_the_report_and_the_sweep_trend(service: Service, browser: Any,
                                                                           rag: RagServer) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    client = service.client()
    job = client.post("/v1/jobs", json={**body(outputs_jsonl(12)), "judge_profile": "slow"}).json()["id"]
    browser.get(f"{service.url}/dashboard/jobs/{job}")
    assert browser.title == f"job {job}"
    seen: set[str] = set()

    def progressed() -> bool:  # the page updates itself from the event stream, then shows the report
        try:
            seen.add(browser.find_element(By.ID, "pct").text)
        except StaleElementReferenceException:  # replaced between finding and reading it: look again
            return False
        return bool(browser.find_elements(By.ID, "report"))

    wait_for(progressed, 300, 0.05)
    assert len(seen - {"0%", "0.0%"}) >= 2, seen  # at least two intermediate values were shown live
    assert browser.find_element(By.ID, "status").text == "completed"
    browser.switch_to.frame(browser.find_element(By.ID, "report"))
    # the frame loads its document after the page: wait for it (an empty title until then)
    wait_for(lambda: browser.execute_script("return document.readyState == 'complete' && document.title")
             == "open-rag-eval report", 120)
    assert browser.find_elements(By.ID, "judge")  # the report's own content rendered inside the page
    browser.switch_to.default_content()
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []

    browser.get(f"{service.url}/dashboard")
    row = browser.find_element(By.CSS_SELECTOR, f"#jobs tr[data-job='{job}']")
    assert "completed" in row.text and "100" in row.text

    sweep = client.post("/v1/sweeps", json={**sweep_body(rag.url), "name": "browsed"}).json()["id"]
    for _ in range(2):
        wait_status(client, client.post(f"/v1/sweeps/{sweep}/runs").json()["id"], ("completed",), 300)
    browser.get(f"{service.url}/dashboard/sweeps")
    browser.find_element(By.LINK_TEXT, "browsed").click()
    chart = browser.find_element(By.CSS_SELECTOR, "svg.trend[data-metric='consistency.rougeL']")
    assert len(chart.find_elements(By.CSS_SELECTOR, "circle.point")) == 2
    verdicts = [c.text for c in browser.find_elements(By.CSS_SELECTOR, "#history td.verdict")]
    assert verdicts == ["first", "stable"]
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
