"""Open the service's database for one process: the engine, the migrations, and in SQLite mode an exclusive lock.

An embedded SQLite file serves one server: a second ``serve`` on the same file is refused with the pid of the one
holding it (an ``flock``, which the kernel drops when that process dies, so a killed server never blocks the next).
At start in SQLite mode every claim left in the file comes from a killed run and is released for resumption.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncEngine

from open_rag_eval.core.errors import StorageError
from open_rag_eval.service.db import migrate, open_engine
from open_rag_eval.service.settings import Settings
from open_rag_eval.store.lock import FolderLock, held_by, lock_path

__all__ = ["Storage", "sqlite_file"]

log = logging.getLogger(__name__)


def sqlite_file(url: str) -> Path | None:
    path = url.split(":///", 1)[-1] if url.startswith("sqlite") else ""
    return Path(path) if path and path != ":memory:" else None


@dataclass
class Storage:
    engine: AsyncEngine
    lock: FolderLock | None = None

    @classmethod
    async def open(cls, settings: Settings, *, exclusive: bool = True) -> Storage:
        """``exclusive`` (servers): in SQLite mode hold the file's lock; admin commands open it without."""
        from open_rag_eval.core.redaction import safe_url

        url = settings.db_url
        lock = _lock(sqlite_file(url)) if settings.sqlite and exclusive else None
        try:
            engine = open_engine(url)
            try:
                await migrate(engine)
            except StorageError:
                raise
            except Exception as error:
                await engine.dispose()
                raise StorageError(f"the service database cannot be opened or migrated: {error}",
                                   path=safe_url(url)) from None
            if settings.sqlite and exclusive:
                from open_rag_eval.service.jobs import release_claims

                released = await release_claims(engine)
                if released:
                    log.info("%d job(s) interrupted by a stop of the previous server will resume", released)
        except BaseException:
            if lock is not None:
                lock.release()
            raise
        return cls(engine, lock)

    async def close(self) -> None:
        await self.engine.dispose()
        if self.lock is not None:
            self.lock.release()


def _lock(path: Path | None) -> FolderLock | None:
    if path is None:
        return None
    lock = FolderLock(path)
    try:
        lock.acquire()
    except StorageError:
        holder = held_by(lock_path(path)) or "unknown"
        raise StorageError(f"another open-rag-eval server (pid {holder}) is using this SQLite database; an embedded "
                           "database serves one server: stop it, choose another data_dir, or move to PostgreSQL "
                           "(database_url: postgresql+asyncpg://...) to run several", path=path) from None
    return lock
