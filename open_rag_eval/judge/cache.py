"""The judge cache: raw completions in an embedded SQLite file (WAL), shared by concurrent tasks and processes.

The key is the sha256 of canonical JSON of everything that determines a completion: base_url, model, messages,
final params, response format, prompt version and sample index. The raw text is stored and parsed afterwards,
so a parser fix never invalidates a paid-for cache. Failures are never stored.

A reply's token log-probabilities (asked for by ``scoring: logprobs``) are kept beside it in their own table,
``logprobs``, paired with the reply by key and creation time: a cache written before they were kept opens as it
is (the table is added), its replies read without log-probabilities, a reply stored again without them never
picks up the log-probabilities of the one it replaced, and a reply deleted takes its log-probabilities along.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from open_rag_eval.judge.base import TokenLogprobs
from open_rag_eval.store.sqlite import Database, connect, db_path, guard

__all__ = ["CACHE_DB", "CachedCompletion", "JudgeCache", "cache_key", "cache_path", "decode_logprobs",
           "encode_logprobs", "read_entries"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    fingerprint TEXT,
    model TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS logprobs (
    key TEXT PRIMARY KEY,
    created REAL NOT NULL,
    data TEXT NOT NULL
);
CREATE TRIGGER IF NOT EXISTS logprobs_follow AFTER DELETE ON completions BEGIN
    DELETE FROM logprobs WHERE key = old.key;
END
"""
_SELECT = ("SELECT c.text, c.prompt_tokens, c.completion_tokens, c.fingerprint, c.model, c.created, l.data "
           "FROM completions c LEFT JOIN logprobs l ON l.key = c.key AND l.created = c.created")


CACHE_DB = Database("judge cache", "judge.cache", {
    "completions": frozenset({"key", "text", "prompt_tokens", "completion_tokens", "fingerprint", "model", "created"}),
    "logprobs": frozenset({"key", "created", "data"})})


def cache_path(setting: str | bool, base_dir: Path) -> Path | None:
    """The cache file ``judge.cache`` names (None: no cache); relative paths resolve against ``base_dir``."""
    if setting is False:
        return None
    return db_path(".open-rag-eval/cache.sqlite" if setting is True else setting, base_dir, CACHE_DB)


