"""Judge test-retest of the generation evaluator's judgments (``consistency.retest: [generation]``): the same
statistics and layout as the trec judgments', checked with a judge whose verdicts move between samples."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.consistency import ConsistencyEvaluator, ConsistencyOptions
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.scoring.dispersion import krippendorff_alpha
from open_rag_eval.core.types import RAGOutput, Score
from tests.generation_fakes import Verdicts, output
from tests.trec_fakes import RuleJudge

GENERATION = {"metrics": ["faithfulness", "context_precision", "context_relevance", "rubric"],
              "context_precision": {"against": ["answer"]}, "rubric": {"rubrics": ["completeness", "coherence"]}}
ANSWER = "Alpha is one [1]. Beta is two [2]. Gamma is three."
# per claim (1-based) the verdict of samples 0, 1, 2
SUPPORTED = {1: (True, True, True), 2: (True, True, False), 3: (False, False, False)}
_CLAIM = re.compile(r"^\(([0-9]+)\) ", re.MULTILINE)


def _moving(request: JudgeRequest) -> str | Exception:
    """Verdicts that move between samples (the re-ask stride is never reached: every reply parses)."""
    user, sample = request.prompt, request.sample
    if request.task == "claim_extract" and sample == 2 and "[3] " in user:  # the third finds the first claim only
        return json.dumps({"refusal": False, "claims": [{"sentence": 1, "claim": "Alpha is one."}]})
    if request.task == "claim_verify":
        numbers = [int(n) for n in _CLAIM.findall(user.split("Claims:")[1])]
        return json.dumps({"verdicts": [{"claim": n, "supported": SUPPORTED[n][sample], "sources": []}
                                        for n in numbers]})
    if request.task == "context_useful":
        return json.dumps({"useful": 0 if "beta passage" in user and sample == 1 else 1})
    if request.task == "context_relevance":
        second = "You rate how relevant" not in user
        return json.dumps({"rating": 1 if second and sample == 1 else 2})
    if request.task == "rubric":
        score = (4 if sample == 2 else 8) if "completeness" in user else 9
        return json.dumps({"reason": "r", "score": score})
    return Verdicts()(request)


def _retest(outputs: list[RAGOutput], rule: RuleJudge, repeats: int = 3,
            generation: dict[str, Any] = GENERATION) -> tuple[dict[str, object], dict[str, Any]]:
    evaluator = ConsistencyEvaluator(ConsistencyOptions(metrics=[], judge_repeats=repeats, retest=["generation"],
                                                        generation=generation))
    kept = {"q1": outputs}
    details: dict[str, dict[str, Any]] = {"q1": {}}
    scores: list[Score] = asyncio.run(evaluator._judge_retest(kept, Context(judge=rule), details))
    return {s.metric: s.value if s.error is None else s.error for s in scores}, details["q1"]["judge_retest"]


def test_generation_judgments_retest_statistics_with_literal_numbers() -> None:
    values, detail = _retest([output(answer=ANSWER)], RuleJudge(_moving))
    prefix = "consistency.judge"
    # claim extraction: the answer's claim count 3, 3, 1 -- one item, its labels differ (alpha over 3, 3, 1 is 0:
    # the only disagreement is inside the one item); all >= 1 claim: no crossing
    assert values[f"{prefix}.claim_extract.flip_rate"] == 1.0
    assert values[f"{prefix}.claim_extract.crossing"] == 0.0
    assert values[f"{prefix}.claim_extract.alpha"] == pytest.approx(0.0)
    assert values[f"{prefix}.claim_refusal.flip_rate"] == 0.0
    assert str(values[f"{prefix}.claim_refusal.alpha"]).startswith("alpha is undefined")
    # verification of the sample-0 claims: [T,T,T], [T,T,F], [F,F,F] -> flip 1/3, crossing 1/3;
    # nominal alpha = 1 - (n-1) * (o_TF + o_FT) / (2 n_T n_F) = 1 - 8 * 2 / (2 * 5 * 4) = 0.6
    assert values[f"{prefix}.claim_verify.flip_rate"] == pytest.approx(1 / 3)
    assert values[f"{prefix}.claim_verify.crossing"] == pytest.approx(1 / 3)
    assert values[f"{prefix}.claim_verify.alpha"] == pytest.approx(0.6)
    # usefulness p1 [1,1,1], p2 [1,0,1]: flip 1/2, crossing 1/2, alpha 1 - 5 * 2 / (2 * 5 * 1) = 0
    assert values[f"{prefix}.context_useful.flip_rate"] == 0.5
    assert values[f"{prefix}.context_useful.crossing"] == 0.5
    assert values[f"{prefix}.context_useful.alpha"] == pytest.approx(0.0)
    # relevance prompt 1 [2,2,2], prompt 2 [2,1,2]: flip 1/2, no rating below 1: crossing 0
    assert values[f"{prefix}.context_relevance.flip_rate"] == 0.5
    assert values[f"{prefix}.context_relevance.crossing"] == 0.0
    # rubric completeness [8,8,4], coherence [9,9,9]: flip 1/2, crossing 1/2 (8 and 4 on both sides of 5);
    # ordinal alpha: n_4 = 1, n_8 = 2, n_9 = 3; delta(4,8) = 2.25, delta(4,9) = 16, delta(8,9) = 6.25;
    # observed 2 * 2.25 = 4.5, expected 2 * (2 * 2.25 + 3 * 16 + 6 * 6.25) = 180 -> 1 - 5 * 4.5 / 180 = 0.875
    assert values[f"{prefix}.rubric.flip_rate"] == 0.5
    assert values[f"{prefix}.rubric.crossing"] == 0.5
    assert values[f"{prefix}.rubric.alpha"] == pytest.approx(0.875)
    assert krippendorff_alpha({"a": [8, 8, 4], "b": [9, 9, 9]}, "ordinal") == pytest.approx(0.875)
    # the trec judgments are not re-judged (retest: [generation] only), and the layout is the trec one's
    assert not any(name.startswith(f"{prefix}.umbrela") for name in values)
    assert detail["rubric"] == {"level": "ordinal", "threshold": "score >= 5 of 10", "n_items": 2, "n_missing": 0,
                                "flip_rate": 0.5, "alpha": pytest.approx(0.875), "crossing": 0.5}
    assert detail["claim_verify"]["n_items"] == 3 and detail["context_useful"]["n_items"] == 2


def test_every_sample_verifies_the_claims_of_sample_zero() -> None:
    rule = RuleJudge(_moving)
    _retest([output(answer=ANSWER)], rule)
    verified = [len(_CLAIM.findall(c.prompt.split("Claims:")[1])) for c in rule.calls
                if c.task == "claim_verify"]
    assert verified == [3, 3, 3]  # never the single claim sample 2 extracted
    # each sample's own extraction (0, 1, 2) and the sample-0 extraction its other judgments read (one request,
    # sent once by the judge client and then cached; this rule judge has no cache)
    assert sorted(c.sample for c in rule.calls if c.task == "claim_extract") == [0, 0, 0, 0, 1, 2]


def test_a_failed_judgment_is_a_missing_label_never_a_value() -> None:
    def rule(request: JudgeRequest) -> str | Exception:
        if request.task == "rubric" and request.sample % 1000 == 1 and "completeness" in request.prompt:
            return "no json"
        return _moving(request)

    _, detail = _retest([output(answer=ANSWER)], RuleJudge(rule))
    # completeness [8, -, 4]: the failed sample is left out, the item still has two labels
    assert detail["rubric"]["n_missing"] == 1 and detail["rubric"]["n_items"] == 2
    assert detail["rubric"]["flip_rate"] == 0.5


def test_rule_given_values_and_refusals_are_not_labels() -> None:
    # a refusal: faithfulness asks nothing, completeness is a rule's 0, coherence is judged
    values, detail = _retest([output(answer="I don't know.")], RuleJudge(_moving))
    assert detail["rubric"]["n_items"] == 1  # coherence only
    assert values["consistency.judge.claim_verify.flip_rate"] == "no claim_verify judgments for this query"
    assert values["consistency.judge.claim_refusal.flip_rate"] == 0.0
    # no passages: every claim unsupported by rule, no verification to repeat
    _, detail = _retest([output(answer=ANSWER, passages=())], RuleJudge(_moving), generation={"metrics": ["faithfulness"]})
    assert detail["claim_verify"]["n_items"] == 0


def test_kinds_follow_the_selected_metrics_and_config_names_them() -> None:
    options = ConsistencyOptions(judge_repeats=2, retest=["trec", "generation"],
                                 generation={"metrics": ["context_relevance", "answer_relevance"]})
    names = ConsistencyEvaluator.metric_names(options)
    assert names is not None
    kinds = sorted({n.split(".")[2] for n in names if n.startswith("consistency.judge.")})
    assert kinds == ["answer_relevance", "context_relevance", "no_answer", "nugget_assignment", "support", "umbrela"]
    assert GenerationEvaluator(GenerationOptions()).retest_kinds() == [
        "claim_extract", "claim_refusal", "claim_verify", "context_useful", "context_relevance"]
    default = ConsistencyEvaluator.metric_names(ConsistencyOptions(judge_repeats=2))
    assert default is not None and not any(".claim_verify." in n for n in default)  # trec only by default
    with pytest.raises(ValidationError, match="unknown metric"):
        ConsistencyOptions(judge_repeats=2, retest=["generation"], generation={"metrics": ["fluency"]})
    with pytest.raises(ValidationError):
        ConsistencyOptions(judge_repeats=2, retest=["golden"])


def test_the_judged_answer_relevance_is_relabelled_without_embeddings() -> None:
    def rule(request: JudgeRequest) -> str | Exception:
        assert request.task == "answer_relevance"  # no question generation (embedding variant) is repeated
        return json.dumps({"refusal": False, "rating": 2 if request.sample != 1 else 0})

    values, detail = _retest([output(answer=ANSWER)], RuleJudge(rule), generation={"metrics": ["answer_relevance"]})
    assert detail["answer_relevance"]["n_items"] == 1
    assert values["consistency.judge.answer_relevance.flip_rate"] == 1.0
    assert values["consistency.judge.answer_relevance.crossing"] == 1.0  # 2 and 0 straddle rating 1


def test_retest_repeats_of_generation_judgments_are_in_the_plan(tmp_path: Path) -> None:
    from open_rag_eval.run import pipeline
    from open_rag_eval.config import load_config
    from tests.test_dry_run import _demo, _write

    def plan(name: str, retest: bool) -> Any:
        config = _demo(tmp_path)
        metrics = {"metrics": ["context_relevance", "rubric"], "rubric": {"rubrics": ["coherence"]}}
        config["evaluators"] = [{"type": "generation", **metrics}]
        if retest:
            config["evaluators"].append({"type": "consistency", "metrics": ["rouge"], "judge_repeats": 3,
                                         "retest": ["generation"], "generation": metrics})
        loaded = load_config(_write(tmp_path, name, config))
        return pipeline.plan(loaded, pipeline.load_outputs(loaded)).by_task()

    plain, with_retest = plan("a.yaml", False), plan("b.yaml", True)
    # sample 0 is the evaluator's own request (counted once); samples 1 and 2 are new
    assert with_retest["context_relevance"].calls == 3 * plain["context_relevance"].calls > 0
    assert with_retest["rubric"].calls == 3 * plain["rubric"].calls > 0
    assert "umbrela" not in with_retest


def test_bad_generation_options_are_a_config_error_naming_the_field(tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    from open_rag_eval.cli import main

    config = tmp_path / "c.yaml"
    config.write_text("input: outputs.csv\noutput_dir: out\njudge:\n  model: simulated-judge\nevaluators:\n"
                      "  - type: consistency\n    judge_repeats: 2\n    retest: [generation]\n"
                      "    generation:\n      metrics: [fluency]\n", encoding="utf-8")
    assert main(["eval", "--config", str(config), "--dry-run"]) == 2
    err = caplog.text
    assert "evaluators[0].generation" in err and "metrics" in err and "unknown metric(s) fluency" in err
    assert not (tmp_path / "out").exists()
