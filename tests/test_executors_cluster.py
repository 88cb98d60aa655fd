"""The ray executor on a two-node cluster (``ray.cluster_utils.Cluster``, one CPU a node, one worker a node): the
same files and paid calls as a local run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from tests.executor_runs import paid_calls, result_bytes, write_config
from tests.ray_setup import RAY_MISSING, CountingJudge

ray = pytest.importorskip("ray", reason=RAY_MISSING)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    from ray.cluster_utils import Cluster

    nodes = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    nodes.add_node(num_cpus=1)
    nodes.wait_for_nodes()
    yield nodes.address
    ray.shutdown()
    nodes.shutdown()


def test_two_nodes_write_what_one_process_writes(cluster: str, tmp_path: Path) -> None:
    with CountingJudge() as judge:
        assert main(["-q", "eval", "--config", str(write_config(tmp_path, "local", base_url=judge.base_url))]) == 0
        local_paid = sum(judge.answered.values())
        config = write_config(tmp_path, "cluster", base_url=judge.base_url,
                              executor={"type": "ray", "workers": 2, "worker_cpus": 1, "shard_outputs": 3})
        assert main(["-q", "eval", "--config", str(config), "--ray-address", cluster]) == 0
        assert sum(judge.answered.values()) == 2 * local_paid
    assert len([n for n in ray.nodes() if n["Alive"]]) == 2  # a worker a node: one CPU each, one CPU a node
    assert result_bytes(tmp_path / "cluster") == result_bytes(tmp_path / "local")
    assert paid_calls(tmp_path / "cluster") == paid_calls(tmp_path / "local") == local_paid > 0


def test_an_unreachable_ray_address_fails_at_once_naming_it() -> None:
    import socket

    from open_rag_eval.core.errors import ConfigError, OpenRagEvalError
    from open_rag_eval.executors.cluster import reachable

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(OpenRagEvalError, match=f"127.0.0.1:{port} cannot be reached within 5 s"):
        reachable(f"ray://127.0.0.1:{port}", 5.0)
    with pytest.raises(OpenRagEvalError, match="cannot be reached"):
        reachable(f"127.0.0.1:{port}", 5.0)
    with pytest.raises(ConfigError, match="not a Ray address"):
        reachable("ray://:x", 1.0)
    reachable("auto", 1.0)
    reachable(None, 1.0)
    with socket.socket() as server:  # a listening port is reachable
        server.bind(("127.0.0.1", 0))
        server.listen()
        reachable(f"127.0.0.1:{server.getsockname()[1]}", 5.0)
