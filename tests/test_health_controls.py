"""Judge health beyond format: label distributions (degeneracy) and controls, judgments whose answer is known.

The recorded constant judge (tests/data/real_judge/, a real small model that gives one answer to everything) must
be called unhealthy, naming its tasks and labels; the simulated judge with noise must pass its controls.
"""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput
from open_rag_eval.health.check import FAIL, INCONCLUSIVE, PASS, WEAK, HealthThresholds, assess, label_shares
from open_rag_eval.health.controls import REFUSAL, Control, Graders, Outcome, build_controls, judge_controls, summarize
from open_rag_eval.core.labels import labels_of
from open_rag_eval.core.recording import HealthRecorder, failure_cause, recording
from open_rag_eval.metrics.citation import CitationJudge
from open_rag_eval.metrics.no_answer import NoAnswerClassifier, NoAnswerOptions
from open_rag_eval.metrics.nuggets import Nuggetizer
from open_rag_eval.metrics.umbrela import UmbrelaGrader
from open_rag_eval.evaluators.generation import GenerationEvaluator, GenerationOptions
from open_rag_eval.run.controls import graders_of
from tests.fakes import ScriptedJudge, task_is
from tests.openai_server import Reply, ScriptedServer, constant_small_model
from tests.recorded_judge import RecordedJudge, recorded_replies

DEMO = Path(__file__).resolve().parent.parent / "configs" / "data" / "demo.csv"
RECORDED_MODEL = "qwen2.5-coder-0.5b-instruct"


# -- labels and degeneracy ------------------------------------------------------------------------------------

def test_labels_of_each_kind_of_reply() -> None:
    assert labels_of("umbrela", (2, True)) == ("2",)
    assert labels_of("support", "NS") == ("NS",)
    assert labels_of("nugget_assign", ["support", "not_support", "support"]) == ("support", "not_support", "support")
    assert labels_of("nugget_create", ["a nugget"]) == ()  # free text, not labels
    assert labels_of("rubric", (7, "a reason")) == ("7",)
    assert labels_of("answer_relevance", (True, None)) == ("refusal",)
    assert labels_of("context_useful", True) == ("yes",)


def test_label_shares_literal_numbers() -> None:
    shares = label_shares({"2": 3, "0": 1})
    assert shares["top_label"] == "2" and shares["top_label_share"] == 0.75 and shares["n_labels"] == 4
    assert shares["label_entropy"] == pytest.approx(0.811278, abs=1e-6)  # -(.75 log2 .75 + .25 log2 .25)
    assert label_shares({"NS": 26})["label_entropy"] == 0.0 and label_shares({}) == {}


def _recorder(task: str, labels: list[str]) -> HealthRecorder:
    recorder = HealthRecorder()
    for label in labels:
        recorder.record(task, "clean", 1, (label,))
    return recorder


def test_degenerate_needs_95_percent_of_at_least_20_labels() -> None:
    limits = HealthThresholds()
    assert not assess(_recorder("umbrela", ["2"] * 19), [], limits).problems  # 19 labels: too few to say
    report = assess(_recorder("umbrela", ["2"] * 19 + ["3"]), [], limits)  # 95% of 20
    assert report.problems == ["umbrela: degenerate: 95% of 20 labels are '2' (one label for everything; "
                               "max_label_share 95% of at least 20)"]
    assert report.degenerate() == {"umbrela": "2"} and report.unhealthy_tasks() == ["umbrela"]
    assert assess(_recorder("umbrela", ["2"] * 18 + ["3"] * 2), [], limits).healthy  # 90%


def test_degenerate_task_whose_controls_pass_is_a_note_not_a_problem() -> None:
    controls = {"state": "run", "tasks": summarize(_outcomes("no_answer", 5, 5))}
    report = assess(_recorder("no_answer", ["yes"] * 30), [], HealthThresholds(), controls)
    assert report.healthy and report.notes[0].startswith("no_answer: 100% of 30 labels are 'yes'")


