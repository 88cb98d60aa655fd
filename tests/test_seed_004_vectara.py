"""Seed 004 -- vectara's open-rag-eval metrics document -- rebuilt under ``profile: vectara`` with literal numbers,
beside the documented differences of our default (``trec2024``), its YAML read as written and run end to end on the
simulated judge, and the plots' confidence intervals it asks for (docs/profiles.md)."""

from __future__ import annotations

import asyncio
import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from open_rag_eval.config import load_config, load_config_text
from open_rag_eval.evaluators.base import Context
from open_rag_eval.evaluators.consistency import ConsistencyEvaluator, ConsistencyOptions
from open_rag_eval.evaluators.trec import TrecEvaluator, TrecOptions
from open_rag_eval.judge.base import JudgeRequest
from open_rag_eval.metrics.citation import CitationJudge, citation_result
from open_rag_eval.metrics.nuggets import Nuggetizer
from open_rag_eval.metrics.structured import VECTARA as VECTARA_FORMATS
from open_rag_eval.metrics.umbrela import UmbrelaGrader
from open_rag_eval.scoring.dispersion import dispersion
from open_rag_eval.core.catalogue import value_bounds as metric_range
from open_rag_eval.scoring.stats import aggregate
from open_rag_eval.scoring.trec import nugget_scores, support_scores, support_scores_per_passage, umbrela_scores
from open_rag_eval.run.results import summarize
from open_rag_eval.core.types import AnswerPart, EvalResult, Passage, RAGOutput, Score
from tests.trec_fakes import RuleJudge, default_rule

SEED_DATA = Path(__file__).parent / "data" / "seed_004"
VECTARA_SYSTEM = "You are a helpful assistant that follows user instructions precisely and provides accurate information."
DEMO = Path(__file__).parents[1] / "configs" / "data" / "demo.csv"


def vectara() -> TrecOptions:
    return TrecOptions(profile="vectara")


# ---------------------------------------------------------------- the profile itself


def test_profile_fills_options_and_the_config_still_wins() -> None:
    options = vectara()
    assert options.metrics == ["umbrela", "nuggets", "citation", "no_answer", "hhem"]
    assert (options.citation.variant, options.citation.scoring, options.citation.passage_text) == (
        "all_citations", "per_passage", "text")
    assert (options.nuggets.creation, options.nuggets.iterations, options.nuggets.pool) == ("iterative", 5, "output")
    assert options.nuggets.no_answer_sentinel is True and options.umbrela.pad is False
    assert (options.umbrela.prompt, options.nuggets.prompts, options.citation.prompt, options.no_answer.system) == (
        "vectara", "vectara", "vectara", "vectara")
    assert (options.hallucination.premise_max_chars, options.hallucination.long_inputs) == (8192, "truncate")
    # one option set back; its siblings keep the profile's values
    mixed = TrecOptions(profile="vectara", citation={"scoring": "per_statement"})
    assert (mixed.citation.scoring, mixed.citation.variant, mixed.citation.temperature) == (
        "per_statement", "all_citations", 0.0)
    ours = TrecOptions()
    assert (ours.profile, ours.citation.scoring, ours.nuggets.creation, ours.umbrela.pad) == (
        "trec2024", "per_statement", "windows", True)
    with pytest.raises(ValidationError, match="trec2024.*vectara"):
        TrecOptions(profile="ragas")


# ---------------------------------------------------------------- UMBRELA


