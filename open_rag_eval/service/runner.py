"""The job runner: claims queued work from the database and runs it through the CLI's own pipeline.

Runs inside ``serve`` (and alone as ``worker``). A job runs ``pipeline.arun`` on its ``job.yaml`` -- the run the CLI
makes -- while a ticker stores the progress and usage, appends progress events, and stops the run when a cancel is
requested or the claim was lost; the claim itself is renewed by a ``Heartbeat`` thread, so a long CPU stretch of a
job on this loop never lets it go stale. A run killed with the process is taken up again (by the next
start in SQLite mode, by any worker once its heartbeat is stale in PostgreSQL mode): the judge cache answers every
judgment already paid for, so the resumed run calls the judge only for what was not judged.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import os
import secrets
import socket
import time
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

# the config sections whose schemas their owners register (core.sections): a bad one fails at load
import open_rag_eval.ablation.options  # noqa: F401
import open_rag_eval.diagnosis.options  # noqa: F401
import open_rag_eval.tracking.options  # noqa: F401
from open_rag_eval.core.errors import OpenRagEvalError, exit_code
from open_rag_eval.core.progress import Progress
from open_rag_eval.core.redaction import redact
from open_rag_eval.run.status import ERROR_CODE as INCOMPLETE_CODE
from open_rag_eval.run.status import RunStatus
from open_rag_eval.service import jobs
from open_rag_eval.service.budget import DeploymentBudget, ProcessBudget, budgets_for
from open_rag_eval.service.fair import FairShare, SharedJudge
from open_rag_eval.service.heartbeat import Heartbeat
from open_rag_eval.service.loop_thread import LoopThread
from open_rag_eval.service.paths import relative_text, served_files
from open_rag_eval.service.settings import Settings
from open_rag_eval.service.tracing import TracedJudge, TracedProgress, configured_tracer

__all__ = ["Runner", "RunnerThread", "worker_name"]

log = logging.getLogger(__name__)

PROGRESS_S = 0.5  # how often a running job's progress is looked at (an event only when it changed)
ERROR_CODES = {2: "bad_config", 3: "bad_input", 4: "judge_unavailable", 5: "storage", 6: INCOMPLETE_CODE, 1: "failed"}


def worker_name() -> str:
    """Unique per process start (a restarted container has the same host name and pid)."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class Runner:
    def __init__(self, engine: AsyncEngine, settings: Settings, worker: str | None = None,
                 tracer: Any | None = None) -> None:
        self.engine, self.settings = engine, settings
        self.tracer = tracer if tracer is not None else configured_tracer()  # None: tracing off (service.tracing)
        self.worker = worker or worker_name()
        self.active: dict[str, asyncio.Task[None]] = {}
        self.shares: dict[str, FairShare] = {}
        # profile -> one budget per endpoint (runner.judge_budget: deployment)
        self.budgets: dict[str, list[DeploymentBudget | ProcessBudget]] = {}
        self.recorders: dict[str, tuple[Any, Path]] = {}  # job -> (the cache keys it used, its folder)
        self.finished = 0
        self._shown: dict[str, dict[str, Any]] = {}  # job -> the progress last sent as an event
        self.heartbeat = Heartbeat(settings.db_url, self.worker, settings.runner.heartbeat_s)

    def share(self, profile: str) -> FairShare:
        if profile not in self.shares:
            slots = int(self.settings.judge_profiles[profile].get("max_concurrency", 32))
            self.shares[profile] = FairShare(slots)
        return self.shares[profile]

    def budget(self, profile: str) -> list[DeploymentBudget | ProcessBudget]:
        """The deployment-wide budget of the profile's endpoints (none with ``runner.judge_budget: process``)."""
        if self.settings.runner.judge_budget != "deployment":
            return []
        if profile not in self.budgets:
            self.budgets[profile] = budgets_for(self.engine, profile, self.settings.judge_profiles[profile],
                                                self.settings.runner.stale_after_s)
        return self.budgets[profile]

    async def run(self, stop: asyncio.Event) -> None:
        """Claim and run jobs until ``stop`` is set; running jobs are then interrupted (their claims are made
        stale at once and the work resumes elsewhere, or at the next start)."""
        limit = self.settings.runner.jobs
        await asyncio.to_thread(self.heartbeat.start)
        swept = 0.0
        try:
            while not stop.is_set():
                swept = await self._retention(swept)
                job = await self._claim() if len(self.active) < limit else None
                if job is None:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), self.settings.runner.poll_s)
                    continue
                if job["id"] in self.active:  # never run one job twice in one process
                    continue
                task = asyncio.create_task(self._run_job(job), name=f"job {job['id']}")
                self.active[job["id"]] = task
                task.add_done_callback(functools.partial(self._forget, job["id"]))
        finally:
            interrupted = list(self.active)
            for task in list(self.active.values()):
                task.cancel()
            await asyncio.gather(*self.active.values(), return_exceptions=True)
            await asyncio.to_thread(self.heartbeat.stop)
            await self._give_back(interrupted)
            for budgets in self.budgets.values():
                for budget in budgets:
                    await budget.close()

    async def _retention(self, last: float) -> float:
        """Sweep out the jobs past their tenant's retention every ``retention.every_s`` (the time of this sweep)."""
        retention = self.settings.retention
        now = time.monotonic()
        if (retention.default_days is None and not retention.tenants) or now - last < retention.every_s:
            return last
        from open_rag_eval.service.retention import sweep

        try:
            await sweep(self.engine, self.settings)
        except Exception as error:  # another replica removing the same job, a database hiccup: next time
            log.warning("retention sweep failed: %s", error)
        return now

    async def _give_back(self, job_ids: list[str]) -> None:
        """Stopping: the claims of the jobs this stop interrupted go stale at once, so another process (or the next
        start) resumes them without waiting ``stale_after_s``."""
        if not job_ids:
            return
        try:
            released = await jobs.release_claims(self.engine, self.worker, job_ids)
        except Exception as error:  # the database is gone: the claims go stale by themselves
            log.warning("handing back %d interrupted job(s) failed: %s", len(job_ids), error)
            return
        log.info("%d interrupted job(s) handed back to the queue", released)

    async def _claim(self) -> dict[str, Any] | None:
        try:
            return await jobs.claim(self.engine, self.worker, self.settings.runner.stale_after_s)
        except Exception as error:  # a database hiccup must not stop the runner
            log.warning("claiming work failed: %s", error)
            return None

    def _forget(self, job_id: str, _task: object) -> None:
        self.active.pop(job_id, None)

    async def _run_job(self, job: dict[str, Any]) -> None:
        job_id = job["id"]
        log.info("job %s: %s", job_id, "resumed" if job.get("resumed") else "started")
        span = self._job_span(job)
        progress = Progress() if span is None else TracedProgress(self.tracer, span)
        self.heartbeat.hold(job_id)  # renewed apart from this loop: a long CPU stretch of the job is no death
        work = asyncio.create_task(self._execute(job, progress))
        stopped_by: str | None = None
        try:
            while not work.done():
                await asyncio.wait({work}, timeout=min(self.settings.runner.heartbeat_s, PROGRESS_S))
                if work.done():
                    break
                if not await self._tick(job_id, progress, job.get("attempt", 1)):
                    stopped_by = await self._why_stopped(job_id)
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                    break
            await self._settle(job, work, progress, stopped_by)
        except asyncio.CancelledError:  # the process is stopping: leave the claim to go stale, resume later
            work.cancel()
            with contextlib.suppress(BaseException):
                await work
            raise
        finally:
            self.heartbeat.release(job_id)
            if span is not None:
                _end_job_span(span, progress, work, stopped_by)

    def _job_span(self, job: dict[str, Any]) -> Any | None:
        if self.tracer is None:
            return None
        attributes = {"job.id": job["id"], "job.kind": str(job.get("kind", "")),
                      "tenant": str(job.get("tenant", "")), "judge.profile": str(job.get("judge_profile", "")),
                      "job.attempt": int(job.get("attempt", 1)), "job.resumed": bool(job.get("resumed"))}
        return self.tracer.start_span("job", attributes=attributes)

    async def _note_replies(self, job_id: str, done: bool = False) -> None:
        recorder, folder = self.recorders.pop(job_id, (None, None)) if done else self.recorders.get(job_id, (None, None))
        if recorder is not None and folder is not None:
            try:
                await asyncio.to_thread(_flush, recorder, folder)
            except Exception as error:  # never in the way of the job's end
                log.warning("job %s: noting its judge replies failed: %s", job_id, error)

    async def _tick(self, job_id: str, progress: Progress, attempt: int) -> bool:
        await self._note_replies(job_id)
        snapshot = progress_snapshot(progress)
        changed = snapshot != self._shown.get(job_id)
        self._shown[job_id] = snapshot
        try:
            return await jobs.heartbeat(self.engine, job_id, self.worker, snapshot, usage_snapshot(progress),
                                        event=snapshot if changed else None, attempt=attempt)
        except Exception as error:
            log.warning("job %s: heartbeat failed: %s", job_id, error)
            return True

    async def _why_stopped(self, job_id: str) -> str:
        row = await jobs.get_job(self.engine, None, job_id)
        return "cancel" if row is not None and row["cancel_requested"] else "lost"

    async def _settle(self, job: dict[str, Any], work: asyncio.Task[Any], progress: Progress,
                      stopped_by: str | None) -> None:
        job_id = job["id"]
        self._shown.pop(job_id, None)
        await self._note_replies(job_id, done=True)
        usage, attempt = usage_snapshot(progress), job.get("attempt", 1)
        final = json.dumps(progress_snapshot(progress), sort_keys=True)
        if stopped_by == "lost":
            log.warning("job %s: another worker took over its claim; this run stopped", job_id)
            return
        if stopped_by == "cancel" or work.cancelled():
            await jobs.finish(self.engine, job_id, self.worker, "cancelled", usage=usage, attempt=attempt,
                              progress=final)
            return
        error = work.exception()
        if error is None:
            results_dir, verdict, status = work.result()
            state, why = ("completed", None) if status.complete else \
                ("incomplete", {"code": INCOMPLETE_CODE, "detail": relative_text(
                    redact(status.summary()), self.folders(json.loads(job["request"])["prepared"]))})
            await jobs.finish(self.engine, job_id, self.worker, state, why, usage=usage, attempt=attempt,
                              progress=final,
                              results_dir=str(results_dir), verdict=verdict)
        else:
            folders = self.folders(json.loads(job["request"])["prepared"])
            await jobs.finish(self.engine, job_id, self.worker, "failed", problem(error, folders),
                              usage=usage, attempt=attempt, progress=final)
        self.finished += 1

    async def _execute(self, job: dict[str, Any], progress: Progress) -> tuple[Path, str | None, RunStatus]:
        request = json.loads(job["request"])
        prepared = request["prepared"]
        loaded = _load(prepared)
        share, budget = self.share(job["judge_profile"]), self.budget(job["judge_profile"])

        def wrap(judge: Any) -> Any:
            shared = SharedJudge(judge, share, job["id"], budget, job["judge_profile"])
            self.recorders[job["id"]] = (shared.recorder, Path(prepared["job_dir"]))
            return TracedJudge(shared, self.tracer, progress) if isinstance(progress, TracedProgress) else shared

        if job["kind"] == "sweep":
            from open_rag_eval.sweeps.run import asweep

            outcome = await asweep(loaded, wrap_judge=wrap, progress=progress)  # its usage and progress too
            output_dir, verdict, status = Path(outcome.output_dir), outcome.verdict, outcome.status
        else:
            from open_rag_eval.report import write_report
            from open_rag_eval.run import pipeline

            report = await pipeline.arun(loaded, limit=request.get("limit"), progress=progress, wrap_judge=wrap,
                                         write_report=write_report)
            output_dir, verdict, status = Path(report.output_dir), None, report.status
        await asyncio.to_thread(served_files, output_dir, self.folders(prepared), job["judge_profile"])
        return output_dir, verdict, status

    def folders(self, prepared: dict[str, Any]) -> list[str | Path]:
        """The server folders a job's messages and files name relatively: its own, its config's, the data folder."""
        return [prepared["job_dir"], prepared["base_dir"], self.settings.data_path]