def test_failed_judgments_name_their_cause() -> None:
    assert failure_cause("judge call failed after 3 attempts: the request timed out after 20 s") == "timeout"
    assert failure_cause("the prompt (about 900 tokens) and its reply (up to 300 tokens) do not fit "
                         "judge.context_tokens (1024); no call was made") == "overflow"
    assert failure_cause("HTTP 500: boom") == "error" and failure_cause("x", refused=True) == "refused"
    recorder = HealthRecorder()
    for cause in ("timeout", "timeout", "overflow"):
        recorder.record("umbrela", "failed", 1, cause=cause)
    (line,) = assess(recorder, [], HealthThresholds()).problems
    assert line == "umbrela: 3 of 3 judgments got no reply (no reply: timeout 2, overflow 1; 100% > max_failed_rate 5%)"


def test_labels_and_causes_survive_merging_shards() -> None:
    a, b = _recorder("support", ["NS", "FS"]), _recorder("support", ["NS"])
    b.record("support", "failed", 1, cause="timeout")
    merged = HealthRecorder().merge([{t: vars(c) for t, c in r.tasks.items()} for r in (a, b)])
    counts = merged.tasks["support"]
    assert (counts.judgments, counts.labels, counts.causes) == (4, {"NS": 2, "FS": 1}, {"timeout": 1})


# -- controls: building, asking, deciding ---------------------------------------------------------------------

def _outputs() -> list[RAGOutput]:
    rows = [("q1", "Why is the sky blue?", "Air molecules scatter blue light more than red light. It is Rayleigh "
             "scattering.", "The sky is blue because air scatters blue light [1]."),
            ("q2", "What causes the seasons on Earth?", "The tilt of the rotational axis causes the seasons on "
             "Earth. Each hemisphere leans toward the Sun in turn.", "The tilt of Earth's axis causes seasons [1]."),
            ("q3", "How do vaccines work?", "Vaccines train the immune system with a harmless antigen. Memory cells "
             "remain afterwards.", "I don't know.")]
    return [RAGOutput(query_id=q, query=text, passages=(Passage(id="1", text=passage),), answer=answer)
            for q, text, passage, answer in rows]


def test_controls_are_built_from_the_run_and_know_their_answer() -> None:
    items = build_controls(_outputs(), ["umbrela", "support", "no_answer", "nugget_assign"], pairs=5)
    by_task = {task: [c for c in items if c.task == task] for task in ("umbrela", "support", "no_answer",
                                                                       "nugget_assign")}
    # q3's only answer is a refusal: it gives support pairs (from its passage) but no answer-based pairs
    assert [len(v) for v in by_task.values()] == [4, 6, 4, 4]
    high = next(c for c in by_task["umbrela"] if c.expect == "high" and c.query_id == "q1")
    assert high.text == "Why is the sky blue? The sky is blue because air scatters blue light."
    low = next(c for c in by_task["umbrela"] if c.expect == "low" and c.query_id == "q1")
    assert low.text.startswith(("The tilt", "Vaccines"))  # another query's passage
    refusal = next(c for c in by_task["no_answer"] if c.expect == "low")
    assert refusal.text == REFUSAL
    quoted = next(c for c in by_task["nugget_assign"] if c.expect == "high" and c.query_id == "q2")
    assert quoted.statement == "The tilt of Earth's axis causes seasons" and quoted.statement in quoted.text
    assert build_controls(_outputs()[:1], ["umbrela", "support"], pairs=5) == []  # one query: nothing unrelated
    assert build_controls(_outputs(), ["umbrela"], pairs=1, seed=4) == build_controls(_outputs(), ["umbrela"], 1, 4)
    assert {build_controls(_outputs(), ["umbrela"], pairs=1, seed=s)[0].query_id for s in range(8)} == {"q1", "q2"}


def _outcomes(task: str, pairs: int, told_apart: int) -> list[Outcome]:
    good = {"umbrela": ("3", "0"), "support": ("FS", "NS"), "no_answer": ("yes", "no"),
            "nugget_assign": ("support", "not_support")}[task]
    found = []
    for n in range(pairs):
        high, low = good if n < told_apart else (good[0], good[0])
        found += [Outcome(Control(task, n, "high", "q", "q", "t"), high),
                  Outcome(Control(task, n, "low", "q", "q", "t"), low)]
    return found