def test_umbrela_sampling_parameters_are_vectaras() -> None:
    judge = RuleJudge()
    passage = Passage(id="p1", text="passage about x")
    asyncio.run(UmbrelaGrader(vectara().umbrela).grade(judge, "what is x", passage))
    assert dict(judge.calls[-1].params) == {"temperature": 0.0, "top_p": 1.0, "presence_penalty": 0.5,
                                            "frequency_penalty": 0.0, "seed": 42,  # no max_tokens: vectara sets none
                                            "response_format": VECTARA_FORMATS["umbrela"], "stream": False}
    system, user = judge.calls[-1].messages
    assert system == ("system", VECTARA_SYSTEM) and user[1].endswith("format of: a single integer without any reasoning.\n    ")
    asyncio.run(UmbrelaGrader(TrecOptions().umbrela).grade(judge, "what is y", passage))
    # castorini's umbrela (the TREC 2024 labels): the two penalties the other way round, no seed
    assert dict(judge.calls[-1].params) == {"temperature": 0.0, "top_p": 1.0, "presence_penalty": 0.0,
                                            "frequency_penalty": 0.5, "max_tokens": 100}
    assert judge.calls[-1].messages[0] == ("system", "You are a helpful assistant.")
    assert "##final score: score" in judge.calls[-1].messages[1][1]


def test_retrieval_metrics_from_umbrela_grades_as_the_seed_defines_them() -> None:
    # relevant = grade >= 2; P@K = relevant in top K / K; AP@K over the relevant ranks; MRR = 1 / first relevant rank
    scores = umbrela_scores([3, 0, 2, 1, 2], [1, 3, 5], pad=vectara().umbrela.pad)
    assert scores["p@1"] == 1.0 and scores["p@3"] == pytest.approx(2 / 3) and scores["p@5"] == pytest.approx(0.6)
    assert scores["ap@3"] == pytest.approx(0.833333, abs=1e-6) and scores["ap@5"] == pytest.approx(0.755556, abs=1e-6)
    assert scores["mrr"] == 1.0 and scores["mean"] == pytest.approx(1.6)
    short = [1, 1, 2, 0]  # four passages: vectara omits P@5, trec_eval pads it with a non-relevant slot
    assert umbrela_scores(short, [5], pad=vectara().umbrela.pad)["p@5"] is None
    assert umbrela_scores(short, [5], pad=TrecOptions().umbrela.pad)["p@5"] == pytest.approx(0.2)
    assert umbrela_scores(short, [3], pad=False)["mrr"] == pytest.approx(1 / 3)


# ---------------------------------------------------------------- citations


def citing_output() -> RAGOutput:
    """The worked example: s1 cites d1 and d2, s2 cites d1, s3 cites nothing."""
    passages = (Passage(id="d1", text="Alpha text.", title="Alpha"), Passage(id="d2", text="Beta text."))
    answer = (AnswerPart(text="First claim.", citations=("d1", "d2")), AnswerPart(text="Second claim.", citations=("d1",)),
              AnswerPart(text="Third claim."))
    return RAGOutput(query_id="q1", query="what?", passages=passages, answer=answer)


LABELS = {("First claim.", "Alpha text."): "Full Support", ("First claim.", "Beta text."): "No Support",
          ("Second claim.", "Alpha text."): "Partial Support"}


def support_rule(request: JudgeRequest) -> str:
    user = request.messages[-1][1]
    label = next(label for (statement, passage), label in LABELS.items()
                 if f"Statement: {statement}" in user and passage in user)
    return label.lower().replace(" ", "_") if "``full_support''" in user else label  # the labels each prompt asks for


def judged(options: TrecOptions) -> tuple[dict[str, float | None], RuleJudge]:
    judge = RuleJudge(rule=support_rule)
    output = citing_output()
    judgments = asyncio.run(CitationJudge(options.citation).judge_output(judge, output))
    scores, _ = citation_result(output, judgments, options.citation)
    return {s.metric: s.value for s in scores}, judge


def test_citation_precision_per_cited_passage() -> None:
    ours, _ = judged(TrecOptions())  # first citation of each statement, per statement
    assert (ours["citation.precision"], ours["citation.recall"], ours["citation.f1"]) == pytest.approx((0.75, 0.5, 0.6))
    theirs, judge = judged(vectara())  # every citation; precision per distinct cited passage
    assert theirs["citation.precision"] == pytest.approx(0.375)  # d1 = (1 + 0.5) / 2, d2 = 0
    assert theirs["citation.recall"] == pytest.approx(1 / 3)  # s1 = 0.5, s2 = 0.5, s3 = 0
    assert theirs["citation.f1"] == pytest.approx(0.352941, abs=1e-6)
    assert len(judge.calls) == 3
    assert all(dict(call.params) == {"temperature": 0.0, "seed": 42, "response_format": VECTARA_FORMATS["support"],
                                     "stream": False} for call in judge.calls)
    assert all(call.messages[0] == ("system", VECTARA_SYSTEM) for call in judge.calls)  # vectara's prompt and system
    assert not any("Alpha: Alpha text." in call.messages[-1][1] for call in judge.calls)  # no title shown


