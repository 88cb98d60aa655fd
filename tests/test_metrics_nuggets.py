import asyncio

from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.metrics.nuggets import (
    AssignedNugget,
    NuggetList,
    Nuggetizer,
    NuggetOptions,
    ScoredNugget,
    nugget_result,
)
from tests.fakes import ScriptedJudge, task_is
from tests.trec_fakes import make_output

SEGMENTS = [f"segment {i}" for i in range(1, 13)]


def test_creation_windows_replace_the_list_and_render_the_reference_context() -> None:
    judge = ScriptedJudge().add(task_is("nugget_create"), '```python\n["a", "b"]\n```', '["a", "b", "c"]')
    texts, status, notes = asyncio.run(Nuggetizer().create(judge, "what is x", SEGMENTS))
    assert (texts, status, notes) == (["a", "b", "c"], "ok", [])
    first, second = (call.messages[1][1] for call in judge.calls)
    assert "Context:\n[1] segment 1\n" in first and "[10] segment 10\nSearch Query: what is x\n" in first
    assert "Initial Nugget List: []\nInitial Nugget List Length: 0" in first
    assert "Context:\n[1] segment 11\n[2] segment 12\n" in second
    assert "Initial Nugget List: ['a', 'b']\nInitial Nugget List Length: 2" in second
    assert judge.calls[0].messages[0][1].startswith("You are NuggetizeLLM")
    assert [c.params["temperature"] for c in judge.calls] == [0.0, 0.0]


def test_creation_keeps_at_most_max_nuggets() -> None:
    judge = ScriptedJudge().add(task_is("nugget_create"), str([f"n{i}" for i in range(1, 36)]))
    texts, _, _ = asyncio.run(Nuggetizer().create(judge, "q", SEGMENTS[:3]))
    assert texts == [f"n{i}" for i in range(1, 31)]


def test_reask_on_parse_failure_at_temperature_0_2_with_fresh_sample() -> None:
    judge = ScriptedJudge().add(task_is("nugget_create"), 'Updated Nugget List: ["a"]', '["a"]')
    texts, status, _ = asyncio.run(Nuggetizer().create(judge, "q", SEGMENTS[:2]))
    assert texts == ["a"] and status == "ok"
    assert [c.params["temperature"] for c in judge.calls] == [0.0, 0.2]
    assert [c.sample for c in judge.calls] == [0, 1000]


def test_window_that_never_parses_keeps_the_previous_list_flagged() -> None:
    judge = ScriptedJudge().add(task_is("nugget_create", "[1] segment 1\n"), '["a"]').add(
        task_is("nugget_create", "[1] segment 11\n"), "not a list", "not a list", "not a list")
    texts, status, notes = asyncio.run(Nuggetizer(NuggetOptions(max_trials=3)).create(judge, "q", SEGMENTS))
    assert texts == ["a"] and status == "defaulted"
    assert notes == ["window 2: reply did not parse after 3 attempt(s): not a list of strings; kept the previous list"]
    assert [c.params["temperature"] for c in judge.calls[1:]] == [0.0, 0.2, 0.2]


def test_a_first_window_that_never_parses_says_there_was_no_list_yet() -> None:
    judge = ScriptedJudge().add(task_is("nugget_create", "[1] segment 1\n"), "no idea", "no idea").add(
        task_is("nugget_create", "[1] segment 11\n"), '["b"]')
    texts, status, notes = asyncio.run(Nuggetizer(NuggetOptions(max_trials=2)).create(judge, "q", SEGMENTS))
    assert texts == ["b"] and status == "defaulted"
    assert notes == ["window 1: reply did not parse after 2 attempt(s): not a list of strings; no list yet"]
    # the re-ask sent the unreadable reply back, quoting what was wrong
    assert judge.calls[1].messages[-2:] == (("assistant", "no idea"), (
        "user", "Your reply could not be read: not a list of strings. Reply again to the request above, in exactly "
                "the format it asks for and nothing else."))


