"""OpenTelemetry traces of the service's jobs: a span per job, one per stage as its child, one per judge call.

Optional and off by default: the ``[otel]`` extra installs the packages, and tracing is on only when the standard
variables ask for it (``OTEL_TRACES_EXPORTER`` other than ``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` /
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``). The OTLP/HTTP exporter then reads its endpoint, headers and timeout from
the same variables; ``OTEL_TRACES_EXPORTER=console`` prints spans instead. Without the packages tracing is simply
off. Spans carry ids and names only (job id, tenant, stage, judge task, cached): never URLs, keys or server paths,
and a failed judge call's span names the error's kind, not its message.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from open_rag_eval.core.progress import Progress

__all__ = ["TracedJudge", "TracedProgress", "configured_tracer", "wanted"]

log = logging.getLogger(__name__)

NAME = "open_rag_eval.service"
_tracer: Any = None
_made = False


def wanted(env: Mapping[str, str]) -> bool:
    """Whether the ``OTEL_*`` variables in ``env`` ask for traces."""
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none" or env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    return bool(exporter or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def configured_tracer(env: Mapping[str, str] | None = None) -> Any | None:
    """The process's tracer when the environment asks for traces and the packages are installed; None otherwise.
    Made once per process (its exporter sends spans in the background until the process ends)."""
    global _tracer, _made
    if _made:
        return _tracer
    _made = True
    env = os.environ if env is None else env
    if not wanted(env):
        return None
    try:
        _tracer = _make(env)
    except ImportError:
        log.warning("OTEL_* variables ask for traces but the [otel] extra is not installed: tracing is off")
    return _tracer


def _make(env: Mapping[str, str]) -> Any:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter

    resource = Resource.create({} if env.get("OTEL_SERVICE_NAME") else {"service.name": "open-rag-eval"})
    provider = TracerProvider(resource=resource)
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "console":
        exporter: Any = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    log.info("tracing on: spans go to the %s exporter", "console" if isinstance(exporter, ConsoleSpanExporter)
             else "OTLP/HTTP")
    return provider.get_tracer(NAME)


def _context(span: Any) -> Any:
    from opentelemetry import trace

    return trace.set_span_in_context(span)


def _error(span: Any, kind: str) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, kind))


class TracedProgress(Progress):
    """A job's progress that also opens a span per stage (a child of the job's span) from ``begin`` to ``end``."""

    def __init__(self, tracer: Any, job_span: Any) -> None:
        super().__init__()
        self._tracer, self._job_span = tracer, job_span
        self._spans: dict[str, Any] = {}

    def begin(self, stage: str, step: str = "") -> None:
        super().begin(stage, step)
        if stage not in self._spans:
            self._spans[stage] = self._tracer.start_span(f"stage {stage}", context=_context(self._job_span),
                                                         attributes={"stage": stage})

    def end(self, stage: str) -> None:
        super().end(stage)
        span = self._spans.pop(stage, None)
        if span is not None:
            span.end()

    def parent(self) -> Any:
        """The span a judge call belongs to: the running stage's, else the job's."""
        return self._spans.get(self.stage or "", self._job_span)

    def close(self) -> None:
        """End the spans of stages a stopped or failed run never ended."""
        for span in self._spans.values():
            span.end()
        self._spans.clear()


class TracedJudge:
    """A job's judge whose every ``complete`` is a span (task, cached) under the running stage's span."""

    def __init__(self, inner: Any, tracer: Any, progress: TracedProgress) -> None:
        self._inner, self._tracer, self._progress = inner, tracer, progress

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def complete(self, request: Any) -> Any:
        task = str(getattr(request, "task", "") or "")
        span = self._tracer.start_span("judge call", context=_context(self._progress.parent()),
                                       attributes={"judge.task": task})
        try:
            completion = await self._inner.complete(request)
        except BaseException as error:
            _error(span, type(error).__name__)
            raise
        else:
            span.set_attribute("judge.cached", bool(getattr(completion, "cached", False)))
            return completion
        finally:
            span.end()