def test_per_passage_scores_pure() -> None:
    rows = [[("d1", "FS"), ("d2", "NS")], [("d1", "PS")], []]
    values = support_scores_per_passage(rows)
    assert (values["precision"], values["recall"]) == pytest.approx((0.375, 1 / 3))
    # all citations judged but scored per statement: s1 = 0.5, s2 = 0.5
    assert support_scores([[label for _, label in row] for row in rows])["precision"] == pytest.approx(0.5)
    # an unparsed label is left out and counted; a passage cited three times counts once
    assert support_scores_per_passage([[("d1", None)], [("d1", "FS")]]) == pytest.approx(
        {"precision": 1.0, "recall": 1.0, "f1": 1.0, "n_unparsed": 1})
    thrice = support_scores_per_passage([[("d1", "FS")], [("d1", "FS")], [("d1", "FS")], [("d2", "NS")]])
    assert thrice["precision"] == pytest.approx(0.5) and thrice["recall"] == pytest.approx(0.75)


# ---------------------------------------------------------------- nuggets


def create_rule(replies: list[list[str]]) -> tuple[RuleJudge, list[str]]:
    contexts: list[str] = []
    queue = list(replies)

    def rule(request: JudgeRequest) -> str | Exception:
        if request.task != "nugget_create":
            return default_rule(request)
        contexts.append(request.messages[-1][1])
        return str(queue.pop(0) if len(queue) > 1 else queue[0])

    return RuleJudge(rule=rule), contexts


SEGMENTS = [f"segment {i} text" for i in range(1, 13)]  # 12: more than one window of 10


def test_nugget_creation_refines_one_context_up_to_five_times() -> None:
    growing = [[f"n{j}" for j in range(1, k + 1)] for k in range(1, 8)]
    judge, prompts = create_rule(growing)
    nuggets, status, _ = asyncio.run(Nuggetizer(vectara().nuggets).create(judge, "what is x", SEGMENTS))
    assert len(prompts) == 5 and nuggets == growing[4] and status == "ok"
    assert all("[1] segment 1 text" in p and "[12] segment 12 text" in p for p in prompts)  # one context, all passages
    assert "Initial Nugget List: ['n1', 'n2']\n" in prompts[2]  # each refinement starts from the last list
    assert "don't make up any nuggets" in prompts[0]  # vectara's creator text, its sentinel instruction included
    judge, prompts = create_rule(growing)
    asyncio.run(Nuggetizer(TrecOptions().nuggets).create(judge, "what is x", SEGMENTS))
    assert len(prompts) == 2 and "[1] segment 11 text" in prompts[1]  # castorini: windows of 10, numbering restarts


def test_nugget_creation_stops_at_thirty_or_when_nothing_changes() -> None:
    judge, prompts = create_rule([["a", "b"], ["a", "b"], ["c"]])
    nuggets, _, _ = asyncio.run(Nuggetizer(vectara().nuggets).create(judge, "q", SEGMENTS))
    assert nuggets == ["a", "b"] and len(prompts) == 2  # the third request would repeat the second
    judge, prompts = create_rule([["a"], [f"n{j}" for j in range(35)], ["b"]])
    nuggets, _, _ = asyncio.run(Nuggetizer(vectara().nuggets).create(judge, "q", SEGMENTS))
    assert len(prompts) == 2 and nuggets == [f"n{j}" for j in range(30)]  # at most 30 nuggets per query


