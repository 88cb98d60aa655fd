"""End to end: a JSONL input -> `open-rag-eval eval` with ``type: generation`` -> the loopback simulated judge ->
results, report, dry run and plot; the simulated judge's replies to the generation prompts."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from open_rag_eval.cli import main
from open_rag_eval.judge.sim_answer import reply
from open_rag_eval.prompts import load

DATA = Path(__file__).parent / "data" / "generation_outputs.jsonl"
SCORES = ("faithfulness.score", "faithfulness.cited", "context.precision_answer", "context.precision_reference",
          "context.recall", "context.relevance", "correctness.f1", "correctness.precision", "correctness.recall")


def _config(tmp_path: Path, name: str, extra: str = "") -> Path:
    shutil.copy(DATA, tmp_path / "outputs.jsonl")
    config = tmp_path / f"{name}.yaml"
    config.write_text(f"input: outputs.jsonl\noutput_dir: {name}\njudge:\n  model: simulated-judge\n  cache: false\n"
                      f"  simulated: {{seed: 1}}\nevaluators:\n  - type: generation\n{extra}", encoding="utf-8")
    return config


def _rows(tmp_path: Path, name: str) -> dict[tuple[str, str], dict[str, str]]:
    with (tmp_path / name / "results.csv").open(encoding="utf-8") as handle:
        return {(r["query_id"], r["run"]): r for r in csv.DictReader(handle)}


def test_generation_metrics_through_the_cli_and_the_simulated_judge(tmp_path: Path) -> None:
    assert main(["-q", "eval", "--config", str(_config(tmp_path, "gen"))]) == 0
    rows = _rows(tmp_path, "gen")
    seasons = rows[("seasons", "1")]
    # 3 claims: tilt (passage 1, cited 1), closest in January (passage 3, cited 3), monthly change (no passage)
    assert seasons["faithfulness.n_claims"] == "3.0"
    assert float(seasons["faithfulness.score"]) == pytest.approx(2 / 3)
    assert float(seasons["faithfulness.cited"]) == pytest.approx(2 / 3)
    for name in SCORES:
        assert 0.0 <= float(seasons[name]) <= 1.0, name
    wrong = rows[("seasons", "2")]
    assert float(wrong["faithfulness.score"]) == 0.0 and wrong["faithfulness.n_uncited"] == "1.0"
    refusal = rows[("everest", "1")]
    assert refusal["faithfulness.score"] == "" and "is undefined for a refusal" in refusal["faithfulness.score.error"]
    assert refusal["correctness.f1"] == "0.0"
    no_reference = rows[("tides", "1")]
    assert "without a reference_answer" in no_reference["context.recall.error"]
    assert float(no_reference["faithfulness.score"]) == 1.0
    empty = rows[("empty", "1")]
    assert empty["faithfulness.score"] == "0.0" and empty["context.recall"] == "0.0"
    assert "no passages were retrieved" in empty["context.relevance.error"]
    out = tmp_path / "gen"
    data = json.loads((out / "results.json").read_text(encoding="utf-8"))
    first = next(o for o in data["outputs"] if o["query_id"] == "seasons" and o["run"] == 1)
    claims = first["details"]["faithfulness"]["claims"]
    assert [c["supporting"] for c in claims] == [["tilt"], ["sun"], []]
    assert claims[0]["citations"] == ["tilt"] and claims[0]["cited_supported"] is True
    summary = {r["metric"]: r for r in csv.DictReader((out / "summary.csv").open(encoding="utf-8"))}
    assert summary["context.recall"]["status"] == "ok" and summary["faithfulness.score"]["simulated_judge"] == "true"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["complete"] is True
    assert {"claim_extract", "claim_verify", "context_useful", "context_relevance"} <= set(manifest["accounting"]["tasks"])
    assert "generation.claim_verify" in manifest["prompt_hashes"]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Claims (faithfulness)" in html and "the seasons change every month" in html
    assert "Faithfulness (claims checked against the passages)" in html


def test_selected_metrics_only_and_a_dry_run_plan(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, "some", "    metrics: [faithfulness, context_relevance]\n")
    assert main(["eval", "--config", str(config), "--dry-run"]) == 0
    plan = capfd.readouterr()
    text = plan.out + plan.err
    assert "claim_extract" in text and "claim_verify" in text and "context_relevance" in text
    assert "context_useful" not in text
    assert not (tmp_path / "some").exists()
    assert main(["-q", "eval", "--config", str(config)]) == 0
    columns = set(next(iter(_rows(tmp_path, "some").values())))
    assert {"faithfulness.score", "context.relevance"} <= columns and "context.recall" not in columns


def test_an_unknown_metric_is_a_config_error_naming_the_field(tmp_path: Path,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    config = _config(tmp_path, "bad", "    metrics: [faithfulnes]\n")
    with caplog.at_level("INFO"):
        assert main(["eval", "--config", str(config)]) == 2
    text = " ".join(r.getMessage() for r in caplog.records if r.levelno >= 30)
    assert "bad.yaml: evaluators[0].metrics" in text and "unknown metric(s) faithfulnes; valid choices" in text


def test_plot_knows_the_generation_metrics(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    assert main(["-q", "eval", "--config", str(_config(tmp_path, "gen"))]) == 0
    png = tmp_path / "gen.png"
    assert main(["-q", "plot", str(tmp_path / "gen"), "-e", "generation", "-o", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_the_simulated_judge_answers_the_generation_prompts() -> None:
    extract = load("generation.claim_extract").render(
        question="What causes tides?", sentences="[1] Tides come from the Moon [1]; they rise twice a day.\n"
                                                 "[2] I don't know the rest.")
    assert json.loads(reply([("user", extract)]).text) == {"refusal": False, "claims": [
        {"sentence": 1, "claim": "Tides come from the Moon."}, {"sentence": 1, "claim": "they rise twice a day."}]}
    refusal = load("generation.claim_extract").render(question="Q?", sentences="[1] I don't know.")
    assert json.loads(reply([("user", refusal)]).text) == {"refusal": True, "claims": []}
    verify = load("generation.claim_verify").render(sources="[1] The Moon pulls the oceans.\n[2] Tides come from "
                                                            "the Moon's pull.", claims="(1) Tides come from the Moon.")
    assert json.loads(reply([("user", verify)]).text) == {"verdicts": [{"claim": 1, "supported": True, "sources": [2]}]}
    useful = load("generation.context_useful").render(question="Q?", answer="Tides come from the Moon.",
                                                      passage="The Moon causes tides.")
    assert reply([("user", useful)]).text == '{"useful": 1}'
    for template in ("generation.context_relevance_1", "generation.context_relevance_2"):
        text = load(template).render(question="What causes tides?", context="Tides are caused by the Moon.")
        assert reply([("user", text)]) .text == '{"rating": 2}'


def test_compare_tests_the_generation_headline(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["-q", "eval", "--config", str(_config(tmp_path, "a"))]) == 0
    assert main(["-q", "eval", "--config", str(_config(tmp_path, "b"))]) == 0
    capfd.readouterr()
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--output-dir", str(tmp_path)]) == 0
    said = capfd.readouterr()
    text = said.out + said.err
    for metric in ("faithfulness.score", "faithfulness.cited", "context.recall", "correctness.f1"):
        assert metric in text, metric
    assert "faithfulness.score" in (tmp_path / "compare.csv").read_text(encoding="utf-8")
