"""A run's first judge requests sent while the program is still loading, and handed to the run when it asks them.

Before a run's first request the program spends about half a second importing its modules and validating its
config; a judge answering in 0.3 s sits idle all that time. When the run's first requests can be known from its
config file and the first rows of its input (``cli.head_start`` says when), the program writes them, byte for byte
as the run will, each on a new connection to the judge from a thread -- with the standard library only, before any
HTTP package has loaded. When the run later asks one of those requests, its keep-alive pool (``judge.http11``)
takes the connection over and reads the reply there, with the deadline counted from the moment the request was
sent: the request is sent once, and the reply is read, checked, retried, cached and counted as every other.

A request the run asks before the thread has sent it is never sent here (the run sends it). A connection that
fails ends the head start: the run sends the rest. Requests sent and never asked (a run stopped by a bad config
before judging) are closed at ``finish``, which says how many: the judge may have answered them, and paid calls
are never hidden. Only ``http://`` endpoints: a TLS connection cannot move from a thread's socket into asyncio.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, wait

__all__ = ["HeadStart", "Sent", "begin", "claim", "close_sent", "finish"]

log = logging.getLogger("open_rag_eval.judge")

FINISH_WAIT_S = 1.0  # how long ``finish`` waits for a request being written to be sent or fail
Sent = tuple[socket.socket, float]  # a connection with one request written on it, and when writing began


class HeadStart:
    """``requests`` (whole HTTP/1.1 requests, head and body) to ``host``:``port``, each on its own connection, in
    order, from a thread; ``connect_s`` bounds each connection's set-up."""

    def __init__(self, host: str, port: int, requests: Sequence[bytes], *, connect_s: float) -> None:
        self.origin, self.connect_s = (host, port), connect_s
        self._waiting: dict[bytes, Future[Sent | None]] = {request: Future() for request in requests}
        self._order = list(self._waiting.items())
        self._thread = threading.Thread(target=self._send_all, name="head-start", daemon=True)
        self._sent = 0

    def start(self) -> HeadStart:
        self._thread.start()
        return self

    def claim(self, host: str, port: int, request: bytes) -> Future[Sent | None] | None:
        """The connection ``request`` was sent on (once its writing has ended; None in it when sending failed),
        or None when it is not one of these requests or was not sent yet (then it never will be)."""
        if (host, port) != self.origin:
            return None
        future = self._waiting.pop(request, None)
        if future is None or future.cancel():
            return None
        return future

    def finish(self) -> tuple[int, int]:
        """Stop: requests not sent yet never will be; those sent (or being written) and never claimed are closed.
        Returns how many were sent, and how many of those were never claimed."""
        waiting, self._waiting = self._waiting, {}
        begun = [future for future in waiting.values() if not future.cancel()]
        wait(begun, timeout=FINISH_WAIT_S)  # the one being written, if any
        unclaimed = 0
        for future in begun:
            if not future.done() or future.result() is not None:
                unclaimed += 1
            future.add_done_callback(close_sent)  # now, or once its writing ends
        return self._sent, unclaimed

    def _send_all(self) -> None:
        failed = False
        for request, future in self._order:
            if not future.set_running_or_notify_cancel():
                continue  # the run asked it first, or finished
            future.set_result(None if failed else self._send(request))
            failed = failed or future.result() is None

    def _send(self, request: bytes) -> Sent | None:
        began = time.monotonic()
        try:
            connection = socket.create_connection(self.origin, timeout=self.connect_s)
        except OSError as error:
            log.debug("head start: no connection to the judge (%s): the run sends its requests itself", error)
            return None
        try:
            connection.sendall(request)
        except OSError as error:
            connection.close()
            log.debug("head start: a request could not be written (%s): the run sends it itself", error)
            return None
        self._sent += 1
        return connection, began


def close_sent(future: Future[Sent | None]) -> None:
    """Close the connection a request was sent on (a done future of ``claim``), if it was."""
    sent = None if future.cancelled() else future.result()
    if sent is not None:
        sent[0].close()


_active: HeadStart | None = None


def begin(head_start: HeadStart) -> None:
    """Start ``head_start`` as this process's (the program's own: one run per process)."""
    global _active
    _active = head_start.start()


def claim(host: str, port: int, request: bytes) -> Future[Sent | None] | None:
    """``HeadStart.claim`` of this process's head start (None when it has none)."""
    return None if _active is None else _active.claim(host, port, request)


def finish() -> tuple[int, int] | None:
    """``HeadStart.finish`` of this process's head start, which ends (None when it had none)."""
    global _active
    head_start, _active = _active, None
    return None if head_start is None else head_start.finish()
