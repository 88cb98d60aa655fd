import asyncio

from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.metrics.no_answer import NoAnswerClassifier, NoAnswerOptions, no_answer_result
from open_rag_eval.core.types import AnswerPart
from tests.fakes import ScriptedJudge, task_is
from tests.trec_fakes import make_output


def _answered(*replies: str | Exception) -> tuple[float | None, str | None, ScriptedJudge]:
    judge = ScriptedJudge().add(task_is("no_answer"), *replies)
    output = make_output(answer=(AnswerPart(text="I don't know."),))
    reply = asyncio.run(NoAnswerClassifier(NoAnswerOptions()).classify(judge, output))
    (score,), detail = no_answer_result(output, reply)
    return score.value, detail.data["label"], judge


def test_yes_no_and_the_rendered_prompt() -> None:
    value, label, judge = _answered('"No"')
    assert (value, label) == (0.0, "no")
    assert "Query: what is x\n        Answer: I don't know.\n        Your Response:" in judge.calls[0].messages[0][1]
    assert dict(judge.calls[0].params) == {"temperature": 0.0, "seed": 42}  # vectara's open-rag-eval parameters (docs/methods.md)
    assert _answered("yes")[:2] == (1.0, "yes")


def test_an_unparseable_reply_is_re_asked_with_what_was_wrong() -> None:
    """The re-ask sends the reply back with a message quoting what was wrong: a request that can differ, though
    greedy with a fixed seed."""
    value, label, judge = _answered("Yes, it attempts", "yes")
    assert (value, label) == (1.0, "yes") and len(judge.calls) == 2
    assert judge.calls[1].messages[-2:] == (
        ("assistant", "Yes, it attempts"),
        ("user", "Your reply could not be read: the reply is neither yes nor no ('Yes, it attempts'). Reply again "
                 "to the request above, in exactly the format it asks for and nothing else."))
    assert judge.calls[1].messages[:-2] == judge.calls[0].messages


def test_unparseable_is_missing_without_a_byte_identical_re_ask() -> None:
    """With judge.reask: repeat the re-ask would be the same greedy request with the same seed: it is not sent (it
    could only repeat), and the reason says what was wrong."""
    judge = ScriptedJudge().add(task_is("no_answer"), "hmm")
    judge.reask = "repeat"  # type: ignore[attr-defined]
    (score,), _ = no_answer_result(make_output(), asyncio.run(
        NoAnswerClassifier(NoAnswerOptions()).classify(judge, make_output())))
    assert score.value is None and len(judge.calls) == 1
    assert score.error == ("reply did not parse after 1 attempt(s): the reply is neither yes nor no ('hmm') (a "
                           "re-ask would have been identical)"), score.error


def test_failed_call_is_missing_with_reason() -> None:
    judge = ScriptedJudge().add(task_is("no_answer"), JudgeCallError("HTTP 500"))
    output = make_output()
    (score,), _ = no_answer_result(output, asyncio.run(NoAnswerClassifier(NoAnswerOptions()).classify(judge, output)))
    assert score.value is None and "HTTP 500" in (score.error or "")
