"""Judge test-retest through the real TREC evaluator and a noisy simulated judge."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from open_rag_eval.cli import main

DATA = Path(__file__).parent / "data" / "peer_layout.csv"


def retest(tmp_path: Path, noise: float) -> dict[str, str]:
    shutil.copy(DATA, tmp_path / "answers.csv")
    config = tmp_path / f"retest-{noise}.yaml"
    config.write_text(
        f"input: answers.csv\noutput_dir: out-{noise}\njudge:\n  model: simulated-judge\n  cache: false\n"
        f"  simulated: {{seed: 2, noise_rate: {noise}}}\nevaluators:\n  - type: trec\n"
        "  - type: consistency\n    metrics: [dispersion]\n    judge_repeats: 4\n",
        encoding="utf-8",
    )
    assert main(["-q", "eval", "--config", str(config)]) == 0
    with (tmp_path / f"out-{noise}" / "summary.csv").open(encoding="utf-8") as handle:
        return {row["metric"]: row["mean"] for row in csv.DictReader(handle)}


@pytest.mark.slow
def test_noise_shows_as_flips_and_a_steady_judge_shows_none(tmp_path: Path) -> None:
    steady = retest(tmp_path, 0.0)
    assert float(steady["consistency.judge.umbrela.flip_rate"]) == 0.0
    assert float(steady["consistency.judge.support.flip_rate"]) == 0.0
    noisy = retest(tmp_path, 0.4)
    assert float(noisy["consistency.judge.umbrela.flip_rate"]) > 0.1
    assert float(noisy["consistency.judge.umbrela.alpha"]) < 1.0


def generation_retest(tmp_path: Path, noise: float) -> tuple[dict[str, str], dict[str, object]]:
    """The generation evaluator and judge test-retest of its judgments, through the CLI and the simulated judge."""
    shutil.copy(DATA, tmp_path / "answers.csv")
    config = tmp_path / f"gen-retest-{noise}.yaml"
    config.write_text(
        f"input: answers.csv\noutput_dir: gen-{noise}\njudge:\n  model: simulated-judge\n  cache: false\n"
        f"  simulated: {{seed: 3, noise_rate: {noise}}}\nevaluators:\n"
        "  - type: generation\n    metrics: [faithfulness, context_precision, context_relevance, rubric]\n"
        "  - type: consistency\n    metrics: [dispersion]\n    judge_repeats: 3\n    retest: [generation]\n"
        "    generation: {metrics: [faithfulness, context_precision, context_relevance, rubric]}\n",
        encoding="utf-8",
    )
    assert main(["-q", "eval", "--config", str(config)]) == 0
    with (tmp_path / f"gen-{noise}" / "summary.csv").open(encoding="utf-8") as handle:
        summary = {row["metric"]: row["mean"] for row in csv.DictReader(handle)}
    results = json.loads((tmp_path / f"gen-{noise}" / "results.json").read_text(encoding="utf-8"))
    return summary, results


@pytest.mark.slow
def test_generation_judge_noise_shows_as_flips_and_a_steady_judge_shows_none(tmp_path: Path) -> None:
    steady, results = generation_retest(tmp_path, 0.0)
    for kind in ("claim_verify", "context_useful", "context_relevance", "rubric"):
        assert float(steady[f"consistency.judge.{kind}.flip_rate"]) == 0.0, kind
    assert not any(name.startswith("consistency.judge.umbrela") for name in steady)  # trec not re-judged
    assert "judge_retest" in json.dumps(results)  # the per-query details, as for the trec judgments
    noisy, _ = generation_retest(tmp_path, 0.4)
    assert float(noisy["consistency.judge.rubric.flip_rate"]) > 0.1
    assert float(noisy["consistency.judge.claim_verify.flip_rate"]) > 0.0
    assert float(noisy["consistency.judge.context_useful.alpha"]) < 1.0


def _summary(folder: Path) -> dict[str, str]:
    with (folder / "summary.csv").open(encoding="utf-8") as handle:
        return {row["metric"]: row["mean"] for row in csv.DictReader(handle)}


def test_a_resumed_run_with_the_noisy_judge_gives_the_numbers_of_a_whole_run(tmp_path: Path) -> None:
    """The resumed run finds the evaluator's judgments (sample 0) in the cache and asks only the retest samples:
    the simulated judge's noise depends on each request, not on the requests it saw before, so the numbers equal
    those of one uninterrupted run."""
    shutil.copy(DATA, tmp_path / "answers.csv")

    def config(name: str, cache: str, retest: bool) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(
            f"input: answers.csv\noutput_dir: {name}\njudge:\n  model: simulated-judge\n  cache: {cache}\n"
            "  simulated: {seed: 2, noise_rate: 0.4}\nevaluators:\n  - type: trec\n    metrics: [umbrela, citation]\n"
            + ("  - type: consistency\n    metrics: [dispersion]\n    judge_repeats: 3\n" if retest else ""),
            encoding="utf-8")
        return path

    assert main(["-q", "eval", "--config", str(config("whole", "whole.sqlite", True))]) == 0
    assert main(["-q", "eval", "--config", str(config("first", "resumed.sqlite", False))]) == 0  # stopped here
    assert main(["-q", "eval", "--config", str(config("resumed", "resumed.sqlite", True))]) == 0
    whole, resumed = _summary(tmp_path / "whole"), _summary(tmp_path / "resumed")
    assert float(whole["consistency.judge.umbrela.flip_rate"]) > 0.0  # the judge is noisy
    assert {m: v for m, v in resumed.items() if m.startswith("consistency.judge.")} == \
        {m: v for m, v in whole.items() if m.startswith("consistency.judge.")}
    assert resumed["citation.f1"] == whole["citation.f1"] and resumed["umbrela.mean"] == whole["umbrela.mean"]
