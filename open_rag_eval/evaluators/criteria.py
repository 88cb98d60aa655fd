"""The ``criteria`` evaluator: your own criteria in plain language, judged per output (docs/criteria.md).

```yaml
evaluators:
  - type: criteria
    criteria:
      - name: effective_date
        question: Does the answer name the policy's effective date?      # yes/no by default
      - name: tone
        question: Is the tone suitable for a customer?
        scale: 1-5
        anchors: {1: rude or dismissive, 5: "warm, clear and professional"}
    evaluation_steps: false   # true: the judge writes each criterion's grading steps once (cached), shown in the report
    scoring: label            # logprobs: the probability-weighted grade where the judge returns log-probabilities
```

Each criterion writes ``criteria.<name>`` on 0..1 (yes = 1, no = 0; a grade g of low..high as (g - low) / (high -
low)); the grade, the judge's reason and how the value was scored are in the detail. Judged through the same judge
client, cache, accounting, health, test-retest (``retest: [criteria]``), CIs, ``compare``, report and diagnosis as
every other judged metric (``open_rag_eval.metrics.criteria``).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from open_rag_eval.core.errors import JudgeError
from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.types import EvalResult, RAGOutput
from open_rag_eval.evaluators.base import Context, Contract, Evaluator, Plan, Retest
from open_rag_eval.judge.base import Judge
from open_rag_eval.metrics.claims import TRIALS
from open_rag_eval.metrics.criteria import CriteriaSession, CriterionSpec, column, judge_grade, score_output
from open_rag_eval.metrics.graders import Graders
from open_rag_eval.scoring.criteria import SCALES, normalise

__all__ = ["CriteriaEvaluator", "CriteriaOptions", "Criterion"]

_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
CHUNK_OUTPUTS = 256  # outputs judged at once (whole queries), as the other evaluators do


class Criterion(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    question: str = Field(min_length=1, validation_alias="question")
    scale: Literal["yes_no", "1-5", "0-10"] = "yes_no"
    anchors: dict[str, str] = Field(default_factory=dict)
    sources: bool = True  # the judge sees the retrieved passages
    controls: bool = True  # judge-health controls: its own answer against another question's (docs/judge-health.md)

    @model_validator(mode="before")
    @classmethod
    def _description(cls, data: Any) -> Any:
        """``description:`` is accepted for ``question:`` (one of the two)."""
        if isinstance(data, dict) and "description" in data:
            if "question" in data:
                raise ValueError("give the criterion as question: or description:, not both")
            data = {**data, "question": data["description"]}
            del data["description"]
        return data

    @field_validator("anchors", mode="before")
    @classmethod
    def _anchor_keys(cls, value: Any) -> Any:
        """YAML reads ``{1: ...}`` with whole-number keys and ``{yes: ..., no: ...}`` with booleans: both are grades."""
        if not isinstance(value, dict):
            return value
        return {("yes" if key else "no") if isinstance(key, bool) else str(key): text for key, text in value.items()}

    @field_validator("name")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not _NAME.match(value):
            raise ValueError(f"criterion name {value!r}: lower-case letters, digits and _, starting with a letter, "
                             "at most 40 characters (it becomes the column criteria.<name>)")
        return value

    @field_validator("question")
    @classmethod
    def _text(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the criterion's question is empty")
        return " ".join(value.split())

    @model_validator(mode="after")
    def _anchors_on_scale(self) -> Criterion:
        scale = SCALES[self.scale]
        for key, text in self.anchors.items():
            word = str(key).strip().lower()
            if word not in scale.labels:
                raise ValueError(f"anchor {key!r} is not on the {self.scale} scale ({', '.join(scale.labels)})")
            if not str(text).strip():
                raise ValueError(f"anchor {key!r} has no text")
        return self

    def spec(self) -> CriterionSpec:
        scale = SCALES[self.scale]
        anchors = tuple(sorted((scale.grade(str(k)), " ".join(str(v).split())) for k, v in self.anchors.items()))
        return CriterionSpec(self.name, self.question, scale, anchors, self.sources, self.controls)


class CriteriaOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    criteria: list[Criterion] = Field(min_length=1)
    evaluation_steps: bool = False
    scoring: Literal["label", "logprobs"] = "label"

    @field_validator("criteria")
    @classmethod
    def _unique(cls, value: list[Criterion]) -> list[Criterion]:
        names = [c.name for c in value]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"criterion names must be unique: {', '.join(twice)} given more than once")
        return value


class CriteriaEvaluator:
    """Per-output judgments of the user's criteria (see the module docstring)."""

    name: ClassVar[str] = "criteria"
    Options: ClassVar[type[BaseModel]] = CriteriaOptions

    def __init__(self, options: CriteriaOptions) -> None:
        self.options = options
        self.specs = [c.spec() for c in options.criteria]

    @classmethod
    def metric_names(cls, options: CriteriaOptions, before: Sequence[str] = ()) -> list[str]:
        return [column(c.name) for c in options.criteria]

    def contract(self) -> Contract:
        """Every criterion reads the answer; the run is seen at once (``window_runs`` None)."""
        return Contract(reads=frozenset({"query", "answer", "passages", "references"}),
                        answer_metrics=tuple(column(c.name) for c in self.options.criteria), needs_judge=True,
                        judge_tasks=tuple(self.reask_bounds()), window_runs=None,
                        graders=self._graders(), retest=Retest("criteria", self.judge_labels, self.reask_bounds()),
                        criteria=tuple(_recorded(c) for c in self.options.criteria),
                        waits={Tasks.CRITERIA: (Tasks.CRITERIA_STEPS,)})  # a criterion's steps come before its grades

    def _graders(self) -> Graders | None:
        """The criteria the judge-health controls ask (those not set ``controls: false``)."""
        asked = tuple(spec for spec in self.specs if spec.controls)
        return Graders(criteria=asked, criteria_session=self._session) if asked else None

    def forget(self) -> None:
        """Nothing of a window is kept."""

    def plan(self, outputs: Sequence[RAGOutput], evaluators: Sequence[Evaluator] = ()) -> Plan:
        """The requests of a run, rehearsed against the rehearsal judge (one reply of typical size per call)."""
        from open_rag_eval.judge.rehearsal import RehearsalJudge, run_sync  # noqa: PLC0415

        judge = RehearsalJudge()
        run_sync(CriteriaEvaluator(self.options).evaluate(outputs, Context(judge=judge)))
        return Plan(requests=judge.requests, reasks=self.reask_bounds())

    def reask_bounds(self) -> dict[str, int]:
        return dict.fromkeys((Tasks.CRITERIA, Tasks.CRITERIA_STEPS), TRIALS - 1)

    def _session(self, judge: Judge, sample: int = 0) -> CriteriaSession:
        return CriteriaSession(judge, steps_on=self.options.evaluation_steps,
                               logprobs=self.options.scoring == "logprobs", sample=sample)

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult:
        from open_rag_eval.evaluators.trec import _gather, query_chunks  # noqa: PLC0415

        if ctx.judge is None:
            raise JudgeError("the criteria evaluator needs a judge")
        result = EvalResult()
        session = self._session(ctx.judge)
        try:
            for chunk in query_chunks(outputs, CHUNK_OUTPUTS):
                for part in await _gather([self._output(session, output, ctx) for output in chunk]):
                    result.extend(part)
        finally:
            session.cancel()
        return result

    async def _output(self, session: CriteriaSession, output: RAGOutput, ctx: Context) -> EvalResult:
        from open_rag_eval.core.types import Score  # noqa: PLC0415

        if output.error is not None:
            scores = [Score.failed(output, column(s.name), f"no output: {output.error}") for s in self.specs]
            ctx.progress("outputs", 1)
            return EvalResult(scores=scores)
        scores, details = await score_output(session, self.specs, output)
        ctx.progress("outputs", 1)
        return EvalResult(scores=scores, details=details)

    # ------------------------------------------------------------ judge test-retest (retest: [criteria])

    def retest_kinds(self) -> list[str]:
        return [Tasks.CRITERIA]

    async def judge_labels(self, output: RAGOutput, judge: Judge, sample: int) -> dict[str, dict[str, Any]]:
        """Each criterion's grade on 0..10 (rounded) as judged with sample index ``sample``; None when it failed.
        Sample 0 is the evaluator's own judgment (the same request, served by the cache)."""
        if output.error is not None or not output.plain_answer.strip():
            return {}
        session = self._session(judge, sample)
        try:
            labels: dict[str, Any] = {}
            for spec in self.specs:
                reply = await judge_grade(session, spec, output)
                if isinstance(reply, str):
                    continue  # nothing asked: no label
                labels[spec.name] = None if reply.value is None else \
                    round(10 * normalise(spec.scale, reply.value[0]))
        finally:
            session.cancel()
        return {Tasks.CRITERIA: labels}


def _recorded(criterion: Criterion) -> dict[str, Any]:
    """A criterion as the run's manifest records it: its text, scale and the sha256 of its definition, so a changed
    criterion is told apart from a changed system (``Contract.criteria``)."""
    definition = json.dumps(criterion.model_dump(), sort_keys=True, ensure_ascii=False)
    return {"name": criterion.name, "scale": criterion.scale, "question": criterion.question,
            "sha256": hashlib.sha256(definition.encode("utf-8")).hexdigest()}