def test_importance_in_batches_of_ten_then_the_top_twenty_vital_first() -> None:
    thirty = [f"n{j}" for j in range(30)]

    def rule(request: JudgeRequest) -> str | Exception:
        if request.task == "nugget_create":
            return str(thirty)
        if request.task == "nugget_importance":
            listed = request.messages[-1][1].split("Nugget List: ")[1].split("\n")[0]
            return str(["vital" if int(n[1:]) % 2 else "okay" for n in eval(listed)])  # noqa: S307 (our own repr)
        return default_rule(request)

    judge = RuleJudge(rule=rule)
    built = asyncio.run(Nuggetizer(vectara().nuggets).build(judge, "q", SEGMENTS))
    assert judge.tasks().count("nugget_importance") == 3
    assert len(built.nuggets) == 20
    assert [n.text for n in built.nuggets[:15]] == [f"n{j}" for j in range(1, 30, 2)]  # the 15 vital, in order
    assert [n.importance for n in built.nuggets[15:]] == ["okay"] * 5


def test_nugget_lists_per_output_under_vectara_per_query_by_default() -> None:
    runs = [RAGOutput(query_id="q1", query="what is x", run=run,
                      passages=tuple(Passage(id=f"r{run}p{i}", text=f"run {run} passage {i} about x") for i in (1, 2)),
                      answer=(AnswerPart(text="x is x."),)) for run in (1, 2)]

    def contexts(options: TrecOptions) -> set[str]:
        judge = RuleJudge()
        asyncio.run(TrecEvaluator(options.model_copy(update={"metrics": ["nuggets"]})).evaluate(runs, Context(judge=judge)))
        return {c.messages[-1][1].split("Context:")[1].split("Search Query")[0].split("Initial Nugget List")[0]
                for c in judge.calls if c.task == "nugget_create"}

    theirs = contexts(vectara())
    assert len(theirs) == 2 and all(("run 1" in c) != ("run 2" in c) for c in theirs)
    ours = contexts(TrecOptions())
    assert len(ours) == 1 and "run 1 passage 1" in next(iter(ours)) and "run 2 passage 2" in next(iter(ours))


def test_nugget_scores_as_the_seed_states_them() -> None:
    n1 = nugget_scores([("vital", "support"), ("vital", "partial_support"), ("vital", "not_support"),
                        ("okay", "support"), ("okay", "partial_support")])
    assert n1 == pytest.approx({"all": 0.6, "all_strict": 0.4, "vital": 0.5, "vital_strict": 1 / 3,
                                "weighted": 0.5625, "weighted_strict": 0.375})
    # the seed's formula with no okay nugget: 3 / 3 = 1.0 (vectara's code divides by 3 + 0.5: 0.857, not copied)
    assert nugget_scores([("vital", "support")] * 3)["weighted"] == 1.0


# ---------------------------------------------------------------- HHEM


def test_hhem_reads_the_passages_cut_at_8192_characters(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="HHEM needs torch (the hhem extra)")
    from open_rag_eval.hhem.tiny import TINY_WORDS, write_tiny_hhem
    from open_rag_eval.metrics.hallucination import HallucinationMetric

    model = str(write_tiny_hhem(tmp_path / "hhem", seed=3))
    words = " ".join(TINY_WORDS[i % len(TINY_WORDS)] for i in range(2000))
    first, second = words[:5000], words[5001:]
    answer = (AnswerPart(text="the tower was"), AnswerPart(text="built 1889"))
    long = RAGOutput(query_id="long", query="q", passages=(Passage(id="a", text=first), Passage(id="b", text=second)),
                     answer=answer)
    premise = f"{first} {second}"[:8192]  # joined by one space, then cut
    cut = RAGOutput(query_id="cut", query="q", passages=(Passage(id="a", text=premise),), answer=answer)
    theirs = TrecOptions(profile="vectara", hallucination={"model_path": model, "device": "cpu"}).hallucination
    plain = theirs.model_copy(update={"premise_max_chars": None})
    scored = asyncio.run(HallucinationMetric(theirs).score([long]))
    reference = asyncio.run(HallucinationMetric(plain).score([cut]))
    value = next(s.value for s in scored.scores if s.metric == "hhem.score")
    assert value == pytest.approx(next(s.value for s in reference.scores if s.metric == "hhem.score"))
    assert scored.details[0].data["premise_cut"] is True


