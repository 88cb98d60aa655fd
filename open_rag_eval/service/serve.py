"""Start the service (``serve``) or a queue worker (``worker``) from the command line."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any

from open_rag_eval.core.errors import ConfigError, MissingDependency
from open_rag_eval.service.settings import Settings, is_loopback

__all__ = ["require_server_extra", "serve", "work"]

log = logging.getLogger("open_rag_eval")

SERVER_MODULES = ("fastapi", "uvicorn", "sqlalchemy", "alembic", "aiosqlite")


def require_server_extra(postgres: bool = False) -> None:
    for module in (*SERVER_MODULES, *(("asyncpg",) if postgres else ())):
        if importlib.util.find_spec(module) is None:
            raise MissingDependency(module, "server")


def serve(settings: Settings, host: str, port: int) -> int:
    if not is_loopback(host) and not settings.auth:
        raise ConfigError(f"refusing to listen on {host} without authentication: set 'auth: true' in the server "
                          "config and create keys (open-rag-eval serve keys create --tenant NAME)", path="--host")
    require_server_extra(postgres=not settings.sqlite)
    return asyncio.run(_serve(settings, host, port))


async def _serve(settings: Settings, host: str, port: int) -> int:
    import uvicorn

    from open_rag_eval.core.redaction import safe_url
    from open_rag_eval.service.app import create_app
    from open_rag_eval.service.storage import Storage

    storage = await Storage.open(settings)  # a second server on the same SQLite file stops here (exit 5)
    try:
        app = create_app(settings, storage=storage)
        config = uvicorn.Config(app, host=host, port=port, log_level="info", access_log=True,
                                server_header=False, log_config=None)
        server = _server(config)
        where = settings.db_url.split(":///", 1)[-1] if settings.sqlite else safe_url(settings.db_url)
        log.info("open-rag-eval service on http://%s:%d (database %s, auth %s)", host, port, where,
                 "on" if settings.auth else "off")
        await server.serve()
    finally:
        await storage.close()
    log.info("open-rag-eval service stopped")
    return 0


def _server(config: Any) -> Any:
    """A uvicorn server that stops on SIGINT or SIGTERM and then lets ``serve`` close the database and return 0.

    uvicorn raises the signal again once it has stopped, which cancels whatever still runs (the database's
    connections closing: a ``CancelledError`` traceback on PostgreSQL) or ends the process before it closed them."""
    import uvicorn

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            original = {signum: signal.signal(signum, self.handle_exit) for signum in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for signum, handler in original.items():
                    signal.signal(signum, handler)

    return Server(config)


def work(settings: Settings, jobs: int | None) -> int:
    if settings.sqlite:
        raise ConfigError("a worker shares the queue through PostgreSQL (database_url: postgresql+asyncpg://...); "
                          "with the embedded SQLite database, 'serve' runs the jobs itself", path="database_url")
    require_server_extra(postgres=True)
    jobs = settings.runner.jobs if jobs is None else jobs
    if jobs < 1:
        raise ConfigError(f"a worker runs at least one job at a time, got {jobs} (runner.jobs or --jobs)",
                          path="--jobs")
    settings = settings.model_copy(update={"runner": settings.runner.model_copy(update={"jobs": jobs})})
    return asyncio.run(_work(settings))


async def _work(settings: Settings) -> int:
    from open_rag_eval.service.runner import Runner
    from open_rag_eval.service.storage import Storage

    storage = await Storage.open(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(signum, stop.set)
    runner = Runner(storage.engine, settings)
    log.info("worker %s: taking jobs (%d at once)", runner.worker, settings.runner.jobs)
    try:
        await runner.run(stop)
    finally:
        await storage.close()
    log.info("worker %s: stopped after %d job(s)", runner.worker, runner.finished)
    return 0
