"""Ask the judge and parse the reply, re-asking a bounded number of times when the reply does not parse.

Shared by the TREC metrics. A call that fails for good (``JudgeCallError``: an error status, an empty, filtered or
cut-off reply, a refusal -- the judge client decides which, in one place) becomes a failed answer with its reason,
never a value; ``JudgeUnavailable`` propagates (the run stops). Re-asks use a distinct ``sample`` index so a cached
bad reply is never served again: attempt j of sample s uses index ``s + SAMPLE_STRIDE * j`` (attempt 0 keeps index
s, which is what makes the normal judgments and test-retest sample 0 share the cache).

A re-ask after a reply that could not be read changes the request: the reply is sent back with a corrective
message quoting what was wrong (``prompts/reask_corrective.txt``). A long reply goes back bounded: its first and last
``QUOTE_CHARS // 2`` characters around a ``[… N characters cut …]`` marker (a 3 MB unreadable reply is not worth
re-reading three times; its head and tail show the judge what it did). A re-ask is sent only when it can differ from
what was already sent: other messages or parameters, or sampling (temperature above 0 and no fixed seed).
Re-sending a byte-identical greedy request would only get the same reply.

A judgment that stays unparsed says what was wrong with its last reply: the parser's problem ("2 labels for 4
nuggets", "no support label ... in the reply"), a structured reply's departure from its schema (not JSON, a label
outside the schema's set), or an empty reply.

Parsers return a ``Parsed`` (value and parse class, ``open_rag_eval.core.parsing``); a value of None is not
accepted. Every finished judgment is counted for the judge-health report: its task, the class of its last reply
(``failed`` when the call failed) and how many replies it took.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.core.labels import labels_of
from open_rag_eval.core.parsing import FAILED, INVALID, Parsed
from open_rag_eval.core.recording import failure_cause, record
from open_rag_eval.judge.base import Completion, Judge, JudgeRequest
from open_rag_eval.core.parsing import strip_reasoning
from open_rag_eval.metrics.structured import as_text, schema_problem
from open_rag_eval.prompts import load

__all__ = ["CALL_FAILED", "QUOTE_CHARS", "SAMPLE_STRIDE", "Asked", "ask", "can_differ", "quoted"]

T = TypeVar("T")
SAMPLE_STRIDE = 1000
QUOTE_CHARS = 4000  # at most this many characters of a bad reply go back in a re-ask (head and tail)
CALL_FAILED = "judge call failed: "  # the reason of a judgment whose call failed begins so


@dataclass(frozen=True)
class Asked(Generic[T]):
    value: T | None
    status: str  # "ok" | "unparsed" | "failed"
    reason: str | None = None
    attempts: int = 0
    text: str | None = None  # the last raw reply
    parse: str = INVALID  # parse class of the last reply (core.parsing), "failed" when there was none
    completion: Completion | None = None  # the accepted reply's completion (its log-probabilities, where asked)


def _sent(judge: Judge, request: JudgeRequest) -> tuple[str, dict[str, Any]]:
    """What goes over the wire for ``request``: its messages and final params (after ``judge.params``)."""
    final = getattr(judge, "final_params", None)
    params = dict(final(request.params, request.task)) if callable(final) else dict(request.params)
    return json.dumps(request.messages, ensure_ascii=False), params


def can_differ(judge: Judge, request: JudgeRequest, sent: list[tuple[str, dict[str, Any]]]) -> bool:
    """Whether sending ``request`` after the ``sent`` ones can bring a different reply."""
    wire = _sent(judge, request)
    if wire not in sent:
        return True
    temperature = wire[1].get("temperature")
    samples = temperature is None or (isinstance(temperature, (int, float)) and temperature > 0)
    return samples and wire[1].get("seed") is None


async def ask(
    judge: Judge,
    build: Callable[[float, int], JudgeRequest],
    parse: Callable[[str], Parsed[T]],
    *,
    trials: int = 1,
    temperatures: tuple[float, float] = (0.0, 0.2),
    sample: int = 0,
    counted_as: str | None = None,
) -> Asked[T]:
    """Up to ``trials`` attempts: the first at ``temperatures[0]``, re-asks at ``temperatures[1]``. A re-ask after
    a reply that could not be read sends that reply back with a corrective message quoting what was wrong
    (``prompts/reask_corrective.txt``). ``counted_as``: the judge-health task the judgment is counted under (the
    request's task by default; a criterion counts under its own column, so its labels are not pooled with other
    criteria's scales)."""
    text: str | None = None
    sent: list[tuple[str, dict[str, Any]]] = []
    attempts, klass, task, problem, outside = 0, INVALID, "", "no reply", None
    for attempt in range(max(1, trials)):
        temperature = temperatures[0] if attempt == 0 else temperatures[1]
        request = build(temperature, sample + SAMPLE_STRIDE * attempt)
        if attempt and text is not None and getattr(judge, "reask", "corrective") == "corrective":
            request = corrected(request, text, problem)
        task = request.task
        counted = counted_as or task
        if attempt and not can_differ(judge, request, sent):
            break
        sent.append(_sent(judge, request))
        attempts += 1
        try:
            completion = await judge.complete(request)
            text = completion.text
        except JudgeCallError as error:
            record(counted, FAILED, attempts, cause=failure_cause(str(error), error.refused))
            return Asked(None, "failed", f"{CALL_FAILED}{error}", attempts, text, FAILED)
        outside = outside_schema(request, text, sent[-1][1])
        if outside is not None:  # never read: a value outside its schema is no judgment
            klass, problem = INVALID, outside
            continue
        parsed = parse(strip_reasoning(as_text(text, sent[-1][1])))  # a JSON-schema reply: its value
        klass = parsed.klass
        if parsed.value is not None:
            record(counted, klass, attempts, labels_of(task, parsed.value))
            return Asked(parsed.value, "ok", None, attempts, text, klass, completion)
        problem = what_was_wrong(text, parsed, sent[-1][1])
    record(counted, klass, attempts, unparsed=problem)
    same = " (a re-ask would have been identical)" if attempts < max(1, trials) else ""
    if outside is not None:  # a failed judgment, never a default: the method's fallback is for its own format
        return Asked(None, "failed", f"reply outside its schema after {attempts} attempt(s): {outside}{same}",
                     attempts, text, klass)
    return Asked(None, "unparsed", f"reply did not parse after {attempts} attempt(s): {problem}{same}", attempts,
                 text, klass)


def outside_schema(request: JudgeRequest, text: str, params: dict[str, Any]) -> str | None:
    """Where a reply departs from the schema ``judge.structured`` asked it by (extra properties, a value outside
    the set or range, the wrong type), or None. A method that sets its own ``response_format`` (a profile's) reads
    its replies as before (``metrics.structured``)."""
    if "response_format" in request.params:
        return None
    return schema_problem(strip_reasoning(text), params.get("response_format"))


def what_was_wrong(text: str, parsed: Parsed[Any], params: dict[str, Any]) -> str:
    """What was wrong with a reply that did not parse: the schema's verdict on a structured reply, else the
    parser's, else what the reply looks like."""
    if not text.strip():
        return "empty reply"
    problem = schema_problem(text, params.get("response_format"))
    if problem is not None:
        return problem
    if parsed.problem is not None:
        return parsed.problem
    return f"not in the method's format ({_start(text)})"


def corrected(request: JudgeRequest, reply: str, problem: str) -> JudgeRequest:
    """``request`` followed by the reply that could not be read and a message saying what was wrong with it."""
    follow_up = load("reask.corrective").render(problem=quoted(problem, QUOTE_CHARS // 4)).strip()
    return replace(request, messages=(*request.messages, ("assistant", quoted(reply)), ("user", follow_up)))


def quoted(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` whole when it has at most ``limit`` characters; else its head and tail around a marker saying how
    many characters were cut."""
    if len(text) <= limit:
        return text
    keep = limit // 2
    return f"{text[:keep]}\n[… {len(text) - 2 * keep:,} characters cut …]\n{text[-keep:]}"


def _start(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")