def test_creation_failing_entirely_is_failed() -> None:
    judge = ScriptedJudge().add(task_is("nugget_create"), JudgeCallError("HTTP 500"))
    texts, status, notes = asyncio.run(Nuggetizer().create(judge, "q", SEGMENTS[:2]))
    assert (texts, status) == ([], "failed") and "HTTP 500" in notes[0]


def test_importance_lowercased_and_failed_never_defaulted_after_trials_or_call_error() -> None:
    judge = ScriptedJudge().add(task_is("nugget_importance"), '["Vital", "OKAY"]')
    scored = asyncio.run(Nuggetizer().score(judge, "q", ["a", "b"]))
    assert scored == [ScoredNugget("a", "vital", "ok"), ScoredNugget("b", "okay", "ok")]
    judge = ScriptedJudge().add(task_is("nugget_importance"), '["vital"]', '["vital"]')
    scored = asyncio.run(Nuggetizer(NuggetOptions(max_trials=2)).score(judge, "q", ["a", "b"]))
    assert scored == [ScoredNugget("a", "failed", "failed"), ScoredNugget("b", "failed", "failed")]
    assert scored[0].reason == "reply did not parse after 2 attempt(s): 1 labels for 2 nuggets"
    judge = ScriptedJudge().add(task_is("nugget_importance"), JudgeCallError("timeout"))
    assert [n.status for n in asyncio.run(Nuggetizer().score(judge, "q", ["a"]))] == ["failed"]


def test_an_importance_that_cannot_be_had_fails_the_list_with_its_reason_never_okay() -> None:
    """"2 labels for 3 nuggets" on every re-ask (what a real 1.5B model did, with and without a schema): the
    query's nugget scores are missing with that reason in results.json -- not computed over a defaulted okay."""
    judge = ScriptedJudge().add(task_is("nugget_create"), "['a', 'b', 'c']").add(
        task_is("nugget_importance"), '["vital", "okay"]', '["vital", "okay"]')
    built = asyncio.run(Nuggetizer(NuggetOptions(max_trials=2)).build(judge, "q", ["s"]))
    reason = "reply did not parse after 2 attempt(s): 2 labels for 3 nuggets"
    assert (built.nuggets, built.status, built.step) == ([], "failed", "importance")
    assert built.notes == [f"importance of 3 of 3 nuggets failed: {reason}"]
    scores, detail = nugget_result(make_output(), built, [], NuggetOptions())
    vital = next(s for s in scores if s.metric == "nuggets.vital")
    assert vital.value is None and vital.error == f"nugget importance failed: importance of 3 of 3 nuggets failed: {reason}"
    assert detail.data["creation_status"] == "failed" and reason in detail.data["creation_notes"][0]


def test_importance_and_assignment_windows_of_ten_run_concurrently() -> None:
    texts = [f"n{i}" for i in range(25)]
    judge = ScriptedJudge().add(task_is("nugget_importance", "n0'"), str(["vital"] * 10)).add(
        task_is("nugget_importance", "n10'"), str(["okay"] * 10)).add(task_is("nugget_importance"), str(["vital"] * 5))
    scored = asyncio.run(Nuggetizer().score(judge, "q", texts))
    assert [n.importance for n in scored] == ["vital"] * 10 + ["okay"] * 10 + ["vital"] * 5
    assert len(judge.calls) == 3


def test_build_selects_top_20_vital_first() -> None:
    texts = [f"n{i}" for i in range(25)]
    judge = ScriptedJudge().add(task_is("nugget_create"), str(texts)).add(
        task_is("nugget_importance", "n0'"), str(["okay"] * 10)).add(
        task_is("nugget_importance", "n10'"), str(["okay"] * 10)).add(task_is("nugget_importance"), str(["vital"] * 5))
    built = asyncio.run(Nuggetizer().build(judge, "q", ["s"]))
    assert [n.text for n in built.nuggets] == [f"n{i}" for i in range(20, 25)] + [f"n{i}" for i in range(15)]


