"""An unavailable metric is explained by the reason of the majority of its missing values, with counts (never one
query's reason), and the diagnosis says a metric it needs is unavailable, with why, rather than "failed or is
undefined"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.core.missing import Missing
from open_rag_eval.diagnosis import diagnose

NOT_INSTALLED = "bert-score is not installed: pip install 'open-rag-eval[consistency]'"


def _items(reasons: list[str]) -> list[dict[str, object]]:
    return [{"errors": {"consistency.bertscore_f1": reason}} for reason in reasons]


def test_the_reason_of_the_majority_with_counts() -> None:
    missing = Missing(_items(["skipped: min_runs is 2 (1 answered run)"] + [NOT_INSTALLED] * 5))
    assert missing.unavailable == {"consistency.bertscore_f1": f"{NOT_INSTALLED} (5 of 6 rows; 1 other: skipped: "
                                                               "min_runs is 2 (1 answered run))"}
    assert Missing(_items([NOT_INSTALLED])).unavailable == {"consistency.bertscore_f1": NOT_INSTALLED}
    assert Missing(_items([NOT_INSTALLED] * 3)).unavailable == {"consistency.bertscore_f1":
                                                                f"{NOT_INSTALLED} (3 of 3 rows)"}
    mixed = Missing(_items([NOT_INSTALLED] * 3 + ["skipped: a", "skipped: b"]))
    assert mixed.unavailable["consistency.bertscore_f1"] == f"{NOT_INSTALLED} (3 of 5 rows; 2 others, e.g. skipped: a)"


def test_the_diagnosis_says_unavailable_with_the_reason() -> None:
    means = {"hhem.score": None, "umbrela.mean": 2.0}
    found = dict(diagnose(means, unavailable={"hhem.score": "HHEM weights unavailable (not in the cache)"}).unchecked)
    assert found["trec_hhem"] == "hhem.score is unavailable (HHEM weights unavailable (not in the cache))"
    assert dict(diagnose(means).unchecked)["trec_hhem"] == \
        "hhem.score has no value (every value failed or is undefined)"


def test_a_run_whose_hhem_is_unavailable_says_so_in_the_console_and_the_report(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "no-model").mkdir()
    rows = "".join(f"q{i},What is topic {i}?,1,Topic {i} is old.,Topic {i} is old [1].\n" for i in range(3))
    (tmp_path / "in.csv").write_text("query_id,query,passage_id,passage,generated_answer\n" + rows)
    (tmp_path / "c.json").write_text(json.dumps({
        "input": "in.csv", "output_dir": "out", "judge": {"simulated": {"seed": 1}, "cache": False},
        "evaluators": [{"type": "trec", "metrics": ["umbrela", "hhem"],
                        "hallucination": {"model_path": str(tmp_path / "no-model")}}]}))
    assert main(["eval", "--config", str(tmp_path / "c.json")]) == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert "trec_hhem: hhem.score is unavailable (HHEM weights unavailable (no config.json there" in shown, shown
    assert "hhem.score has no value" not in shown
    report = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "hhem.score is unavailable (HHEM weights unavailable (no config.json there" in report
    assert "(3 of 3 rows)" in report and "hhem.score has no value" not in report
