"""End to end: the peer's CSV layout -> `open-rag-eval eval` -> the loopback simulated judge -> result files."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from open_rag_eval.cli import main

DATA = Path(__file__).parent / "data" / "peer_layout.csv"
BOUNDED = ("umbrela.p@", "umbrela.ap@", "umbrela.map@", "umbrela.ndcg@", "umbrela.mrr", "nuggets.", "citation.precision",
           "citation.recall", "citation.f1", "no_answer.answered")


def run_eval(tmp_path: Path, judge: str, name: str, code: int = 0) -> list[dict[str, str]]:
    shutil.copy(DATA, tmp_path / "answers.csv")
    config = tmp_path / f"{name}.yaml"
    config.write_text(
        f"input: answers.csv\noutput_dir: {name}\njudge:\n  model: simulated-judge\n  cache: false\n{judge}"
        "evaluators:\n  - type: trec\n    k_values: [1, 3]\n",
        encoding="utf-8",
    )
    assert main(["-q", "eval", "--config", str(config)]) == code
    with (tmp_path / name / "results.csv").open(encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_peer_layout_through_the_simulated_judge(tmp_path: Path) -> None:
    rows = run_eval(tmp_path, "  simulated: {seed: 1}\n", "clean")
    assert [(r["query_id"], r["run"]) for r in rows][:3] == [("1", "1"), ("1", "2"), ("2", "1")]
    expected = {"umbrela.mean", "umbrela.p@1", "umbrela.p@3", "umbrela.mrr", "umbrela.ndcg@3", "nuggets.vital_strict",
                "nuggets.weighted", "citation.precision", "citation.recall", "citation.f1", "citation.fabricated",
                "no_answer.answered"}
    assert expected <= set(rows[0])
    assert not [c for c in rows[0] if c.endswith(".error")]  # a clean run misses nothing
    for row in rows:
        assert row["simulated_judge"] == "true"
        assert 0.0 <= float(row["umbrela.mean"]) <= 3.0
        for column, value in row.items():
            if column.startswith(BOUNDED) and value:
                assert 0.0 <= float(value) <= 1.0, (column, value)
    refusals = [r for r in rows if r["no_answer.answered"] == "0.0"]
    assert refusals  # NO_ANSWER is kept and judged as a refusal
    data = json.loads((tmp_path / "clean" / "results.json").read_text(encoding="utf-8"))
    first = data["outputs"][0]
    assert [g["passage_id"] for g in first["details"]["umbrela"]["grades"]] == [p["id"] for p in first["passages"]]
    assert first["details"]["nuggets"]["nuggets"] and first["details"]["citation"]["statements"]
    manifest = json.loads((tmp_path / "clean" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["simulated"] is True and manifest["accounting"]["total"]["calls"] > 0
    assert len(manifest["prompt_hashes"]) >= 10


@pytest.mark.slow
def test_failed_calls_take_only_what_depended_on_them(tmp_path: Path) -> None:
    clean = {(r["query_id"], r["run"]): r for r in run_eval(tmp_path, "  simulated: {seed: 1}\n", "clean")}
    # no retries, a third of the calls fail for good: failures must stay local to what needed the call
    judge = "  max_retries: 0\n  outage_after_failures: 1000\n  simulated: {seed: 1, error_rate: 0.3}\n"
    # every query lost an importance call: its nugget list failed, so nuggets failed everywhere (exit 6, written)
    rows = run_eval(tmp_path, judge, "faulty", code=6)
    missing = 0
    for row in rows:
        before = clean[(row["query_id"], row["run"])]
        values = {c: v for c, v in row.items() if "." in c and not c.endswith(".error") and c != "simulated_judge"}
        for column, value in values.items():
            if value == "":
                missing += 1
                assert row[f"{column}.error"], f"{column} is missing without a reason"
        # a family none of whose calls failed for this output has exactly the clean values
        for family in ("umbrela", "citation"):
            if row[f"{family}.n_failed"] == "0.0":
                assert {c: v for c, v in values.items() if c.startswith(family)} == \
                    {c: v for c, v in before.items() if c.startswith(family) and c in values}
        if row["no_answer.answered"]:
            assert row["no_answer.answered"] == before["no_answer.answered"]
        assert any(value != "" for value in values.values()), "a whole output lost every metric"
    assert missing > 0  # the injected failures did cost something, and it is reported
