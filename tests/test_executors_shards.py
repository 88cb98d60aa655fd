"""Engine-free shards: `eval --shard i/n` + `merge` write what one run writes; shards by query; merge refuses
shards that do not make up one run. (No Ray needed.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.executors.array import parse_shard
from open_rag_eval.executors.shards import merge_results, split_by_query, ShardResult
from open_rag_eval.core.types import EvalResult, RAGOutput, Score
from tests.executor_runs import paid_calls, result_bytes, write_config


def _outputs(keys: list[tuple[str, int]]) -> list[RAGOutput]:
    return [RAGOutput(query_id=q, query=f"question {q}", run=r) for q, r in keys]


def test_shards_hold_whole_queries_contiguous_and_balanced() -> None:
    outputs = _outputs([("a", 1), ("b", 1), ("a", 2), ("c", 1), ("d", 1), ("c", 2), ("e", 1)])
    shards = split_by_query(outputs, 3)
    assert sorted(p for s in shards for p in s) == list(range(len(outputs)))
    queries = [{outputs[p].query_id for p in s} for s in shards]
    assert queries == [{"a", "b"}, {"c"}, {"d", "e"}]  # every run of a query in one shard
    assert split_by_query(outputs, 10).count([]) == 5  # more shards than queries: some are empty


def test_merge_puts_scores_back_in_one_run_s_order() -> None:
    """trec gives results query by query, golden in input order; the merge gives each its own order back."""
    outputs = _outputs([("a", 1), ("b", 1), ("a", 2), ("b", 2)])
    by_query = [("a", 1), ("a", 2), ("b", 1), ("b", 2)]

    def part(keys: list[tuple[str, int]], metric: str) -> EvalResult:
        return EvalResult(scores=[Score(query_id=q, run=r, metric=metric, value=float(i)) for i, (q, r) in
                                  enumerate(keys)])

    shards = [ShardResult(1, [part([("b", 1), ("b", 2)], "trec.x"), part([("b", 1), ("b", 2)], "golden.y")]),
              ShardResult(0, [part([("a", 1), ("a", 2)], "trec.x"), part([("a", 1), ("a", 2)], "golden.y")])]
    merged = merge_results(["query", "input"], outputs, shards)  # trec's order, golden's (their contracts)
    keys = [(s.query_id, s.run) for s in merged.scores]
    assert keys[:4] == by_query and keys[4:] == [o.key for o in outputs]


@pytest.mark.parametrize("text", ["3/3", "1", "-1/2", "a/b", "1/0", "²/3"])
def test_a_shard_is_i_of_n(text: str) -> None:
    with pytest.raises(Exception, match="i/n"):
        parse_shard(text)


@pytest.fixture(scope="module")
def three_shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[Path]]:
    """A single run and the same config as shards 0/3..2/3, merged."""
    folder = tmp_path_factory.mktemp("shards")
    single = write_config(folder, "single")
    assert main(["-q", "eval", "--config", str(single)]) == 0
    sharded = write_config(folder, "sharded")
    shard_dirs = []
    for i in range(3):
        shard_dir = folder / f"shard{i}"
        assert main(["-q", "eval", "--config", str(sharded), "--shard", f"{i}/3", "--output-dir", str(shard_dir)]) == 0
        shard_dirs.append(shard_dir)
    assert main(["-q", "merge", *map(str, reversed(shard_dirs))]) == 0
    return folder / "single", folder / "sharded", shard_dirs


def test_shards_merged_write_what_a_single_run_writes(three_shards: tuple[Path, Path, list[Path]]) -> None:
    single, merged, shard_dirs = three_shards
    assert result_bytes(merged) == result_bytes(single)
    assert paid_calls(merged) == paid_calls(single) > 0
    queries = [{o["query_id"] for line in (d / "records.jsonl").read_text().splitlines()
                for o in json.loads(line)["outputs"]} for d in shard_dirs]
    assert all(queries) and not (queries[0] & queries[1] or queries[1] & queries[2] or queries[0] & queries[2])
    manifest = json.loads((merged / "manifest.json").read_text())
    assert manifest["complete"] is True and manifest["n_outputs"] == json.loads(
        (single / "manifest.json").read_text())["n_outputs"]


def test_merge_fills_the_config_s_cache_so_a_rerun_pays_nothing(three_shards: tuple[Path, Path, list[Path]],
                                                                  tmp_path: Path) -> None:
    single, merged, shard_dirs = three_shards
    assert main(["-q", "eval", "--config", str(merged.parent / "sharded.yaml"), "--output-dir",
                 str(tmp_path / "again")]) == 0
    assert paid_calls(tmp_path / "again") == 0
    assert result_bytes(tmp_path / "again") == result_bytes(single)


def test_merge_refuses_shards_that_do_not_make_up_one_run(three_shards: tuple[Path, Path, list[Path]],
                                                           tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, _, shard_dirs = three_shards
    out = ["--output-dir", str(tmp_path / "out")]
    assert main(["-q", "merge", str(shard_dirs[0]), str(shard_dirs[1]), *out]) == 3
    assert "shard(s) 2/3 missing" in caplog.text
    assert main(["-q", "merge", *map(str, shard_dirs), str(shard_dirs[1]), *out]) == 3
    assert "given twice" in caplog.text
    other = tmp_path / "other"
    shutil.copytree(shard_dirs[2], other)
    data = json.loads((other / "shard.json").read_text())
    data["config_digest"] = "0" * 64
    (other / "shard.json").write_text(json.dumps(data))
    assert main(["-q", "merge", str(shard_dirs[0]), str(shard_dirs[1]), str(other), *out]) == 3
    assert "another config" in caplog.text
    assert main(["-q", "merge", str(tmp_path), *out]) == 3
    assert "not a shard folder" in caplog.text
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_budget_is_shared_by_demand_and_never_given_out_twice() -> None:
    from open_rag_eval.executors.remote import split

    assert split(32, {"a": 40, "b": 40}) == {"a": 16, "b": 16}
    assert split(32, {"a": 4, "b": 40, "c": 40}) == {"a": 4, "b": 14, "c": 14}  # the small one gets what it wants
    assert split(32, {"a": 0, "b": 40}) == {"a": 0, "b": 32}  # an idle worker holds nothing
    assert split(7, {"a": 9, "b": 9, "c": 9}) == {"a": 3, "b": 2, "c": 2}
    assert sum(split(5, {w: 100 for w in "abcde"}).values()) == 5


def test_executor_ray_without_ray_installed_is_exit_2_before_any_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setitem(__import__("sys").modules, "ray", None)  # import ray raises ImportError
    config = write_config(tmp_path, "noray")
    assert main(["-q", "eval", "--config", str(config), "--executor", "ray"]) == 2
    assert "pip install 'open-rag-eval-trec[ray]'" in caplog.text
    assert not (tmp_path / "noray").exists()


def test_a_config_ray_cannot_shard_is_exit_2(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = write_config(tmp_path, "taped", judge={"record": "tape.jsonl"})
    assert main(["-q", "eval", "--config", str(config), "--shard", "0/2"]) == 2
    assert "judge.record" in caplog.text and not (tmp_path / "taped").exists()


def test_merged_shards_of_a_judge_that_answers_as_the_simulated_one_are_labelled_simulated(tmp_path: Path) -> None:
    """The config names an endpoint, not ``judge.simulated``; the endpoint is a `simulate-judge` server. Its
    fingerprints reach the merge with the shards' accounting, and the run, deciding once, is labelled simulated."""
    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

    with SimulatedJudgeServer(SimulatedServerConfig()) as server:
        config = write_config(tmp_path, "named", base_url=server.base_url, consistency=False, metrics=("umbrela",))
        shards = [tmp_path / f"shard{i}" for i in range(2)]
        for i, shard in enumerate(shards):
            assert main(["-q", "eval", "--config", str(config), "--shard", f"{i}/2", "--output-dir", str(shard)]) == 0
        assert main(["-q", "merge", *map(str, shards), "--output-dir", str(tmp_path / "merged")]) == 0
    manifest = json.loads((tmp_path / "merged" / "manifest.json").read_text())
    assert manifest["simulated"] is True and manifest["judge"]["simulated"] is True
    rows = (tmp_path / "merged" / "results.csv").read_text().splitlines()
    assert rows[0].endswith(",simulated_judge") and len(rows) > 1 and all(r.endswith(",true") for r in rows[1:])


