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