def test_control_verdicts_with_literal_intervals() -> None:
    constant = summarize(_outcomes("umbrela", 5, 0))["umbrela"]
    assert (constant["verdict"], constant["told_apart"], constant["correct"], constant["judged"]) == (FAIL, 0, 5, 10)
    assert constant["told_apart_ci"][1] == pytest.approx(0.434482, abs=1e-6)  # Wilson upper bound of 0 of 5
    assert constant["accuracy"] == 0.5
    assert summarize(_outcomes("support", 5, 1))["support"]["verdict"] == WEAK  # 1 of 5: upper bound 0.62
    four = summarize(_outcomes("support", 5, 4))["support"]  # 4 of 5: lower bound 0.376, below the pass level 0.5
    assert four["verdict"] == WEAK and four["told_apart_ci"][0] == pytest.approx(0.375535, abs=1e-6)
    assert four["levels"] == {"fail_below": 0.5, "pass_from": 0.5}
    assert summarize(_outcomes("support", 5, 4), pass_told_apart=0.3)["support"]["verdict"] == PASS
    assert summarize(_outcomes("umbrela", 10, 9))["umbrela"]["verdict"] == PASS  # 9 of 10: lower bound 0.596
    assert summarize(_outcomes("umbrela", 10, 8))["umbrela"]["verdict"] == WEAK  # 8 of 10: lower bound 0.490
    assert summarize(_outcomes("support", 3, 0))["support"]["verdict"] == INCONCLUSIVE  # 3 pairs prove nothing
    perfect = summarize(_outcomes("no_answer", 5, 5))["no_answer"]
    assert perfect["verdict"] == PASS and perfect["accuracy_ci"][0] == pytest.approx(0.722467, abs=1e-6)
    missing = _outcomes("umbrela", 5, 5)
    missing[0] = Outcome(missing[0].control, None, "judge call failed: HTTP 500")
    row = summarize(missing)["umbrela"]
    assert (row["judged"], row["pairs_judged"], row["verdict"]) == (9, 4, PASS)


def _graders() -> Graders:
    return Graders(UmbrelaGrader(), CitationJudge(), NoAnswerClassifier(NoAnswerOptions()), Nuggetizer())


def test_a_constant_judge_fails_every_control_it_can_be_asked() -> None:
    """The recorded model's answers, given to every request of their task."""
    judge = (ScriptedJudge().add(task_is("umbrela"), *["##final score: 2"] * 50)
             .add(task_is("support"), *["No Support"] * 50).add(task_is("no_answer"), *["no"] * 50)
             .add(task_is("nugget_assign"), *["['support', 'support']"] * 50)
             .add(task_is("context_useful"), *['{"useful": 1}'] * 50))
    outputs = _outputs() + [o.model_copy(update={"query_id": f"{o.query_id}b", "query": o.query + " Really?"})
                            for o in _outputs()]
    graders = _graders()
    graders.useful = graders_of([GenerationEvaluator(GenerationOptions(metrics=["context_precision"]))]).useful
    with recording() as recorder:
        found = asyncio.run(judge_controls(judge, outputs, graders, pairs=5))
    assert found["state"] == "run" and not recorder.tasks  # kept out of the run's parse classes and labels
    verdicts = {task: row["verdict"] for task, row in found["tasks"].items()}
    assert verdicts == {"umbrela": FAIL, "support": FAIL, "no_answer": FAIL, "nugget_assign": FAIL,
                        "context_useful": FAIL}
    assert found["tasks"]["context_useful"]["labels"] == {"high": {"yes": 4}, "low": {"yes": 4}}
    # 4 queries answered (umbrela, no_answer, nugget pairs), 6 with passages (support, at most 5 pairs); one
    # assignment call per nugget pair
    assert len(judge.calls) == 4 * 2 + 5 * 2 + 4 * 2 + 4 + 4 * 2


# -- whole runs -----------------------------------------------------------------------------------------------

def _eval(tmp_path: Path, base_url: str, model: str, metrics: str, *flags: str) -> tuple[int, Path]:
    config = tmp_path / "c.yaml"
    config.write_text(f"input: {DEMO}\noutput_dir: out\njudge:\n  model: {model}\n  base_url: {base_url}\n"
                      f"  cache: false\n  max_retries: 0\nevaluators:\n  - type: trec\n    metrics: [{metrics}]\n",
                      encoding="utf-8")
    return main(["-q", "eval", "--config", str(config), *flags]), tmp_path / "out"


