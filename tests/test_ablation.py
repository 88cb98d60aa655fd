"""``open-rag-eval ablate``: the grid and its variants checked at the door, the comparison table with literal
numbers (paired test, Holm across the table, best variant per metric), and the BM25 pipeline end to end -- changing
top_k changes recall and the table says so with a p-value -- resumable: finished variants are reused, an unfinished
one runs again with the judge cache."""

from __future__ import annotations

import csv
import importlib.util
import json
import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from open_rag_eval.ablation.options import AblateOptions, parse_path
from open_rag_eval.ablation.table import ablation_table
from open_rag_eval.ablation.variants import build_variants, set_path
from open_rag_eval.cli import main
from open_rag_eval.config import load_config
from open_rag_eval.core.errors import ConfigError
from open_rag_eval.report.data import ResultSet, Row

needs_bm25 = pytest.mark.skipif(importlib.util.find_spec("bm25s") is None,
                                reason="bm25s is not installed (extra 'bm25')")
CONFIGS = Path(__file__).resolve().parent.parent / "configs"


def test_parse_path() -> None:
    assert parse_path("connector.options.top_k") == ["connector", "options", "top_k"]
    assert parse_path("evaluators[0].alpha") == parse_path("evaluators.0.alpha") == ["evaluators", 0, "alpha"]
    for bad in ("", ".a", "a..b", "[0].a", "a.[", "a b.c]"):
        with pytest.raises(ValueError, match="is not a config path"):
            parse_path(bad)


