"""OpenTelemetry traces of a job: a small job run by the service's runner with the simulated judge gives a job span,
its stages as children, and a span per judge call (task, cached) under its stage; nothing in them names a server
path. Which ``OTEL_*`` variables turn tracing on, and that it stays off without them."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the [server] extra is not installed")
pytest.importorskip("aiosqlite", reason="the [server] extra is not installed")
pytest.importorskip("opentelemetry.sdk", reason="the [otel] extra is not installed")

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from open_rag_eval.service import jobs, tracing  # noqa: E402
from open_rag_eval.service.intake import Inputs, JobRequest, prepare  # noqa: E402
from open_rag_eval.service.runner import Runner  # noqa: E402
from open_rag_eval.service.settings import Settings  # noqa: E402
from open_rag_eval.service.storage import Storage  # noqa: E402
from tests.service_server import SIMULATED  # noqa: E402

TREC = {"evaluators": [{"type": "trec"}]}


def outputs_jsonl(n: int) -> str:
    lines = []
    for i in range(n):
        docs = [{"id": f"d{j}", "text": f"Fact {j} about topic {i}: it is studied widely."} for j in range(3)]
        answer = [{"text": f"Topic {i} is studied widely.", "citations": ["d0"]},
                  {"text": f"Fact {i} matters.", "citations": ["d1"]}]
        lines.append(json.dumps({"query_id": f"q{i}", "query": f"What about topic {i}?", "run": 1,
                                 "passages": docs, "answer": answer}))
    return "\n".join(lines) + "\n"


def run_one_job(folder: Path, tracer: Any) -> tuple[str, dict[str, Any]]:
    settings = Settings.model_validate({"data_dir": str(folder / "data"), "judge_profiles": {"sim": SIMULATED},
                                        "runner": {"jobs": 1, "poll_s": 0.05, "heartbeat_s": 0.2}})

    async def main() -> tuple[str, dict[str, Any]]:
        storage = await Storage.open(settings)
        try:
            job_id = jobs.new_id()
            request = JobRequest(config=TREC, inputs=Inputs(format="jsonl", data=outputs_jsonl(2)),
                                 judge_profile="sim")
            prepared = prepare(settings, "tenant-7", job_id, request)
            await jobs.create_job(storage.engine, job_id=job_id, tenant="tenant-7", kind="eval",
                                  request={"body": {}, "prepared": prepared.model_dump()}, request_hash="h",
                                  idempotency_key=None, judge_profile="sim", n_outputs=prepared.n_outputs)
            runner, stop = Runner(storage.engine, settings, tracer=tracer), asyncio.Event()
            running = asyncio.create_task(runner.run(stop))
            for _ in range(1200):  # at most a minute (a loaded machine), usually a second
                row = await jobs.get_job(storage.engine, None, job_id)
                if row is not None and row["status"] not in ("queued", "running"):
                    break
                await asyncio.sleep(0.05)
            stop.set()
            await running
            row = await jobs.get_job(storage.engine, None, job_id)
            assert row is not None
            return job_id, dict(row)
        finally:
            await storage.close()

    return asyncio.run(main())


def test_a_job_is_a_span_with_its_stages_and_judge_calls_under_it(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    job_id, row = run_one_job(tmp_path, provider.get_tracer("test"))
    assert row["status"] == "completed", row
    spans = exporter.get_finished_spans()
    job = [span for span in spans if span.name == "job"]
    assert len(job) == 1
    (job_span,) = job
    assert job_span.attributes["job.id"] == job_id and job_span.attributes["tenant"] == "tenant-7"
    assert job_span.attributes["job.state"] == "ok" and job_span.parent is None
    stages = {span.attributes["stage"]: span for span in spans if span.name.startswith("stage ")}
    assert list(stages)[:1] == ["read"] and {"read", "trec", "write"} <= set(stages)
    for span in stages.values():
        assert span.parent is not None and span.parent.span_id == job_span.context.span_id
        assert span.context.trace_id == job_span.context.trace_id
    calls = [span for span in spans if span.name == "judge call"]
    assert calls, "no judge-call span"
    trec = stages["trec"].context.span_id
    assert all(span.parent is not None and span.parent.span_id == trec for span in calls)
    tasks = {span.attributes["judge.task"] for span in calls}
    assert {"nugget_create", "nugget_importance", "nugget_assign", "umbrela", "support"} <= tasks, tasks
    # a fresh tenant cache: every distinct request is paid for (identical ones in flight at once share one reply,
    # and are marked cached, as the judge marks them)
    paid = [span for span in calls if span.attributes["judge.task"] != "no_answer"]
    assert all(span.attributes["judge.cached"] is False for span in paid)
    text = json.dumps([dict(span.attributes or {}) for span in spans])
    assert str(tmp_path) not in text and "http" not in text


def test_a_rerun_of_the_same_job_marks_its_judge_calls_cached(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    run_one_job(tmp_path, tracer)
    first = len([span for span in exporter.get_finished_spans() if span.name == "judge call"])
    exporter.clear()
    _, row = run_one_job(tmp_path, tracer)  # same tenant, same inputs: the tenant's judge cache answers
    assert row["status"] == "completed", row
    calls = [span for span in exporter.get_finished_spans() if span.name == "judge call"]
    assert len(calls) == first and all(span.attributes["judge.cached"] is True for span in calls)


@pytest.mark.parametrize(("env", "on"), [
    ({}, False),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
    ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
    ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, False),
    ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, False),
])
def test_the_otel_variables_decide_whether_traces_are_on(env: dict[str, str], on: bool) -> None:
    assert tracing.wanted(env) is on


def test_without_otel_variables_the_runner_has_no_tracer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tracing, "_made", False)
    monkeypatch.setattr(tracing, "_tracer", None)
    for name in ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    assert tracing.configured_tracer() is None
    monkeypatch.setattr(tracing, "_made", False)
    assert tracing.configured_tracer({"OTEL_TRACES_EXPORTER": "otlp",
                                      "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}) is not None


def test_without_the_packages_tracing_is_off_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setattr(tracing, "_made", False)
    monkeypatch.setattr(tracing, "_tracer", None)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.trace", None)  # importing it raises ImportError
    assert tracing.configured_tracer({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}) is None


def test_a_failed_judge_call_is_an_error_span_naming_the_kind_not_the_message() -> None:
    from opentelemetry.trace import StatusCode

    from open_rag_eval.core.errors import JudgeCallError

    class Failing:
        async def complete(self, request: Any) -> Any:
            raise JudgeCallError("POST https://judge.internal/v1 with key sk-made-up-0000 failed")

    class Request:
        task = "umbrela"

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("test")
    job = tracer.start_span("job")
    progress = tracing.TracedProgress(tracer, job)
    progress.begin("trec")
    judge = tracing.TracedJudge(Failing(), tracer, progress)
    with pytest.raises(JudgeCallError):
        asyncio.run(judge.complete(Request()))
    progress.close()
    job.end()
    (call,) = [span for span in exporter.get_finished_spans() if span.name == "judge call"]
    assert call.status.status_code is StatusCode.ERROR and call.status.description == "JudgeCallError"
    assert call.attributes["judge.task"] == "umbrela" and "judge.cached" not in call.attributes
    assert call.parent is not None and call.parent.span_id != job.get_span_context().span_id  # under the stage
    assert not call.events  # no exception event: its message could name a URL or a key


@pytest.mark.slow
def test_a_real_server_traces_a_job_when_otel_variables_ask(tmp_path: Path) -> None:
    """``serve`` with ``OTEL_TRACES_EXPORTER=console``: the spans of a job submitted over HTTP are in its output."""
    from tests.service_server import Service, wait_status

    env = {"OTEL_TRACES_EXPORTER": "console", "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "evals-test"}
    with Service(tmp_path / "served", env=env) as service, service.client() as client:
        created = client.post("/v1/jobs", json={"config": TREC, "judge_profile": "sim",
                                                "inputs": {"format": "jsonl", "data": outputs_jsonl(1)}})
        assert created.status_code in (200, 201, 202), created.text
        job_id = created.json()["id"]
        assert wait_status(client, job_id, ("completed",))["status"] == "completed"
    log = service.log.read_text(encoding="utf-8")
    assert f'"job.id": "{job_id}"' in log and '"name": "stage trec"' in log and '"judge.task": "umbrela"' in log
    assert '"service.name": "evals-test"' in log
