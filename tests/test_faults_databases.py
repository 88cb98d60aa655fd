"""The judge cache and the sweep history in every file state, through the CLI.

A property test draws a database (cache read and written by ``eval``, history read by ``history`` and written by
``sweep``) and a file state: missing, empty, truncated, corrupt, a folder, another program's database, an older
schema, read-only, locked by another process. Usable states run; every other state is one error line naming the
file (exit 5), no traceback, and no results folder. Plus: an empty path, a real disk-full (``RLIMIT_FSIZE``) on the
cache mid-run, and ``validate`` reporting all of it without creating anything.
"""

from __future__ import annotations

import os
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import types
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from open_rag_eval.cli import main
from open_rag_eval.core.errors import StorageError
from open_rag_eval.sweeps.history import History, SweepRecord
from open_rag_eval.judge.cache import CachedCompletion, JudgeCache
from open_rag_eval.store import sqlite as store_sqlite
from tests.logs import logged_errors
from tests.rag_server import RagServer
from tests.test_faults_api_errors import synthetic_outputs, write_inputs

ROOT = Path(__file__).resolve().parent.parent
STATES = ("missing", "empty", "truncated", "corrupt", "folder", "foreign", "older", "readonly", "locked")
USABLE = {  # state -> exit code, per use; every state not listed exits 5
    "cache": {"missing": 0, "empty": 0},
    "history": {"missing": 2, "empty": 0, "readonly": 0},
    "sweep": {"missing": 0, "empty": 0},
}
ROOT_USER = os.geteuid() == 0


def _valid(use: str, path: Path, *, journal: str = "wal") -> None:
    """A usable database for ``use`` with one entry."""
    if use == "cache":
        cache = JudgeCache(path)
        cache.put_sync("k", CachedCompletion("0", 1, 1, None, "m", 0.0))
        cache.close()
    else:
        with History(path) as history:
            history.append(SweepRecord(id="s0", started_at="t", finished_at="t", system="demo", config_digest="d",
                                       output_dir="o", n_queries=1, n_outputs=2, n_failed_outputs=0,
                                       simulated=False))
    if journal != "wal":
        with sqlite3.connect(path) as db:
            db.execute(f"PRAGMA journal_mode = {journal}")