# ---------------------------------------------------------------- consistency


def test_rouge_precision_recall_and_f1() -> None:
    pytest.importorskip("rouge_score", reason="ROUGE needs rouge-score (the consistency extra)")
    from open_rag_eval.metrics.similarity import RougeOptions, rouge_pairs

    options = RougeOptions(measures=["f1", "precision", "recall"])
    pair = rouge_pairs([["the cat sat"], ["the cat sat down"]], options)[(0, 1)]
    # run 1 is the reference, run 2 the candidate: precision over the later answer's length
    assert (pair["rouge1_precision"], pair["rouge1_recall"], pair["rouge1"]) == pytest.approx((0.75, 1.0, 6 / 7))
    assert (pair["rouge2_precision"], pair["rouge2_recall"], pair["rouge2"]) == pytest.approx((2 / 3, 1.0, 0.8))
    assert (pair["rougeL_precision"], pair["rougeL_recall"]) == pytest.approx((0.75, 1.0))
    assert set(rouge_pairs([["a b"], ["a c"]])[(0, 1)]) == {"rouge1", "rouge2", "rougeL", "rougeLsum"}  # ours: F1


def test_variance_and_dispersion_population_vs_sample() -> None:
    theirs = dispersion([0.9, 0.7, 0.5], ddof=ConsistencyOptions(profile="vectara").ddof)
    assert theirs["mean"] == pytest.approx(0.7)
    assert theirs["variance"] == pytest.approx(0.08 / 3) and theirs["std"] == pytest.approx(0.163299, abs=1e-6)
    assert theirs["cv"] == pytest.approx(0.233285, abs=1e-6) and theirs["range"] == pytest.approx(0.4)
    assert theirs["cai"] == pytest.approx(0.7 / (1 + math.sqrt(0.08 / 3)))  # vectara's consistency-adjusted index
    assert theirs["iqr"] == pytest.approx(0.2)
    ours = dispersion([0.9, 0.7, 0.5])
    assert (ours["variance"], ours["std"], ours["cv"]) == pytest.approx((0.04, 0.2, 0.2 / 0.7))


def test_consistency_evaluator_under_the_profile_needs_three_runs() -> None:
    outputs = [RAGOutput(query_id=q, query=q, run=r, answer=(AnswerPart(text=f"answer {r}"),))
               for q, runs in (("q1", 3), ("q2", 2)) for r in range(1, runs + 1)]
    previous = [Score(query_id="q1", run=r, metric="citation.f1", value=v) for r, v in zip((1, 2, 3), (0.9, 0.7, 0.5))]
    previous += [Score(query_id="q2", run=r, metric="citation.f1", value=v) for r, v in zip((1, 2), (1.0, 0.0))]
    options = ConsistencyOptions(profile="vectara", metrics=["dispersion"])
    result = asyncio.run(ConsistencyEvaluator(options).evaluate(outputs, Context(previous=EvalResult(scores=previous))))
    got = {(s.query_id, s.metric): s for s in result.scores}
    assert got[("q1", "consistency.citation.f1.variance")].value == pytest.approx(0.08 / 3)
    assert got[("q1", "consistency.citation.f1.cai")].value == pytest.approx(0.601737, abs=1e-6)
    assert got[("q2", "consistency.citation.f1.std")].value is None  # two runs: skipped, with the reason
    assert "min_runs is 3" in (got[("q2", "consistency.citation.f1.std")].error or "")


# ---------------------------------------------------------------- its YAML, as written