@pytest.mark.parametrize(("section", "message"), [
    ({"grid": {}}, "at least 1 item"),
    ({"grid": {"connector.queries": ["a.csv", "b.csv"]}}, "cannot vary: every variant runs on the same queries"),
    ({"grid": {"input": ["a.csv"]}}, "cannot vary"),
    ({"grid": {"output_dir": ["x"]}}, "cannot vary"),
    ({"grid": {"evaluators[0]": [{"type": "golden"}]}}, "cannot vary"),
    ({"grid": {"evaluators[1].type": ["golden"]}}, "cannot vary"),
    ({"grid": {"connector.options.top_k": []}}, "has no values"),
    ({"grid": {"connector.options.top_k": [1, 1]}}, "lists a value twice"),
    ({"grid": {"a.b": list(range(9)), "a.c": list(range(8))}}, "makes 72 variants; at most 64"),
    ({"grid": {"a.b": [1, 2]}, "baseline": {"a.c": 1}}, "baseline names 'a.c', which is not in the grid"),
    ({"grid": {"a.b": [1, 2]}, "baseline": {"a.b": 3}}, "baseline a.b: 3 is not one of the grid's values"),
    ({"grid": {"a.b": [1]}, "alpha": 1.5}, "less than 1"),
])
def test_bad_ablate_sections(section: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        AblateOptions.model_validate(section)


def test_set_path_creates_mappings_and_refuses_what_is_not_there() -> None:
    config: dict[str, Any] = {"connector": {"type": "bm25"}, "evaluators": [{"type": "golden"}]}
    set_path(config, "connector.options.top_k", 5)
    set_path(config, "evaluators[0].k_values", [1, 2])
    assert config == {"connector": {"type": "bm25", "options": {"top_k": 5}},
                      "evaluators": [{"type": "golden", "k_values": [1, 2]}]}
    for path in ("evaluators[3].alpha", "connector.type.x", "evaluators.x"):
        with pytest.raises(ConfigError) as caught:
            set_path(config, path, 1)
        assert caught.value.path == f"ablate.grid.{path}"


def _config(tmp_path: Path, grid: dict[str, list[Any]] | None = None, baseline: str = "",
            evaluators: str = "[{type: golden, k_values: [1, 3, 10], qrels: data/bm25_qrels.txt}]",
            judge: str = "") -> Path:
    shutil.copytree(CONFIGS / "data", tmp_path / "data", dirs_exist_ok=True)
    path = tmp_path / "ablate.yaml"
    path.write_text(f"output_dir: out\n{judge}connector: {{type: bm25, queries: data/bm25_queries.csv, options: "
                    f"{{corpus: data/bm25_corpus}}}}\nevaluators: {evaluators}\n"
                    f"ablate:\n  grid: {json.dumps(grid or {'connector.options.top_k': [1, 3, 5]})}\n{baseline}",
                    encoding="utf-8")
    return path


def test_variants_are_every_combination_checked_before_anything_runs(tmp_path: Path) -> None:
    config = _config(tmp_path, grid={"connector.options.top_k": [1, 3], "evaluators[0].k_values": [[1, 3], [5]]},
                     baseline="  baseline: {connector.options.top_k: 3}\n")
    variants = build_variants(load_config(config))
    assert [v.name for v in variants] == ["top_k=1, k_values=[1,3]", "top_k=1, k_values=[5]",
                                          "top_k=3, k_values=[1,3]", "top_k=3, k_values=[5]"]
    assert [v.baseline for v in variants] == [False, False, True, False]  # unnamed paths: their first value
    assert [v.folder.name for v in variants] == ["top_k=1_k_values=_1_3", "top_k=1_k_values=_5",
                                                 "top_k=3_k_values=_1_3", "top_k=3_k_values=_5"]
    assert all(v.folder.parent == (tmp_path / "out" / "ablation").resolve() for v in variants)
    assert variants[1].loaded.config.connector.options["top_k"] == 1
    assert variants[1].loaded.evaluators[0].options.k_values == [5]
    assert variants[1].loaded.config.ablate is None and len({v.loaded.digest for v in variants}) == 4
    bad = _config(tmp_path, grid={"connector.options.top_k": [3, 0]})
    with pytest.raises(ConfigError) as caught:
        build_variants(load_config(bad))
    assert caught.value.path == "connector.options.top_k" and caught.value.file.endswith("(variant top_k=0)")
    same_end = _config(tmp_path, grid={"connector.options.top_k": [1], "evaluators[0].top_k": [2]})
    with pytest.raises(ConfigError):  # the golden evaluator has no top_k: named with the variant's whole path
        build_variants(load_config(same_end))


def _set(label: str, values: dict[str, list[float | None]]) -> ResultSet:
    rows = []
    for metric, per_query in values.items():
        for index, value in enumerate(per_query):
            rows.append(Row(query_id=f"q{index}", query="", run=1, scores={metric: value}))
    return ResultSet(label=label, path=Path(label), layout="ours", rows=rows)


def test_table_literal_paired_holm_and_best() -> None:
    base = _set("k=3", {"recall": [0.5] * 8, "latency.ms": [100.0] * 8, "empty": [None] * 8})
    worse = _set("k=1", {"recall": [0.0] * 8, "latency.ms": [50.0] * 8, "empty": [None] * 8})
    same = _set("k=5", {"recall": [0.5] * 7 + [1.0], "latency.ms": [100.0] * 8, "empty": [None] * 8})
    table = ablation_table(base, [worse, base, same], ["recall", "latency.ms", "empty"])
    assert table.variants == ["k=1", "k=3", "k=5"]
    assert table.means["k=1"] == {"recall": 0.0, "latency.ms": 50.0, "empty": None}
    assert table.means["k=5"]["recall"] == pytest.approx(0.5625)
    rows = {(r["variant"], r["metric"]): r for r in table.rows}
    recall = rows[("k=1", "recall")]
    assert (recall["n"], recall["diff"], recall["ci95_low"], recall["ci95_high"]) == (8, -0.5, -0.5, -0.5)
    assert recall["p_value"] == pytest.approx(2 / 256, abs=0.01)  # 8 sign flips all alike: 2 / 2^8
    assert recall["significant"] and recall["verdict"] == "REGRESSION"
    assert rows[("k=1", "latency.ms")]["verdict"] == "PASS (better)"  # lower is better
    assert not rows[("k=5", "recall")]["significant"]  # one query moved: p = 1
    assert ("k=1", "empty", "no query has a value on both sides") in table.skipped
    assert table.best["recall"] == {"variants": ["k=5"], "mean": 0.5625,
                                    "note": "not significantly different from the baseline"}
    assert table.best["latency.ms"]["variants"] == ["k=1"]
    assert table.best["latency.ms"]["note"] == "significantly better than the baseline"
    assert table.best["empty"] == {"variants": [], "mean": None, "note": "no variant has a value"}
    # Holm over the whole table: with 4 tests the smallest p must be under 0.05 / 4
    strict = ablation_table(base, [worse, base, same], ["recall", "latency.ms"], alpha=0.02)
    assert not any(r["significant"] for r in strict.rows)  # 2/256 = 0.0078 > 0.02 / 4


def _csv(path: Path) -> dict[tuple[str, str], dict[str, str]]:
    return {(row["variant"], row["metric"]): row for row in csv.DictReader(path.open(encoding="utf-8"))}


@needs_bm25
def test_ablate_bm25_top_k_moves_recall_with_a_p_value_and_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    config = _config(tmp_path, baseline="  baseline: {connector.options.top_k: 3}\n  metrics: [golden.recall@10, "
                     "golden.hit@10, golden.mrr, umbrela.mean]\n",
                     evaluators="[{type: golden, k_values: [1, 3, 10], qrels: data/bm25_qrels.txt}, "
                                "{type: trec, metrics: [umbrela], k_values: [1]}]",
                     judge="judge: {model: simulated-judge, simulated: {latency_ms: 0}, cache: cache.sqlite}\n")
    assert main(["ablate", "--config", str(config)]) == 0
    printed = capsys.readouterr().out
    assert "# Ablation: 3 variants, baseline `top_k=3`" in printed and "| top_k=3 (baseline) |" in printed
    root = tmp_path / "out" / "ablation"
    rows = _csv(root / "ablation.csv")
    one = rows[("top_k=1", "golden.recall@10")]
    assert float(one["diff"]) < -0.15 and float(one["p_value"]) < 0.005 and one["significant"] == "yes"
    assert one["verdict"] == "REGRESSION" and int(one["n"]) == 32
    assert float(one["mean_baseline"]) == pytest.approx(float(rows[("top_k=3", "golden.recall@10")]["mean_variant"]))
    assert float(rows[("top_k=5", "golden.recall@10")]["diff"]) > 0  # more passages, more of the relevant ones
    assert rows[("top_k=3", "golden.mrr")]["verdict"] == "baseline"
    data = json.loads((root / "ablation.json").read_text())
    assert data["best"]["golden.recall@10"]["variants"] == ["top_k=5"] and data["simulated"] is True
    assert [v["settings"] for v in data["variants"]] == [{"connector.options.top_k": k} for k in (1, 3, 5)]
    assert (root / "ablation.png").stat().st_size > 10_000 and "## Best variant per metric" in \
        (root / "ablation.md").read_text()
    for name in ("top_k=1", "top_k=3", "top_k=5"):  # each variant is a normal run folder
        assert {"results.csv", "summary.csv", "manifest.json", "report.html"} <= {p.name for p in (root / name).iterdir()}
    # a second run reuses every finished variant; an unfinished one (no manifest) runs again from the judge cache
    stamp = (root / "top_k=1" / "manifest.json").stat().st_mtime_ns
    (root / "top_k=5" / "manifest.json").unlink()
    caplog.set_level(logging.INFO)
    assert main(["ablate", "--config", str(config)]) == 0
    assert (root / "top_k=1" / "manifest.json").stat().st_mtime_ns == stamp
    assert "variant 3/3 top_k=5: running" in caplog.text and "variant 1/3 top_k=1: finished earlier" in caplog.text
    accounting = json.loads((root / "top_k=5" / "manifest.json").read_text())["accounting"]["total"]
    assert accounting["calls"] == 0 and accounting["cache_hits"] > 0
    assert _csv(root / "ablation.csv") == rows  # the same numbers, seeded
    # --fail-if-worse makes it a gate with compare's exit codes; without one a worse variant is a finding (exit 0)
    caplog.clear()
    assert main(["-q", "ablate", "--config", str(config), "--fail-if-worse", "golden.recall@10"]) == 1
    assert "gates: REGRESSION (golden.recall@10 (top_k=1) REGRESSION, golden.recall@10 (top_k=5) PASS)" in caplog.text
    # hit@10: 1.000 -> 0.813 with top_k 1, six queries changed: 2 / 2^6 cannot pass Holm's 0.05 / 8
    assert main(["-q", "ablate", "--config", str(config), "--fail-if-worse", "golden.hit@10"]) == 7
    assert main(["-q", "ablate", "--config", str(config), "--fail-if-worse", "golden.hit@10",
                 "--fail-if-worse", "golden.recall@10"]) == 1
    assert main(["-q", "ablate", "--config", str(config), "--fail-if-worse", "golden.recall@10:0.5"]) == 0
    assert main(["-q", "ablate", "--config", str(config), "--fail-if-worse", "golden.recal@10"]) == 3
    assert main(["-q", "ablate", "--config", str(config), "--fail-if-worse", "golden.recall@10:-1"]) == 3
    gated = _csv(root / "ablation.csv")[("top_k=1", "golden.recall@10")]  # the last written: under the 0.5 allowed
    assert gated["verdict"] == "PASS" and "no drop beyond the 0.5 allowed" in gated["reason"]
    # --list names each variant, its folder and whether it is finished; a changed config runs again
    capsys.readouterr()
    assert main(["ablate", "--config", str(config), "--list"]) == 0
    assert "top_k=3 (baseline): " in capsys.readouterr().out
    text = config.read_text().replace("options: {corpus: data/bm25_corpus}", "options: {corpus: data/bm25_corpus, "
                                      "answer_sentences: 1}")
    config.write_text(text)
    assert main(["ablate", "--config", str(config), "--list"]) == 0
    assert capsys.readouterr().out.count("[to run]") == 3


def test_ablate_without_a_section_or_with_a_bad_grid_is_exit_2(tmp_path: Path) -> None:
    config = _config(tmp_path)
    text = config.read_text()
    config.write_text(text[: text.index("ablate:")])
    assert main(["ablate", "--config", str(config)]) == 2
    config.write_text(text.replace("[1, 3, 5]", "[1, -3]"))
    assert "[1, -3]" in config.read_text()
    assert main(["ablate", "--config", str(config)]) == 2
    assert main(["validate", "--config", str(config)]) == 2  # validate checks every variant too
    config.write_text(text)
    assert main(["validate", "--config", str(config)]) == 0
    assert not (tmp_path / "out").exists()  # nothing ran, nothing written


def test_bundled_config_has_a_valid_ablate_section() -> None:
    loaded = load_config(CONFIGS / "bm25.yaml")
    assert [v.name for v in build_variants(loaded)] == ["top_k=1", "top_k=3", "top_k=5"]
    assert yaml.safe_load((CONFIGS / "bm25.yaml").read_text())["ablate"]["baseline"] == {"connector.options.top_k": 3}


def test_a_second_ablation_on_the_same_folder_is_refused(tmp_path: Path) -> None:
    from open_rag_eval.store.lock import FolderLock

    config = _config(tmp_path)
    root = (tmp_path / "out" / "ablation").resolve()
    root.mkdir(parents=True)
    with FolderLock(root):
        assert main(["ablate", "--config", str(config)]) == 5
    assert list(root.iterdir()) == []  # no variant ran


def _umbrela_fails(body: dict[str, Any]) -> Any:
    """Every UMBRELA prompt gets an empty (null) reply; every no-answer prompt gets "yes"."""
    from tests.openai_server import Reply

    if "integer scale of 0 to 3" in body["messages"][-1]["content"]:
        return Reply.shaped({"role": "assistant", "content": None})
    return Reply.ok("yes")


@needs_bm25
def test_ablate_exits_6_when_a_variant_run_is_incomplete_and_a_rerun_retries_it(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from tests.openai_server import Reply, ScriptedServer

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "q.csv").write_text("query_id,query\nb01,How many eggs does a queen lay in a day?\n"
                                             "b02,How do worker bees and drones differ?\n", encoding="utf-8")
    shutil.copytree(CONFIGS / "data" / "bm25_corpus", tmp_path / "data" / "corpus")
    with ScriptedServer(responder=_umbrela_fails) as server:
        judge = {"model": "gpt-4o-mini", "base_url": server.base_url, "api_key_env": "OPEN_RAG_EVAL_TEST_NO_KEY",
                 "cache": False, "backoff_base_s": 0.001, "backoff_cap_s": 0.002}
        config = tmp_path / "ablate.yaml"
        config.write_text(yaml.safe_dump({
            "output_dir": "out", "judge": judge,
            "connector": {"type": "bm25", "queries": "data/q.csv", "options": {"corpus": "data/corpus"}},
            "evaluators": [{"type": "trec", "metrics": ["umbrela", "no_answer"], "k_values": [1]}],
            "ablate": {"grid": {"connector.options.top_k": [1, 2]}}}), encoding="utf-8")
        with caplog.at_level(logging.ERROR):
            assert main(["-q", "ablate", "--config", str(config)]) == 6
        errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
        assert errors[-1].startswith("error: incomplete variant run(s): top_k=1, top_k=2 (a judged metric failed")
        root = tmp_path / "out" / "ablation"
        for name in ("top_k=1", "top_k=2"):  # each variant: umbrela failed everywhere, no-answer judged
            manifest = json.loads((root / name / "manifest.json").read_text())
            assert manifest["complete"] is False
            failed = {item["metric"] for item in manifest["incomplete"]}
            assert "umbrela.mean" in failed and all(metric.startswith("umbrela.") for metric in failed)
        assert json.loads((root / "ablation.json").read_text())["variants"][1]["complete"] is False
        assert "**INCOMPLETE**: top_k=1, top_k=2: a judged metric failed" in (root / "ablation.md").read_text()
        rows = _csv(root / "ablation.csv")  # the comparison is still written, with what was judged
        assert rows[("top_k=2", "no_answer.answered")]["mean_variant"] == "1"
        umbrela = rows[("top_k=2", "umbrela.mean")]  # never a zero: no value, and why
        assert (umbrela["mean_variant"], umbrela["verdict"], umbrela["reason"]) == (
            "", "INCONCLUSIVE", "not compared: no query has a value on both sides")
        # the judge recovers: a rerun reuses nothing incomplete, runs both again and finishes
        server.responder = lambda body: Reply.ok("##final score: 2") if "integer scale of 0 to 3" in \
            body["messages"][-1]["content"] else Reply.ok("yes")
        caplog.clear()
        with caplog.at_level(logging.INFO):
            assert main(["-q", "ablate", "--config", str(config)]) == 0
    assert "finished earlier" not in caplog.text and "INCOMPLETE" not in (root / "ablation.md").read_text()
    assert json.loads((root / "ablation.json").read_text())["variants"][1]["complete"] is True
    assert float(_csv(root / "ablation.csv")[("top_k=2", "umbrela.mean")]["mean_variant"]) == 2.0
