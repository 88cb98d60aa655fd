"""Files, outputs and resume, through the CLI: a run writes a complete generation of results or nothing.

Disk full (an injected ENOSPC at every write of a run, and a real ``RLIMIT_FSIZE`` in a subprocess), a SIGKILL at
spread points of a run, two runs on one folder, an input inside the output folder, unusable output folders, and a
killed connector run that must not query the live system again for what it already fetched.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from open_rag_eval.store import fileio
from open_rag_eval.cli import main
from tests.logs import logged_errors
from tests.rag_server import RagBehaviour, RagServer
from tests.ray_setup import CountingJudge
from tests.test_faults_api_errors import synthetic_outputs, write_inputs

ROOT = Path(__file__).resolve().parent.parent
RESULT_FILES = ("outputs.jsonl", "results.csv", "summary.csv", "results.json", "manifest.json", "report.html")


def _config(folder: Path, data: Path | str | None, *, cache: Path | str | bool | None = None, out: str = "out",
            name: str = "config.yaml", judge: dict[str, Any] | None = None, **top: Any) -> Path:
    config: dict[str, Any] = {"output_dir": out,
                              "judge": {"model": "simulated-judge", "simulated": {"seed": 1},
                                        "cache": str(folder / "cache.sqlite") if cache is None else
                                        (cache if isinstance(cache, bool) else str(cache)), **(judge or {})},
                              "evaluators": [{"type": "trec", "k_values": [1, 3],
                                              "metrics": ["umbrela", "citation", "no_answer"]}], **top}
    if data is not None:
        config["input"] = str(data)
    path = folder / name
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def _eval(config: Path, *extra: str) -> int:
    return main(["-q", "eval", "--config", str(config), *extra])


def _command(config: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "open_rag_eval", "-q", "eval", "--config", str(config), *extra]


def _snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (relative path -> bytes)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _leftovers(out: Path) -> list[str]:
    """Hidden siblings a run uses (fresh folder, old folder, lock) that are still there."""
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def _one_line(records: list[logging.LogRecord], *fragments: str) -> str:
    assert len(records) == 1, [r.getMessage() for r in records]
    line = records[0].getMessage()
    assert line.startswith("error: ") and "\n" not in line and "Traceback" not in line, line
    for fragment in fragments:
        assert fragment in line, (fragment, line)
    return line


def _consistent(out: Path) -> str:
    """A complete generation: every result file, all from one run (the manifest's counts match the files)."""
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    outputs = (out / "outputs.jsonl").read_text(encoding="utf-8").splitlines()
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    csv_rows = (out / "results.csv").read_text(encoding="utf-8").splitlines()[1:]
    assert len(outputs) == manifest["n_outputs"] == len(results["outputs"]) == len(csv_rows)
    assert (out / "report.html").is_file() and (out / "summary.csv").is_file()
    return str(manifest["input"]["sha256"])


@pytest.fixture()
def two_inputs(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    return (write_inputs(tmp_path / "a", synthetic_outputs(3, seed=1)),
            write_inputs(tmp_path / "b", synthetic_outputs(5, seed=2)))


# -- an input inside the output folder ----------------------------------------------------------------------------


def test_re_evaluating_the_saved_outputs_in_place_is_refused(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    out = tmp_path / "out"
    assert _eval(_config(tmp_path, two_inputs[1])) == 0
    before = _snapshot(out)
    with logged_errors() as records:
        code = _eval(_config(tmp_path, out / "outputs.jsonl", name="again.yaml"), "--limit", "1")
    assert code == 2
    _one_line(records, "outputs.jsonl", "inside the output folder", "--output-dir")
    assert _snapshot(out) == before  # nothing shrank to one query
    assert _leftovers(out) == []


def test_an_input_named_like_a_result_file_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    csv_input = out / "results.csv"
    csv_input.write_text("query_id,query,passage_id,passage,generated_answer\n"
                         "q1,What is wind power?,d1,Wind turbines turn wind into electricity.,Wind turbines [1].\n",
                         encoding="utf-8")
    with logged_errors() as records:
        assert _eval(_config(tmp_path, csv_input)) == 2
    _one_line(records, "results.csv", "would replace it")
    assert csv_input.read_text(encoding="utf-8").startswith("query_id,query,passage_id")
    assert sorted(p.name for p in out.iterdir()) == ["results.csv"]


def test_the_output_folder_as_input_or_around_the_current_folder_is_refused(tmp_path: Path,
                                                                            two_inputs: tuple[Path, Path],
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    with logged_errors() as records:
        assert _eval(_config(tmp_path, two_inputs[0], out=str(tmp_path / "a"))) == 2
    _one_line(records, "inside the output folder")  # a/outputs.jsonl is the input
    monkeypatch.chdir(tmp_path / "b")
    with logged_errors() as records:
        assert _eval(_config(tmp_path, two_inputs[0], out=str(tmp_path))) == 2
    _one_line(records, "holds the current folder")
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["outputs.jsonl"]


def test_other_files_in_the_output_folder_are_carried_over(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    """vectara's open-rag-eval layout keeps answers.csv in its results folder: such inputs and the user's own
    files stay, unchanged, beside every new generation."""
    out = tmp_path / "out"
    (out / "sweeps" / "old").mkdir(parents=True)
    answers = out / "answers.jsonl"
    answers.write_bytes(two_inputs[0].read_bytes())
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    (out / "sweeps" / "old" / "results.csv").write_text("a sweep's own results\n", encoding="utf-8")
    kept = {name: data for name, data in _snapshot(out).items()}
    for data in (answers, two_inputs[1], answers):
        assert _eval(_config(tmp_path, data)) == 0
        assert {name: data for name, data in _snapshot(out).items() if name in kept} == kept
        _consistent(out)
    assert _leftovers(out) == []


# -- disk full and write failures ---------------------------------------------------------------------------------


def _count_writes(monkeypatch: pytest.MonkeyPatch, fail_at: int | None) -> list[int]:
    """Wrap the low-level write every file goes through; the ``fail_at``-th call fails with ENOSPC."""
    calls: list[int] = []
    real = fileio.write_bytes

    def write(fd: int, data: bytes) -> None:
        calls.append(len(data))
        if fail_at is not None and len(calls) - 1 == fail_at:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, data)

    monkeypatch.setattr(fileio, "write_bytes", write)
    return calls


def test_disk_full_at_any_write_keeps_the_previous_results(tmp_path: Path, two_inputs: tuple[Path, Path],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    assert _eval(_config(tmp_path, two_inputs[0])) == 0
    before = _snapshot(out)
    config = _config(tmp_path, two_inputs[1], name="b.yaml")
    with monkeypatch.context() as patch:
        calls = _count_writes(patch, None)
        assert _eval(config, "--output-dir", str(tmp_path / "probe")) == 0
        writes = len(calls)
    assert writes >= len(RESULT_FILES)  # one per file at least: every one of them is a failure point below
    for fail_at in range(writes):
        with monkeypatch.context() as patch, logged_errors() as records:
            _count_writes(patch, fail_at)
            assert _eval(config) == 5, fail_at
        _one_line(records, "No space left on device", f"the previous results in {out} are unchanged")
        assert _snapshot(out) == before, fail_at  # never results.csv beside an old manifest
        assert _leftovers(out) == [], fail_at
    assert _eval(config) == 0  # space again: the run completes
    assert _consistent(out) != json.loads(before["manifest.json"])["input"]["sha256"]


def _limit_file_size(limit: int) -> Any:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_real_file_size_limit_keeps_the_previous_results(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    out = tmp_path / "out"
    assert _eval(_config(tmp_path, two_inputs[0])) == 0
    before = _snapshot(out)
    limit = len(before["outputs.jsonl"]) * 3  # B's outputs.jsonl fits, its results.json does not
    config = _config(tmp_path, two_inputs[1], name="b.yaml", cache=False)
    done = subprocess.run(_command(config), cwd=ROOT, capture_output=True, text=True, timeout=120,
                          preexec_fn=_limit_file_size(limit))
    assert done.returncode == 5, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "File too large" in lines[0] and str(out) in lines[0], done.stderr
    assert _snapshot(out) == before
    assert _leftovers(out) == []


# -- kills --------------------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_kill_at_any_point_leaves_one_complete_generation(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    out = tmp_path / "out"
    first = _config(tmp_path, two_inputs[0])
    second = _config(tmp_path, two_inputs[1], name="b.yaml")
    assert _eval(first) == 0 and _eval(second, "--output-dir", str(tmp_path / "warm")) == 0  # warm cache: fast runs
    digests = {_consistent(tmp_path / "warm")}
    started = time.monotonic()
    subprocess.run(_command(second, "--output-dir", str(tmp_path / "timed")), cwd=ROOT, check=True, timeout=120)
    duration = time.monotonic() - started
    digests.add(_consistent(out))
    for i in range(8):
        config = second if i % 2 == 0 else first
        process = subprocess.Popen(_command(config), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(duration * (0.4 + 0.6 * i / 7))
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
        if out.exists():
            assert _consistent(out) in digests, i  # the previous generation or the new one, never a mix
    assert _eval(second) == 0
    _consistent(out)
    assert _leftovers(out) == []


def test_a_kill_during_the_swap_is_undone_by_the_next_run(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    """Killed between renaming the old folder away and the new one in: the next run puts the old one back
    (here the next run then stops on a missing API key, so the restored folder is what stays)."""
    out = tmp_path / "out"
    assert _eval(_config(tmp_path, two_inputs[0])) == 0
    (out / "notes.txt").write_text("mine", encoding="utf-8")
    before = _snapshot(out)
    partial, old = tmp_path / ".out.partial", tmp_path / ".out.old"
    partial.mkdir()
    (partial / "results.csv").write_text("query_id\nhalf\n", encoding="utf-8")
    os.rename(out / "notes.txt", partial / "notes.txt")  # carried over already
    os.rename(out, old)
    needs_key = _config(tmp_path, two_inputs[1], name="key.yaml",
                        judge={"simulated": None, "base_url": "https://judge.example.com/v1",
                               "api_key_env": "OPEN_RAG_EVAL_TEST_UNSET_KEY"})
    with logged_errors() as records:
        assert _eval(needs_key) == 2
    _one_line(records, "OPEN_RAG_EVAL_TEST_UNSET_KEY")
    assert _snapshot(out) == before
    assert _leftovers(out) == []


# -- one run per folder -------------------------------------------------------------------------------------------


def _wait_until(condition: Any, process: subprocess.Popen[Any] | None = None, timeout_s: float = 120) -> None:
    """Wait until ``condition()`` holds (failing if ``process`` ends first or the generous deadline passes)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert process is None or process.poll() is None, "the run ended before the awaited moment"
        assert time.monotonic() < deadline, "the awaited moment never came"
        time.sleep(0.01)


def _wait_for_lock(lock: Path, process: subprocess.Popen[Any]) -> None:
    """Wait until the run ``process`` holds the lock file (it exists and names the owner's pid)."""
    def owner() -> str:
        try:
            return lock.read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    _wait_until(lambda: owner() == str(process.pid), process)


def test_a_second_run_on_a_busy_folder_is_refused(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    out = tmp_path / "out"
    with CountingJudge() as judge:
        judge.hold_after = 0  # the first run waits on its first judgment, holding its folder, until released
        held = _config(tmp_path, two_inputs[1], judge={"simulated": None, "base_url": judge.base_url})
        process = subprocess.Popen(_command(held), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   text=True)
        try:
            _wait_for_lock(tmp_path / ".out.lock", process)
            _wait_until(lambda: judge.held > 0, process)
            with logged_errors() as records:
                assert _eval(_config(tmp_path, two_inputs[0], name="other.yaml")) == 5
            _one_line(records, str(out), f"in use by another run (pid {process.pid})")
            assert process.poll() is None
            judge.release()
            _, stderr = process.communicate(timeout=240)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, stderr
    _consistent(out)  # the first run's files, whole: the second one neither mixed in nor deleted anything
    assert json.loads((out / "manifest.json").read_text())["n_outputs"] == 5
    assert _leftovers(out) == []


def test_a_run_inside_the_output_folder_keeps_it_from_being_swapped(tmp_path: Path,
                                                                    two_inputs: tuple[Path, Path]) -> None:
    """A run writing into out/inner (its lock out/.inner.lock is held) must not have its folder pulled away."""
    import fcntl

    (tmp_path / "out").mkdir()
    with (tmp_path / "out" / ".inner.lock").open("w") as lock:
        lock.write("4242\n")
        lock.flush()
        fcntl.flock(lock, fcntl.LOCK_EX)
        with logged_errors() as records:
            assert _eval(_config(tmp_path, two_inputs[0])) == 5
    _one_line(records, "another run (pid 4242) is writing into", str(tmp_path / "out" / "inner"))
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [".inner.lock"]
    assert _eval(_config(tmp_path, two_inputs[0])) == 0  # released: the run goes ahead


def test_a_stale_lock_is_taken_over(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / ".out.lock").write_text(f"{dead.pid}\n", encoding="utf-8")
    assert _eval(_config(tmp_path, two_inputs[0])) == 0
    _consistent(tmp_path / "out")
    assert _leftovers(tmp_path / "out") == []


# -- unusable output folders --------------------------------------------------------------------------------------


def test_an_output_folder_that_is_a_file_fails_before_judging(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    (tmp_path / "out").write_text("not a folder", encoding="utf-8")
    with logged_errors() as records:
        assert _eval(_config(tmp_path, two_inputs[0])) == 5
    _one_line(records, str(tmp_path / "out"), "is a file")
    assert not (tmp_path / "cache.sqlite").exists()  # nothing was judged
    assert (tmp_path / "out").read_text(encoding="utf-8") == "not a folder"


@pytest.mark.skipif(os.geteuid() == 0, reason="running as root: file permissions do not stop root")
def test_a_read_only_output_folder_fails_before_judging(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o555)
    try:
        with logged_errors() as records:
            assert _eval(_config(tmp_path, two_inputs[0])) == 5
        _one_line(records, str(out), "read-only")
    finally:
        out.chmod(0o755)
    assert not (tmp_path / "cache.sqlite").exists()


# -- connector resume ---------------------------------------------------------------------------------------------


def _connector_config(folder: Path, url: str, n: int, judge: dict[str, Any] | None = None) -> Path:
    (folder / "queries.csv").write_text("query_id,query\n" + "".join(f"t{i},What is topic {i} about\n"
                                                                     for i in range(n)), encoding="utf-8")
    config = _config(folder, None, judge=judge,
                     connector={"type": "http", "queries": "queries.csv", "repeats": 2,
                                "options": {"url": url, "concurrency": 2, "backoff_s": 0,
                                            "body": {"query": "{query}", "query_id": "{query_id}"}}})
    return config


def test_a_killed_connector_run_reuses_what_it_fetched(tmp_path: Path) -> None:
    """SIGKILL while fetching: the rerun asks the live system only for the queries it had not saved, and keeps the
    saved outputs as they were (the system words every answer differently, so a re-query would show)."""
    with RagServer(RagBehaviour(mode="unstable")) as server:
        server.hold_after = 8  # two batches (2 queries x 2 runs each) are answered; the third waits, mid-fetch
        config = _connector_config(tmp_path, server.url, 12)
        journal = tmp_path / ".out.partial" / "outputs.jsonl"
        process = subprocess.Popen(_command(config), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            _wait_until(lambda: journal.exists() and len(journal.read_text(encoding="utf-8").splitlines()) >= 8
                        and server.in_flight > 0, process)
        finally:
            process.kill()
            process.wait(timeout=30)
        server.release()
        _wait_until(lambda: server.in_flight == 0)  # the held requests are answered to nobody before counting
        saved = {(o["query_id"], o["run"]): o for o in map(json.loads, journal.read_text().splitlines())}
        assert len(saved) == 8
        complete = {qid for qid, _ in saved if (qid, 1) in saved and (qid, 2) in saved}
        assert len(complete) == 4
        calls = server.calls
        assert _eval(config) == 0
        assert server.calls - calls == 2 * (12 - len(complete))
    final = {(o["query_id"], o["run"]): o for o in map(json.loads, (tmp_path / "out" / "outputs.jsonl")
                                                     .read_text().splitlines())}
    assert len(final) == 24
    for qid in complete:
        assert final[(qid, 1)] == saved[(qid, 1)] and final[(qid, 2)] == saved[(qid, 2)]
    assert _leftovers(tmp_path / "out") == []


def test_a_connector_run_stopped_by_the_judge_does_not_query_again(tmp_path: Path) -> None:
    with RagServer(RagBehaviour(mode="unstable")) as server:
        dead_judge = {"simulated": None, "base_url": "http://127.0.0.1:9/v1", "max_retries": 0,
                      "outage_after_failures": 1, "timeout_s": 2}
        assert _eval(_connector_config(tmp_path, server.url, 4, judge=dead_judge)) == 4
        assert server.calls == 8
        saved = (tmp_path / ".out.partial" / "outputs.jsonl").read_text(encoding="utf-8")
        assert _eval(_connector_config(tmp_path, server.url, 4)) == 0
        assert server.calls == 8  # the judge is back: nothing is asked of the system again
    assert (tmp_path / "out" / "outputs.jsonl").read_text(encoding="utf-8") == saved
    with RagServer() as server:  # a finished run is not resumed: the next one is a new measurement
        assert _eval(_connector_config(tmp_path, server.url, 4)) == 0
        assert server.calls == 8


def test_a_sweep_holds_its_output_folder(tmp_path: Path, two_inputs: tuple[Path, Path]) -> None:
    """A sweep writes into <output_dir>/sweeps/<id>: an eval into the same output_dir waits its turn."""
    with RagServer() as server:
        server.hold_after = 0  # the sweep waits on its first query, holding its folder, until the eval was refused
        config = _connector_config(tmp_path, server.url, 4)
        body = yaml.safe_load(config.read_text())
        body["connector"]["options"]["concurrency"] = 1
        body["evaluators"] = [{"type": "consistency", "metrics": ["rouge"]}]
        body["sweep"] = {"history": "history.sqlite"}
        config.write_text(yaml.safe_dump(body), encoding="utf-8")
        command = [sys.executable, "-m", "open_rag_eval", "-q", "sweep", "--config", str(config)]
        process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_for_lock(tmp_path / ".out.lock", process)
            _wait_until(lambda: server.in_flight > 0, process)
            with logged_errors() as records:
                assert _eval(_config(tmp_path, two_inputs[0], name="other.yaml")) == 5
            _one_line(records, f"in use by another run (pid {process.pid})")
            server.release()
            _, stderr = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    assert process.returncode == 0, stderr
    assert len(list((tmp_path / "out" / "sweeps").iterdir())) == 1
