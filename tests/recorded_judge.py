"""A loopback OpenAI-compatible server that answers from a recorded corpus of real request/reply bodies.

``RecordedJudge(path, runs)`` indexes the recorded exchanges of the given experiments by their request's messages;
a request the corpus holds gets the recorded reply body (the first recorded 200 of those messages), any other gets
HTTP 400 naming the miss. Nothing is made up: a request nobody recorded fails.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.openai_server import Reply, ScriptedServer

__all__ = ["CORPUS", "RecordedJudge", "recorded_replies"]

CORPUS = Path(__file__).resolve().parent / "data" / "real_judge" / "qwen2.5-coder-0.5b-instruct.jsonl"


def _rows(path: Path, runs: Sequence[str]) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [r for r in rows if r["run"] in runs and r["status"] == 200 and isinstance(r["response"], dict)]


def _key(messages: Any) -> str:
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


def recorded_replies(path: Path = CORPUS, runs: Sequence[str] = ("trec", "calib")) -> list[str]:
    """The reply texts of the recorded exchanges of ``runs``."""
    return [r["response"]["choices"][0]["message"]["content"] for r in _rows(path, runs)]


class RecordedJudge(ScriptedServer):
    def __init__(self, path: Path = CORPUS, runs: Sequence[str] = ("trec", "calib")) -> None:
        self.bodies: dict[str, dict[str, Any]] = {}
        for row in _rows(path, runs):
            self.bodies.setdefault(_key(row["request"]["messages"]), row["response"])
        self.hits = self.misses = 0
        super().__init__(responder=self._answer)

    def _answer(self, body: dict[str, Any]) -> Reply:
        found = self.bodies.get(_key(body.get("messages")))
        if found is None:
            self.misses += 1
            return Reply.error(400, "the recorded corpus holds no reply to this request")
        self.hits += 1
        return Reply(200, found)
