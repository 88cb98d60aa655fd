"""A simulated judge the tests can gate: requests whose body holds a marker wait until the test lets them through,
one at a time; every other request is answered at once. Counts the replies it answered per body (a paid call)."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import Counter
from typing import Any

from open_rag_eval.judge.sim_http import Request, Response
from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

__all__ = ["GatedJudge"]


class GatedJudge(SimulatedJudgeServer):
    """``gate``: the marker (bytes) of the requests to hold (None: hold nothing); ``allow(n)`` lets ``n`` held
    requests through; ``open()`` lets every request through from now on. ``holding``: gated requests waiting now;
    ``passed``: gated requests let through so far; ``answered``: replies sent per body digest; ``answered_gated``:
    replies sent to gated requests."""

    def __init__(self, gate: bytes | None = None) -> None:
        super().__init__(SimulatedServerConfig(latency_ms=1))
        self.gate = gate
        self.answered: Counter[bytes] = Counter()
        self.answered_gated = 0
        self.holding = 0
        self.passed = 0
        self._allowance = 0
        self._open = False
        self._lock = threading.Lock()

    def allow(self, n: int = 1) -> None:
        with self._lock:
            self._allowance += n

    def open(self) -> None:
        with self._lock:
            self._open = True

    def _take(self) -> bool:
        with self._lock:
            if self._open:
                return True
            if self._allowance > 0:
                self._allowance -= 1
                return True
            return False

    async def _fate(self, request: Request, body: dict[str, Any], text: str, key: bytes, seen: int,
                    record: Any) -> Response | None:
        gated = self.gate is not None and self.gate in key
        if gated:
            self.holding += 1
            try:
                while not self._take():
                    await asyncio.sleep(0.01)
                self.passed += 1
            finally:
                self.holding -= 1
            if request.reader.at_eof():  # the caller went away while held (a cancelled job): nobody to answer
                return None
        response = await super()._fate(request, body, text, key, seen, record)
        if response is not None and response.status == 200:
            self.answered[hashlib.sha256(key).digest()] += 1
            self.answered_gated += gated
        return response
