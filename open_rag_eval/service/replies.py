"""Which cached judge replies a job used, and purging them when the job goes (``DELETE``, retention).

A tenant's jobs share one judge cache. While a job runs, ``RecordingCache`` notes the key of every reply it read
from or wrote to the cache; the runner appends them to ``judge-keys.txt`` in the job's folder with each heartbeat.
Purging a job deletes from the tenant's cache the replies it used that none of the tenant's remaining jobs used.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["KEYS_FILE", "RecordingCache", "job_folders", "purge"]

KEYS_FILE = "judge-keys.txt"


class RecordingCache:
    """A judge cache that remembers the keys it answered or stored since the last ``flush`` (``fresh``): memory
    holds a heartbeat's keys, not the run's. A key used again after a flush is appended again (the file is read as
    a set)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.fresh: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def _note(self, key: str) -> None:
        self.fresh.add(key)

    async def get(self, key: str) -> Any:
        found = await self.inner.get(key)
        if found is not None:
            self._note(key)
        return found

    async def put(self, key: str, entry: Any) -> None:
        await self.inner.put(key, entry)
        self._note(key)

    def get_sync(self, key: str) -> Any:
        found = self.inner.get_sync(key)
        if found is not None:
            self._note(key)
        return found

    def put_sync(self, key: str, entry: Any) -> None:
        self.inner.put_sync(key, entry)
        self._note(key)

    def flush(self, job_dir: Path) -> None:
        """Append the keys noted since the last flush to the job's ``judge-keys.txt``."""
        if not self.fresh:
            return
        keys, self.fresh = sorted(self.fresh), set()
        with (job_dir / KEYS_FILE).open("a", encoding="utf-8") as handle:
            handle.write("".join(f"{key}\n" for key in keys))


def _keys(job_dir: Path) -> set[str]:
    try:
        return set((job_dir / KEYS_FILE).read_text(encoding="utf-8").split())
    except OSError:
        return set()


def job_folders(requests: Iterable[str]) -> list[Path]:
    """The folders of jobs, from their stored requests."""
    import json

    return [Path(json.loads(request)["prepared"]["job_dir"]) for request in requests]


def purge(cache: Path, job_dir: Path, others: Iterable[Path]) -> int:
    """Delete from the tenant's ``cache`` the replies the job in ``job_dir`` used that no job in ``others`` used;
    returns how many were deleted."""
    doomed = _keys(job_dir)
    for other in others:
        doomed -= _keys(other)
    if not doomed or not cache.exists():
        return 0
    connection = sqlite3.connect(cache, timeout=30)
    try:
        with connection:
            deleted = connection.executemany("DELETE FROM completions WHERE key = ?",
                                             [(key,) for key in sorted(doomed)]).rowcount
    finally:
        connection.close()
    return int(deleted)
