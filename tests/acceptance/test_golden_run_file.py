"""Retrieval-only evaluation of a TREC run file against its qrels (golden ``run:`` + ``qrels:``) at every door: the
console script, the Python API and ``eval --shard`` + ``merge``. Per-query values equal ``ir_measures`` (trec_eval
through pytrec_eval) to 1e-9 for P@k, recall@k, nDCG@k, RR and AP, on 60 random queries with ties and graded
labels; every judged query of the run has its row, and only those."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.acceptance.cli import ok, rows, run

ir_measures = pytest.importorskip("ir_measures")

K_VALUES = (1, 3, 5, 10)
N_QUERIES = 60
POOL = [f"d{i}" for i in range(30)] + ["D3", "a", "zz", "doc-10"]  # strcmp tie order: "d1" < "d10" < "d2"


def _write_case(folder: Path, seed: int = 35) -> None:
    """A run of 60 judged queries (few distinct scores: many ties) and 2 unjudged ones; graded qrels (0-3)."""
    rng = random.Random(seed)
    run_lines, qrel_lines = [], []
    for q in range(N_QUERIES + 2):
        qid = f"q{q:02d}"
        retrieved = rng.sample(POOL, rng.randint(1, 20))
        for rank, docid in enumerate(retrieved, 1):
            score = rng.choice((0.0, 0.5, 1.0, 1.5, 2.0, -1.0))
            run_lines.append(f"{qid} Q0 {docid} {rank} {score} acceptance")
        if q < N_QUERIES:  # the last two are not judged: no row, as trec_eval
            judged = rng.sample(POOL, rng.randint(1, 12))
            qrel_lines += [f"{qid} 0 {docid} {rng.choice((0, 0, 1, 1, 2, 3))}" for docid in judged]
    (folder / "run.txt").write_text("\n".join(run_lines) + "\n", encoding="utf-8")
    (folder / "qrels.txt").write_text("\n".join(qrel_lines) + "\n", encoding="utf-8")


def _config(folder: Path, level: int) -> Path:
    path = folder / f"golden-run-{level}.yaml"
    path.write_text(f"output_dir: results/level-{level}\nevaluators:\n  - type: golden\n"
                    f"    k_values: [{', '.join(map(str, K_VALUES))}]\n    relevance_level: {level}\n"
                    "    run: run.txt\n    qrels: qrels.txt\n", encoding="utf-8")
    return path


def _reference(folder: Path, level: int) -> dict[str, dict[str, float]]:
    """query -> our metric name -> ir_measures' value."""
    from ir_measures import AP, RR, P, R, nDCG

    names = {"golden.mrr": RR(rel=level), "golden.ap": AP(rel=level)}
    for k in K_VALUES:
        names |= {f"golden.p@{k}": P(rel=level) @ k, f"golden.recall@{k}": R(rel=level) @ k,
                  f"golden.ndcg@{k}": nDCG @ k}
    by_measure = {measure: name for name, measure in names.items()}
    qrels = list(ir_measures.read_trec_qrels(str(folder / "qrels.txt")))
    scored = list(ir_measures.read_trec_run(str(folder / "run.txt")))
    found: dict[str, dict[str, float]] = {}
    for metric in ir_measures.iter_calc(list(names.values()), qrels, scored):
        found.setdefault(metric.query_id, {})[by_measure[metric.measure]] = metric.value
    assert len(found) == N_QUERIES and all(len(values) == len(names) for values in found.values())
    return found


def _assert_equal(table: list[dict[str, str]], reference: dict[str, dict[str, float]]) -> None:
    by_query = {row["query_id"]: row for row in table}
    assert sorted(by_query) == sorted(reference), "one row per judged query of the run, and only those"
    for qid, values in reference.items():
        for metric, value in values.items():
            assert float(by_query[qid][metric]) == pytest.approx(value, abs=1e-9), (qid, metric)


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("golden-run")
    _write_case(folder)
    return folder


@pytest.mark.parametrize("level", [1, 2])
def test_the_console_script_scores_a_run_file_as_trec_eval(case: Path, level: int) -> None:
    ok(run("eval", "--config", _config(case, level), cwd=case))
    _assert_equal(rows(case / "results" / f"level-{level}"), _reference(case, level))


def test_the_python_api_scores_a_run_file_as_trec_eval(case: Path) -> None:
    import open_rag_eval

    config = _config(case, 1)
    results = open_rag_eval.evaluate([], str(config))  # no outputs: the run file is the data
    assert results.complete
    _assert_equal([{k: str(v) for k, v in row.items()} for row in results.rows()], _reference(case, 1))


def test_shards_and_merge_score_a_run_file_as_trec_eval(case: Path) -> None:
    config = _config(case, 1)
    for index in range(3):
        ok(run("eval", "--config", config, "--shard", f"{index}/3", "--output-dir", f"shards/{index}", cwd=case))
    ok(run("merge", *(f"shards/{index}" for index in range(3)), "--output-dir", "merged", cwd=case))
    _assert_equal(rows(case / "merged"), _reference(case, 1))
    ok(run("eval", "--config", config, cwd=case))
    assert (case / "merged" / "results.csv").read_bytes() == (case / "results/level-1/results.csv").read_bytes()


def test_a_run_file_sharing_no_query_with_the_qrels_is_exit_3(case: Path) -> None:
    (case / "other-qrels.txt").write_text("x1 0 d1 1\nx2 0 d2 2\n", encoding="utf-8")
    config = case / "no-overlap.yaml"
    config.write_text("output_dir: results/no-overlap\nevaluators:\n  - type: golden\n    run: run.txt\n"
                      "    qrels: other-qrels.txt\n", encoding="utf-8")
    done = run("eval", "--config", config, cwd=case)
    assert done.returncode == 3, done.stderr
    assert "shares no query with the qrels" in done.stderr.strip().splitlines()[-1]
    assert not (case / "results" / "no-overlap").exists()
