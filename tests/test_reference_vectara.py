"""``profile: vectara`` against a recording of vectara's open-rag-eval 0.3.0 itself (bench/vectara_reference.py:
its TRECEvaluator and ConsistencyEvaluator on tests/data/reference_vectara/answers.csv through the simulated judge).

Ours runs the same CSV under vectara's own config layout through the same simulated judge, answering JSON-schema
requests in JSON as vectara's run was answered. Every request body and every metric must equal the recording's,
except the departures docs/profiles.md lists, which are asserted here with their figures. HHEM and BERTScore were
stubbed in the recording (they need model downloads) and are not compared. Nothing here installs vectara's package.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.recording_judge import RecordingJudge

DATA = Path(__file__).parent / "data" / "reference_vectara"
ROOT = Path(__file__).resolve().parent.parent
CONFIG = """
results_folder: "."
generated_answers: "answers.csv"
judge: {{model: simulated-judge, base_url: "{url}", cache: false, health: {{controls: false}}}}
evaluator:
  - type: "TRECEvaluator"
    options:
      k_values: [1, 3, 5]
      run_consistency: true
      metrics_to_run_consistency: ["mean_umbrela_score", "vital_nuggetizer_score", "citation_f1_score"]
  - type: "ConsistencyEvaluator"
    options:
      metrics:
        - rouge_score: {{}}
        - bert_score: {{}}
