"""The ``executor:`` section: where a run evaluates its outputs (docs/scaling.md).

``local`` (the default) evaluates in this process. ``ray`` splits the outputs by query into shards and evaluates
them in Ray worker actors, sharing one judge budget and one judge cache; running it is ``open_rag_eval.executors``'s
job, this module only names and checks the options.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ExecutorOptions"]


class ExecutorOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    type: Literal["local", "ray"] = "local"
    # ray: unset starts a Ray instance on this machine; "auto" joins the cluster this machine belongs to,
    # "ray://host:10001" one reached through Ray Client
    address: str | None = None
    connect_timeout_s: float = Field(30.0, gt=0, le=3600)  # a cluster at `address` not reachable within this fails
    workers: int | None = Field(None, ge=1, le=4096)  # worker actors; unset: one per CPU of the cluster
    worker_cpus: float | None = Field(None, gt=0, le=1024)  # CPUs each worker reserves; unset: fits the cluster
    shard_outputs: int = Field(500, ge=1)  # outputs per shard (whole queries); a dead worker redoes at most one
    max_restarts: int = Field(3, ge=0, le=100)  # a worker that dies is restarted and its shard retried
    # judge calls made by relay actors that outlive the workers (0: each worker makes its own): a worker that dies
    # mid-call repeats no paid call (its retried shard joins the call in flight)
    relays: int = Field(0, ge=0, le=256)
    # model metrics (HHEM, BERTScore) in a pool of actors next to the judge work; GPUs each model actor takes
    # (unset: one when the cluster has GPUs, else none) and how many model actors
    model_gpus: float | None = Field(None, ge=0, le=64)
    model_actors: int = Field(1, ge=1, le=1024)
