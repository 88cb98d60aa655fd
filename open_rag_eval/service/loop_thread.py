"""A thread with its own event loop and database engine, for service work that must not share the server's loop."""

from __future__ import annotations

import asyncio
import threading

from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["LoopThread"]


class LoopThread:
    """Runs ``work(engine, stop)`` on a daemon thread with an event loop and a database engine of its own, from
    ``start()`` until ``stop()`` sets ``stop``; the engine is disposed of when the work returns."""

    name = "open-rag-eval loop"

    def __init__(self, db_url: str) -> None:
        self.db_url = db_url
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._main, name=self.name, daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(30)

    def stop(self, timeout_s: float = 30.0) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout_s)

    async def work(self, engine: AsyncEngine, stop: asyncio.Event) -> None:
        raise NotImplementedError

    def _main(self) -> None:
        asyncio.run(self._run())

    async def _run(self) -> None:
        from open_rag_eval.service.db import open_engine

        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        engine = open_engine(self.db_url)
        self._ready.set()
        try:
            await self.work(engine, self._stop)
        finally:
            await engine.dispose()
