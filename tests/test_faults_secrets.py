"""A recognisable fake API key in the environment never lands in an output file, a log line or an error message.

The judge is a loopback server that requires that key, and -- like real endpoints do -- echoes the bearer token in its
error messages (401 for a wrong key, 500s on first attempts). The CLI runs as a real process with debug logging.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from open_rag_eval.judge.sim_http import Response, json_response
from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
from tests.test_faults_api_errors import synthetic_outputs, write_inputs

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "OPEN_RAG_EVAL_FAULTS_FAKE_KEY"
FAKE_KEY = "sk-faults-FAKEKEY-7f3a9c1e5b2d4068aa11bb22cc33dd44"
FRAGMENTS = (FAKE_KEY, FAKE_KEY[10:30], FAKE_KEY[-16:])  # the key, or a recognisable piece of it


class _EchoingServer(SimulatedJudgeServer):
    """Requires ``expected`` as the bearer token and repeats whatever token it got in its error messages."""

    def __init__(self, expected: str) -> None:
        super().__init__(SimulatedServerConfig(retry_after_s=0.01))
        self.expected = expected
        self._failed_once: set[bytes] = set()

    async def _complete(self, request: Any, record: Any) -> Response | None:
        token = request.headers.get("authorization", "").removeprefix("Bearer ")
        if token != self.expected:
            return _echo(401, f"Incorrect API key provided: {token}. You can find your API key in your account.")
        if request.body not in self._failed_once:  # every request fails once, then succeeds on its retry
            self._failed_once.add(request.body)
            return _echo(500, f"The server had an error while processing the request of key {token}")
        return await super()._complete(request, record)


def _echo(status: int, message: str) -> Response:
    return json_response(status, {"error": {"message": message, "type": "invalid_request_error", "param": None,
                                            "code": "invalid_api_key" if status == 401 else None}})


def _run(folder: Path, config: dict[str, Any], key: str | None) -> subprocess.CompletedProcess[str]:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    if key is not None:
        env[KEY_ENV] = key
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "-v", "eval", "--config", str(path)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def _judge(base_url: str, cache: Path) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "base_url": base_url, "api_key_env": KEY_ENV, "cache": str(cache),
            "max_retries": 3, "backoff_base_s": 0.01, "backoff_cap_s": 0.02}


def _assert_nowhere(done: subprocess.CompletedProcess[str], *folders: Path) -> None:
    for fragment in FRAGMENTS:
        assert fragment not in done.stdout and fragment not in done.stderr
        for folder in folders:
            for path in folder.rglob("*"):
                if path.is_file():
                    assert fragment.encode() not in path.read_bytes(), path.name


def test_key_never_written_on_success(tmp_path: Path) -> None:
    data = write_inputs(tmp_path, synthetic_outputs(3))
    with _EchoingServer(FAKE_KEY) as server:
        config = {"input": str(data), "output_dir": str(tmp_path / "out"),
                  "judge": _judge(server.base_url, tmp_path / "cache" / "judge.sqlite"),
                  "evaluators": [{"type": "trec", "metrics": ["umbrela", "citation", "no_answer"]}]}
        done = _run(tmp_path, config, FAKE_KEY)
        errors_seen = sum(1 for record in server.stats.log if record.status == 500)
    assert done.returncode == 0, done.stderr
    assert errors_seen > 0 and "retry 1/3" in done.stderr  # the echoing errors were logged -- redacted
    _assert_nowhere(done, tmp_path / "out", tmp_path / "cache")
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["judge"]["api_key_env"] == KEY_ENV
    assert manifest["config"]["judge"]["api_key_env"] == KEY_ENV


def test_rejected_key_is_not_repeated_in_the_error(tmp_path: Path) -> None:
    data = write_inputs(tmp_path, synthetic_outputs(2))
    with _EchoingServer("sk-the-right-key-is-another-one") as server:
        config = {"input": str(data), "output_dir": str(tmp_path / "out"),
                  "judge": _judge(server.base_url, tmp_path / "cache.sqlite"),
                  "evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}
        done = _run(tmp_path, config, FAKE_KEY)
    assert done.returncode == 4, done.stderr
    assert "refused the credentials (HTTP 401" in done.stderr and KEY_ENV in done.stderr
    assert "Traceback" not in done.stderr
    _assert_nowhere(done, tmp_path)


def test_peer_config_key_reference_keeps_only_the_name(tmp_path: Path) -> None:
    """The peer writes ``api_key: ${oc.env:NAME}``: the translated config and the manifest keep the reference."""
    data = tmp_path / "results" / "answers.csv"  # the peer's answers live in its results folder
    data.parent.mkdir()
    data.write_text("query_id,query,passage_id,passage,generated_answer\n"
                    "q1,Why is the sky blue?,[1],Rayleigh scattering makes the sky blue.,Scattering [1].\n",
                    encoding="utf-8")
    with _EchoingServer(FAKE_KEY) as server:
        peer = {"input_queries": "queries.csv", "results_folder": "results/", "generated_answers": "answers.csv",
                "eval_results_file": "results.csv", "metrics_file": "metrics.png",
                "evaluator": {"type": "TRECEvaluator",
                              "model": {"type": "OpenAIModel", "name": "gpt-4o-mini", "base_url": server.base_url,
                                        "api_key": "${oc.env:" + KEY_ENV + "}"},
                              "options": {"k_values": [1]}}}
        done = _run(tmp_path, peer, FAKE_KEY)
    assert done.returncode == 0, done.stderr
    _assert_nowhere(done, tmp_path)
    manifests = list(tmp_path.rglob("manifest.json"))
    assert len(manifests) == 1
    assert KEY_ENV in manifests[0].read_text(encoding="utf-8")