"""
NUGGETS = {"All": "all", "All Strict": "all_strict", "Vital": "vital", "Vital Strict": "vital_strict",
           "Weighted": "weighted", "Weighted Strict": "weighted_strict"}
CITATION = {"weighted_precision": "precision", "weighted_recall": "recall", "f1": "f1"}
SPREADS = {"mean_umbrela_score": "umbrela.mean", "vital_nuggetizer_score": "nuggets.vital",
           "citation_f1_score": "citation.f1"}
STATS = {"mean": "mean", "median": "median", "std": "std", "max_min": "range", "iqr": "iqr",
         "consistency_adjusted_index": "cai"}
# docs/profiles.md, "What the profile does not copy": q4 run 2 cites [7], a passage it does not have; vectara skips
# the citation (its statement leaves recall), ours judges it No Support: (theirs, ours)
FABRICATED = {("q4", 2, "citation.precision"): (0.75, 0.5), ("q4", 2, "citation.recall"): (0.75, 0.5),
              ("q4", 2, "citation.f1"): (0.75, 0.5)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    folder = tmp_path_factory.mktemp("reference_vectara")
    (folder / "answers.csv").write_bytes((DATA / "answers.csv").read_bytes())
    with RecordingJudge() as judge:
        (folder / "config.yaml").write_text(CONFIG.format(url=judge.base_url), encoding="utf-8")
        env = {**os.environ, "OPENAI_API_KEY": "sk-simulated", "HF_HUB_OFFLINE": "1",
               "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(folder / "config.yaml"),
                               "--output-dir", str(folder / "out")], capture_output=True, text=True, env=env,
                              timeout=600)
        bodies = list(judge.bodies)
    assert done.returncode == 0, done.stderr[-3000:]
    return bodies, json.loads((folder / "out" / "results.json").read_text(encoding="utf-8"))


def recorded() -> dict[str, Any]:
    return json.loads((DATA / "results.json").read_text(encoding="utf-8"))


def canonical(body: dict[str, Any]) -> str:
    return json.dumps(body, sort_keys=True, ensure_ascii=False)


def test_every_request_body_is_one_vectara_sent(runs: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    bodies, _ = runs
    theirs = {canonical(line["body"]): line["count"]
              for line in map(json.loads, (DATA / "requests.jsonl").read_text(encoding="utf-8").splitlines())}
    ours = Counter(canonical(body) for body in bodies)
    assert set(ours) == set(theirs)  # messages, sampling parameters, response_format and stream, as JSON
    assert (len(ours), sum(ours.values()), sum(theirs.values())) == (67, 67, 142)
    # the 75 more it sends are repeats of bodies it already sent (docs/profiles.md): a passage's UMBRELA grade again
    # for each run that retrieved it, nugget refinements after the list stopped changing, the importance of a list
    # another run of the query already had scored; ours sends each distinct request once
    repeated = Counter(json.loads(body)["response_format"]["json_schema"]["name"]
                       for body, count in theirs.items() for _ in range(count - 1))
    assert repeated == {"UMBRELAScore": 21, "Nuggets": 47, "NuggetImportance": 7}


def ours_by_output(results: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(o["query_id"], o["run"]): o for o in results["outputs"]}


def test_per_run_metrics_equal_vectaras(runs: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    outputs = ours_by_output(runs[1])
    compared, departed = 0, 0
    for query in recorded()["queries"]:
        for run, theirs in enumerate(query["runs"], start=1):
            ours = outputs[(query["query_id"], run)]
            values, departures = compare_run(query["query_id"], run, theirs, ours)
            compared, departed = compared + values, departed + departures
    # 11 outputs, 21 values each; 11 differ as listed: the weighted scores (strict or not) of outputs whose nuggets
    # are all vital, where not 0 (8), and the precision, recall and F1 of the output citing a missing passage (3)
    assert (compared, departed) == (11 * 21, 11)


def compare_run(qid: str, run: int, theirs: dict[str, Any], ours: dict[str, Any]) -> tuple[int, int]:
    """How many values were compared and how many of them differ as listed."""
    scores, errors, details = ours["scores"], ours["errors"], ours["details"]
    expected: dict[str, Any] = {}
    retrieval, generation = theirs["retrieval"], theirs["generation"]
    grades = {g["passage_id"]: g["grade"] for g in details["umbrela"]["grades"]}
    expected["grades"] = ({k.strip("[]"): v for k, v in retrieval["umbrela_scores"].items()}, grades)
    expected["umbrela.mean"] = (retrieval["mean_umbrela_score"], scores["umbrela.mean"])
    expected["umbrela.mrr"] = (retrieval["precision_metrics"]["MRR"], scores["umbrela.mrr"])
    for k in ("1", "3", "5"):
        for theirs_name, ours_name in (("precision@", f"umbrela.p@{k}"), ("AP@", f"umbrela.ap@{k}")):
            value = retrieval["precision_metrics"][theirs_name].get(k)
            expected[ours_name] = (value, scores.get(ours_name))
            if value is None:  # vectara omits k beyond the passages; ours: missing, undefined
                assert errors[ours_name].startswith("undefined: fewer than k documents"), (qid, run, ours_name)
    nuggets = generation["autonugget_scores"]
    listed = details["nuggets"]["nuggets"]
    expected["nugget list"] = ((nuggets["nuggets"], nuggets["labels"], nuggets["assignments"]),
                               ([n["text"] for n in listed], [n["importance"] for n in listed],
                                [n["assignment"] for n in listed]))
    for theirs_name, ours_name in NUGGETS.items():
        expected[f"nuggets.{ours_name}"] = (nuggets["nuggetizer_scores"][theirs_name], scores[f"nuggets.{ours_name}"])
    statements = [(s["text"], [c.strip("[]") for c in s["citations"]]) for s in theirs["statements"]]
    expected["statements"] = (statements, [(s["text"], s["citations"]) for s in details["citation"]["statements"]])
    for theirs_name, ours_name in CITATION.items():
        expected[f"citation.{ours_name}"] = (generation["citation_scores"][theirs_name], scores[f"citation.{ours_name}"])
    answered = {"yes": 1.0, "no": 0.0}[generation["no_answer_score"]["query_answered"]]
    expected["no_answer.answered"] = (answered, scores["no_answer.answered"])
    departures = 0
    for name, (their_value, our_value) in expected.items():
        if (qid, run, name) in FABRICATED:
            assert (their_value, our_value) == pytest.approx(FABRICATED[(qid, run, name)]), (qid, run, name)
            departures += 1
        elif name == "nuggets.weighted" or name == "nuggets.weighted_strict":
            departures += assert_weighted(their_value, our_value, listed, strict=name.endswith("strict"))
        elif isinstance(their_value, float) and isinstance(our_value, float):
            assert their_value == pytest.approx(our_value, abs=1e-12), (qid, run, name)
        else:  # lists, labels, grades, or a value both omit (None)
            assert their_value == our_value, (qid, run, name)
    return len(expected), departures


def assert_weighted(theirs: float, ours: float, listed: list[dict[str, Any]], strict: bool) -> bool:
    """Equal, except with no okay (or no vital) nugget: vectara divides by max(count, 1) (docs/profiles.md)."""
    credit = {"support": 1.0, "partial_support": 0.0 if strict else 0.5, "not_support": 0.0}
    vital = [credit[n["assignment"]] for n in listed if n["importance"] == "vital"]
    okay = [credit[n["assignment"]] for n in listed if n["importance"] == "okay"]
    earned = sum(vital) + 0.5 * sum(okay)
    assert theirs == pytest.approx(earned / (max(len(vital), 1) + 0.5 * max(len(okay), 1)), abs=1e-12)
    assert ours == pytest.approx(earned / (len(vital) + 0.5 * len(okay)), abs=1e-12)
    if vital and okay:
        assert theirs == pytest.approx(ours, abs=1e-12)
    return theirs != pytest.approx(ours, abs=1e-12)


def test_consistency_equals_vectaras(runs: tuple[list[dict[str, Any]], dict[str, Any]]) -> None:
    rows = {q["query_id"]: q for q in runs[1]["queries"]}
    compared = 0
    for query in recorded()["queries"]:
        ours = rows[query["query_id"]]
        if not query["consistency"]:  # two runs: vectara computes nothing; ours says it skipped the query
            assert ours["errors"]["consistency.rougeL"] == "skipped: 2 answered run(s), min_runs is 3"
            continue
        rouge = query["consistency"]["rouge_score"]
        assert ours["scores"]["consistency.rougeL"] == pytest.approx(rouge["stats"]["mean"], abs=1e-12)
        pairs = ours["details"]["consistency"]["pairs"]
        assert [p["rougeL"] for p in pairs] == pytest.approx(rouge["values"], abs=1e-12)
        compared += 1 + len(pairs)
        for theirs_name, ours_name in SPREADS.items():
            stats = query["consistency"][theirs_name]["stats"]
            for stat, our_stat in STATS.items():
                value = ours["scores"][f"consistency.{ours_name}.{our_stat}"]
                assert value == pytest.approx(stats[stat], abs=1e-12), (query["query_id"], ours_name, stat)
                compared += 1
    assert compared == 3 * (1 + 3) + 3 * 3 * 6