def test_seed_yaml_is_accepted_as_written() -> None:
    trec = load_config(SEED_DATA / "trecrag.yaml")
    assert [spec.type for spec in trec.evaluators] == ["trec"]  # run_consistency: false
    options = trec.evaluators[0].options
    assert options.profile == "vectara" and options.k_values == [1, 3, 5] and options.citation.scoring == "per_passage"
    consistency = load_config(SEED_DATA / "consistency.yaml").evaluators[0].options
    assert consistency.bertscore.model_type == "xlm-roberta-large" and consistency.bertscore.lang == "en"
    assert consistency.bertscore.rescale_with_baseline is True
    assert consistency.metrics == ["bertscore", "rouge", "dispersion"]
    assert (consistency.min_runs, consistency.ddof) == (3, 0)
    text = (SEED_DATA / "trecrag.yaml").read_text(encoding="utf-8") + "profile: trec2024\n"
    back = load_config_text(text, base_dir=SEED_DATA).evaluators[0].options
    assert back.profile == "trec2024" and back.citation.scoring == "per_statement"


def test_seed_yaml_names_unknown_evaluators_and_metrics(tmp_path: Path) -> None:
    from open_rag_eval.core.errors import ConfigError

    text = (SEED_DATA / "trecrag.yaml").read_text(encoding="utf-8").replace('"trecrag"', '"golden"')
    with pytest.raises(ConfigError, match="evaluator\\[0\\].name.*trecrag, consistency"):
        load_config_text(text, base_dir=tmp_path)
    text = (SEED_DATA / "consistency.yaml").read_text(encoding="utf-8").replace("rouge_score", "rogue_score")
    with pytest.raises(ConfigError, match="metrics\\[1\\].*rogue_score"):
        load_config_text(text, base_dir=tmp_path)


def three_runs(folder: Path) -> None:
    """The demo's answers with a third run (a copy of run 1): vectara needs three runs for consistency."""
    with DEMO.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    rows += [dict(row, query_run="3") for row in rows if row["query_run"] == "1"]
    with (folder / "answers.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def run_seed_config(tmp_path: Path, fixture: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    three_runs(tmp_path)
    config = tmp_path / "config.yaml"  # the seed's text as written, plus where its answers are and which judge
    config.write_text((SEED_DATA / fixture).read_text(encoding="utf-8")
                      + 'results_folder: "."\ngenerated_answers: "answers.csv"\n'
                      + "judge:\n  model: simulated-judge\n  simulated: {}\n", encoding="utf-8")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "open_rag_eval", "eval", "--config", str(config), "--output-dir",
                           str(out)], capture_output=True, text=True, timeout=300)
    return done, out


def test_seed_trec_yaml_runs_end_to_end_on_the_simulated_judge(tmp_path: Path) -> None:
    done, out = run_seed_config(tmp_path, "trecrag.yaml")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = {row["metric"]: row for row in csv.DictReader((out / "summary.csv").open(encoding="utf-8"))}
    for metric in ("umbrela.mean", "umbrela.p@5", "umbrela.ap@3", "umbrela.mrr", "nuggets.vital", "citation.precision",
                   "citation.f1", "no_answer.answered"):
        assert summary[metric]["mean"] != "", metric
    hhem = summary["hhem.score"]  # HHEM runs under the profile; without weights: missing, counted (unavailable)
    assert int(hhem["n_failed"]) + int(hhem["n_unavailable"]) > 0
    for metric, row in summary.items():
        bounds = metric_range(metric)
        if bounds and row["ci95_low"]:
            assert bounds[0] <= float(row["ci95_low"]) <= float(row["ci95_high"]) <= bounds[1], metric
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["profile"] == "vectara" and manifest["simulated"] is True
    details = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert "umbrela.p@5" in details["outputs"][0]["scores"]


def test_seed_consistency_yaml_runs_end_to_end(tmp_path: Path) -> None:
    pytest.importorskip("rouge_score", reason="ROUGE needs rouge-score (the consistency extra)")
    done, out = run_seed_config(tmp_path, "consistency.yaml")
    assert done.returncode == 0, done.stderr[-2000:]
    summary = {row["metric"]: row for row in csv.DictReader((out / "summary.csv").open(encoding="utf-8"))}
    assert summary["consistency.rougeL"]["mean"] != "" and "consistency.rouge1" not in summary  # vectara's one ROUGE
    assert summary["consistency.rougeL"]["n"] == "5"  # 5 queries answered in three runs; the sixth once: skipped
    # the skipped query is no failure: nothing went wrong, it has fewer runs than min_runs (3)
    assert (summary["consistency.rougeL"]["n_failed"], summary["consistency.rougeL"]["n_skipped"]) == ("0", "1")
    assert summary["consistency.bertscore_f1"]["mean"] == ""  # xlm-roberta-large is not on disk: missing, not made up


