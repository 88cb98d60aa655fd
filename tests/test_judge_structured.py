"""Structured replies (``judge.structured: json_schema``): each task's request carries its JSON schema as
``response_format`` with the published prompt text unchanged, and the reply is read by the schema -- against a
loopback server that answers by the schema it is sent, and one that answers outside it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pandas as pd

from open_rag_eval.api import evaluate
from open_rag_eval.judge.client import open_judge
from open_rag_eval.metrics._judging import ask
from open_rag_eval.core.parsing import classify_umbrela
from open_rag_eval.prompts import reply_schema
from tests.openai_server import Reply, ScriptedServer, ask as request_of, config

DATA = Path(__file__).parent / "data"
# the answer of each schema (a reply holding exactly what the schema asks for)
ANSWERS: dict[str, Any] = {
    "umbrela_grade": {"final_score": "3"},
    "support_label": {"label": "Partial Support"},
    "no_answer": {"answer": "yes"},
}


def _by_schema(body: dict[str, Any]) -> Reply:
    wanted = body.get("response_format")
    if not isinstance(wanted, dict):
        return Reply.ok("this reply follows no schema")
    return Reply.ok(json.dumps(ANSWERS[wanted["json_schema"]["name"]]))


def test_every_task_sends_its_schema_and_the_same_prompt_text(tmp_path: Path) -> None:
    frame = pd.read_csv(DATA / "minimal.csv")
    sent: dict[bool, list[dict[str, Any]]] = {}
    for structured in (False, True):
        with ScriptedServer(responder=_by_schema) as server:
            judge = {"model": "test-model", "base_url": server.base_url, "cache": False, "max_retries": 0,
                     **({"structured": "json_schema"} if structured else {})}
            results = evaluate(frame, judge=judge, evaluators=[{"type": "trec", "metrics": ["umbrela", "citation",
                                                                                          "no_answer"]}])
        sent[structured] = [seen.body for seen in server.completions]
        if structured:
            table = results.to_pandas()
            assert table["umbrela.mean"].tolist() == [3.0, 3.0]  # {"final_score": "3"} read as grade 3
            assert table["no_answer.answered"].tolist() == [1.0, 1.0]
    def first_asks(bodies: list[dict[str, Any]]) -> list[str]:  # a re-ask carries the reply back as "assistant"
        return sorted(json.dumps(b["messages"]) for b in bodies if all(m["role"] != "assistant" for m in b["messages"]))

    assert first_asks(sent[True]) == sorted(json.dumps(b["messages"]) for b in sent[True])  # every reply was read
    assert first_asks(sent[False]) == first_asks(sent[True]) and len(sent[True]) > 6  # the published prompts as they are
    assert all("response_format" not in body for body in sent[False])
    names = {body["response_format"]["json_schema"]["name"] for body in sent[True]}
    assert {"umbrela_grade", "support_label", "no_answer"} <= names


def test_each_schema_is_strict_json_schema_data() -> None:
    for task in ("umbrela", "support", "no_answer", "nugget_create", "nugget_importance", "nugget_assign",
                 "claim_extract", "claim_verify", "rubric"):
        schema = reply_schema(task)
        assert schema is not None and schema["type"] == "json_schema", task
        body = schema["json_schema"]["schema"]
        assert body["additionalProperties"] is False and sorted(body["required"]) == sorted(body["properties"])
    assert reply_schema("no_such_task") is None


def test_a_reply_outside_the_schema_fails_saying_what_was_wrong() -> None:
    replies = [Reply.ok('{"final_score": "7"}'), Reply.ok("grade: three"), Reply.ok('{"final_score": "2"}')]

    async def main(server: ScriptedServer) -> Any:
        async with open_judge(config(server.base_url, structured="json_schema"), base_dir=Path(".")) as judge:
            def build(temperature: float, sample: int) -> Any:
                return request_of("Query: q\nPassage: p", params={"temperature": temperature}, sample=sample)
            first = await ask(judge, build, lambda text: classify_umbrela(text, "strict"), trials=2)
            second = await ask(judge, build, lambda text: classify_umbrela(text, "strict"), trials=2, sample=5)
            return first, second

    with ScriptedServer(replies) as server:
        first, second = asyncio.run(main(server))
    assert first.status == "unparsed" and first.attempts == 2
    assert first.reason == ("reply did not parse after 2 attempt(s): not JSON (a JSON object was asked for by "
                            "its schema)")  # what was wrong with the last reply
    # the re-ask sent the unreadable reply back with a message quoting what was wrong with it
    reask = server.completions[1].body["messages"]
    assert reask[:2] == [{"role": "user", "content": "Query: q\nPassage: p"},
                         {"role": "assistant", "content": '{"final_score": "7"}'}]
    assert reask[2]["role"] == "user" and reask[2]["content"].startswith(
        "Your reply could not be read: final_score: '7' is not one of the schema's values (0, 1, 2, 3).")
    assert server.completions[1].body["response_format"]["json_schema"]["name"] == "umbrela_grade"
    assert second.status == "ok" and second.value == (2, True)
