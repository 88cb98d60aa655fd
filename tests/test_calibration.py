"""`calibrate`: label files, pairing with the judge's labels, and the command end to end."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.calibration.compare import compare
from open_rag_eval.inputs.human_labels import Item, Judged, judged_items, read_labels
from open_rag_eval.core.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
DEMO_LABELS = ROOT / "configs" / "data" / "demo_labels"


def test_qrels_tsv_and_jsonl_labels(tmp_path: Path) -> None:
    (tmp_path / "q.txt").write_text("q1 0 p1 3\nq1 0 p2 0\n")
    (tmp_path / "l.tsv").write_text("task\tquery_id\trun\tnugget\tstatement\tpassage_id\tlabel\n"
                                    "nugget_importance\tq1\t\tThe  Sky is blue\t\t\tVital\n"
                                    "nugget_support\tq1\t2\tthe sky is blue\t\t\tpartial support\n"
                                    "citation_support\tq1\t1\t\t2\tp1\tFull Support\n")
    (tmp_path / "l.jsonl").write_text(json.dumps({"task": "citation_support", "query_id": "q1", "statement": 1,
                                                  "passage_id": "p2", "label": "NS"}) + "\n")
    assert read_labels(tmp_path / "q.txt") == {Item("umbrela", "q1", None, "p1"): 3,
                                               Item("umbrela", "q1", None, "p2"): 0}
    assert read_labels(tmp_path / "l.tsv") == {
        Item("nugget_importance", "q1", None, "the sky is blue"): "vital",
        Item("nugget_support", "q1", 2, "the sky is blue"): "partial_support",
        Item("citation_support", "q1", 1, "2:p1"): "FS"}
    assert read_labels(tmp_path / "l.jsonl") == {Item("citation_support", "q1", 1, "1:p2"): "NS"}


@pytest.mark.parametrize(("name", "text", "where"), [
    ("grade.txt", "q1 0 p1 4\n", "not an UMBRELA grade"),
    ("fields.txt", "q1 0 p1\n", "fields.txt:1"),
    ("label.tsv", "task\tquery_id\tpassage_id\tlabel\numbrela\tq1\tp1\tthree\n", "label.tsv:2: field 'label'"),
    ("task.tsv", "task\tquery_id\tlabel\nrelevance\tq1\t1\n", "task.tsv:2: field 'task'"),
    ("column.tsv", "task\tqid\tlabel\n", "unknown column(s) qid"),
    ("twice.tsv", "task\tquery_id\tpassage_id\tlabel\numbrela\tq1\tp1\t1\numbrela\tq1\tp1\t2\n", "twice.tsv:3"),
    ("missing.jsonl", '{"task": "citation_support", "query_id": "q1", "passage_id": "p", "label": "FS"}\n',
     "missing.jsonl:1: field 'statement'"),
    ("support.jsonl", '{"task": "nugget_support", "query_id": "q1", "nugget": "n", "label": "FS"}\n',
     "not a nugget_support label"),
    ("broken.jsonl", '{"task": \n', "broken.jsonl:1"),
])
def test_bad_labels_name_file_line_and_field(tmp_path: Path, name: str, text: str, where: str) -> None:
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as raised:
        read_labels(tmp_path / name)
    assert where in str(raised.value)


def _results(outputs: list[dict[str, Any]]) -> dict[str, Any]:
    return {"outputs": outputs}


def _output(query_id: str, run: int, grades: dict[str, int | None], citations: list[tuple[str, str | None]] = (),
            nuggets: list[tuple[str, str, str | None]] = ()) -> dict[str, Any]:
    return {"query_id": query_id, "run": run, "details": {
        "umbrela": {"grades": [{"passage_id": p, "grade": g, "status": "ok" if g is not None else "failed"}
                               for p, g in grades.items()]},
        "citation": {"statements": [{"judgments": [{"passage_id": p, "label": label, "fabricated": False}]}
                                    for p, label in citations]},
        "nuggets": {"nuggets": [{"text": t, "importance": imp, "assignment": a,
                                 "assignment_status": "ok" if a else "failed"} for t, imp, a in nuggets]}}}


def test_pairing_counts_failed_and_unjudged_items_and_never_compares_them() -> None:
    results = _results([_output("q1", 1, {"p1": 3, "p2": None, "p3": 1}),
                        _output("q1", 2, {"p1": 3, "p3": 1})])  # p1 and p3 graded again in run 2: one item each
    human = {Item("umbrela", "q1", None, "p1"): 3, Item("umbrela", "q1", None, "p2"): 2,
             Item("umbrela", "q1", None, "p3"): 0, Item("umbrela", "q1", None, "p9"): 1}
    [umbrela] = compare(human, list(judged_items(results)), resamples=50)
    assert (umbrela.n_pairs, umbrela.n_judge_failed, umbrela.n_not_judged) == (2, 1, 1)
    assert umbrela.confusion == [[0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 1]]
    stats = {s.name: s for s in umbrela.statistics}
    # two items, judge (3, 1) vs people (3, 0): po = 1/2, pe = 1/4 -> kappa = 1/3
    assert stats["kappa"].value == pytest.approx(1 / 3)
    assert stats["agreement"].value == pytest.approx(0.5)
    assert stats["kappa"].ci_low is None  # one query: no interval
    # both runs have the same passages' grades: identical scores on both sides, tau undefined
    assert stats["tau_systems"].value is None and "tied" in stats["tau_systems"].note


def test_system_ranking_tau_against_hand_computed_scores() -> None:
    # three runs of one query; citation credit FS=1, PS=.5, NS=0 per run, by judge and by people
    judged = [Judged(Item("citation_support", "q1", run, f"1:p{run}"), label, f"run{run}")
              for run, label in ((1, "FS"), (2, "PS"), (3, "NS"))]
    human = {Item("citation_support", "q1", 1, "1:p1"): "PS", Item("citation_support", "q1", 2, "1:p2"): "FS",
             Item("citation_support", "q1", 3, "1:p3"): "NS"}
    [citation] = compare(human, judged, resamples=50)
    tau = next(s for s in citation.statistics if s.name == "tau_systems")
    # judge (1, .5, 0) vs people (.5, 1, 0): pairs (1,2) discordant, (1,3) and (2,3) concordant -> 1/3
    assert tau.value == pytest.approx(1 / 3) and tau.n == 3
    assert citation.systems == {"run1": (1.0, 0.5), "run2": (0.5, 1.0), "run3": (0.0, 0.0)}


def _demo_eval(tmp_path: Path) -> Path:
    config = tmp_path / "demo.yaml"
    config.write_text(f"input: {ROOT / 'configs' / 'data' / 'demo.csv'}\noutput_dir: {tmp_path / 'out'}\n"
                      "judge:\n  model: simulated-judge\n  simulated: {noise_rate: 0.2, seed: 1}\n  cache: false\n"
                      "evaluators:\n  - type: trec\n    metrics: [umbrela, citation]\n")
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return config


def test_calibrate_through_the_cli_matches_scikit_learn_on_the_demo_labels(tmp_path: Path) -> None:
    metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn (the dev extra) is not installed")
    config = _demo_eval(tmp_path)
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "calibrate", "--config", str(config),
                           "--labels", str(DEMO_LABELS / "umbrela_qrels.txt"),
                           "--labels", str(DEMO_LABELS / "citation_support.tsv"), "--resamples", "200"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "kappa_quadratic" in done.stdout and "rows = judge, columns = people" in done.stdout
    rows = {(r["task"], r["statistic"]): r for r in csv.DictReader((tmp_path / "out" / "calibrate.csv").open())}

    # the judge's grades read straight from results.json, the people's straight from the qrels
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    judge = {(o["query_id"], g["passage_id"]): g["grade"] for o in results["outputs"]
             for g in o["details"]["umbrela"]["grades"]}
    people = {(q, p): int(g) for q, _, p, g in (line.split() for line in
                                                (DEMO_LABELS / "umbrela_qrels.txt").read_text().splitlines())}
    keys = sorted(people)
    assert len(keys) == 30 and set(keys) == set(judge)
    for statistic, weights in (("kappa", None), ("kappa_linear", "linear"), ("kappa_quadratic", "quadratic")):
        expected = metrics.cohen_kappa_score([judge[k] for k in keys], [people[k] for k in keys],
                                             labels=[0, 1, 2, 3], weights=weights)
        row = rows[("umbrela", statistic)]
        assert float(row["value"]) == pytest.approx(expected, abs=1e-5)
        assert float(row["ci_low"]) <= float(row["value"]) <= float(row["ci_high"]) and row["n"] == "30"
    report = json.loads((tmp_path / "out" / "calibrate.json").read_text())
    umbrela = next(t for t in report["tasks"] if t["task"] == "umbrela")
    assert sum(map(sum, umbrela["confusion"]["matrix"])) == 30
    assert {t["task"] for t in report["tasks"]} == {"umbrela", "citation_support"}
    assert report["resamples"] == 200
    # every demo query is labelled: the corrected UMBRELA mean is the people's, the mean of the 30 qrels grades
    corrected = rows[("corrected", "umbrela.mean")]
    assert float(corrected["value"]) == pytest.approx(sum(people.values()) / 30, abs=1e-6) == pytest.approx(1.5)
    assert (corrected["n"], corrected["n_unlabelled"], corrected["lambda"]) == ("6", "0", "0")
    assert float(corrected["judge_mean"]) == pytest.approx(sum(judge.values()) / 30, abs=1e-6)
    assert float(corrected["judge_bias"]) == pytest.approx(float(corrected["judge_mean"]) - 1.5, abs=1e-5)
    assert "umbrela.mean" in {c["metric"] for c in report["corrected"]} and "corrected metric" in done.stdout


def test_calibrate_without_results_or_labels_is_a_clear_error(tmp_path: Path) -> None:
    missing = subprocess.run([sys.executable, "-m", "open_rag_eval", "calibrate", "--results", str(tmp_path),
                              "--labels", str(DEMO_LABELS / "umbrela_qrels.txt")],
                             capture_output=True, text=True, timeout=120)
    assert missing.returncode == 3 and "results.json" in missing.stderr and "eval" in missing.stderr
    assert not (tmp_path / "calibrate.csv").exists()
    no_labels = subprocess.run([sys.executable, "-m", "open_rag_eval", "calibrate", "--results", str(tmp_path)],
                               capture_output=True, text=True, timeout=120)
    assert no_labels.returncode == 2 and "--labels" in no_labels.stderr