def cache_key(*, base_url: str, model: str, messages: Sequence[tuple[str, str]], params: Mapping[str, Any],
              prompt_version: str, sample: int) -> str:
    rest = {name: value for name, value in params.items() if name != "response_format"}
    material = {
        "base_url": base_url.rstrip("/"),
        "model": model,
        "messages": [[role, content] for role, content in messages],
        "params": rest,
        "response_format": params.get("response_format"),
        "prompt_version": prompt_version,
        "sample": sample,
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CachedCompletion:
    text: str  # raw, as the endpoint returned it
    prompt_tokens: int
    completion_tokens: int
    fingerprint: str | None
    model: str
    created: float  # unix time
    logprobs: TokenLogprobs | None = None


def encode_logprobs(logprobs: TokenLogprobs) -> str:
    return json.dumps([[token, [list(alt) for alt in alternatives]] for token, alternatives in logprobs],
                      ensure_ascii=False, separators=(",", ":"))


def decode_logprobs(data: str | None) -> TokenLogprobs | None:
    """The stored log-probabilities; None when there are none or they cannot be read (never a failed lookup)."""
    if data is None:
        return None
    try:
        return tuple((str(token), tuple((str(alt), float(logprob)) for alt, logprob in alternatives))
                     for token, alternatives in json.loads(data))
    except (ValueError, TypeError):
        return None


def _entry(row: Sequence[Any]) -> CachedCompletion:
    """A cache entry from a row of ``_SELECT``."""
    text, prompt_tokens, completion_tokens, fingerprint, model, created, logprobs = row
    return CachedCompletion(text, prompt_tokens, completion_tokens, fingerprint, model, created,
                            decode_logprobs(logprobs))


def read_entries(connection: sqlite3.Connection) -> Iterator[tuple[str, CachedCompletion]]:
    """Every entry of a judge cache opened elsewhere (read-only), with its log-probabilities where it keeps them."""
    if connection.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'logprobs'").fetchone():
        rows = connection.execute(_SELECT.replace("SELECT ", "SELECT c.key, ", 1))
        for row in rows:
            yield row[0], _entry(row[1:])
    else:
        for row in connection.execute("SELECT key, text, prompt_tokens, completion_tokens, fingerprint, model, "
                                      "created FROM completions"):
            yield row[0], CachedCompletion(*row[1:])


class JudgeCache:
    """Two connections, each guarded by a lock. Writes run in the cache's own writer thread, one at a time in the
    order given, so a database busy with another process's write never blocks the loop (one thread: the writes
    are serial anyway, and the loop's shared pool started a thread per write in flight, up to six, each start
    waiting for the interpreter lock while the run's first replies came in); lookups by key run in the caller's
    thread on their own connection (in WAL mode a reader never waits for a writer, and a lookup costs less than a
    hop to a thread and back). ``close`` waits for the writes given. Every SQLite failure (corrupt, locked,
    read-only, disk full...) raises ``StorageError`` naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._lock, self._read_lock = threading.Lock(), threading.Lock()
        self._db = connect(self.path, CACHE_DB, schema=_SCHEMA)
        try:
            with guard(self.path, CACHE_DB):
                self._db.execute("PRAGMA synchronous = NORMAL")
            self._reader = connect(self.path, CACHE_DB)
        except BaseException:
            self._db.close()
            raise
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="judge-cache")

    def get_sync(self, key: str) -> CachedCompletion | None:
        with self._read_lock, guard(self.path, CACHE_DB):
            row = self._reader.execute(_SELECT + " WHERE c.key = ?", (key,)).fetchone()
        return None if row is None else _entry(row)

    def put_sync(self, key: str, entry: CachedCompletion) -> None:
        values = (key, entry.text, entry.prompt_tokens, entry.completion_tokens, entry.fingerprint, entry.model,
                  entry.created)
        with self._lock, guard(self.path, CACHE_DB):
            if entry.logprobs is None:
                self._db.execute("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?)", values)
                return
            self._db.execute("BEGIN IMMEDIATE")  # the reply and its log-probabilities together, or neither
            try:
                self._db.execute("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?)", values)
                self._db.execute("INSERT OR REPLACE INTO logprobs VALUES (?, ?, ?)",
                                 (key, entry.created, encode_logprobs(entry.logprobs)))
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    async def get(self, key: str) -> CachedCompletion | None:
        return self.get_sync(key)

    async def put(self, key: str, entry: CachedCompletion) -> None:
        await asyncio.get_running_loop().run_in_executor(self._writer, self.put_sync, key, entry)

    def __len__(self) -> int:
        with self._lock, guard(self.path, CACHE_DB):
            return int(self._db.execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def close(self) -> None:
        self._writer.shutdown(wait=True)
        with self._lock, self._read_lock:
            self._reader.close()
            self._db.close()


class MemoryCache:
    """The cache of a run with ``judge.cache: false``: nothing is kept on disk or after the run, but within the run
    an identical request is still asked once (test-retest's sample 0 is the evaluator's own judgment), so the run
    sends what ``--dry-run`` plans."""

    def __init__(self) -> None:
        self._entries: dict[str, CachedCompletion] = {}

    def get_sync(self, key: str) -> CachedCompletion | None:
        return self._entries.get(key)

    def put_sync(self, key: str, entry: CachedCompletion) -> None:
        self._entries[key] = entry

    async def get(self, key: str) -> CachedCompletion | None:
        return self._entries.get(key)

    async def put(self, key: str, entry: CachedCompletion) -> None:
        self._entries[key] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        self._entries.clear()