def test_a_golden_run_shards_and_merges_into_what_a_single_run_writes(tmp_path: Path) -> None:
    """The golden evaluator's options have no metric list (it computes all of them): splitting the stages read it
    as one and `eval --shard` stopped with a TypeError."""
    rows = [{"query_id": f"q{i}", "query": f"question {i}", "run": run, "answer": f"answer {i} [1].",
             "passages": [{"id": "1", "text": f"passage {i}"}, {"id": "2", "text": "other"}],
             "relevant_ids": {"1": 1}, "expected_keywords": [f"{i}"]} for i in range(6) for run in (1, 2)]
    data = tmp_path / "outputs.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config = tmp_path / "golden.yaml"
    config.write_text(json.dumps({"input": str(data), "output_dir": str(tmp_path / "single"),
                                  "evaluators": [{"type": "golden", "k_values": [1]}]}), encoding="utf-8")
    assert main(["-q", "eval", "--config", str(config)]) == 0
    shards = [tmp_path / f"shard{i}" for i in range(2)]
    for i, shard in enumerate(shards):
        assert main(["-q", "eval", "--config", str(config), "--shard", f"{i}/2", "--output-dir", str(shard)]) == 0
    assert main(["-q", "merge", *map(str, shards), "--output-dir", str(tmp_path / "merged")]) == 0
    assert result_bytes(tmp_path / "merged") == result_bytes(tmp_path / "single")
    assert "golden.ndcg@1" in (tmp_path / "merged" / "results.csv").read_text(encoding="utf-8").splitlines()[0]


