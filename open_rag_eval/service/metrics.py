"""``GET /metrics``: the service for Prometheus (text exposition format, ``prometheus_client``).

What the database knows is the deployment's, whichever replica is scraped: jobs by state, the queue's depth and
the age of its oldest item, the judge's calls, tokens, cost and failed calls per profile (every attempt of every
job), failed jobs by reason. What a process measures itself is its own: the duration of each judge request it made,
per profile (``open_rag_eval_judge_request_seconds``; a ``worker`` serves its own with ``--metrics-port``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from open_rag_eval.service.db import job_usage, jobs, work_items

__all__ = ["CONTENT_TYPE", "observe_request", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
STATES = ("queued", "running", "cancelling", "completed", "incomplete", "failed", "cancelled")
_LATENCY: Any = None


def observe_request(profile: str, seconds: float) -> None:
    """One judge request of this process took ``seconds`` (nothing when prometheus_client is not installed)."""
    global _LATENCY
    if _LATENCY is None:
        try:
            from prometheus_client import Histogram
        except ImportError:
            return
        _LATENCY = Histogram("open_rag_eval_judge_request_seconds", "Judge requests made by this process, by "
                             "judge profile endpoint", ["profile"],
                             buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300))
    _LATENCY.labels(profile).observe(seconds)


async def snapshot(engine: AsyncEngine) -> dict[str, Any]:
    """The deployment's numbers, from the database."""
    now = time.time()
    async with engine.connect() as connection:
        states: dict[str, int] = dict((await connection.execute(sa.select(jobs.c.status, sa.func.count()).group_by(
            jobs.c.status))).all())
        depth, oldest = (await connection.execute(sa.select(sa.func.count(), sa.func.min(work_items.c.created)).where(
            work_items.c.status == "queued"))).one()
        usage = (await connection.execute(sa.select(
            job_usage.c.judge_profile, sa.func.sum(job_usage.c.calls), sa.func.sum(job_usage.c.prompt_tokens),
            sa.func.sum(job_usage.c.completion_tokens), sa.func.sum(job_usage.c.cost_usd)).group_by(
            job_usage.c.judge_profile))).all()
        failures: Counter[str] = Counter()
        failed_calls: Counter[str] = Counter()
        for profile, data in (await connection.execute(sa.select(job_usage.c.judge_profile, job_usage.c.data))).all():
            failed_calls[profile or ""] += int(json.loads(data).get("failures") or 0)
        for error, in (await connection.execute(sa.select(jobs.c.error).where(jobs.c.status == "failed"))).all():
            failures[(json.loads(error) or {}).get("code", "failed") if error else "failed"] += 1
    return {"states": {state: int(states.get(state, 0)) for state in sorted({*STATES, *states})},
            "queue_depth": int(depth), "queue_age": max(0.0, now - oldest) if oldest is not None else 0.0,
            "usage": [(profile or "", int(calls or 0), int(prompt or 0), int(completion or 0), float(cost or 0.0))
                      for profile, calls, prompt, completion, cost in usage],
            "failed_calls": dict(failed_calls), "failed_jobs": dict(failures)}


async def render(engine: AsyncEngine) -> bytes:
    from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    numbers = await snapshot(engine)

    class Deployment:
        def collect(self) -> Any:
            states = GaugeMetricFamily("open_rag_eval_jobs", "Jobs by state", labels=["state"])
            for state, count in numbers["states"].items():
                states.add_metric([state], count)
            yield states
            yield GaugeMetricFamily("open_rag_eval_queue_depth", "Work items waiting for a runner",
                                    value=numbers["queue_depth"])
            yield GaugeMetricFamily("open_rag_eval_queue_oldest_age_seconds", "Age of the oldest waiting work item",
                                    value=numbers["queue_age"])
            families = {name: CounterMetricFamily(f"open_rag_eval_judge_{name}", text, labels=labels)
                        for name, text, labels in (
                            ("calls", "Judge calls of every attempt of every job", ["profile"]),
                            ("tokens", "Judge tokens of every attempt of every job", ["profile", "kind"]),
                            ("cost_usd", "Judge cost in US dollars (profiles with prices)", ["profile"]),
                            ("failed_calls", "Judge calls that failed after their retries", ["profile"]))}
            for profile, calls, prompt, completion, cost in numbers["usage"]:
                families["calls"].add_metric([profile], calls)
                families["tokens"].add_metric([profile, "prompt"], prompt)
                families["tokens"].add_metric([profile, "completion"], completion)
                families["cost_usd"].add_metric([profile], cost)
                families["failed_calls"].add_metric([profile], numbers["failed_calls"].get(profile, 0))
            yield from families.values()
            failed = CounterMetricFamily("open_rag_eval_jobs_failed", "Failed jobs by reason", labels=["reason"])
            for reason, count in sorted(numbers["failed_jobs"].items()):
                failed.add_metric([reason], count)
            yield failed

    registry = CollectorRegistry()
    registry.register(Deployment())  # type: ignore[arg-type]
    return generate_latest(registry) + generate_latest(REGISTRY)
