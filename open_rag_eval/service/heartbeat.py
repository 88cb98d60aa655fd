"""Claim renewal on its own thread, event loop and database connection, apart from the jobs' work.

A job's CPU stretches (reading inputs, scoring, writing the files and the report) hold the runner's event loop.
Were the claims renewed on that loop, a stretch longer than ``stale_after_s`` would look like a dead process and
another worker would take the job over and repeat its work. ``Heartbeat`` renews every claim its runner holds every
``heartbeat_s`` from a thread of its own, so only a process that really stopped (killed, crashed, its machine gone)
lets its claims go stale. The runner's loop still stores progress, and notices cancels and lost claims, at its pace.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time

from sqlalchemy.ext.asyncio import AsyncEngine

from open_rag_eval.service.db import work_items

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)


class Heartbeat:
    """Renews the claims of the jobs in ``hold`` for ``worker``; ``start`` and ``stop`` from the runner."""

    def __init__(self, db_url: str, worker: str, every_s: float) -> None:
        self.db_url, self.worker, self.every_s = db_url, worker, every_s
        self.renewals = 0  # rounds that renewed at least one claim (tests look at it)
        self._jobs: set[str] = set()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name="open-rag-eval heartbeat", daemon=True)

    def hold(self, job_id: str) -> None:
        with self._lock:
            self._jobs.add(job_id)

    def release(self, job_id: str) -> None:
        with self._lock:
            self._jobs.discard(job_id)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop renewing (the claims still held go stale, and their work resumes elsewhere or at the next start)."""
        with self._lock:
            self._jobs.clear()
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout_s)

    def _main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        from open_rag_eval.service.db import open_engine

        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        engine = open_engine(self.db_url)
        self._ready.set()
        try:
            while not self._stop.is_set():
                with self._lock:
                    held = sorted(self._jobs)
                if held:
                    await self._renew(engine, held)
                try:
                    await asyncio.wait_for(self._stop.wait(), self.every_s)
                except asyncio.TimeoutError:
                    pass
        finally:
            await engine.dispose()

    async def _renew(self, engine: AsyncEngine, held: list[str]) -> None:
        try:
            async with engine.begin() as connection:
                renewed = await connection.execute(work_items.update().where(
                    work_items.c.job_id.in_(held), work_items.c.claimed_by == self.worker,
                    work_items.c.status == "claimed").values(heartbeat=time.time()))
            if renewed.rowcount:
                self.renewals += 1
        except Exception as error:  # a database hiccup: try again next round (the claim has stale_after_s)
            log.warning("renewing the claims of %d job(s) failed: %s", len(held), error)