def _make_state(use: str, state: str, path: Path, cut: float, junk: bytes, stack: ExitStack,
                monkeypatch: pytest.MonkeyPatch) -> None:
    if state == "missing":
        return
    if state == "empty":
        path.write_bytes(b"")
    elif state == "truncated":
        _valid(use, path)
        data = path.read_bytes()
        path.write_bytes(data[:max(1, int(len(data) * cut))])
    elif state == "corrupt":
        path.write_bytes(b"x" + junk)  # never the SQLite magic
    elif state == "folder":
        path.mkdir()
    elif state in ("foreign", "older"):
        with sqlite3.connect(path) as db:
            table = "people (name TEXT)" if state == "foreign" else \
                ("completions (key TEXT, text TEXT)" if use == "cache" else "sweeps (id TEXT)")
            db.execute(f"CREATE TABLE {table}")
    elif state == "readonly":
        _valid(use, path)
        if ROOT_USER:  # root ignores file modes: open every connection read-only instead
            real = sqlite3.connect

            def read_only(target: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
                uri = str(target) if str(target).startswith("file:") else f"{Path(target).resolve().as_uri()}?mode=ro"
                kwargs["uri"] = True
                return real(uri if "mode=" in uri else f"{uri}?mode=ro", *args, **kwargs)

            proxy = types.SimpleNamespace(**{**vars(sqlite3), "connect": read_only})
            monkeypatch.setattr(store_sqlite, "sqlite3", proxy)
        else:
            path.chmod(0o444)
            path.parent.chmod(0o555)
            stack.callback(path.parent.chmod, 0o755)
    elif state == "locked":
        _valid(use, path, journal="delete")
        holder = sqlite3.connect(path, isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        stack.callback(holder.close)
        monkeypatch.setenv("OPEN_RAG_EVAL_DB_TIMEOUT_S", "0.2")


def _run(use: str, folder: Path, db: Path) -> int:
    if use == "history":
        return main(["-q", "history", "--db", str(db)])
    if use == "cache":
        data = write_inputs(folder, synthetic_outputs(2, seed=3))
        config = {"input": str(data), "output_dir": "out",
                  "judge": {"model": "simulated-judge", "simulated": {"seed": 1}, "cache": str(db)},
                  "evaluators": [{"type": "trec", "metrics": ["umbrela"]}]}
        path = folder / "config.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return main(["-q", "eval", "--config", str(path)])
    (folder / "queries.csv").write_text("query_id,query\nt1,What is wind power\nt2,What is solar power\n")
    with RagServer() as server:
        config = {"output_dir": "out", "evaluators": [{"type": "consistency", "metrics": ["rouge"]}],
                  "connector": {"type": "http", "queries": "queries.csv", "repeats": 2,
                                "options": {"url": server.url, "backoff_s": 0,
                                            "body": {"query": "{query}", "query_id": "{query_id}"}}},
                  "sweep": {"history": str(db), "system": "demo"}}
        path = folder / "sweep.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return main(["-q", "sweep", "--config", str(path)])


@settings(max_examples=24, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(use=st.sampled_from(sorted(USABLE)), state=st.sampled_from(STATES), cut=st.floats(0.0, 0.95),
       junk=st.binary(min_size=0, max_size=3000))
def test_every_file_state_runs_or_is_one_clear_error(use: str, state: str, cut: float, junk: bytes,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack, monkeypatch.context() as patch:
        folder = Path(tmp)
        (folder / "db").mkdir()
        db = folder / "db" / ("cache.sqlite" if use == "cache" else "history.sqlite")
        _make_state(use, state, db, cut, junk, stack, patch)
        with logged_errors() as records:
            code = _run(use, folder, db)
        expected = USABLE[use].get(state, 5)
        assert code == expected, (use, state, [r.getMessage() for r in records])
        assert all(r.exc_info is None for r in records), "a traceback was logged"
        if expected == 5:
            assert len(records) == 1, [r.getMessage() for r in records]
            line = records[0].getMessage()
            assert line.startswith("error: ") and str(db) in line and "\n" not in line, line
            assert not (folder / "out").exists()  # failed before any result was written
        elif expected == 0 and use == "cache":
            assert (folder / "out" / "results.csv").is_file() and len(JudgeCache(db)) > 0


def test_an_empty_cache_path_is_one_clear_error(tmp_path: Path) -> None:
    data = write_inputs(tmp_path, synthetic_outputs(1))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"input": str(data), "output_dir": "out", "evaluators": [{"type": "trec"}],
                                      "judge": {"simulated": {}, "cache": ""}}), encoding="utf-8")
    with logged_errors() as records:
        assert main(["-q", "eval", "--config", str(config)]) == 5
    assert [r.getMessage() for r in records] == ["error: judge.cache: the judge cache path is empty: set it to a "
                                                 "file path"]
    assert not (tmp_path / "out").exists()


def _limit_file_size(limit: int) -> Any:
    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_full_disk_under_the_cache_stops_the_run_with_the_path(tmp_path: Path) -> None:
    data = write_inputs(tmp_path, synthetic_outputs(12, n_passages=5, seed=5))
    cache = tmp_path / "cache.sqlite"
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"input": str(data), "output_dir": "out",
                                      "evaluators": [{"type": "trec", "metrics": ["umbrela"]}],
                                      "judge": {"simulated": {}, "cache": str(cache)}}), encoding="utf-8")
    limit = data.stat().st_size + 4096  # outputs.jsonl fits; the cache outgrows it while judging
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "-q", "eval", "--config", str(config)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, preexec_fn=_limit_file_size(limit))
    assert done.returncode == 5, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(cache) in lines[0] and "judge cache" in lines[0], done.stderr
    assert not (tmp_path / "out").exists()
    assert main(["-q", "eval", "--config", str(config)]) == 0  # space again: the run resumes from the cache


def test_validate_reports_every_unusable_path_and_creates_nothing(tmp_path: Path) -> None:
    data = write_inputs(tmp_path, synthetic_outputs(2))
    (tmp_path / "cache.sqlite").mkdir()
    (tmp_path / "history.sqlite").write_bytes(b"not a database at all")
    (tmp_path / "out").write_text("a file", encoding="utf-8")
    config = tmp_path / "config.yaml"
    body = {"input": str(data), "output_dir": "out", "evaluators": [{"type": "trec"}],
            "judge": {"simulated": {}, "cache": "cache.sqlite"}, "sweep": {"history": "history.sqlite"}}
    config.write_text(yaml.safe_dump(body), encoding="utf-8")
    before = sorted(p.name for p in tmp_path.iterdir())
    with logged_errors() as records:
        assert main(["-q", "validate", "--config", str(config)]) == 5
    lines = [r.getMessage() for r in records]
    assert len(lines) == 3, lines
    assert any(str(tmp_path / "out") in line and "is a file" in line for line in lines)
    assert any(str(tmp_path / "cache.sqlite") in line and "is a folder" in line for line in lines)
    assert any(str(tmp_path / "history.sqlite") in line and "not a usable sweep history" in line for line in lines)
    (tmp_path / "cache.sqlite").rmdir()
    (tmp_path / "history.sqlite").unlink()
    (tmp_path / "out").unlink()
    with logged_errors() as records:
        assert main(["-q", "validate", "--config", str(config)]) == 0
    assert records == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [n for n in before if n not in
                                                          ("cache.sqlite", "history.sqlite", "out")]


