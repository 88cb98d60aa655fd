"""The README's "Run it as a service" walk-through, run as written against real servers on loopback.

Each command of the section's shell blocks runs in ``bash`` (curl, jq) in a scratch folder, in order, the shell
variables it sets (JOB, KEY, SWEEP) kept for the next ones. ``open-rag-eval serve ...`` runs until stopped: the test
starts it (stopping the one before) with the block's own arguments. The only changes: ``localhost:8080`` becomes the
test's free port, the README's RAG system URL a loopback one, and ``crontab`` a stand-in that keeps the crontab in a
file (the test then runs the installed line's command, as cron would).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.rag_server import RagServer
from tests.service_server import free_port, wait_for
from tests.test_doc_examples import Block, _commands, _is_install, blocks

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("httpx", reason="httpx (dev extra) is not installed")

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(shutil.which("curl") is None or shutil.which("jq") is None,
                                 reason="curl and jq are needed to run the README's service walk-through "
                                        "(Debian: apt-get install -y curl jq; .ci/run installs them)")]

ROOT = Path(__file__).resolve().parent.parent
README_RAG = "https://rag.internal.example/api/"
SHELL = """set -uo pipefail
open-rag-eval() { "$PYTHON" -m open_rag_eval "$@"; }
crontab() {
  if [ "${1-}" != -l ]; then cat > crontab.txt
  elif [ -f crontab.txt ]; then cat crontab.txt
  else echo "no crontab for ${USER-you}" >&2; return 1; fi
}
if [ -f .vars ]; then source .vars; fi
"""


def section(doc: Path, heading: str) -> list[Block]:
    """The blocks between ``heading`` and the next heading of the same level."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    first = lines.index(heading) + 1  # 1-based line of the heading
    level = heading.split(" ")[0] + " "
    last = next((n for n, text in enumerate(lines, 1) if n > first and text.startswith(level)), len(lines) + 1)
    return [block for block in blocks(doc) if first < block.line < last]


