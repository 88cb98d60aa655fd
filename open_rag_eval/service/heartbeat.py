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
from open_rag_eval.service.loop_thread import LoopThread

__all__ = ["Heartbeat"]

log = logging.getLogger(__name__)


class Heartbeat(LoopThread):
    """Renews the claims of the jobs in ``hold`` for ``worker``; ``start`` and ``stop`` from the runner."""

    name = "open-rag-eval heartbeat"

    def __init__(self, db_url: str, worker: str, every_s: float) -> None:
        super().__init__(db_url)
        self.worker, self.every_s = worker, every_s
        self.renewals = 0  # rounds that renewed at least one claim (tests look at it)
        self._jobs: set[str] = set()
        self._lock = threading.Lock()

    def hold(self, job_id: str) -> None:
        with self._lock:
            self._jobs.add(job_id)

    def release(self, job_id: str) -> None:
        with self._lock:
            self._jobs.discard(job_id)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop renewing (the claims still held go stale, and their work resumes elsewhere or at the next start)."""
        with self._lock:
            self._jobs.clear()
        super().stop(timeout_s)

    async def work(self, engine: AsyncEngine, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with self._lock:
                held = sorted(self._jobs)
            if held:
                await self._renew(engine, held)
            try:
                await asyncio.wait_for(stop.wait(), self.every_s)
            except asyncio.TimeoutError:
                pass

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
