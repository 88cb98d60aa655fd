"""Judge health: parse classes of canned replies, the counts a run records, thresholds, and the CLI end to end."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path
from typing import Any

import pytest

from open_rag_eval.cli import main
from open_rag_eval.health.check import HealthThresholds, assess
from open_rag_eval.core.parsing import (
    classify_labels,
    classify_no_answer,
    classify_nugget_list,
    classify_support,
    classify_umbrela,
)
from open_rag_eval.core.recording import HealthRecorder, recording
from open_rag_eval.metrics.citation import CitationJudge, CitationOptions, citation_result
from open_rag_eval.metrics.nuggets import Nuggetizer, NuggetOptions
from open_rag_eval.metrics.umbrela import UmbrelaGrader, UmbrelaOptions
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput
from tests.fakes import ScriptedJudge, task_is
from tests.openai_server import Reply, ScriptedServer

# METHODS 7.2's UMBRELA replies (trec2024 values) with their class, then replies that only the fallback or an echo
# of the rubric reads. (reply, reference grade or None for invalid, class)
UMBRELA = [
    ("##final score: 2", 2, "clean"),
    ("M: 2, T: 1, O: 3", 3, "clean"),
    ('{"O": 2}', 2, "clean"),
    ("The passage refers to 2 of the aspects. ##final score: 1", 2, "clean"),  # pattern 3 is a primary pattern
    ("##final score: 3\n##final score: 1", 1, "clean"),
    ("score: 2 (M=2, T=1)", 1, "fallback"),  # the last digit anywhere: 1, not the 2 the reply gave
    ("Given all aspects, I would assign it a score of 3.", 3, "fallback"),
    ("final score - 2", 2, "fallback"),
    ("Relevance category 1", 1, "clean"),
    ("0", 0, "clean"),  # a bare grade is the basic prompt's own format
    ("Explanation: the passage answers it.\n**3**", 3, "clean"),
    ("4", None, "invalid"),
    ("I cannot determine the relevance.", None, "invalid"),
    ("", None, "invalid"),
    # the rubric's own list numbers: "2." is taken as grade 2
    ("1. Determine the score of 0 if unrelated.\n2. Measure how well the content matches", 2, "echo"),
    ("0 = represent that the passage has nothing to do with the query\n1 = represents related\n"
     "2 = represents some answer\n3 = represents the exact answer\n##final score: 2", 2, "echo"),
]


@pytest.mark.parametrize(("reply", "grade", "klass"), UMBRELA)
def test_umbrela_parse_classes(reply: str, grade: int | None, klass: str) -> None:
    reference = classify_umbrela(reply)
    assert reference.klass == klass
    assert reference.value == ((0, False) if grade is None else (grade, True))  # the reference value is kept
    strict = classify_umbrela(reply, "strict")
    assert strict.klass == klass  # the class describes the reply, whatever the profile
    assert strict.value == (reference.value if klass == "clean" else None)


@pytest.mark.parametrize(("reply", "label", "klass"), [
    ("Full Support", "FS", "clean"), ("**Partial Support**", "PS", "clean"), ("No Support.", "NS", "clean"),
    ("There is no full support here.", "FS", "clean"),
    ("Partial Support, not Full Support", "FS", "fallback"),  # two labels: the script's order decides
    ('Respond as either "Full Support", "Partial Support", or "No Support"', "FS", "echo"),
    ("Not supported", None, "invalid"), ("Unsupported", None, "invalid"), ("", None, "invalid"),
])
def test_support_parse_classes(reply: str, label: str | None, klass: str) -> None:
    assert classify_support(reply) == classify_support(reply, "reference")
    assert (classify_support(reply).value, classify_support(reply).klass) == (label, klass)
    assert classify_support(reply, "strict").value == (label if klass == "clean" else None)


def test_no_answer_and_nugget_parse_classes() -> None:
    assert [(p.value, p.klass) for p in map(classify_no_answer, ["yes", '"No"', "yes or no", "maybe"])] == [
        ("yes", "clean"), ("no", "clean"), (None, "echo"), (None, "invalid")]
    assert classify_nugget_list('["a", "b", "..."]').klass == "echo"  # the creator prompt's own example
    assert classify_nugget_list('```python\n["x is y"]\n```').klass == "clean"
    assert classify_nugget_list("Updated Nugget List: ['x']").klass == "invalid"
    allowed = ("support", "partial_support", "not_support")
    assert classify_labels('["supported"]', 1, allowed).value == ["supported"]  # kept, earns 0 (reference)
    assert classify_labels('["supported"]', 1, allowed).klass == "fallback"
    assert classify_labels('["supported"]', 1, allowed, "strict").value is None
    assert classify_labels('["support"]', 2, allowed).klass == "invalid"  # length mismatch


def test_ask_records_one_judgment_per_question_with_its_last_class() -> None:
    judge = ScriptedJudge().add(task_is("nugget_assign"), "garbage", '["support", "not_support"]')
    judge.add(task_is("umbrela", "p1"), "final score - 2").add(task_is("umbrela", "p2"), "##final score: 1")
    with recording() as recorder:
        assigned = asyncio.run(Nuggetizer().assign(judge, "q", "answer", _scored(["a", "b"])))
        grader = UmbrelaGrader()
        grades = [asyncio.run(grader.grade(judge, "q", Passage(id=i, text=i))) for i in ("p1", "p2")]
    assert [a.assignment for a in assigned] == ["support", "not_support"] and assigned[0].parse == "clean"
    assert [(g.grade, g.parse) for g in grades] == [(2, "fallback"), (1, "clean")]
    assign = recorder.tasks["nugget_assign"]
    assert (assign.judgments, assign.replies, assign.reasked, assign.classes["clean"]) == (1, 2, 1, 1)
    umbrela = recorder.tasks["umbrela"]
    assert (umbrela.judgments, umbrela.classes["fallback"], umbrela.classes["clean"]) == (2, 1, 1)


def test_strict_profiles_refuse_fallback_and_echo() -> None:
    judge = ScriptedJudge().add(task_is("umbrela"), "final score - 2")
    grade = asyncio.run(UmbrelaGrader(UmbrelaOptions(parse="strict")).grade(judge, "q", Passage(id="p", text="t")))
    assert (grade.grade, grade.valid, grade.status, grade.parse) == (0, False, "defaulted", "fallback")
    assert "strict" in (grade.reason or "")
    judge = ScriptedJudge().add(task_is("nugget_assign"), '["supported"]', '["support"]')
    strict = asyncio.run(Nuggetizer(NuggetOptions(parse="strict")).assign(judge, "q", "a", _scored(["x"])))
    assert [a.assignment for a in strict] == ["support"] and len(judge.calls) == 2  # re-asked, not kept


def _scored(texts: list[str]) -> list[Any]:
    from open_rag_eval.metrics.nuggets import ScoredNugget

    return [ScoredNugget(text, "vital", "ok") for text in texts]


def _output(n: int = 4) -> RAGOutput:
    passages = tuple(Passage(id=f"p{i}", text=f"passage {i}") for i in range(1, n + 1))
    answer = tuple(AnswerPart(text=f"S{i}.", citations=(f"p{i}",)) for i in range(1, n + 1))
    return RAGOutput(query_id="q1", query="what?", passages=passages, answer=answer)


def test_recall_built_on_one_of_four_statements_is_visible_and_flagged() -> None:
    judge = ScriptedJudge().add(task_is("support", "S1."), "Full Support")
    for i in (2, 3, 4):
        judge.add(task_is("support", f"S{i}."), "I cannot tell")
    output = _output()
    with recording() as recorder:
        judgments = asyncio.run(CitationJudge().judge_output(judge, output))
    scores, detail = citation_result(output, judgments, CitationOptions())
    by = {s.metric: s.value for s in scores}
    assert by["citation.recall"] == 1.0 and by["citation.precision"] == 1.0  # the reference convention
    assert (by["citation.n_cited"], by["citation.n_unlabelled"], by["citation.n_unparsed"]) == (4, 3, 3)
    assert [j["parse"] for s in detail.data["statements"] for j in s["judgments"]] == [
        "clean", "invalid", "invalid", "invalid"]
    report = assess(recorder, scores, HealthThresholds())
    assert report.low_labelled == [{"query_id": "q1", "run": 1, "n_cited": 4, "n_labelled": 1}]
    assert report.tasks["support"]["rates"]["invalid"] == 0.75
    assert not report.healthy and any("1 of 4" in line for line in report.problems)
    rows = {a.metric: (a.mean, a.n) for a in report.summary_rows()}
    assert rows["health.support.invalid_rate"] == (0.75, 4)
    assert rows["health.support.low_labelled_output_rate"] == (1.0, 1)


def test_thresholds_decide_health_and_rates_add_up() -> None:
    recorder = HealthRecorder()
    for klass in ["clean"] * 18 + ["fallback", "failed"]:
        recorder.record("umbrela", klass, 1)
    report = assess(recorder, [], HealthThresholds())
    rates = report.tasks["umbrela"]["rates"]
    assert sum(rates[k] for k in ("clean", "fallback", "echo", "invalid", "failed")) == pytest.approx(1.0)
    assert (rates["fallback"], rates["failed"]) == (0.05, 0.05) and report.healthy  # limits are "above"
    recorder.record("umbrela", "failed", 1)
    assert not assess(recorder, [], HealthThresholds()).healthy  # 2 of 21 > 5%
    assert assess(recorder, [], HealthThresholds(max_failed_rate=0.2)).healthy


# -- the CLI, end to end, against a loopback OpenAI-compatible server with canned replies ------------------------

UMBRELA_REPLIES = {"passage 1": "##final score: 2", "passage 2": "final score - 3",
                   "passage 3": "1. Determine the score of 0 if unrelated.\n2. Measure the match", "passage 4": "N/A"}
SUPPORT_REPLIES = {"S1.": "Full Support", "S2.": "Full Support, Partial Support, or No Support",
                   "S3.": "I cannot say", "S4.": "Not supported"}


def _noisy(body: dict[str, Any]) -> Reply:
    """Replies by prompt: UMBRELA one per class, support clean/echo/invalid/invalid, assignment re-asked once."""
    user = body["messages"][-1]["content"]
    system = body["messages"][0]["content"] if len(body["messages"]) > 1 else ""
    if system == "You are a helpful assistant.":
        return Reply.ok(next(r for p, r in UMBRELA_REPLIES.items() if f"Passage: {p}\n" in user))
    if "NuggetizeLLM" in system:
        return Reply.ok('["n1", "n2"]')
    if "NuggetizeScoreLLM" in system:
        return Reply.ok('["vital", "okay"]')
    if "NuggetizeAssignerLLM" in system:
        return Reply.ok("garbage" if body["temperature"] == 0.0 else '["support", "not_support"]')
    if "Statement:" in user:
        return Reply.ok(next(r for s, r in SUPPORT_REPLIES.items() if f"Statement: {s}\n" in user))
    return Reply.ok("yes")


def _healthy(body: dict[str, Any]) -> Reply:
    reply = _noisy(body)
    text = reply.body["choices"][0]["message"]["content"]  # type: ignore[index]
    if text in UMBRELA_REPLIES.values():
        return Reply.ok("##final score: 2")
    if text in SUPPORT_REPLIES.values():
        return Reply.ok("Full Support")
    return Reply.ok('["support", "not_support"]') if text == "garbage" else reply


def _run(tmp_path: Path, responder: Any, *flags: str) -> tuple[int, Path]:
    tmp_path.mkdir(exist_ok=True)
    output = _output()
    record = {"query_id": output.query_id, "query": output.query,
              "passages": [{"id": p.id, "text": p.text} for p in output.passages],
              "answer": [{"text": a.text, "citations": list(a.citations)} for a in output.answer]}
    (tmp_path / "outputs.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    with ScriptedServer(responder=responder) as server:
        (tmp_path / "c.yaml").write_text(
            f"input: outputs.jsonl\noutput_dir: out\njudge:\n  model: test-model\n  base_url: {server.base_url}\n"
            "  cache: false\n  max_retries: 0\nevaluators:\n  - type: trec\n", encoding="utf-8")
        code = main(["-q", "eval", "--config", str(tmp_path / "c.yaml"), *flags])
    return code, tmp_path / "out"


def test_cli_health_figures_equal_the_canned_replies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, _noisy)
    assert code == 0  # unhealthy, but only --strict-judge makes that an exit code
    with (out / "summary.csv").open(encoding="utf-8") as handle:
        rows = {r["metric"]: r for r in csv.DictReader(handle)}
    expected = {"umbrela": {"clean": 0.25, "fallback": 0.25, "echo": 0.25, "invalid": 0.25, "failed": 0.0},
                "support": {"clean": 0.25, "echo": 0.25, "invalid": 0.5, "fallback": 0.0},
                "nugget_assign": {"clean": 1.0, "reasked": 1.0}, "nugget_create": {"clean": 1.0},
                "no_answer": {"clean": 1.0}}
    for task, rates in expected.items():
        for name, rate in rates.items():
            assert float(rows[f"health.{task}.{name}_rate"]["mean"]) == rate, (task, name)
    assert rows["health.umbrela.fallback_rate"]["n"] == "4"
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["health"]["healthy"] is False
    assert manifest["health"]["tasks"]["umbrela"]["counts"]["echo"] == 1
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))["outputs"][0]
    assert [g["parse"] for g in result["details"]["umbrela"]["grades"]] == ["clean", "fallback", "echo", "invalid"]
    assert result["scores"]["citation.recall"] == 1.0 and result["scores"]["citation.n_unlabelled"] == 2.0
    printed = capsys.readouterr().out
    assert "judge health: UNHEALTHY" in printed and "umbrela: 1 of 4 judgments" in printed
    assert "health." not in printed.split("judge health")[0]  # rates are not mixed into the metric table
    html = (out / "report.html").read_text(encoding="utf-8")
    assert 'id="judge-health"' in html and 'data-healthy="false"' in html
    assert html.count('data-parse="fallback"') == 1 and html.count('data-parse="echo"') == 2  # passage 2; passage 3 and S2


def test_strict_judge_exits_6_only_when_unhealthy(tmp_path: Path) -> None:
    assert _run(tmp_path / "a", _noisy, "--strict-judge")[0] == 6
    code, out = _run(tmp_path / "b", _healthy, "--strict-judge")
    assert code == 0 and json.loads((out / "manifest.json").read_text(encoding="utf-8"))["health"]["healthy"]


def test_diagnosis_names_an_unhealthy_judge_before_the_system() -> None:
    from open_rag_eval.report.hints import diagnose

    means = {"no_answer.answered": 0.5, "umbrela.mean": 2.0}
    assert "too cautious" in diagnose(means)[0][1]  # a healthy (or unknown) judge: the generator is blamed
    health = {"healthy": False, "tasks": {"umbrela": {}, "no_answer": {}},
              "problems": ["no_answer: 3 of 4 judgments never parsed (75% > max_invalid_rate 10%)"]}
    hints = diagnose(means, health=health)
    assert hints[0][0] == "judge" and "no_answer" in hints[0][1] and "umbrela" not in hints[0][1]
    assert hints[1][0] == "no answer" and "too cautious" not in hints[1][1] and "unhealthy" in hints[1][1]
    assert diagnose(means, health={"healthy": True, "tasks": {}, "problems": []}) == diagnose(means)


def test_citation_prompt_variant_paper_figure() -> None:
    from open_rag_eval.prompts import load

    judge = ScriptedJudge().add(task_is("support"), "Partial Support")
    options = CitationOptions(prompt="paper_figure")
    (row, *_), = [asyncio.run(CitationJudge(options).judge_output(judge, _output(1)))]
    assert row[0].label == "PS"
    (call,) = judge.calls
    figure = load("support.paper_figure")
    assert call.prompt_version == figure.sha256
    assert call.messages[-1][1] == figure.render(statement="S1.", citation="passage 1")
    assert "which the statement cites" in call.messages[-1][1]


def test_health_through_the_simulated_judge_equals_its_malformed_replies(tmp_path: Path) -> None:
    """The simulated judge answers some requests with a reply no parser accepts; UMBRELA and support ask once, so
    each such reply is one invalid judgment and every other final reply a clean one."""
    import shutil

    from open_rag_eval.judge.simulated import SimulatedJudgeServer, SimulatedServerConfig

    shutil.copy(Path(__file__).parent / "data" / "peer_layout.csv", tmp_path / "answers.csv")
    with SimulatedJudgeServer(SimulatedServerConfig(malformed_rate=0.3, seed=5)) as server:
        (tmp_path / "c.yaml").write_text(
            f"input: answers.csv\noutput_dir: out\njudge:\n  model: simulated-judge\n  base_url: {server.base_url}\n"
            "  cache: false\n  backoff_base_s: 0.001\n  backoff_cap_s: 0.002\n"
            "  health: {controls: false}\n"  # the server's log is compared with the metrics' judgments alone
            "evaluators:\n  - type: trec\n",
            encoding="utf-8")
        assert main(["-q", "eval", "--config", str(tmp_path / "c.yaml")]) == 0
        log = list(server.stats.log)
    tasks = json.loads((tmp_path / "out" / "manifest.json").read_text(encoding="utf-8"))["health"]["tasks"]
    for task in ("umbrela", "support"):
        final = [r.outcome for r in log if r.kind == task and r.outcome in ("ok", "malformed_text")]
        counts = tasks[task]["counts"]
        assert final.count("malformed_text") > 0  # the knob did bite
        assert (tasks[task]["judgments"], counts["invalid"], counts["clean"]) == (
            len(final), final.count("malformed_text"), final.count("ok")), task


def test_creation_failed_everywhere_is_counted_not_zero() -> None:
    """Two creation windows whose replies never parse: the scores are missing, the failures are counted."""
    from open_rag_eval.metrics.nuggets import nugget_result

    judge = ScriptedJudge().add(task_is("nugget_create"), *["Here are the nuggets: a, b"] * 4)
    segments = [f"segment {i}" for i in range(12)]  # windows of 10: two windows
    with recording() as recorder:
        built = asyncio.run(Nuggetizer(NuggetOptions(max_trials=2)).build(judge, "q", segments))
    assert (built.status, built.n_create_failed, built.create_parse) == ("failed", 2, ["invalid", "invalid"])
    scores, detail = nugget_result(_output(), built, [], NuggetOptions())
    by = {s.metric: s for s in scores}
    assert by["nuggets.vital"].value is None and "creation failed" in (by["nuggets.vital"].error or "")
    assert by["nuggets.n_create_failed"].value == 2 and detail.data["creation_parse"] == ["invalid", "invalid"]
    counts = recorder.tasks["nugget_create"]
    assert (counts.judgments, counts.replies, counts.classes["invalid"], counts.reasked) == (2, 4, 2, 2)
    report = assess(recorder, scores, HealthThresholds())
    assert report.tasks["nugget_create"]["rates"]["invalid"] == 1.0 and not report.healthy
