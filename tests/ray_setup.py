"""Shared by the Ray executor tests: a simulated judge that counts the replies it answered, and can hold requests."""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from typing import Any

from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
from open_rag_eval.judge.sim_http import Request, Response

RAY_MISSING = "ray is not installed (pip install -e '.[ray]')"
START_ATTEMPTS = 5  # Ray gives its node 30 s to register (not configurable): on a loaded machine, try again


def start_ray(num_cpus: int = 2, attempts: int = START_ATTEMPTS) -> None:
    """A new local Ray instance (address "local": even while another process runs a Ray cluster on this machine).
    Ray's own start-up wait is a fixed 30 s, which a machine busy with other work can exceed: a start that timed out
    is shut down and made again, ``attempts`` times in all."""
    import logging

    import ray

    for attempt in range(1, attempts + 1):
        try:
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                     configure_logging=False)
            return
        except Exception as error:
            if "timed out during startup" not in str(error) or attempt == attempts:
                raise
            logging.getLogger(__name__).warning("Ray start-up timed out (attempt %d of %d): again", attempt,
                                                attempts)
            ray.shutdown()


class CountingJudge(SimulatedJudgeServer):
    """Counts every request body it answered (a paid call); once ``hold_after`` bodies are answered, holds the
    requests that come until ``release()`` (``holding``: the held ones not yet let go). A held request whose client
    went away meanwhile is not answered, unless ``pay_orphans``: then it counts as paid (the endpoint computed and
    charged a reply nobody received: the worst case of a worker dying mid-call). ``tokens``: the prompt and
    completion tokens of the replies it answered, as their ``usage`` said (what a run's manifest must count)."""

    def __init__(self) -> None:
        super().__init__(SimulatedServerConfig(latency_ms=2))
        self.answered: Counter[bytes] = Counter()
        self.tokens: Counter[str] = Counter()
        self.hold_after: int | None = None
        self.held = 0
        self.holding: set[bytes] = set()
        self.pay_orphans = False
        self._released = False

    def release(self) -> None:
        self._released = True

    def reset(self) -> None:
        """Hold nothing again, pay no orphans."""
        self.hold_after, self._released, self.pay_orphans = None, False, False
        self.held = 0

    async def _fate(self, request: Request, body: dict[str, Any], text: str, key: bytes, seen: int,
                    record: Any) -> Response | None:
        if self.hold_after is not None and sum(self.answered.values()) >= self.hold_after:
            self.held += 1
            digest = hashlib.sha256(key).digest()
            self.holding.add(digest)
            while not self._released:
                await asyncio.sleep(0.01)
            self.holding.discard(digest)
            if request.reader.at_eof():  # the caller died while its request was held
                if self.pay_orphans:
                    self.answered[digest] += 1
                return None
        response = await super()._fate(request, body, text, key, seen, record)
        if response is not None and response.status == 200:
            self.answered[hashlib.sha256(key).digest()] += 1
            usage = json.loads(response.body)["usage"]
            self.tokens.update(prompt_tokens=usage["prompt_tokens"], completion_tokens=usage["completion_tokens"])
        return response
