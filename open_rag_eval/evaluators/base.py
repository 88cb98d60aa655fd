"""What every evaluator is: a named bundle of metrics with its own validated options, and its declared contract.

An evaluator module defines an ``Options`` pydantic model (``extra="forbid"``) and a class with

    name: str                          # the ``type:`` in config
    def __init__(self, options: Options) -> None
    def contract(self) -> Contract     # what it reads and needs, declared once (below)
    def plan(self, outputs, evaluators=()) -> Plan   # an estimate for --dry-run; calls nothing (``evaluators``:
                                       # every evaluator of the run, built, in order)
    async def evaluate(self, outputs, ctx: Context) -> EvalResult
    def forget(self) -> None           # drop what it kept of the last window's queries (may do nothing)

and is listed in ``open_rag_eval.registry.EVALUATORS``.

The run reads the contract, never the evaluator's other attributes: the input rule (an output without an answer
is refused only when a configured metric reads the answer: ``answer_metrics``), whether the run opens a judge
(``judge_tasks``), whether it may evaluate window by window (``window_runs``), the graders the judge-health
controls ask (``graders``) and the labeller judge test-retest re-asks (``retest``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from pydantic import BaseModel

from open_rag_eval.core.errors import InputError
from open_rag_eval.inputs.validate import NO_ANSWER, where_of
from open_rag_eval.judge.base import Judge
from open_rag_eval.judge.rehearsal import PlannedCall
from open_rag_eval.metrics.graders import Graders
from open_rag_eval.core.types import EvalResult, RAGOutput

if TYPE_CHECKING:
    from open_rag_eval.metrics.similarity import BertScores

__all__ = ["Context", "Contract", "Evaluator", "Kept", "Labeller", "Plan", "Read", "Retest", "TaskPlan",
           "answer_reader", "check_answers", "judged", "kept_of", "needs_judge", "unanswered",
           "window_safe"]

Read = Literal["query", "answer", "passages", "labels", "references", "runs", "scores", "results"]
# re-judges one output with sample index ``sample``: judgment kind -> item -> label (judge test-retest)
Labeller = Callable[[RAGOutput, Judge, int], Awaitable[dict[str, dict[str, Any]]]]


@dataclass(frozen=True)
class Retest:
    """What judge test-retest (``consistency.judge_repeats``) re-asks through an evaluator of the run:
    ``kind`` is the evaluator type ``retest:`` names, ``labeller`` its judgments with a sample index, ``reasks`` the
    most extra attempts one of its requests takes per task when replies do not parse (the dry run's bound)."""

    kind: str
    labeller: Labeller
    reasks: Mapping[str, int] = field(default_factory=dict)  # per task, the most extra attempts of one request


@dataclass(frozen=True)
class Kept:
    """What an evaluator keeps of the queries it evaluated for later evaluators of the run to reuse (trec's nugget
    lists, which judge test-retest re-asks with), carried from shards to the driver as JSON: ``export`` gives it by
    key (a query id, or a tuple that starts with one), ``restore`` puts one entry back."""

    export: Callable[[], Mapping[Any, dict[str, Any]]]
    restore: Callable[[Any, dict[str, Any]], None]


def kept_of(evaluator: Evaluator) -> Mapping[Any, dict[str, Any]]:
    """What ``evaluator`` kept of the queries it evaluated, as JSON fields by key (``Contract.kept``; none: {})."""
    kept = evaluator.contract().kept
    return kept.export() if kept is not None else {}


@dataclass(frozen=True)
class Contract:
    """What an evaluator, with its options, reads and needs: declared once, read by the run.

    ``reads``: what of an output its configured metrics read (``runs``: several runs of a query compared;
    ``scores``: the results of the evaluators before it; ``results``: a results folder of its own).
    ``answer_metrics``: the configured metrics that read the answer, so an output without one (a retriever's
    output: passages and labels only) is refused naming the first of them; none: such outputs are scored.
    ``needs_judge``: it runs only with a judge (the run opens one); ``judge_tasks``: the judge tasks its configured
    metrics ask.
    ``window_runs``: it gives a run's results when it sees the run one window of whole queries at a time, when
    every query has at least this many answered runs (None: it must see the whole run at once).
    ``graders``: the judges the judge-health controls ask for its tasks; ``retest``: what test-retest re-asks.
    ``own_rows``: it scores rows of its own data (golden's TREC run file: the run file's queries), with or without
    outputs, so a run of it has rows even with no input, and those rows are scored once, after any shards.
    ``waits``: judge task -> the tasks whose replies its requests wait for; ``in_turn``: the tasks that ask one
    query's requests one after another (the console's time left counts the chain they make: ``core.eta``).
    ``order``: it evaluates output by output, so a run may be split into shards of whole queries, and its results
    come query by query (``query``) or in the outputs' order (``input``); None: it sees the whole run (after the
    shards, in the driver). ``model_metrics``: its metrics a model scores in the run's own batches (a Ray run's
    model stage); ``model_split``: its options with only those metrics and with the rest (the model stage's
    evaluator and the shards'; None: an evaluator run shard by shard scores them itself, in the shards);
    ``model_scores``: hands it what the model stage scored outside it (consistency's BERTScore of the run's pairs,
    or the reason the model could not score them). ``kept``: what it keeps of the queries it evaluated for later
    evaluators (``Kept``).
    ``criteria``: the user's criteria it judges by, for the run's manifest (each one's name, scale, question and
    the sha256 of its definition).
    """

    reads: frozenset[Read]
    answer_metrics: tuple[str, ...] = ()
    needs_judge: bool = False
    judge_tasks: tuple[str, ...] = ()
    window_runs: int | None = 0
    graders: Graders | None = None
    retest: Retest | None = None
    own_rows: bool = False
    waits: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    in_turn: tuple[str, ...] = ()
    order: Literal["query", "input"] | None = None
    model_metrics: tuple[str, ...] = ()
    model_split: Callable[[], tuple[BaseModel, BaseModel]] | None = None
    model_scores: Callable[[BertScores | str], None] | None = None
    kept: Kept | None = None
    criteria: tuple[Mapping[str, Any], ...] = ()

    def window_safe(self, fewest_answered: int) -> bool:
        return self.window_runs is not None and fewest_answered >= self.window_runs


@dataclass
class TaskPlan:
    """Planned work of one judge task."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reask_calls: int = 0  # at most this many more calls when replies do not parse
    reask_prompt_tokens: int = 0


@dataclass
class Plan:
    """Estimated judge work for --dry-run.

    ``requests`` are the distinct requests an evaluator rehearsed (``open_rag_eval.judge.rehearsal``): identical
    requests of several evaluators are counted once, as the judge's cache counts them. ``reasks`` gives per task how
    many more attempts a request may take when its reply does not parse. ``calls`` / ``prompt_tokens`` /
    ``completion_tokens`` are estimates an evaluator gives without rehearsing; the totals add both. ``fixed``
    requests (the judge-health controls, a fixed number whatever the run's size) are rehearsed on every query and
    never scaled.
    """

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    notes: list[str] = field(default_factory=list)
    requests: dict[Hashable, PlannedCall] = field(default_factory=dict)
    reasks: dict[str, int] = field(default_factory=dict)
    scale: float = 1.0  # the rehearsed requests stand for this many times as many (a sample of the queries)
    fixed: dict[Hashable, PlannedCall] = field(default_factory=dict)  # rehearsed on every query: never scaled

    def __add__(self, other: Plan) -> Plan:
        reasks = dict(self.reasks)
        for task, extra in other.reasks.items():
            reasks[task] = max(extra, reasks.get(task, 0))
        return Plan(
            self.calls + other.calls,
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.notes + [note for note in other.notes if note not in self.notes],
            {**self.requests, **other.requests},
            reasks,
            max(self.scale, other.scale),
            {**self.fixed, **other.fixed},
        )

    def by_task(self) -> dict[str, TaskPlan]:
        """Planned calls and tokens per judge task (``other`` for estimates given without rehearsal)."""
        tasks: dict[str, TaskPlan] = {}
        self._count(tasks, self.requests.values())
        if self.calls or self.prompt_tokens or self.completion_tokens:
            tasks["other"] = TaskPlan(self.calls, self.prompt_tokens, self.completion_tokens)
        if self.scale != 1.0:
            for task in tasks.values():
                for name in ("calls", "prompt_tokens", "completion_tokens", "reask_calls", "reask_prompt_tokens"):
                    setattr(task, name, round(getattr(task, name) * self.scale))
        self._count(tasks, (call for key, call in self.fixed.items() if key not in self.requests))
        return dict(sorted(tasks.items()))

    def _count(self, tasks: dict[str, TaskPlan], calls: Iterable[PlannedCall]) -> None:
        for call in calls:
            task = tasks.setdefault(call.task, TaskPlan())
            extra = self.reasks.get(call.task, 0)
            task.calls += 1
            task.prompt_tokens += call.prompt_tokens
            task.completion_tokens += call.completion_tokens
            task.reask_calls += extra
            task.reask_prompt_tokens += extra * call.prompt_tokens

    def expected_reasks(self, rates: dict[str, float]) -> TaskPlan:
        """The re-asks to expect at per-task rates (extra replies per judgment, e.g. measured in an earlier run)."""
        expected = TaskPlan()
        for name, task in self.by_task().items():
            rate = rates.get(name, 0.0)
            expected.calls += round(task.calls * rate)
            expected.prompt_tokens += round(task.prompt_tokens * rate)
            expected.completion_tokens += round(task.completion_tokens * rate)
        return expected

    def over_context(self, limit: int) -> dict[str, tuple[int, int]]:
        """Per task, (requests that cannot fit ``limit`` context tokens with the reply they need, requests)."""
        found: dict[str, tuple[int, int]] = {}
        for call in {**self.requests, **self.fixed}.values():
            over, n = found.get(call.task, (0, 0))
            found[call.task] = (over + (call.context_need > limit), n + 1)
        return {task: counts for task, counts in sorted(found.items()) if counts[0]}

    def total(self) -> TaskPlan:
        total = TaskPlan()
        for task in self.by_task().values():
            for name in ("calls", "prompt_tokens", "completion_tokens", "reask_calls", "reask_prompt_tokens"):
                setattr(total, name, getattr(total, name) + getattr(task, name))
        return total


@dataclass
class Context:
    """What an evaluator may use besides its outputs."""

    judge: Judge | None = None
    previous: EvalResult = field(default_factory=EvalResult)  # results of the evaluators before it
    output_dir: Path | None = None
    progress: Callable[[str, int], None] = lambda what, n: None  # e.g. ("outputs", 1) per output done
    evaluators: Sequence[Evaluator] = ()  # every evaluator of the run, built, in order (itself included)


class Evaluator(Protocol):
    name: ClassVar[str]
    Options: ClassVar[type[BaseModel]]

    def contract(self) -> Contract: ...

    def plan(self, outputs: Sequence[RAGOutput], evaluators: Sequence[Evaluator] = ()) -> Plan: ...

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult: ...

    def forget(self) -> None: ...


def needs_judge(evaluators: Iterable[Evaluator]) -> bool:
    """Whether any of these evaluators asks the judge."""
    return any(e.contract().needs_judge for e in evaluators)


def window_safe(evaluator: Evaluator, fewest_answered: int) -> bool:
    """Whether ``evaluator`` gives a run's results seeing it one window of whole queries at a time
    (``fewest_answered``: the fewest answered runs of any query)."""
    return evaluator.contract().window_safe(fewest_answered)


def judged(evaluators: Iterable[Evaluator]) -> Graders:
    """The graders the judge-health controls ask: for each task, the first evaluator's that declares one."""
    graders = Graders()
    for evaluator in evaluators:
        declared = evaluator.contract().graders
        if declared is not None:
            graders = graders.joined(declared)
    return graders


def answer_reader(evaluators: Iterable[Evaluator]) -> str | None:
    """The first configured metric that reads an answer, in words (None: no metric reads one)."""
    for evaluator in evaluators:
        metrics = evaluator.contract().answer_metrics
        if metrics:
            return f"the {evaluator.name} evaluator's metric '{metrics[0]}'"
    return None


def unanswered(output: RAGOutput) -> bool:
    """An output with neither an answer nor an error: a retriever's output (passages, labels), before generation."""
    return output.error is None and not output.answer_text.strip()


def check_answers(evaluators: Sequence[Evaluator], outputs: Iterable[RAGOutput]) -> None:
    """An output without an answer is an ``InputError`` naming its file (or item), line (or row) and the first
    configured metric that reads the answer; with no such metric, outputs without an answer are scored."""
    reader = answer_reader(evaluators)
    if reader is None:
        return
    for output in outputs:
        if unanswered(output):
            file, line = where_of(output)
            raise InputError(NO_ANSWER.format(reader=reader), file=file, line=line, field="answer")