class Walkthrough:
    def __init__(self, folder: Path, port: int, env: dict[str, str]) -> None:
        self.folder, self.port, self.env = folder, port, env
        self.server: subprocess.Popen[bytes] | None = None
        self.log = folder / "serve.log"
        self.url = f"http://127.0.0.1:{port}"

    def local(self, text: str) -> str:
        return text.replace("localhost:8080", f"127.0.0.1:{self.port}")

    def serve(self, args: list[str]) -> None:
        import httpx

        self.stop()
        handle = self.log.open("ab")
        self.server = subprocess.Popen([sys.executable, "-m", "open_rag_eval", *args, "--port", str(self.port)],
                                       cwd=self.folder, env=self.env, stdout=handle, stderr=subprocess.STDOUT)
        handle.close()

        def up() -> bool:
            assert self.server is not None and self.server.poll() is None, self.log.read_text()[-2000:]
            try:
                return httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200
            except httpx.HTTPError:
                return False

        wait_for(up, 180)

    def stop(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.terminate()
            try:
                self.server.wait(30)
            except subprocess.TimeoutExpired:
                self.server.kill()
                self.server.wait()
        self.server = None

    def bash(self, line: str) -> str:
        script = SHELL + self.local(line) + "\ndeclare -p JOB KEY SWEEP 2>/dev/null > .vars || true\n"
        done = subprocess.run(["bash", "-c", script], cwd=self.folder, env=self.env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"`{line}` exited {done.returncode}: {done.stderr[-2000:]}"
        return done.stdout

    def variable(self, name: str) -> str:
        return self.bash(f'printf %s "${{{name}-}}"')


@pytest.fixture
def rag() -> Iterator[RagServer]:
    with RagServer() as server:
        yield server


def test_the_readme_service_walk_through_runs_as_written(tmp_path: Path, rag: RagServer) -> None:
    import httpx

    readme = [block for block in section(ROOT / "README.md", "## Run it as a service")
              if Path(__file__).name in block.markers.get("not-run", "")]  # the PostgreSQL part is not run here
    assert [block.kind for block in readme] == ["shell", "shell", "yaml", "shell", "shell"], readme
    loopback = rag.origin + "/"
    (tmp_path / "tests" / "data").mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "data" / "outputs.jsonl", tmp_path / "tests" / "data" / "outputs.jsonl")
    for block in readme:
        if "file" in block.markers:  # server.yaml
            (tmp_path / block.markers["file"]).write_text(block.body.replace(README_RAG, loopback), encoding="utf-8")
    sweep_json = [b for b in section(ROOT / "docs" / "service.md", "## Scheduled sweeps") if b.lang == "json"]
    assert len(sweep_json) == 1
    (tmp_path / "sweep.json").write_text(sweep_json[0].body.replace(README_RAG, loopback), encoding="utf-8")
    assert json.loads((tmp_path / "sweep.json").read_text())["config"]["connector"]["type"] == "http"

    env = {**os.environ, "PYTHON": sys.executable, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT),
           "OPENAI_API_KEY": "sk-readme-not-a-key"}
    walk = Walkthrough(tmp_path, free_port(), env)
    shown: dict[str, str] = {}  # command -> what it printed
    try:
        for block in readme:
            if block.kind != "shell":
                continue
            for line in _commands(block.body):
                argv = shlex.split(line, comments=True)
                if _is_install(line):
                    continue  # the test environment has the extra
                if argv[:2] == ["open-rag-eval", "serve"] and argv[2:3] != ["keys"]:
                    walk.serve(argv[1:])
                    continue
                shown[line] = walk.bash(line)

        # submit, watch, fetch: JOB came from the JSON reply, the events ran to the end, results.csv is the job's
        job = walk.variable("JOB")
        assert re.fullmatch(r"[0-9a-f]{16}", job), job
        status = json.loads(next(out for line, out in shown.items() if "{status, usage}" in line))
        assert status["status"] == "completed" and status["usage"]["calls"] > 0
        results = (tmp_path / "results.csv").read_text(encoding="utf-8").splitlines()
        outputs = (ROOT / "tests" / "data" / "outputs.jsonl").read_text(encoding="utf-8").split("\n")
        assert results[0].startswith("query_id,") and len(results) == 1 + len([o for o in outputs if o.strip()])

        # keys: a new tenant's key works, and that tenant sees none of the first server's jobs
        key = walk.variable("KEY")
        assert key.startswith("ore_")
        assert next(out for line, out in shown.items() if "'.jobs | length'" in line).strip() == "0"
        assert httpx.get(f"{walk.url}/v1/jobs", timeout=30).status_code == 401  # auth: true

        # the sweep: defined, the crontab line installed, and what cron would run triggers a run
        sweep = walk.variable("SWEEP")
        assert re.fullmatch(r"[0-9a-f]{16}", sweep), sweep
        cron = (tmp_path / "crontab.txt").read_text(encoding="utf-8").splitlines()
        assert len(cron) == 1 and cron[0].startswith("0 2 * * * curl ") and key in cron[0] and sweep in cron[0]
        headers = {"Authorization": f"Bearer {key}"}

        def runs_done(n: int) -> list[dict[str, Any]] | None:
            runs = httpx.get(f"{walk.url}/v1/sweeps/{sweep}/runs", headers=headers, timeout=30).json()["runs"]
            return runs if len(runs) == n and all(r["status"] in ("completed", "failed") for r in runs) else None

        wait_for(lambda: runs_done(1), 300)  # the README's "one run now"
        walk.bash(cron[0].split(" ", 5)[5])  # then the command cron runs at 02:00
        runs = wait_for(lambda: runs_done(2), 300)
        assert sorted(r["status"] for r in runs) == ["completed", "completed"], [r["error"] for r in runs]
        assert sorted(r["verdict"] for r in runs) == ["first", "stable"]
    finally:
        walk.stop()