def _config_400(folder: Path, name: str) -> Path:
    config = {"input": "data.csv", "output_dir": name,
              "judge": {"model": "simulated-judge", "simulated": {"latency_ms": 0}, "cache": f"{name}-cache.sqlite"},
              "evaluators": [{"type": "trec", "k_values": [1, 3], "metrics": ["umbrela", "citation", "no_answer"]},
                             {"type": "consistency", "metrics": ["rouge", "dispersion"]}]}
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    return path


def test_400_outputs_in_three_shards_merged_write_the_local_run_s_files_controls_and_calls_included(
        tmp_path: Path) -> None:
    """The judge-health controls are asked once per run wherever it is evaluated: merge asks them (the shards do
    not), so results.csv, summary.csv and results.json (health and controls included) and the paid calls equal the
    local run's."""
    from tests.test_csv_windows import _csv, _rows

    (tmp_path / "data.csv").write_text(_csv(_rows(160)), encoding="utf-8")
    assert main(["-q", "eval", "--config", str(_config_400(tmp_path, "local"))]) == 0
    sharded = _config_400(tmp_path, "sharded")
    folders = [tmp_path / f"shard{i}" for i in range(3)]
    for i, folder in enumerate(folders):
        assert main(["-q", "eval", "--config", str(sharded), "--shard", f"{i}/3", "--output-dir", str(folder)]) == 0
    assert main(["-q", "merge", *map(str, folders)]) == 0
    local = json.loads((tmp_path / "local" / "manifest.json").read_text(encoding="utf-8"))
    assert local["n_outputs"] == 400
    controls = local["health"]["controls"]
    assert controls["items"] and not str(controls["state"]).startswith("not run"), controls["state"]
    assert result_bytes(tmp_path / "sharded") == result_bytes(tmp_path / "local")
    assert paid_calls(tmp_path / "sharded") == paid_calls(tmp_path / "local") > 0