def _end_job_span(span: Any, progress: Progress, work: asyncio.Task[Any], stopped_by: str | None) -> None:
    """The job's span ends with the run: its state (``ok``, ``incomplete``, ``cancelled``, ``lost``, ``failed``);
    a failed run's span names the error's kind only (its message may name server files)."""
    if isinstance(progress, TracedProgress):
        progress.close()
    if stopped_by is not None or work.cancelled() or not work.done():
        state = stopped_by or "cancelled"
    elif (error := work.exception()) is not None:
        state = "failed"
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, type(error).__name__))
    else:
        state = "ok" if work.result()[2].complete else "incomplete"
    span.set_attribute("job.state", state)
    span.end()


def _flush(recorder: Any, folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    recorder.flush(folder)


def _load(prepared: dict[str, Any]) -> Any:
    from open_rag_eval.config import load_config_text

    text = Path(prepared["config_file"]).read_text(encoding="utf-8")
    return load_config_text(text, base_dir=Path(prepared["base_dir"]), file="job.yaml")


def problem(error: BaseException, hide: list[str | Path] | None = None) -> dict[str, Any]:
    """A failed job's error for clients: a stable code and the message without server paths or secrets."""
    code = ERROR_CODES.get(exit_code(error), "failed") if isinstance(error, OpenRagEvalError) else "internal"
    detail = redact(str(error)) if isinstance(error, OpenRagEvalError) else "the run failed unexpectedly"
    detail = relative_text(detail, hide or [])
    if not isinstance(error, OpenRagEvalError):
        log.error("job failed unexpectedly", exc_info=error)
    return {"code": code, "detail": detail}


def progress_snapshot(progress: Progress) -> dict[str, Any]:
    return {"stage": progress.stage, "stages": list(progress.stages), "done": dict(progress.done),
            "outputs_total": progress.outputs_total, "step": progress.steps.get(progress.stage or "", "")}


def usage_snapshot(progress: Progress) -> dict[str, Any]:
    accounting = getattr(progress.judge, "accounting", None)
    if accounting is None:
        return {}
    total = accounting.snapshot()["total"]
    keep = ("calls", "cache_hits", "deduplicated", "retries", "failures", "prompt_tokens", "completion_tokens",
            "cost_usd")
    return {name: total.get(name) for name in keep}


class RunnerThread(LoopThread):
    """The server's runner on a thread with its own event loop and database engine: a job's CPU work (reading
    inputs, scoring, writing files and the report) never holds up the requests the server's own loop answers."""

    name = "open-rag-eval job runner"

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings.db_url)
        self.settings = settings

    async def work(self, engine: AsyncEngine, stop: asyncio.Event) -> None:
        try:
            await Runner(engine, self.settings).run(stop)
        except Exception:
            log.exception("the job runner stopped unexpectedly")
