"""The simulated judge, keeping every request body it is sent (the recorded-reference tests compare them) and
answering a request that asks for a JSON-schema reply with that JSON, as a structured-output endpoint does
(``{"score": "2"}`` where the simulated judge says ``##final score: 2``). bench/vectara_reference.py records
vectara's open-rag-eval through it; tests/test_reference_vectara.py runs ours through it."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from open_rag_eval.judge.sim_http import Request, Response
from open_rag_eval.judge.simulated import RequestRecord, SimulatedJudgeServer, SimulatedServerConfig


def as_schema_reply(text: str, schema: dict[str, Any]) -> str:
    """The simulated judge's reply as the JSON object of a one-property schema."""
    ((name, _),) = schema["properties"].items()
    if name == "score":
        value: Any = re.findall(r"[0-3]", text)[-1]
    elif name == "support":
        value = text.strip().lower().replace(" ", "_")
    elif name == "answered":
        value = text.strip().lower()
    else:  # a list: nuggets, importance, assignment
        value = ast.literal_eval(text.strip())
    return json.dumps({name: value})


class RecordingJudge(SimulatedJudgeServer):
    def __init__(self, config: SimulatedServerConfig | None = None) -> None:
        super().__init__(config or SimulatedServerConfig())
        self.bodies: list[dict[str, Any]] = []

    async def _complete(self, request: Request, record: RequestRecord) -> Response | None:
        body = json.loads(request.body)
        self.bodies.append(body)
        response = await super()._complete(request, record)
        wanted = body.get("response_format") or {}
        if response is None or response.status != 200 or wanted.get("type") != "json_schema":
            return response
        reply = json.loads(response.body)
        for choice in reply["choices"]:
            choice["message"]["content"] = as_schema_reply(choice["message"]["content"], wanted["json_schema"]["schema"])
        return Response(200, json.dumps(reply).encode(), response.headers)