def test_validate_names_a_run_holding_the_output_folder(tmp_path: Path) -> None:
    import fcntl

    data = write_inputs(tmp_path, synthetic_outputs(1))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"input": str(data), "output_dir": "out", "evaluators": [{"type": "trec"}],
                                      "judge": {"simulated": {}, "cache": "c.sqlite"}}), encoding="utf-8")
    with (tmp_path / ".out.lock").open("w") as lock:
        lock.write("4242\n")
        lock.flush()
        fcntl.flock(lock, fcntl.LOCK_EX)
        with logged_errors() as records:
            assert main(["-q", "validate", "--config", str(config)]) == 5
    assert [r.getMessage() for r in records] == [f"error: {tmp_path / 'out'}: the output folder is in use by a "
                                                 "running run (pid 4242)"]


class _LockedAtFirst:
    """A connection whose first ``n`` journal-mode switches answer "database is locked" at once, as SQLite does
    while another process creates the same new file."""

    def __init__(self, connection: sqlite3.Connection, n: int) -> None:
        self.connection, self.n, self.tries = connection, n, 0

    def execute(self, sql: str, *args: object) -> sqlite3.Cursor:
        if sql.startswith("PRAGMA journal_mode"):
            self.tries += 1
            if self.tries <= self.n:
                raise sqlite3.OperationalError("database is locked")
        return self.connection.execute(sql, *args)

    def executescript(self, sql: str) -> sqlite3.Cursor:
        return self.connection.executescript(sql)


def test_a_database_locked_at_once_while_another_process_creates_it_is_tried_again(tmp_path: Path) -> None:
    import time

    from open_rag_eval.judge.cache import _SCHEMA, CACHE_DB
    from open_rag_eval.store.sqlite import _set_up

    raw = sqlite3.connect(tmp_path / "cache.sqlite", isolation_level=None)
    locked = _LockedAtFirst(raw, n=3)
    _set_up(locked, tmp_path / "cache.sqlite", CACHE_DB, _SCHEMA, False, time.monotonic() + 5)  # type: ignore[arg-type]
    assert locked.tries == 4
    assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    forever = _LockedAtFirst(raw, n=10**9)
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # past the deadline it is the usual error
        _set_up(forever, tmp_path / "cache.sqlite", CACHE_DB, _SCHEMA, False, time.monotonic() + 0.2)  # type: ignore[arg-type]
    raw.close()


def test_opening_a_database_again_keeps_the_locks_of_this_process(tmp_path: Path) -> None:
    """A second connection of this process to a file (another job's judge cache, or the second connection of the same
    cache) must not read the file itself: closing any descriptor of a file drops every POSIX lock the process holds
    on it, and other processes then act as if nobody used the database (the judge cache of replicas and workers
    sharing one data folder was corrupted that way: 'database disk image is malformed', 'disk I/O error')."""
    from open_rag_eval.judge.cache import CACHE_DB

    path = tmp_path / "cache.sqlite"
    _valid("cache", path)
    holder = store_sqlite.connect(path, CACHE_DB)
    holder.execute("BEGIN")
    holder.execute("SELECT COUNT(*) FROM completions").fetchone()  # a read: SQLite's shared lock on the file
    try:
        store_sqlite.connect(path, CACHE_DB, readonly=True).close()  # this process opens the file again
        other = subprocess.run([sys.executable, "-c", (  # SQLite's shared-lock bytes: 510 from 2**30 + 2
            "import fcntl, sys\n"
            "with open(sys.argv[1], 'r+b') as f:\n"
            "    try:\n        fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB, 510, 2**30 + 2)\n"
            "    except OSError:\n        print('held')\n"
            "    else:\n        print('free')\n"), str(path)], capture_output=True, text=True, timeout=60)
        assert other.stdout.strip() == "held", other.stdout + other.stderr
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    path.write_bytes(path.read_bytes()[:1500])  # no connection of this process is open: a damaged file is found again
    with pytest.raises(StorageError, match="not a usable judge cache"):
        store_sqlite.connect(path, CACHE_DB)
