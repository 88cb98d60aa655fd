"""The part every loopback test server shares: an HTTP server on a free port, served while a ``with`` block runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

T = TypeVar("T", bound="Loopback")


class Loopback:
    """Subclasses build their request handler, then call ``super().__init__(handler)``."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True

    @property
    def origin(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self: T) -> T:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def send_json(handler: BaseHTTPRequestHandler, status: int, payload: bytes, headers: Iterable[tuple[str, str]] = (),
              drip_s: float = 0.0) -> None:
    """Reply ``payload`` as JSON with its length and ``headers``; ``drip_s``: one byte at a time, that far apart."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(payload)))
    for name, value in headers:
        handler.send_header(name, value)
    handler.end_headers()
    if drip_s:
        drip(handler.wfile, payload, drip_s)
    else:
        handler.wfile.write(payload)


def drip(out: Any, payload: bytes, interval_s: float) -> None:
    """Write ``payload`` one byte at a time, ``interval_s`` apart (until the client hangs up)."""
    for byte in payload:
        out.write(bytes([byte]))
        out.flush()
        time.sleep(interval_s)