# ---------------------------------------------------------------- confidence intervals (plots)


def test_intervals_are_clipped_to_the_metric_range() -> None:
    values = [1.0] * 29 + [0.0] * 1 + [1.0] * 10  # 40 values: Student's t interval, which leaves [0, 1]
    free = aggregate("citation.f1", values)
    assert free.ci95_high is not None and free.ci95_high > 1.0
    clipped = aggregate("citation.f1", values, bounds=metric_range("citation.f1"))
    assert clipped.ci95_high == 1.0 and clipped.ci95_low == free.ci95_low
    rows = [Score(query_id=f"q{i}", run=1, metric=m, value=v) for i, v in enumerate(values)
            for m in ("citation.f1", "rubric.custom")]
    summary = {a.metric: a for a in summarize(rows)}
    assert summary["citation.f1"].ci95_high == 1.0
    assert summary["rubric.custom"].ci95_high == free.ci95_high  # an unknown range is never guessed
    assert metric_range("umbrela.mean") == (0.0, 3.0) and metric_range("consistency.umbrela.mean.mean") == (0.0, 3.0)
    assert metric_range("consistency.bertscore_f1") is None  # rescaled BERTScore can be negative
    assert metric_range("consistency.citation.f1.std") == (0.0, math.inf)


def test_trec_plot_marks_each_mean_with_its_interval(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib", reason="plots need matplotlib (the plot extra)")
    import matplotlib.pyplot as plt
    from matplotlib.container import ErrorbarContainer

    from open_rag_eval.report import plots
    from open_rag_eval.report.data import ResultSet, Row

    values = [1.0, 1.0, 1.0, 0.8, 1.0, 0.9]
    rows = [Row(query_id=f"q{i}", query="", run=1, scores={"citation.f1": v, "no_answer.answered": 1.0})
            for i, v in enumerate(values)]
    results = ResultSet(label="a", path=tmp_path, layout="ours", rows=rows)
    mean, low, high = plots.mean_ci("citation.f1", values)
    assert mean == pytest.approx(0.95) and low is not None and high is not None and low < mean <= high <= 1.0
    fig, ax = plt.subplots()
    plots._box_panel(ax, "citation.f1", [results])
    bars = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    assert len(bars) == 1
    segment = bars[0].lines[2][0].get_segments()[0]
    assert (segment[0][1], segment[1][1]) == pytest.approx((low, high))
    assert f"[{low:.2f}, {high:.2f}]" in ax.get_xticklabels()[0].get_text()
    plt.close(fig)
    path = plots.plot_trec([results, results], ["citation.f1"], tmp_path / "ci.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_profile_spread_equals_the_stats_in_vectaras_consistency_csv() -> None:
    from open_rag_eval.report.loader import load_results

    path = Path(__file__).parent / "data" / "peer" / "consistency_results.csv"
    with path.open(encoding="utf-8", newline="") as handle:
        cell = json.loads(next(csv.DictReader(handle))["consistency_bert_score"])
    ours = dispersion(cell["values"], ddof=ConsistencyOptions(profile="vectara").ddof)
    assert ours["std"] == pytest.approx(cell["stats"]["std"], abs=1e-12)  # 0.020548: the population std
    assert ours["cai"] == pytest.approx(cell["stats"]["consistency_adjusted_index"], abs=1e-12)
    assert dispersion(cell["values"])["std"] == pytest.approx(0.025166, abs=1e-6)  # ours, n - 1: larger
    loaded = load_results(path).rows[0].scores
    assert loaded["consistency.bertscore_f1.cai"] == pytest.approx(ours["cai"])