def test_replayed_constant_judge_is_unhealthy_naming_tasks_and_labels(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The demo judged by the recorded real model: every request the run sends that the corpus holds gets its
    recorded reply; the controls' requests were never recorded, so they fail (no verdict, never a made-up one)."""
    with RecordedJudge() as server:
        code, out = _eval(tmp_path, server.base_url, RECORDED_MODEL, "umbrela, citation", "--strict-judge")
        hits, misses = server.hits, server.misses
    assert code == 6 and hits == 56 and misses == 20  # 30 grades + 26 support labels recorded; 20 controls not
    health = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["health"]
    assert health["healthy"] is False
    unchecked = "controls inconclusive: 10 of 10 control calls failed, 0 of 5 pairs got both verdicts, so the judge " \
                "could not be checked"  # a control whose call failed is a failed control: said, with its cause
    assert [p.split(" (")[0] for p in health["problems"]] == [
        f"umbrela: {unchecked}", f"support: {unchecked}",
        "umbrela: degenerate: 100% of 30 labels are '2'", "support: degenerate: 100% of 26 labels are 'NS'"]
    assert "(HTTP 400: the recorded corpus holds no reply to this request)" in health["problems"][0]
    assert {t: r["verdict"] for t, r in health["controls"]["tasks"].items()} == {"umbrela": INCONCLUSIVE,
                                                                                "support": INCONCLUSIVE}
    with (out / "summary.csv").open(encoding="utf-8") as handle:
        rows = {r["metric"]: r for r in csv.DictReader(handle)}
    top = rows["health.umbrela.top_label_share"]
    assert top["mean"] == "1.0" and top["n"] == "30"
    assert float(rows["health.support.label_entropy"]["mean"]) == 0.0
    accuracy = rows["health.umbrela.control_accuracy"]
    assert accuracy["mean"] == "" and accuracy["n_failed"] == "10"
    printed = capsys.readouterr().out
    assert "! umbrela: degenerate: 100% of 30 labels are '2'" in printed
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "degenerate" in html and "&#x27;NS&#x27;" in html or "'NS'" in html


def test_constant_judge_fails_its_controls_and_strict_judge_exits_6(tmp_path: Path) -> None:
    replies = set(recorded_replies(runs=("calib",)))
    assert replies == {"##final score: 2", "No Support"}  # the corpus: one answer per task
    with ScriptedServer(responder=constant_small_model) as server:
        code, out = _eval(tmp_path, server.base_url, "constant", "umbrela, citation, no_answer", "--strict-judge")
    assert code == 6
    health = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["health"]
    controls = health["controls"]["tasks"]
    assert {t: (r["verdict"], r["told_apart"], r["pairs_judged"]) for t, r in controls.items()} == {
        "umbrela": (FAIL, 0, 5), "support": (FAIL, 0, 5), "no_answer": (FAIL, 0, 5)}
    assert controls["umbrela"]["labels"] == {"high": {"2": 5}, "low": {"2": 5}}
    failed = [p for p in health["problems"] if "controls failed" in p]
    assert [p.split(":")[0] for p in failed] == ["umbrela", "support", "no_answer"]


def test_simulated_judge_with_noise_passes_its_controls(tmp_path: Path) -> None:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

    with SimulatedJudgeServer(SimulatedServerConfig(noise_rate=0.1, seed=3)) as server:
        code, out = _eval(tmp_path, server.base_url, "simulated-judge", "umbrela, nuggets, citation, no_answer",
                          "--strict-judge")
    health = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["health"]
    assert code == 0 and health["healthy"], health["problems"]
    # 5 of 5 told apart passes (Wilson lower bound 0.57); 4 of 5 (0.38) is weak: a note, never a problem
    assert {t: (r["verdict"], r["told_apart"]) for t, r in health["controls"]["tasks"].items()} == {
        "umbrela": (PASS, 5), "support": (PASS, 5), "no_answer": (WEAK, 4), "nugget_assign": (PASS, 5)}
    assert any(n.startswith("no_answer: controls weak: 4 of 5 pairs told apart (80%, 95% CI 38%-96%)")
               for n in health["notes"])
    assert health["controls"]["tasks"]["umbrela"]["accuracy"] >= 0.8


def test_controls_can_be_turned_off_and_are_in_the_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from open_rag_eval.config import load_config
    from open_rag_eval.run.pipeline import load_outputs, plan

    config = tmp_path / "c.yaml"
    base = f"input: {DEMO}\njudge:\n  model: simulated-judge\n  cache: false\n"
    tail = "evaluators:\n  - type: trec\n    metrics: [umbrela, citation, no_answer]\n"
    config.write_text(base + tail, encoding="utf-8")
    loaded = load_config(config)
    with_controls = plan(loaded, load_outputs(loaded)).by_task()
    config.write_text(base + "  health: {controls: false}\n" + tail, encoding="utf-8")
    loaded = load_config(config)
    without = plan(loaded, load_outputs(loaded)).by_task()
    # a no-answer control on the system's own answer is the metric's own request: the cache answers it once
    assert {t: with_controls[t].calls - without[t].calls for t in without} == {"umbrela": 10, "support": 10,
                                                                               "no_answer": 5}


# -- calibrate and the injection probe name a constant judge --------------------------------------------------

def test_calibrate_names_a_judge_that_gives_one_label_for_everything() -> None:
    from open_rag_eval.calibration.compare import compare
    from open_rag_eval.inputs.human_labels import Item, Judged
    from open_rag_eval.calibration.run import table

    human = {Item("umbrela", f"q{i}", None, "p1"): grade for i, grade in enumerate([0, 1, 2, 3, 3, 0])}
    constant = [Judged(item, 2, "") for item in human]
    [umbrela] = compare(human, constant, resamples=50)
    assert umbrela.one_label == 2 and umbrela.as_dict()["judge_one_label"] == 2
    assert table([umbrela])[0] == ("umbrela: the judge gave one label for everything: 2 to all 6 compared items (it "
                                   "does not discriminate; agreement with people is chance at best)")
    varied = [Judged(item, label, "") for item, label in human.items()]
    [agreeing] = compare(human, varied, resamples=50)
    assert agreeing.one_label is None and not table([agreeing])[0].startswith("umbrela: the judge gave")


def test_the_probe_leads_with_its_result_and_names_a_constant_judge(tmp_path: Path) -> None:
    """The recorded model's UMBRELA answer, for every request (the probe's planted payload included)."""
    from open_rag_eval.calibration.injection import probe
    from open_rag_eval.inputs import read_outputs

    judge = ScriptedJudge().add(task_is("umbrela"), *["##final score: 2"] * 200)
    result = asyncio.run(probe(judge, read_outputs(DEMO), sample=5, tasks=("umbrela",)))
    assert result.one_label() == {"umbrela": 2}
    assert result.headline() == [
        "injection probe: text planted in the material moved umbrela to the planted verdict on 0 of 15 judgments "
        "that were not there already (0%, 95% CI 0%-20%)",
        "umbrela: the judge gave one label for everything without a payload: 2"]


def test_health_shows_during_the_run_naming_the_cause(tmp_path: Path) -> None:
    """The recorded constant judge: the 24th judgment already shows the degenerate task, long before the end."""
    from open_rag_eval.config import load_config
    from open_rag_eval.core.progress import Event, Progress
    from open_rag_eval.run.pipeline import run

    seen: list[Event] = []

    class Watching(Progress):
        def notify(self, event: Event) -> None:
            seen.append(event)
            super().notify(event)

    with RecordedJudge() as server:
        config = tmp_path / "c.yaml"
        config.write_text(f"input: {DEMO}\noutput_dir: out\njudge:\n  model: {RECORDED_MODEL}\n"
                          f"  base_url: {server.base_url}\n  cache: false\n  max_retries: 0\nevaluators:\n"
                          "  - type: trec\n    metrics: [umbrela, citation]\n", encoding="utf-8")
        run(load_config(config), progress=Watching())
    first = next(e for e in seen if "degenerate" in e.text)
    assert first.kind == "health" and first.level == "warning"
    # umbrela and support run at once and both are constant in the recording: whichever reaches 24 labels first
    assert first.text.startswith("judge health so far (")
    assert ("umbrela: degenerate: 100% of 24 labels are '2'" in first.text
            or "support: degenerate: 100% of 24 labels are 'NS'" in first.text), first.text
    assert int(first.text.split("(")[1].split()[0]) < 56  # before the run's 56 judgments were in
    assert any("controls: umbrela inconclusive, support inconclusive" in e.text for e in seen)


def test_live_health_says_nothing_before_there_is_something_to_say() -> None:
    """No "0 judgments: no problem" line: nothing before a judgment or a verdict; the controls' verdicts alone once
    in."""
    from open_rag_eval.core.progress import Event
    from open_rag_eval.health.check import HealthThresholds
    from open_rag_eval.health.check import PASS
    from open_rag_eval.health.live import LiveHealth

    seen: list[Event] = []
    live = LiveHealth(seen.append, HealthThresholds())
    live.show()
    live.controls_done({"state": "run", "tasks": {}, "items": []})
    assert seen == []
    live.controls_done({"state": "run", "tasks": {"umbrela": {"verdict": PASS}}, "items": []})
    assert [(e.kind, e.text) for e in seen] == [("health", f"judge controls: umbrela {PASS}")]



def test_live_health_says_when_a_failed_control_is_not_a_problem() -> None:
    """A criterion's failed controls are a note while its grades are not all one label (docs/judge-health.md):
    the live line says so beside "no problem"; a failed UMBRELA control is a problem and says plain "fail"."""
    from open_rag_eval.core.progress import Event
    from open_rag_eval.core.recording import HealthRecorder
    from open_rag_eval.health.check import FAIL, HealthThresholds
    from open_rag_eval.health.live import LiveHealth

    seen: list[Event] = []
    live = LiveHealth(seen.append, HealthThresholds())
    recorder = HealthRecorder()
    for grade in ("0", "1", "2", "1"):
        recorder.record("criteria.explains_cause", "clean", 1, [grade])
    live.recorder = recorder
    failed = {"verdict": FAIL, "pairs": 4, "pairs_judged": 4, "told_apart": 0, "told_apart_share": 0.0,
              "told_apart_ci": [0.0, 0.49], "correct": 0, "judged": 8, "labels": {"high": {"2": 4}, "low": {"2": 4}}}
    live.controls_done({"state": "run", "tasks": {"criteria.explains_cause": failed}, "items": []})
    assert [(e.kind, e.level, e.text) for e in seen][-1][2] == (
        "judge health so far (4 judgments): no problem; controls: criteria.explains_cause fail (a problem only if "
        "its grades are all one label)")
    live.controls_done({"state": "run", "tasks": {"umbrela": failed}, "items": []})
    assert seen[-1].level == "warning" and seen[-1].text.endswith("; controls: umbrela fail"), seen[-1].text

# -- judge.context_tokens counts the reply the task needs, not the cap ------------------------------------------

def test_context_tokens_counts_the_reply_a_task_needs_not_its_cap() -> None:
    from open_rag_eval.core.errors import JudgeCallError
    from open_rag_eval.judge.rehearsal import expected_reply, reply_need
    from open_rag_eval.judge.tokens import count_tokens
    from tests.openai_server import config, outcome, with_judge

    segments = "\n".join(f"[{i}] " + "solar panels turn light into electric power " * 6 for i in range(1, 6))
    user = (f"Search Query: what is solar power?\nContext:\n{segments}\nSearch Query: what is solar power?\n"
            "Initial Nugget List: []\nInitial Nugget List Length: 0\nOnly update the list of atomic nuggets (if "
            "needed, else return as is). Do not explain. Always answer in short nuggets (not questions). List in the "
            "form [\"a\", \"b\", ...] and a and b are in quotes. Make at most 30 nuggets.")
    creation = ask_request("nugget_create", user, 4096)
    # the method's reply: a list of 5 nuggets (one per passage), 61 tokens; a quarter more and 16 tokens of slack
    assert count_tokens(expected_reply(creation)) == 61 and reply_need(creation, 4096) == 77 + 16
    assert reply_need(creation, 50) == 50  # never beyond the cap
    with ScriptedServer(default=Reply.ok('["solar panels turn light into power"]')) as server:
        cfg = config(server.base_url, context_tokens=1024)
        fits = with_judge(cfg, lambda judge: judge.complete(creation))  # ~520 prompt + 4,096 cap: sent, answered
        long = with_judge(cfg, lambda judge: outcome(judge, ask_request("umbrela", "word " * 1000, 100)))
    assert fits.text.startswith('["solar') and len(server.completions) == 1
    # "##final score: 2" is 6 tokens: ceil(6 x 1.25) + 16 = 24, not the 100-token cap
    assert isinstance(long, JudgeCallError) and "the reply its task needs (about 24 tokens)" in str(long)


def ask_request(task: str, user: str, cap: int) -> Any:
    from open_rag_eval.judge.base import JudgeRequest

    return JudgeRequest.chat(task, user, params={"temperature": 0, "max_tokens": cap})


def test_validate_and_the_dry_run_name_the_tasks_that_cannot_fit(tmp_path: Path,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    import logging

    config = tmp_path / "c.yaml"
    config.write_text(f"input: {DEMO}\noutput_dir: out\njudge:\n  model: simulated-judge\n  simulated: {{}}\n"
                      "  context_tokens: 400\n  cache: false\nevaluators:\n  - type: trec\n"
                      "    metrics: [umbrela, nuggets]\n", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        assert main(["validate", "--config", str(config)]) == 0
    named = [r.getMessage() for r in caplog.records if "judge.context_tokens (400)" in r.getMessage()]
    assert any("of 40 umbrela requests cannot fit with the reply the task needs" in m for m in named)
    assert any("nugget_create requests cannot fit" in m for m in named)
    assert not any("nugget_importance" in m for m in named)  # its prompts fit


def test_the_report_leads_with_the_probe_when_it_ran_on_these_results(tmp_path: Path) -> None:
    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig
    from open_rag_eval.report import write_report

    with SimulatedJudgeServer(SimulatedServerConfig()) as server:
        code, out = _eval(tmp_path, server.base_url, "simulated-judge", "umbrela")
    assert code == 0 and 'id="injection-probe"' not in (out / "report.html").read_text(encoding="utf-8")
    line = "injection probe: text planted in the material moved umbrela to the planted verdict on 22 of 24 judgments"
    (out / "injection.json").write_text(json.dumps({"headline": [line]}), encoding="utf-8")
    write_report(out)
    html = (out / "report.html").read_text(encoding="utf-8")
    assert line in html and html.index('id="injection-probe"') < html.index('id="judge-health"')


def test_structured_replies_are_named_beside_their_parse_rates() -> None:
    from open_rag_eval.health.text import health_lines
    from open_rag_eval.report.health import render_health_panel

    recorder = _recorder("support", ["NS", "FS"])
    recorder.record("support", "invalid", 2)
    report = assess(recorder, [], HealthThresholds(), None, "json_schema")
    assert report.snapshot()["reply_format"] == "json_schema" and report.tasks["support"]["rates"]["invalid"] == 1 / 3
    assert health_lines(report)[0].startswith("judge health: UNHEALTHY (share of judgments per task; replies asked "
                                              "as json_schema;")
    assert "Replies asked as json_schema" in render_health_panel({"health": report.snapshot()})
    assert "replies asked" not in health_lines(assess(recorder, [], HealthThresholds()))[0]


def test_controls_that_break_are_said_not_run_and_never_cost_the_run() -> None:
    from open_rag_eval.core.errors import JudgeUnavailable
    from open_rag_eval.evaluators.trec import TrecEvaluator
    from open_rag_eval.run.controls import run_controls_of

    class Broken:
        model, simulated = "broken", False

        def __init__(self, error: Exception) -> None:
            self.error = error

        async def complete(self, request: Any) -> Any:
            raise self.error

    outputs = _outputs()
    found = asyncio.run(run_controls_of([TrecEvaluator()], outputs, Broken(RuntimeError("boom")), HealthThresholds()))
    assert found == {"state": "not run: RuntimeError('boom')", "tasks": {}, "items": []}
    with pytest.raises(JudgeUnavailable):  # a judge that is down stops the run, as its metrics would
        asyncio.run(run_controls_of([TrecEvaluator()], outputs, Broken(JudgeUnavailable("down")), HealthThresholds()))
    report = assess(HealthRecorder(), [], HealthThresholds(), found)
    assert report.healthy and report.notes == ["controls not run: RuntimeError('boom')"]


def test_the_run_s_controls_are_built_at_once_and_its_outputs_not_kept_while_they_are_asked() -> None:
    import gc
    import weakref

    from open_rag_eval.evaluators.trec import TrecEvaluator
    from open_rag_eval.run.controls import run_controls_of

    class Outputs(list):  # type: ignore[type-arg]  # a list a weak reference can name
        pass

    outputs = Outputs(_outputs() + [o.model_copy(update={"query_id": f"{o.query_id}b", "query": o.query + " Really?"})
                                    for o in _outputs()])
    kept = weakref.ref(outputs)
    judge = ScriptedJudge().add(task_is("umbrela"), *["##final score: 2"] * 50)
    asking = run_controls_of([TrecEvaluator()], outputs, judge, HealthThresholds())
    del outputs
    gc.collect()
    assert kept() is None  # a large run's 10,000 outputs leave memory before the evaluation's first window
    found = asyncio.run(asking)  # type: ignore[arg-type]
    assert found is not None and found["state"] == "run" and found["tasks"]["umbrela"]["judged"] == 8


def test_a_sampled_dry_run_counts_the_controls_once_not_scaled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from open_rag_eval.config import load_config
    from open_rag_eval.run import pipeline, planning

    config = tmp_path / "c.yaml"
    base = f"input: {DEMO}\njudge:\n  model: simulated-judge\n  simulated: {{}}\n  cache: false\n"
    tail = "evaluators:\n  - type: trec\n    metrics: [umbrela, citation, no_answer]\n"
    monkeypatch.setattr(planning, "REHEARSED_QUERIES", 3)
    planned = {}
    for name, extra in (("on", ""), ("off", "  health: {controls: false}\n")):
        config.write_text(base + extra + tail, encoding="utf-8")
        loaded = load_config(config)
        outputs = [o.model_copy(update={"query_id": f"{o.query_id}-{i}", "query": f"{o.query} ({i})"})
                   for i in range(4) for o in pipeline.load_outputs(loaded)]  # 24 queries, 3 of them rehearsed
        plan = pipeline.plan(loaded, outputs)
        assert plan.scale > 7
        planned[name] = plan.by_task()
    # 5 pairs per task whatever the sample, not scaled (support: the copied queries share their passages, so two of
    # the ten support requests are one: two high items copied from one passage; the low items never share a passage
    # while others are free); a no-answer control on a system's answer is the metric's own request,
    # which a sample cannot recognise unless that query was rehearsed: an upper bound (5 more than the run)
    assert {t: planned["on"][t].calls - planned["off"][t].calls for t in planned["off"]} == {
        "umbrela": 10, "support": 9, "no_answer": 10}


def test_an_unrelated_passage_is_picked_from_a_bounded_pool() -> None:
    """Building controls once scanned every passage of the run for every pair tried (a 100,000-output run never
    finished its first window): the pool is a spread sample of at most POOL_MAX passages, words computed once."""
    from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput
    from open_rag_eval.health.controls import ATTEMPTS, POOL_MAX, _Pool, _queries, build_controls

    outputs = [RAGOutput(query_id=f"q{i}", query=f"what is topic {i}?", run=1,
                         passages=tuple(Passage(id=f"p{i}-{j}", text=f"Topic {i} fact {j} is told here in words.")
                                        for j in range(5)),
                         answer=(AnswerPart(text=f"Topic {i} is a fact told in several plain words."),))
               for i in range(2000)]
    pool = _Pool.of(_queries(outputs))
    assert len(pool.entries) <= POOL_MAX and len({qid for qid, _, _ in pool.entries}) > 100
    controls = build_controls(outputs, ["umbrela", "support", "no_answer"], pairs=5)
    assert {c.task for c in controls} == {"umbrela", "support", "no_answer"} and len(controls) == 30
    assert ATTEMPTS >= 5