def test_an_evaluator_reading_a_results_folder_of_its_own_cannot_be_sharded(tmp_path: Path) -> None:
    """Its contract says it reads a results folder (``reads``: results): a shard of the outputs would not be it."""
    from open_rag_eval.config import load_config
    from open_rag_eval.core.errors import ConfigError
    from open_rag_eval.executors.shards import check_shardable

    path = write_config(tmp_path, "own")
    config = json.loads(path.read_text(encoding="utf-8"))
    config["evaluators"] = [{"type": "consistency", "metrics": ["rouge"], "results_dir": "earlier"}]
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"evaluators\[0\]: the consistency evaluator reads its own data"):
        check_shardable(load_config(path))
    config["evaluators"] = [{"type": "consistency", "metrics": ["rouge"]}]
    path.write_text(json.dumps(config), encoding="utf-8")
    check_shardable(load_config(path))


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_400_outputs_of_the_demo_s_evaluators_in_three_shards_write_the_local_run_s_files_and_pay_its_calls(
        tmp_path: Path) -> None:
    """The array path (``eval --shard i/3`` then ``merge``) on 400 outputs with every trec family, BERTScore and
    judge test-retest (the shards' nugget lists carried to the merge's test-retest): results.csv, summary.csv and
    results.json (health and controls included) equal the local run's byte for byte, and the judge answers the
    same calls for each (each config with its own cache)."""
    from tests.executor_runs import assert_400_local, write_400
    from tests.ray_setup import CountingJudge

    with CountingJudge() as judge:
        assert main(["-q", "eval", "--config", str(write_400(tmp_path, "local", judge.base_url))]) == 0
        local_paid = sum(judge.answered.values())
        sharded = write_400(tmp_path, "sharded", judge.base_url)
        folders = [tmp_path / f"shard{i}" for i in range(3)]
        for i, folder in enumerate(folders):
            assert main(["-q", "eval", "--config", str(sharded), "--shard", f"{i}/3", "--output-dir", str(folder)]) == 0
        assert main(["-q", "merge", *map(str, folders)]) == 0
        assert sum(judge.answered.values()) == 2 * local_paid
    assert_400_local(tmp_path / "local")
    assert result_bytes(tmp_path / "sharded") == result_bytes(tmp_path / "local")
    assert paid_calls(tmp_path / "sharded") == paid_calls(tmp_path / "local") == local_paid > 0



def test_stages_split_model_metrics_as_the_contract_declares(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """trec's HHEM goes to the model stage and its judged metrics to the shards (``Contract.model_split``);
    consistency's BERTScore is scored in the model stage and handed to it in the driver (``Contract.model_scores``);
    an evaluator that declares model metrics but no split keeps them in its shards."""
    from dataclasses import replace

    from open_rag_eval.config import load_config_text
    from open_rag_eval.evaluators.base import Contract
    from open_rag_eval.evaluators.consistency import ConsistencyEvaluator, ConsistencyOptions
    from open_rag_eval.evaluators.trec import TrecEvaluator
    from open_rag_eval.executors.shards import stages

    loaded = load_config_text(json.dumps({
        "input": "data.csv", "judge": {"model": "simulated-judge"},
        "evaluators": [{"type": "trec", "metrics": ["umbrela", "hhem", "citation"]},
                       {"type": "consistency", "metrics": ["rouge", "bertscore"]}]}), base_dir=tmp_path)
    plan = stages(loaded)
    assert [spec.options.metrics for spec in plan.shards] == [["umbrela", "citation"]]
    assert {i: spec.options.metrics for i, spec in plan.models.items()} == {0: ["hhem"]}
    assert list(plan.bertscore) == [1] and [spec.options.metrics for spec in plan.driver] == [["rouge", "bertscore"]]
    assert loaded.evaluators[0].options.metrics == ["umbrela", "hhem", "citation"]  # the run's own spec untouched

    consistency = ConsistencyEvaluator(ConsistencyOptions(metrics=["bertscore"]))
    take = consistency.contract().model_scores
    assert take is not None
    take("the model is not installed")
    assert consistency.bertscored == "the model is not installed"

    declared = TrecEvaluator.contract
    monkeypatch.setattr(TrecEvaluator, "contract", lambda self: replace(declared(self), model_split=None))
    plan = stages(loaded)
    assert [spec.options.metrics for spec in plan.shards] == [["umbrela", "hhem", "citation"]] and plan.models == {}
    assert isinstance(TrecEvaluator().contract(), Contract)