def test_assignment_modes_and_failure() -> None:
    nuggets = [ScoredNugget("a", "vital", "ok"), ScoredNugget("b", "okay", "ok")]
    judge = ScriptedJudge().add(task_is("nugget_assign"), "['support', 'partial_support']")
    assigned = asyncio.run(Nuggetizer().assign(judge, "q", "The answer.", nuggets))
    assert [a.assignment for a in assigned] == ["support", "partial_support"]
    assert "Passage: The answer.\nNugget List: ['a', 'b']\nOnly return" in judge.calls[0].messages[1][1]
    judge = ScriptedJudge().add(task_is("nugget_assign"), "['support', 'not_support']")
    asyncio.run(Nuggetizer(NuggetOptions(assign_mode="grade2")).assign(judge, "q", "A.", nuggets))
    assert "either as support or not_support" in judge.calls[0].messages[1][1]
    judge = ScriptedJudge().add(task_is("nugget_assign"), JudgeCallError("HTTP 503"))
    assigned = asyncio.run(Nuggetizer().assign(judge, "q", "A.", nuggets))
    assert {(a.assignment, a.status) for a in assigned} == {("failed", "failed")}


def test_result_n4_counts_and_missing_values() -> None:
    output = make_output()
    nuggets = NuggetList([ScoredNugget("a", "vital", "ok"), ScoredNugget("b", "vital", "ok"),
                          ScoredNugget("c", "okay", "defaulted")])
    assigned = [AssignedNugget("failed", "failed", "x"), AssignedNugget("support", "ok"),
                AssignedNugget("partial_support", "ok")]
    scores, detail = nugget_result(output, nuggets, assigned, NuggetOptions())
    by = {s.metric: s.value for s in scores}
    assert by["nuggets.all"] == 0.5 and by["nuggets.weighted"] == 0.5 and by["nuggets.weighted_strict"] == 0.4
    assert by["nuggets.n_failed"] == 1 and by["nuggets.n_defaulted"] == 1
    assert detail.data["nuggets"][2] == {"text": "c", "importance": "okay", "importance_status": "defaulted",
                                         "importance_parse": "clean", "assignment": "partial_support",
                                         "assignment_status": "ok", "assignment_parse": "clean"}
    every_failed = [AssignedNugget("failed", "failed", "HTTP 503")] * 3
    scores, _ = nugget_result(output, nuggets, every_failed, NuggetOptions())
    vital = next(s for s in scores if s.metric == "nuggets.vital")
    assert vital.value is None and "HTTP 503" in (vital.error or "")


def test_no_relevant_segment_gives_no_nuggets_or_the_sentinel() -> None:
    judge = ScriptedJudge()
    built = asyncio.run(Nuggetizer().build(judge, "q", []))
    assert built.nuggets == [] and judge.calls == []
    scores, detail = nugget_result(make_output(), built, [], NuggetOptions())
    # nothing to recall: every score is 0 by the method's empty-denominator convention (docs/methods.md), noted
    assert {s.metric: s.value for s in scores if s.metric.startswith("nuggets.")} == {
        "nuggets.all": 0.0, "nuggets.all_strict": 0.0, "nuggets.vital": 0.0, "nuggets.vital_strict": 0.0,
        "nuggets.weighted": 0.0, "nuggets.weighted_strict": 0.0, "nuggets.n_defaulted": 0.0, "nuggets.n_failed": 0.0,
        "nuggets.n_create_failed": 0.0}
    assert "no nuggets" in detail.data["note"]
    sentinel = asyncio.run(Nuggetizer(NuggetOptions(no_answer_sentinel=True)).build(judge, "q", []))
    assert [(n.text, n.importance) for n in sentinel.nuggets] == [("Not enough information, no answer found", "vital")]
