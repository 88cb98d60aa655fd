"""Structured replies (``judge.structured: json_schema``): each task's request carries its JSON schema as
``response_format`` with the published prompt text unchanged, and the reply is read by the schema -- against a
loopback server that answers by the schema it is sent, and one that answers outside it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

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
    assert first.status == "failed" and first.attempts == 2 and first.value is None  # never a default grade
    assert first.reason == ("reply outside its schema after 2 attempt(s): not JSON (a JSON object was asked for "
                            "by its schema)")  # what was wrong with the last reply
    # the re-ask sent the unreadable reply back with a message quoting what was wrong with it
    reask = server.completions[1].body["messages"]
    assert reask[:2] == [{"role": "user", "content": "Query: q\nPassage: p"},
                         {"role": "assistant", "content": '{"final_score": "7"}'}]
    assert reask[2]["role"] == "user" and reask[2]["content"].startswith(
        "Your reply could not be read: final_score: '7' is not one of the schema's values (0, 1, 2, 3).")
    assert server.completions[1].body["response_format"]["json_schema"]["name"] == "umbrela_grade"
    assert second.status == "ok" and second.value == (2, True)


# -- the forms servers take: OpenAI's json_schema, and the schema beside json_object (llama-cpp-python) ----------

LLAMA_CPP_500 = ("1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': "
                 "\"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}")


def _llama_cpp(body: dict[str, Any]) -> Reply:
    """llama-cpp-python's server as it answers: OpenAI's json_schema form is a 500 validation error naming
    response_format; ``{"type": "json_object", "schema": S}`` is answered within the schema."""
    wanted = body.get("response_format")
    if isinstance(wanted, dict) and wanted.get("type") == "json_schema":
        return Reply.error(500, LLAMA_CPP_500)
    if isinstance(wanted, dict) and wanted.get("type") == "json_object" and "schema" in wanted:
        field = next(iter(wanted["schema"]["properties"]))
        return Reply.ok(json.dumps({field: ANSWERS_BY_FIELD[field]}))
    return Reply.ok("this reply follows no schema")


ANSWERS_BY_FIELD = {"final_score": "3", "label": "Partial Support", "answer": "yes"}


def _run_demo(tmp_path: Path, base_url: str, structured: str) -> int:
    from open_rag_eval.cli import main

    config_file = tmp_path / f"{structured}.yaml"
    config_file.write_text(f"input: {DATA / 'minimal.csv'}\noutput_dir: {structured}\njudge:\n  model: llama\n"
                           f"  base_url: {base_url}\n  cache: false\n  max_concurrency: 4\n"
                           f"  structured: {structured}\nevaluators:\n  - type: trec\n"
                           "    metrics: [umbrela, citation, no_answer]\n", encoding="utf-8")
    return main(["-q", "eval", "--config", str(config_file)])


def test_a_server_that_rejects_openai_s_form_stops_the_run_at_once_with_the_form_it_takes(
        tmp_path: Path, caplog: Any) -> None:
    with ScriptedServer(responder=_llama_cpp) as server:
        code = _run_demo(tmp_path, server.base_url, "json_schema")
        sent = len(server.completions)
    assert code == 4
    assert sent <= 4  # the requests in flight when the first reply came (max_concurrency 4): none retried
    line = caplog.records[-1].getMessage()
    assert "does not take response_format {\"type\": \"json_schema\", \"json_schema\": ...} (OpenAI's form)" in line
    assert "HTTP 500" in line and "set judge.structured: json_object" in line


def test_the_schema_beside_json_object_is_the_form_llama_cpp_takes_and_its_replies_parse(tmp_path: Path) -> None:
    with ScriptedServer(responder=_llama_cpp) as server:
        code = _run_demo(tmp_path, server.base_url, "json_object")
        bodies = [seen.body for seen in server.completions]
    assert code == 0
    assert all(b["response_format"]["type"] == "json_object" and b["response_format"]["schema"]["type"] == "object"
               for b in bodies)
    assert {b["response_format"]["schema"]["required"][0] for b in bodies} == {"final_score", "label", "answer"}
    results = json.loads((tmp_path / "json_object" / "results.json").read_text(encoding="utf-8"))
    assert [o["scores"]["umbrela.mean"] for o in results["outputs"]] == [3.0, 3.0]  # {"final_score": "3"}
    assert all(not o["errors"] for o in results["outputs"])


def test_each_form_of_a_task_s_schema() -> None:
    openai, llama = reply_schema("umbrela", "json_schema"), reply_schema("umbrela", "json_object")
    assert openai is not None and llama is not None
    assert llama == {"type": "json_object", "schema": openai["json_schema"]["schema"]}
    llama["schema"]["properties"].clear()  # each call gets its own copy
    assert reply_schema("umbrela", "json_object") != llama


@pytest.mark.parametrize(("reply", "where"), [
    ('{"final_score": "2", "why": "on topic"}', "the object has property the schema does not allow: 'why'"),
    ('{"final_score": 2}', "final_score: 2 is not a string"),
    ('{"final_score": "5"}', "final_score: '5' is not one of the schema's values (0, 1, 2, 3)"),
    ('["2"]', "JSON but not an object (list)"),
])
def test_a_reply_outside_its_schema_is_a_failed_judgment_saying_where_everywhere(tmp_path: Path, reply: str,
                                                                                  where: str) -> None:
    """Every UMBRELA reply departs from its schema (even where the method's parser could read a grade from it):
    each grade is a failed judgment with where -- in results.json, the health problems the console and the report
    show -- never UMBRELA's default grade 0 and never a grade read past the schema."""
    def answer(body: dict[str, Any]) -> Reply:
        if "final_score" in body["response_format"]["schema"]["properties"]:
            return Reply.ok(reply)
        return _llama_cpp(body)

    with ScriptedServer(responder=answer) as server:
        code = _run_demo(tmp_path, server.base_url, "json_object")
    assert code == 6  # UMBRELA failed for every output: an incomplete run, its files written
    out = tmp_path / "json_object"
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    grades = [g for o in results["outputs"] for g in o["details"]["umbrela"]["grades"]]
    assert grades and all(g["grade"] is None and g["status"] == "failed" for g in grades)
    assert all(g["reason"] == f"reply outside its schema after 1 attempt(s): {where}" for g in grades)
    assert all(where in o["errors"]["umbrela.mean"] for o in results["outputs"])
    health = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["health"]
    assert health["tasks"]["umbrela"]["unparsed"] == {where: len(grades)}
    assert health["problems"][0] == (f"umbrela: {len(grades)} of {len(grades)} judgments never parsed (parse failure: "
                                     f"{where!r} x{len(grades)}; 100% > max_invalid_rate 10%)")
    assert where.split(":")[0] in (out / "report.html").read_text(encoding="utf-8")
