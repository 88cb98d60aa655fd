"""User-written criteria judged per output (``type: criteria``, docs/criteria.md).

One call per criterion and output (task ``criteria``, priority LEAF), the prompt ``criteria.judge`` filled with the
criterion's text, its scale and anchors, the question, the retrieved passages (unless the criterion says
``sources: false``) and the answer with its citations. The reply is one JSON object ``{"reason": "...", "score":
V}`` with V a value of the criterion's scale ("yes"/"no", or a whole number); anything else does not parse, is asked
once more, and then the value is missing with its reason. Never a default.

With ``evaluation_steps: true`` the judge first writes the steps of each criterion once (task ``criteria_steps``,
priority CHAIN_START, one cached request per criterion), and every judgment of that criterion includes them. If the
steps cannot be had, the criterion's values are missing with that reason: judging without them would mix two
methods in one column.

With ``scoring: logprobs`` the request asks for the log-probabilities of the reply's tokens; where the judge returns
them, the value is the probability-weighted mean grade over the scale (``scoring.criteria.weighted_grade``), else the
grade it wrote -- the detail says which was used for each value.

An empty answer is undefined (nothing to judge). A refusal is judged like any answer: a criterion may well be about
refusing.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import parse_json_object
from open_rag_eval.core.types import Detail, RAGOutput, Score
from open_rag_eval.core.parsing import CLEAN, INVALID, Parsed, strip_reasoning
from open_rag_eval.judge.base import Judge, JudgeRequest, Priority
from open_rag_eval.metrics._generation import EMPTY_ANSWER
from open_rag_eval.metrics._judging import Asked, ask
from open_rag_eval.metrics.claims import TEMPERATURES, TRIALS, source_text
from open_rag_eval.metrics.rubric import cited_answer
from open_rag_eval.prompts import load
from open_rag_eval.scoring.criteria import SCALES, Scale, normalise, weighted_grade

__all__ = ["PREFIX", "CriterionSpec", "CriteriaSession", "column", "parse_criterion", "parse_steps", "scale_text",
           "score_output"]

PREFIX = "criteria"
PARAMS = {"max_tokens": 300}
STEPS_PARAMS = {"max_tokens": 400}
LOGPROB_PARAMS = {"logprobs": True, "top_logprobs": 20}
TEMPLATE, STEPS_TEMPLATE = "criteria.judge", "criteria.steps"
_SCORE = re.compile(r'"score"\s*:\s*"?')  # where the reply's grade begins


@dataclass(frozen=True)
class CriterionSpec:
    """One criterion as the metric uses it (built from the evaluator's validated options)."""

    name: str
    text: str
    scale: Scale
    anchors: tuple[tuple[int, str], ...] = ()
    sources: bool = True
    controls: bool = True  # the judge-health controls ask this criterion (``health.controls``)


def column(name: str) -> str:
    return f"{PREFIX}.{name}"


def scale_text(spec: CriterionSpec) -> tuple[str, str]:
    """The scale's instruction and the reply's form, for the prompt."""
    anchors = dict(spec.anchors)
    if spec.scale.name == "yes_no":
        yes = f" ({anchors[1]})" if 1 in anchors else ""
        no = f" ({anchors[0]})" if 0 in anchors else ""
        return (f"Answer yes if the answer meets the criterion{yes}, no if it does not{no}. Judge this criterion only.",
                '"yes" or "no"')
    low, high = spec.scale.low, spec.scale.high
    points = anchors or {low: "does not meet the criterion at all", high: "fully meets the criterion"}
    where = "; ".join(f"{grade} = {text}" for grade, text in sorted(points.items()))
    return (f"Score the answer from {low} to {high} on this criterion only, where {where}.",
            f"N where N is a whole number from {low} to {high}")


def parse_criterion(scale: Scale) -> Callable[[str], Parsed[tuple[int, str]]]:
    """A parser of ``{"reason": "...", "score": V}`` with V a value of ``scale``: (grade, reason)."""

    def parse(text: str) -> Parsed[tuple[int, str]]:
        try:
            value = parse_json_object(text)
        except ValueError:
            return Parsed(None, INVALID)
        score, reason = value.get("score"), value.get("reason", "")
        if isinstance(score, bool) or not isinstance(reason, str):
            return Parsed(None, INVALID)
        if isinstance(score, float) and score.is_integer():
            score = int(score)
        if not isinstance(score, (int, str)):
            return Parsed(None, INVALID)
        try:
            grade = scale.grade(str(score))
        except ValueError:
            return Parsed(None, INVALID)
        return Parsed((grade, " ".join(reason.split())), CLEAN)

    return parse


def parse_steps(text: str) -> Parsed[tuple[str, ...]]:
    """``{"steps": ["...", ...]}`` with 1..10 non-empty steps."""
    try:
        steps = parse_json_object(text).get("steps")
    except ValueError:
        return Parsed(None, INVALID)
    if not isinstance(steps, list) or not 1 <= len(steps) <= 10 \
            or not all(isinstance(s, str) and s.strip() for s in steps):
        return Parsed(None, INVALID)
    return Parsed(tuple(" ".join(s.split()) for s in steps), CLEAN)


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass
class CriteriaSession:
    """What the criteria of one run share: the judge, the sample index (test-retest) and each criterion's steps."""

    judge: Judge
    steps_on: bool = False
    logprobs: bool = False
    sample: int = 0
    _steps: dict[str, asyncio.Task[Asked[tuple[str, ...]]]] = field(default_factory=dict)

    def steps(self, spec: CriterionSpec) -> asyncio.Task[Asked[tuple[str, ...]]]:
        """The criterion's evaluation steps, asked once (sample 0: every test-retest sample uses the same steps)."""
        if spec.name not in self._steps:
            template = load(STEPS_TEMPLATE)
            user = template.render(name=spec.name, criterion=_one_line(spec.text))
            self._steps[spec.name] = asyncio.ensure_future(ask(
                self.judge, lambda t, s: JudgeRequest.chat(Tasks.CRITERIA_STEPS, user,
                                                           params={"temperature": t, **STEPS_PARAMS},
                                                           prompt_version=template.sha256, sample=s,
                                                           priority=Priority.CHAIN_START),
                parse_steps, trials=TRIALS, temperatures=TEMPERATURES))
        return self._steps[spec.name]

    def cancel(self) -> None:
        for task in self._steps.values():
            task.cancel()


async def score_output(session: CriteriaSession, specs: Sequence[CriterionSpec],
                       output: RAGOutput) -> tuple[list[Score], list[Detail]]:
    """Every criterion's value for one output, and one detail listing each judgment."""
    if not output.plain_answer.strip():
        return [Score.failed(output, column(spec.name), EMPTY_ANSWER) for spec in specs], []
    judged = await asyncio.gather(*(_judge(session, spec, output) for spec in specs))
    scores, rows = [], []
    for spec, (score, row) in zip(specs, judged, strict=True):
        scores.append(score)
        rows.append(row)
    return scores, [Detail(query_id=output.query_id, run=output.run, section="criteria", data={"criteria": rows})]


async def judge_grade(session: CriteriaSession, spec: CriterionSpec, output: RAGOutput) -> Asked[tuple[int, str]] | str:
    """The judge's reply for one criterion, or the reason nothing was asked."""
    steps = ""
    if session.steps_on:
        asked = await session.steps(spec)
        if asked.value is None:
            return f"the evaluation steps of criterion {spec.name} could not be had: {asked.reason}"
        steps = "\nEvaluation steps:\n" + "\n".join(f"{i}. {s}" for i, s in enumerate(asked.value, start=1))
    numbers = {p.id: i for i, p in enumerate(output.passages, start=1)}
    sources = "\n".join(f"[{i}] {_one_line(source_text(p))}" for i, p in enumerate(output.passages, start=1))
    instruction, form = scale_text(spec)
    template = load(TEMPLATE)
    user = template.render(name=spec.name, criterion=_one_line(spec.text), steps=steps,
                           question=_one_line(output.query),
                           sources=(sources or "(none retrieved)") if spec.sources
                           else "(not shown for this criterion)",
                           answer=cited_answer(output, numbers), scale=instruction, form=form)
    params: dict[str, Any] = {**PARAMS, **(LOGPROB_PARAMS if session.logprobs else {})}
    return await ask(session.judge, lambda t, s: JudgeRequest.chat(
        Tasks.CRITERIA, user, params={"temperature": t, **params}, prompt_version=template.sha256, sample=s,
        priority=Priority.LEAF), parse_criterion(spec.scale), trials=TRIALS, temperatures=TEMPERATURES,
        sample=session.sample, counted_as=column(spec.name))


async def _judge(session: CriteriaSession, spec: CriterionSpec, output: RAGOutput) -> tuple[Score, dict[str, Any]]:
    metric = column(spec.name)
    reply = await judge_grade(session, spec, output)
    row: dict[str, Any] = {"criterion": spec.name, "scale": spec.scale.name}
    if session.steps_on and spec.name in session._steps and session._steps[spec.name].done():
        steps = session._steps[spec.name].result().value
        row["steps"] = list(steps) if steps is not None else None
    if isinstance(reply, str):
        return Score.failed(output, metric, reply), row | {"error": reply}
    row |= {"status": reply.status, "parse": reply.parse}
    if reply.value is None:
        row["error"] = reply.reason
        return Score.failed(output, metric, f"criterion {spec.name} failed: {reply.reason}"), row
    grade, reason = reply.value
    row |= {"grade": grade, "reason": reason, "scoring": "label"}
    value = float(grade)
    if session.logprobs:
        weighted, row["scoring"] = _weighted(spec.scale, reply)
        if weighted is not None:
            value, row["weighted_grade"] = weighted, round(weighted, 6)
    return Score.ok(output, metric, normalise(spec.scale, value)), row


def _weighted(scale: Scale, reply: Asked[tuple[int, str]]) -> tuple[float | None, str]:
    """The grade weighted by the reply's log-probabilities and ``logprobs``; else None and why the written grade is
    used: no log-probabilities, none on a value of the scale, tokens that do not spell the written reply, or
    log-probabilities that are not finite or above 0."""
    tokens = reply.completion.logprobs if reply.completion is not None else None
    if not tokens:
        return None, "label (the judge returned no log-probabilities for the grade)"
    if strip_reasoning("".join(token for token, _ in tokens)) != strip_reasoning(reply.text or ""):
        return None, "label (the log-probabilities' tokens do not spell the written reply)"
    try:
        weighted = weighted_grade(scale, _grade_alternatives(reply))
    except ValueError as error:
        return None, f"label ({error} where the grade is written)"
    if weighted is None:
        return None, "label (no log-probability on a value of the scale where the grade is written)"
    return weighted, "logprobs"


def _grade_alternatives(reply: Asked[tuple[int, str]]) -> list[tuple[str, float]]:
    """The (token, log-probability) alternatives at the token where the reply writes its grade: the one holding the
    first character after the reply's last ``"score":`` (and its opening quote); [] when the reply carries no
    log-probabilities or no such token."""
    tokens = reply.completion.logprobs if reply.completion is not None else None
    if not tokens:
        return []
    found = list(_SCORE.finditer("".join(token for token, _ in tokens)))
    if not found:
        return []
    start, end = found[-1].end(), 0
    for token, alternatives in tokens:
        end += len(token)
        if end > start:
            return list(alternatives)
    return []
