"""A real ``open-rag-eval serve`` process on loopback for the service tests, and small helpers to talk to it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

__all__ = ["Service", "as_served", "free_port", "sse_events", "wait_for"]

SIMULATED = {"model": "simulated-judge", "simulated": {"latency_ms": 1}}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(check: Any, timeout_s: float = 60.0, every_s: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {check}")
        time.sleep(every_s)


class Service:
    """``serve --config <folder>/server.yaml`` in a subprocess; its log in ``<folder>/serve.log``."""

    def __init__(self, folder: Path, settings: dict[str, Any] | None = None, env: dict[str, str] | None = None,
                 host: str = "127.0.0.1") -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.settings = {"data_dir": "data", "judge_profiles": {"sim": SIMULATED},
                         "runner": {"poll_s": 0.1, "heartbeat_s": 0.5}, **(settings or {})}
        self.config = folder / "server.yaml"
        self.config.write_text(yaml.safe_dump(self.settings), encoding="utf-8")
        self.env = {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}
        self.host, self.port = host, free_port()
        self.url = f"http://{host}:{self.port}"
        self.log = folder / "serve.log"
        self.process: subprocess.Popen[bytes] | None = None

    def command(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "open_rag_eval", *args]

    def start(self, timeout_s: float = 60.0) -> Service:
        import httpx

        handle = self.log.open("ab")
        self.process = subprocess.Popen(
            self.command("serve", "--config", str(self.config), "--host", self.host, "--port", str(self.port)),
            stdout=handle, stderr=subprocess.STDOUT, env=self.env)
        handle.close()

        def up() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited {self.process.returncode}: {self.log.read_text()[-2000:]}")
            try:
                return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, timeout_s)
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        self.process = None

    def keys(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.command("serve", "keys", *args, "--config", str(self.config)),
                              capture_output=True, text=True, env=self.env, timeout=120)

    def new_key(self, tenant: str, scopes: str = "read,write") -> str:
        done = self.keys("create", "--tenant", tenant, "--scopes", scopes)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def client(self, key: str | None = None) -> Any:
        import httpx

        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def job_dir(self, job_id: str) -> Path:
        return self.folder / "data" / "jobs" / job_id

    def cache(self, tenant: str = "default") -> Path:
        return self.folder / "data" / "tenants" / tenant / "judge-cache.sqlite"

    def __enter__(self) -> Service:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def as_served(path: Path, job_dir: Path) -> bytes:
    """A CLI result file as the service serves it: the job's folder named relatively (``input.jsonl:3``)."""
    return path.read_bytes().replace(f"{job_dir}/".encode(), b"")


def sse_events(client: Any, path: str, last_event_id: str | None = None) -> list[dict[str, Any]]:
    """Every event of a job's stream (it ends when the job does): id, event, data (parsed)."""
    headers = {"Last-Event-ID": last_event_id} if last_event_id else {}
    events: list[dict[str, Any]] = []
    with client.stream("GET", path, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        current: dict[str, Any] = {}
        for line in response.iter_lines():
            if not line:
                if current:
                    events.append(current)
                current = {}
            elif line.startswith("id: "):
                current["id"] = int(line[4:])
            elif line.startswith("event: "):
                current["event"] = line[7:]
            elif line.startswith("data: "):
                current["data"] = json.loads(line[6:])
    return events


def wait_status(client: Any, job_id: str, statuses: tuple[str, ...], timeout_s: float = 120.0) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        job = client.get(f"/v1/jobs/{job_id}").json()
        return job if job["status"] in statuses else None

    return wait_for(check, timeout_s, 0.1)  # type: ignore[no-any-return]
