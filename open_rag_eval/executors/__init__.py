"""Executors: where a run evaluates its outputs (docs/scaling.md).

- local (no executor): this process, the one async core (``open_rag_eval.run.pipeline``);
- ``ray``: shards of whole queries in Ray worker actors, one judge budget and one judge cache for all of them
  (``cluster``, ``remote``), the same files written by the same writer; optionally every judge call made by relay
  actors that outlive the workers (``relay``);
- engine-free shards: ``eval --shard i/n`` writes a shard folder, ``merge`` joins the folders into one run's files
  (``array``).

Ray is imported only when a ray run starts (extra ``[ray]``).
"""

from __future__ import annotations

from typing import Any

from open_rag_eval.config import LoadedConfig
from open_rag_eval.config.executor import ExecutorOptions

__all__ = ["executor_for"]


def executor_for(loaded: LoadedConfig, kind: str | None = None, address: str | None = None) -> Any:
    """The executor a config (``executor:``) and the command line (``--executor``, ``--ray-address``) ask for;
    None for a local run. Raises ``MissingDependency`` (exit 2) before any work when ray is not installed."""
    options = loaded.config.executor or ExecutorOptions()
    update: dict[str, Any] = {}
    if kind is not None:
        update["type"] = kind
    if address is not None:
        update["type"], update["address"] = "ray", address
    options = options.model_copy(update=update)
    if options.type == "local":
        return None
    from open_rag_eval.executors.cluster import RayExecutor, import_ray
    from open_rag_eval.executors.shards import check_shardable

    import_ray()

    check_shardable(loaded)
    return RayExecutor(options)
