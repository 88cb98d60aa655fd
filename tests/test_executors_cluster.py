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


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_two_nodes_on_400_outputs_write_what_one_process_writes(cluster: str, tmp_path: Path) -> None:
    """The two-node cluster on 400 outputs with the demo's evaluators (every trec family, BERTScore, judge
    test-retest): the local run's results.csv, summary.csv and results.json (health and controls included) byte for
    byte, and the same calls answered by the judge. Each query's question and answer are its own: two workers that
    ask one identical request at the same moment both pay it (no relay joins them; docs/scaling.md)."""
    from tests.executor_runs import assert_400_local, write_400

    with CountingJudge() as judge:
        local = write_400(tmp_path, "local", judge.base_url, distinct=True)
        assert main(["-q", "eval", "--config", str(local)]) == 0
        local_paid = sum(judge.answered.values())
        config = write_400(tmp_path, "cluster", judge.base_url,
                           {"type": "ray", "workers": 2, "worker_cpus": 1, "shard_outputs": 50}, distinct=True)
        assert main(["-q", "eval", "--config", str(config), "--ray-address", cluster]) == 0
        assert sum(judge.answered.values()) == 2 * local_paid
    assert_400_local(tmp_path / "local")
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
