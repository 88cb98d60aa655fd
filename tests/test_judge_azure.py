"""The judge against Azure OpenAI (``judge.azure``): a loopback server that speaks only Azure's dialect -- deployment
paths, ``api-version`` in the query, the key in the ``api-key`` header -- and misbehaves like one."""

from __future__ import annotations

from typing import Any

import pytest

from open_rag_eval.core.errors import ConfigError, JudgeCallError, JudgeUnavailable
from open_rag_eval.judge.config import JudgeConfig
from tests.openai_server import FAST, Reply, ScriptedServer, ask, azure_door, outcome, with_judge

KEY = "azure-test-key-5521"
VERSION = "2024-10-21"


def _azure(server: ScriptedServer, **overrides: Any) -> JudgeConfig:
    azure = overrides.pop("azure", {"api_version": VERSION, "deployment": "judge-dep"})
    return JudgeConfig(**{"model": "gpt-4o-mini", "base_url": server.origin, "api_key_env": "AZURE_JUDGE_KEY",
                          "cache": False, "azure": azure, **FAST, **overrides})


async def _two(judge: Any) -> list[Any]:
    return [await outcome(judge, ask("grade passage A")), await outcome(judge, ask("grade passage B"))]


def test_requests_go_to_the_deployment_with_the_api_version_and_the_api_key_header(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_JUDGE_KEY", KEY)
    script = [Reply.error(429, "Rate limit is exceeded.", retry_after="0"), Reply.ok("##final score: 3"),
              Reply.ok("##final score: 1")]
    with ScriptedServer(script, door=azure_door("judge-dep", VERSION, KEY)) as server:
        first, second = with_judge(_azure(server), _two)
    assert [first.text, second.text] == ["##final score: 3", "##final score: 1"]  # the 429 was retried
    assert len(server.completions) == 3
    seen = server.completions[0]
    headers = {name.lower(): value for name, value in seen.headers.items()}
    assert seen.path == f"/openai/deployments/judge-dep/chat/completions?api-version={VERSION}"
    assert headers["api-key"] == KEY and "authorization" not in headers  # never the key as a bearer token
    assert seen.body["messages"] == [{"role": "user", "content": "grade passage A"}]


def test_the_deployment_defaults_to_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_JUDGE_KEY", KEY)
    with ScriptedServer([Reply.ok("2")], door=azure_door("gpt-4o-mini", VERSION, KEY)) as server:
        [done, _] = with_judge(_azure(server, azure={"api_version": VERSION}), _two)
    assert done.text == "2"


@pytest.mark.parametrize(("deployment", "version", "key", "problem"), [
    ("other-dep", VERSION, KEY, "no such model or path (HTTP 404: The API deployment"),
    ("judge-dep", "2023-05-15", KEY, "no such model or path (HTTP 404: Resource not found"),
    ("judge-dep", VERSION, "a-wrong-key-0000", "refused the credentials (HTTP 401: Access denied"),
])
def test_a_wrong_deployment_version_or_key_makes_the_judge_unavailable_saying_which(
        monkeypatch: pytest.MonkeyPatch, deployment: str, version: str, key: str, problem: str) -> None:
    monkeypatch.setenv("AZURE_JUDGE_KEY", key)
    with ScriptedServer(door=azure_door("judge-dep", VERSION, KEY)) as server:
        failed, again = with_judge(_azure(server, azure={"api_version": version, "deployment": deployment}), _two)
    assert isinstance(failed, JudgeUnavailable) and problem in str(failed), failed
    assert isinstance(again, JudgeUnavailable) and len(server.completions) == 1  # one refusal stops every call
    assert key not in str(failed)


def test_a_server_error_then_a_cut_reply_through_azure_is_a_failed_judgment_with_its_reason(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AZURE_JUDGE_KEY", KEY)
    cut = Reply.shaped({"role": "assistant", "content": "##final sc"}, finish_reason="length")
    with ScriptedServer([Reply.error(503, "busy"), cut], door=azure_door("judge-dep", VERSION, KEY)) as server:
        [failed, _] = with_judge(_azure(server), _two)
    assert isinstance(failed, JudgeCallError) and "finish_reason: length" in str(failed)


def test_azure_needs_its_api_version() -> None:
    with pytest.raises(ValueError, match="api_version"):
        JudgeConfig(model="m", base_url="https://x.openai.azure.com", azure={"deployment": "d"})
    with pytest.raises(ConfigError):
        from open_rag_eval.judge.client import open_judge
        from pathlib import Path

        open_judge(JudgeConfig(model="m", base_url="https://x.openai.azure.com", api_key_env="UNSET_AZ_KEY_VAR",
                               azure={"api_version": VERSION}), base_dir=Path("."))
