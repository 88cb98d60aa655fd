"""Removing jobs: ``DELETE`` purges the cached judge replies only that job used (the tenant's other jobs keep
theirs); a tenant's ``retention_days`` has the runner's sweeper remove its finished jobs, files and replies; usage
stays billed; a backup made while the server runs restores every job."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.service_server import Service, wait_for, wait_status
from tests.test_service_api import body, outputs_jsonl

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytestmark = pytest.mark.slow

SHORT_DAYS = 3 / 86_400  # three seconds


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    settings = {"auth": True, "retention": {"tenants": {"short": SHORT_DAYS}, "every_s": 0.5},
                "runner": {"jobs": 2, "poll_s": 0.1, "heartbeat_s": 0.5}}
    with Service(tmp_path_factory.mktemp("retention"), settings) as running:
        yield running


def _replies(cache: Path) -> set[str]:
    connection = sqlite3.connect(cache)
    try:
        return {key for key, in connection.execute("SELECT key FROM completions")}
    finally:
        connection.close()


def test_delete_purges_the_replies_only_that_job_used(service: Service) -> None:
    client = service.client(service.new_key("keep"))
    small = client.post("/v1/jobs", json=body(outputs_jsonl(2))).json()["id"]
    assert wait_status(client, small, ("completed",))["status"] == "completed"
    used_by_small = _replies(service.cache("keep"))
    large = client.post("/v1/jobs", json=body(outputs_jsonl(4))).json()["id"]  # its first two outputs are small's
    assert wait_status(client, large, ("completed",))["status"] == "completed"
    everything = _replies(service.cache("keep"))
    assert used_by_small < everything
    assert (service.job_dir(large) / "judge-keys.txt").is_file()

    assert client.delete(f"/v1/jobs/{large}").status_code == 204
    assert _replies(service.cache("keep")) == used_by_small  # small's replies stay: it still exists
    assert not service.job_dir(large).exists()
    assert client.delete(f"/v1/jobs/{small}").status_code == 204
    assert _replies(service.cache("keep")) == set()
    assert client.get("/v1/usage").json()["total"]["jobs"] == 2  # the usage stays billed


def test_retention_removes_a_tenants_finished_jobs_files_and_replies(service: Service) -> None:
    short, keep = service.client(service.new_key("short")), service.client(service.new_key("keep"))
    kept = keep.post("/v1/jobs", json=body(outputs_jsonl(1))).json()["id"]
    job = short.post("/v1/jobs", json=body(outputs_jsonl(2))).json()["id"]
    assert wait_status(short, job, ("completed",))["status"] == "completed"
    assert _replies(service.cache("short"))
    wait_for(lambda: short.get(f"/v1/jobs/{job}").status_code == 404, 60)
    # the sweeper deletes the row first, then the folder and the replies: wait for the whole removal
    wait_for(lambda: not service.job_dir(job).exists(), 30)
    assert _replies(service.cache("short")) == set()
    assert short.get("/v1/usage").json()["total"]["calls"] > 0
    time.sleep(2)  # several sweeps later, the other tenant's job is still there
    assert wait_status(keep, kept, ("completed",))["status"] == "completed"


def test_an_online_backup_restores_every_job(service: Service, tmp_path: Path) -> None:
    client = service.client(service.new_key("backed-up"))
    job = client.post("/v1/jobs", json=body(outputs_jsonl(1))).json()["id"]
    view = wait_status(client, job, ("completed",))
    source = sqlite3.connect(service.folder / "data" / "service.sqlite")
    copy = sqlite3.connect(tmp_path / "service.sqlite")
    try:
        source.backup(copy)  # the documented online backup, while the server runs
    finally:
        source.close()
        copy.close()
    restored = tmp_path / "restored"
    restored.mkdir()
    import shutil

    shutil.copytree(service.folder / "data", restored / "data", ignore=shutil.ignore_patterns("service.sqlite*"))
    shutil.copy(tmp_path / "service.sqlite", restored / "data" / "service.sqlite")
    settings = {**service.settings, "runner": {"jobs": 0}}
    with Service(restored, settings) as again:
        keyed = again.client(_key_of(client))
        assert keyed.get(f"/v1/jobs/{job}").json() == view
        assert keyed.get(f"/v1/jobs/{job}/results", params={"format": "csv"}).content == client.get(
            f"/v1/jobs/{job}/results", params={"format": "csv"}).content


def _key_of(client: Any) -> str:
    return str(client.headers["Authorization"]).split(" ", 1)[1]


def test_pg_dump_and_pg_restore_bring_every_job_back(tmp_path: Path) -> None:
    import shutil
    import tempfile

    from tests.postgres_server import PostgresServer, unavailable
    from tests.service_server import free_port

    if unavailable() is not None:
        pytest.skip(str(unavailable()))
    folder = Path(tempfile.mkdtemp(prefix="open-rag-eval-pg-"))
    database = PostgresServer(folder, free_port())
    try:
        url = database.start()
        settings = {"database_url": url, "data_dir": str(tmp_path / "data"),
                    "runner": {"jobs": 1, "poll_s": 0.1, "heartbeat_s": 0.5}}
        with Service(tmp_path / "a", settings) as first:
            client = first.client()
            job = client.post("/v1/jobs", json=body(outputs_jsonl(1))).json()["id"]
            view = wait_status(client, job, ("completed",))
            results = client.get(f"/v1/jobs/{job}/results", params={"format": "csv"}).content
            dump = folder / "evals.dump"  # where the server's own user may write
            where = ("-h", "127.0.0.1", "-p", str(database.port), "-U", "postgres")
            database._run("pg_dump", *where, "-Fc", "-f", str(dump), "evals")
        database._run("createdb", *where, "restored")
        database._run("pg_restore", *where, "-d", "restored", str(dump))
        restored = {**settings, "database_url": url.rsplit("/", 1)[0] + "/restored", "runner": {"jobs": 0}}
        with Service(tmp_path / "b", restored) as second:
            again = second.client()
            assert again.get(f"/v1/jobs/{job}").json() == view
            assert again.get(f"/v1/jobs/{job}/results", params={"format": "csv"}).content == results
    finally:
        database.stop()
        shutil.rmtree(folder, ignore_errors=True)
