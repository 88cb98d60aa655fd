"""The ``trec`` evaluator: UMBRELA, AutoNuggetizer, TREC support (citations), no-answer and HHEM, per output.

Everything runs at once: all outputs concurrently, and within an output its metrics concurrently; the judge alone
limits concurrency. Dependencies are expressed by awaiting shared tasks, never by ordering this code:

* a passage's UMBRELA grade is one task per (query, passage, sample), awaited by the UMBRELA scores of every output
  that retrieved it and by the query's nugget creation;
* a query's nugget list is one task per query, built ONCE from the union of the passages of all its runs (first-seen
  order, de-duplicated by passage id -- closest to TREC pooling) that are graded >= ``min_grade``, and reused by
  every run of the query; importance is scored once per query; assignment is per output.
  With ``nuggets.pool: output`` (vectara's definition) each output's own passages make its own list instead.

A failed judge call affects only the judgments that needed it; ``JudgeUnavailable`` stops the run.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Coroutine, Sequence
from dataclasses import asdict
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from open_rag_eval import profiles
from open_rag_eval.scoring.retrieval import MAX_K
from open_rag_eval.core.errors import JudgeError
from open_rag_eval.core.judge_tasks import FAMILY_TASKS, Tasks
from open_rag_eval.evaluators.base import Context, Contract, Evaluator, Kept, Plan, Read, Retest
from open_rag_eval.judge.base import Judge
from open_rag_eval.metrics.citation import (
    NO_MARKERS_NOTICE,
    CitationJudge,
    CitationOptions,
    citation_result,
    cites_nothing,
)
from open_rag_eval.metrics.graders import Graders
from open_rag_eval.metrics.hallucination import HallucinationOptions
from open_rag_eval.metrics.no_answer import NoAnswerClassifier, NoAnswerOptions, no_answer_result
from open_rag_eval.metrics.nuggets import NuggetList, Nuggetizer, NuggetOptions, ScoredNugget, nugget_result
from open_rag_eval.metrics.umbrela import Grade, UmbrelaGrader, UmbrelaOptions, umbrela_result
from open_rag_eval.core.segment import between_markers
from open_rag_eval.core.types import Detail, EvalResult, Passage, RAGOutput, Score

log = logging.getLogger(__name__)

__all__ = ["METRICS", "TrecEvaluator", "TrecOptions"]

T = TypeVar("T")
NuggetKey = str | tuple[str, int]  # a query id, or (query id, run) for per-output nugget lists
METRICS = ("umbrela", "nuggets", "citation", "no_answer", "hhem")
_FAMILY_SCORES = {
    "umbrela": ("mean", "mrr", "n_invalid", "n_failed"),
    "nuggets": ("all", "all_strict", "vital", "vital_strict", "weighted", "weighted_strict", "n_defaulted", "n_failed",
                "n_create_failed"),
    "citation": ("precision", "recall", "f1", "precision_strict", "recall_strict", "f1_strict", "fabricated",
                 "n_unparsed", "n_failed", "n_cited", "n_unlabelled"),
    "no_answer": ("answered",),
    "hhem": ("score", "hallucinated"),
}



class TrecOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    profile: profiles.ProfileName = profiles.DEFAULT  # fills the options not given (docs/profiles.md)
    k_values: list[int] = Field(default_factory=lambda: [1, 3, 5])
    metrics: list[str] = Field(default_factory=lambda: ["umbrela", "nuggets", "citation", "no_answer"])
    umbrela: UmbrelaOptions = Field(default_factory=UmbrelaOptions)
    nuggets: NuggetOptions = Field(default_factory=NuggetOptions)
    citation: CitationOptions = Field(default_factory=CitationOptions)
    no_answer: NoAnswerOptions = Field(default_factory=NoAnswerOptions)
    hallucination: HallucinationOptions = Field(default_factory=HallucinationOptions)
    # how a plain answer becomes statements: our sentences, or vectara's text between two citation groups
    statements: Literal["sentences", "between_markers"] = "sentences"
    # which runs of a query are scored: all, or the first only (vectara's run_consistency: false)
    runs: Literal["all", "first"] = "all"

    @model_validator(mode="before")
    @classmethod
    def _profile_defaults(cls, data: Any) -> Any:
        return profiles.apply("trec", data)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: list[str]) -> list[str]:
        unknown = [name for name in value if name not in METRICS]
        if unknown:
            raise ValueError(f"unknown metric(s) {', '.join(unknown)}; valid choices: {', '.join(METRICS)}")
        return list(dict.fromkeys(value))

    @field_validator("k_values")
    @classmethod
    def _positive_k(cls, value: list[int]) -> list[int]:
        if not value or any(not 1 <= k <= MAX_K for k in value):
            raise ValueError(f"k_values must be a non-empty list of positive integers, at most {MAX_K}")
        return sorted(set(value))


CHUNK_OUTPUTS = 1000


def query_chunks(outputs: Sequence[RAGOutput], size: int) -> list[list[RAGOutput]]:
    """The outputs in chunks of about ``size``, never splitting the runs of a query."""
    by_query: dict[str, list[RAGOutput]] = {}
    for output in outputs:
        by_query.setdefault(output.query_id, []).append(output)
    chunks: list[list[RAGOutput]] = [[]]
    for runs in by_query.values():
        if chunks[-1] and len(chunks[-1]) + len(runs) > size:
            chunks.append([])
        chunks[-1].extend(runs)
    return chunks


class _Session:
    """The shared tasks of one evaluation: grades per (query, passage, sample), nugget lists per query."""

    def __init__(self, evaluator: TrecEvaluator, judge: Judge, outputs: Sequence[RAGOutput]) -> None:
        self.evaluator, self.judge = evaluator, judge
        self.grades: dict[tuple[str, str, str, int], asyncio.Future[Grade]] = {}
        self.nugget_lists: dict[NuggetKey, asyncio.Future[NuggetList]] = {}
        self.pools: dict[str, list[Passage]] = {}
        self.pools = pools(outputs)

    def _shared(self, table: dict[Any, asyncio.Future[T]], key: Any, make: Coroutine[Any, Any, T]) -> Awaitable[T]:
        if key in table:
            make.close()
        else:
            table[key] = asyncio.ensure_future(make)
        return table[key]

    def grade(self, query: str, passage: Passage, sample: int = 0) -> Awaitable[Grade]:
        grader = self.evaluator.umbrela
        key = (query, passage.id, passage.text, sample)
        return self._shared(self.grades, key, grader.grade(self.judge, query, passage, sample))

    def nugget_list(self, output: RAGOutput) -> Awaitable[NuggetList]:
        key = self.evaluator.nugget_key(output)
        return self._shared(self.nugget_lists, key, self._build_nuggets(key, output))

    async def _build_nuggets(self, key: NuggetKey, output: RAGOutput) -> NuggetList:
        query = output.query
        per_query = self.evaluator.options.nuggets.pool == "query"
        pool = self.pools.get(output.query_id, []) if per_query else list(output.passages)
        grades = await asyncio.gather(*(self.grade(query, passage) for passage in pool))
        min_grade = self.evaluator.options.nuggets.min_grade
        segments = [p.text for p, g in zip(pool, grades) if g.grade is not None and g.grade >= min_grade]
        n_ungraded = sum(1 for g in grades if g.grade is None)
        if not segments and n_ungraded:  # "no passage qualifies" is unknown, not true: no 0 by convention
            reason = next(g.reason for g in grades if g.grade is None)
            built = NuggetList([], "failed", [f"no passage graded >= {min_grade} and {n_ungraded} of {len(pool)} "
                                              f"have no grade ({reason})"], 0)
            self.evaluator.nugget_lists[key] = built
            return built
        built = await self.evaluator.nuggetizer.build(self.judge, query, segments)
        if n_ungraded:
            built.notes.append(f"{n_ungraded} passage(s) without a grade (failed call) left out of creation")
        self.evaluator.nugget_lists[key] = built
        return built

    def cancel(self) -> None:
        futures: list[asyncio.Future[Any]] = [*self.grades.values(), *self.nugget_lists.values()]
        for future in futures:
            future.cancel()


def _metric_names(families: Sequence[str], k_values: Sequence[int]) -> list[str]:
    names = [f"{family}.{name}" for family in families for name in _FAMILY_SCORES[family]]
    if "umbrela" in families:
        names += [f"umbrela.{m}@{k}" for m in ("p", "ap", "map", "ndcg") for k in k_values]
    return names


# the judge tasks of each family (hhem is a model, not the judge)
JUDGE_TASKS = {family: FAMILY_TASKS[family] for family in ("umbrela", "nuggets", "citation", "no_answer")}


# the order of its judge tasks (the console's time left, core.eta): a nugget list waits for its passages' grades, its
# importance for the list, each output's assignment for both; one query's list grows passage window after window
TASK_WAITS = {Tasks.NUGGET_CREATE: (Tasks.UMBRELA,), Tasks.NUGGET_IMPORTANCE: (Tasks.NUGGET_CREATE,),
              Tasks.NUGGET_ASSIGN: (Tasks.NUGGET_IMPORTANCE,)}


class TrecEvaluator:
    """Per-output TREC 2024 RAG metrics with the judge (see the module docstring)."""

    name: ClassVar[str] = "trec"
    Options: ClassVar[type[BaseModel]] = TrecOptions

    def __init__(self, options: TrecOptions | None = None) -> None:
        self.options = options or TrecOptions()
        self.umbrela = UmbrelaGrader(self.options.umbrela)
        self.nuggetizer = Nuggetizer(self.options.nuggets)
        self.citation = CitationJudge(self.options.citation)
        self.no_answer = NoAnswerClassifier(self.options.no_answer)
        self.nugget_lists: dict[NuggetKey, NuggetList] = {}  # nugget_key -> list, from the last evaluation
        self.uncited = False  # no answer of the last evaluation cites anything: citation support is undefined

    def contract(self) -> Contract:
        """Query by query, so a run may be evaluated window by window (whole queries, cut as ``query_chunks`` cuts
        them); UMBRELA grades passages alone, the other families read the answer."""
        metrics = self.options.metrics
        reads: set[Read] = {"query", "passages"}
        if set(metrics) - {"umbrela"}:
            reads.add("answer")
        return Contract(
            reads=frozenset(reads),
            answer_metrics=tuple(m for m in metrics if m != "umbrela"),
            needs_judge=True,
            judge_tasks=tuple(task for m in metrics for task in JUDGE_TASKS.get(m, ())),
            waits=TASK_WAITS, in_turn=(Tasks.NUGGET_CREATE,), order="query",
            model_metrics=("hhem",) if "hhem" in metrics else (), model_split=self.split_models,
            window_runs=0,
            graders=Graders(umbrela=self.umbrela if "umbrela" in metrics else None,
                            citation=self.citation if "citation" in metrics else None,
                            no_answer=self.no_answer if "no_answer" in metrics else None,
                            nuggets=self.nuggetizer if "nuggets" in metrics else None),
            retest=Retest("trec", self.judge_labels, self.reask_bounds()),
            kept=Kept(self.kept_nuggets, self.restore_nuggets),
        )

    def kept_nuggets(self) -> dict[NuggetKey, dict[str, Any]]:
        """The last evaluation's nugget lists as JSON fields (``Contract.kept``: a shard's, for the driver)."""
        return {key: asdict(built) for key, built in self.nugget_lists.items()}

    def split_models(self) -> tuple[TrecOptions, TrecOptions]:
        """Its options with HHEM alone (a Ray run's model stage) and without it (the shards):
        ``Contract.model_split``."""
        metrics = self.options.metrics
        return (self.options.model_copy(update={"metrics": ["hhem"]}),
                self.options.model_copy(update={"metrics": [m for m in metrics if m != "hhem"]}))

    def restore_nuggets(self, key: NuggetKey, data: dict[str, Any]) -> None:
        """One nugget list put back from ``kept_nuggets``'s fields (judge test-retest after the shards reuses it)."""
        nuggets = [ScoredNugget(**n) for n in data["nuggets"]]
        self.nugget_lists[key] = NuggetList(**{**data, "nuggets": nuggets})

    def forget(self) -> None:
        """Drop what the last window left (its queries' nugget lists): a run evaluated in windows keeps one's."""
        self.nugget_lists = {}

    def nugget_key(self, output: RAGOutput) -> NuggetKey:
        """Which nugget list an output is scored against: its query's, or (``pool: output``) its own."""
        return output.query_id if self.options.nuggets.pool == "query" else (output.query_id, output.run)

    def scored(self, outputs: Sequence[RAGOutput]) -> list[RAGOutput]:
        """The outputs these options score (``runs: first``: each query's first run with an output, as vectara
        skips a run without an answer before taking run 1), each segmented into the statements ``statements`` names."""
        if self.options.runs == "first":
            first: dict[str, tuple[bool, int]] = {}
            for output in outputs:  # the first run that has an output, else the first run
                rank = (output.error is not None, output.run)
                first[output.query_id] = min(first.get(output.query_id, rank), rank)
            outputs = [o for o in outputs if (o.error is not None, o.run) == first[o.query_id]]
        if self.options.statements == "sentences":
            return list(outputs)
        return [o.model_copy(update={"answer": between_markers(o.answer_text, [p.id for p in o.passages])})
                if o.answer_text.strip() else o for o in outputs]

    def plan(self, outputs: Sequence[RAGOutput], evaluators: Sequence[Evaluator] = ()) -> Plan:
        """The requests of a run, rehearsed: this evaluator's own code runs against the rehearsal judge, which
        answers with replies of the size each method asks for (``open_rag_eval.judge.rehearsal``). Nugget lists are
        estimated (1 nugget per passage, every passage relevant); HHEM makes no judge call."""
        from open_rag_eval.judge.rehearsal import RehearsalJudge, run_sync  # noqa: PLC0415

        families = [m for m in self.options.metrics if m != "hhem"]
        if not families:
            return Plan()
        judge = RehearsalJudge()
        rehearsal = TrecEvaluator(self.options.model_copy(update={"metrics": families}))
        run_sync(rehearsal.evaluate(outputs, Context(judge=judge)))
        self.nugget_lists = rehearsal.nugget_lists  # a later test-retest plan reuses them, as a run does
        notes = ["trec: nugget lists are estimated (1 nugget per passage, every passage relevant)"] \
            if "nuggets" in families else []
        return Plan(notes=notes, requests=judge.requests, reasks=self.reask_bounds())

    def reask_bounds(self) -> dict[str, int]:
        """Per task, the most extra attempts one request takes when its replies do not parse."""
        extra = self.options.nuggets.max_trials - 1  # re-asked at temperature 0.2: each re-ask can differ
        # no-answer asks greedily with a fixed seed: its re-ask would be byte-identical, so it is not sent
        return {Tasks.NUGGET_CREATE: extra, Tasks.NUGGET_IMPORTANCE: extra, Tasks.NUGGET_ASSIGN: extra,
                Tasks.NO_ANSWER: 0}

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult:
        """All outputs, in chunks of whole queries: every judge call of a chunk is issued at once, so chunks bound
        the memory of a large run (10,000 outputs) while keeping the judge busy. Results equal an unchunked run's."""
        if ctx.judge is None:
            raise JudgeError("the trec evaluator needs a judge")
        result = EvalResult()
        scored = self.scored(outputs)
        self.uncited = "citation" in self.options.metrics and cites_nothing(scored)
        if self.uncited:
            log.warning("%s", NO_MARKERS_NOTICE)
        for chunk in query_chunks(scored, CHUNK_OUTPUTS):
            result.extend(await self._evaluate_chunk(chunk, ctx, ctx.judge))
        return result

    async def _evaluate_chunk(self, outputs: Sequence[RAGOutput], ctx: Context, judge: Judge) -> EvalResult:
        session = _Session(self, judge, [o for o in outputs if o.error is None])
        result = EvalResult()

        async def one(output: RAGOutput) -> EvalResult:
            done = await self._evaluate_output(session, output, ctx)
            ctx.progress("outputs", 1)
            return done

        for family in self._judged_families():
            ctx.progress(f"outputs {family}", 0)  # the parts, in their order, before any finishes

        self._start_critical_path(session, outputs)
        jobs = [one(output) for output in outputs]
        if "hhem" in self.options.metrics:
            jobs.append(self._hhem_with_progress(outputs, ctx))
        try:
            for part in await _gather(jobs):
                result.extend(part)
        finally:
            session.cancel()
        return result

    def _start_critical_path(self, session: _Session, outputs: Sequence[RAGOutput]) -> None:
        """Issue every UMBRELA call, then every nugget list, before the other calls: the judge queues in order,
        and grades -> creation -> importance -> assignment is the longest chain of dependent calls."""
        if not {"umbrela", "nuggets"} & set(self.options.metrics):
            return
        live = [o for o in outputs if o.error is None]
        for output in live:
            for passage in session.pools.get(output.query_id, []):
                session.grade(output.query, passage)
        if "nuggets" in self.options.metrics:
            for output in live:
                session.nugget_list(output)

    def _judged_families(self) -> list[str]:
        return [m for m in self.options.metrics if m in ("umbrela", "nuggets", "citation", "no_answer")]

    async def _evaluate_output(self, session: _Session, output: RAGOutput, ctx: Context) -> EvalResult:
        families = self._judged_families()
        if output.error is not None:
            reason = f"no output: {output.error}"
            for family in families:
                ctx.progress(f"outputs {family}", 1)
            return EvalResult(scores=[Score.failed(output, name, reason)
                                      for name in self._names([m for m in self.options.metrics if m != "hhem"])])
        jobs = {"umbrela": self._umbrela, "nuggets": self._nuggets, "citation": self._citation,
                "no_answer": self._no_answer}

        async def part(family: str) -> tuple[list[Score], Detail]:
            done = await jobs[family](session, output)
            ctx.progress(f"outputs {family}", 1)
            return done

        parts = await _gather([part(m) for m in families])
        result = EvalResult()
        for scores, detail in parts:
            result.extend(EvalResult(scores=scores, details=[detail]))
        return result

    async def _umbrela(self, session: _Session, output: RAGOutput) -> tuple[list[Score], Detail]:
        grades = await asyncio.gather(*(session.grade(output.query, p) for p in output.passages))
        return umbrela_result(output, grades, self.options.umbrela, self.options.k_values)

    async def _nuggets(self, session: _Session, output: RAGOutput) -> tuple[list[Score], Detail]:
        nuggets = await session.nugget_list(output)
        assigned = await self.nuggetizer.assign(session.judge, output.query, output.plain_answer, nuggets.nuggets)
        return nugget_result(output, nuggets, assigned, self.options.nuggets)

    async def _citation(self, session: _Session, output: RAGOutput) -> tuple[list[Score], Detail]:
        judgments = await self.citation.judge_output(session.judge, output)
        return citation_result(output, judgments, self.options.citation, uncited=self.uncited)

    async def _no_answer(self, session: _Session, output: RAGOutput) -> tuple[list[Score], Detail]:
        return no_answer_result(output, await self.no_answer.classify(session.judge, output))

    async def _hhem_with_progress(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult:
        ctx.progress("model HHEM", 0)
        try:
            return await self._hhem(outputs)
        finally:
            ctx.progress("model HHEM done", 0)

    async def _hhem(self, outputs: Sequence[RAGOutput]) -> EvalResult:
        from open_rag_eval.metrics.hallucination import HallucinationMetric  # noqa: PLC0415 (heavy at use)

        answered = [o for o in outputs if o.error is None]
        result = await HallucinationMetric(self.options.hallucination).score(answered) if answered else EvalResult()
        for output in outputs:
            if output.error is not None:
                result.scores += [Score.failed(output, n, f"no output: {output.error}") for n in self._names(["hhem"])]
        return result

    def _names(self, families: Sequence[str]) -> list[str]:
        return _metric_names(families, self.options.k_values)

    @classmethod
    def metric_names(cls, options: TrecOptions, before: Sequence[str] = ()) -> list[str]:
        """Every metric these options can produce (config checks name them)."""
        return _metric_names(options.metrics, options.k_values)

    async def judge_labels(self, output: RAGOutput, judge: Judge,
                           sample: int) -> dict[str, dict[str, str | int | None]]:
        """Labels of one output judged with sample index ``sample`` (0 = the normal judgments, free from the cache).

        Keys: "umbrela" (passage id -> grade), "support" ("<statement index>:<passage id>" -> FS/PS/NS),
        "nugget_assignment" (nugget text -> label; the query's nugget list from the last evaluation, else built
        from this output's passages with sample 0), "no_answer" ("answered" -> yes/no). Failed labels are None.
        """
        session = _Session(self, judge, [output])
        try:
            nuggets = self.nugget_lists.get(self.nugget_key(output)) or await session.nugget_list(output)
            grades, assigned, support, answered = await _gather([
                asyncio.gather(*(session.grade(output.query, p, sample) for p in output.passages)),
                self.nuggetizer.assign(judge, output.query, output.plain_answer, nuggets.nuggets, sample),
                self.citation.judge_output(judge, output, sample),
                self.no_answer.classify(judge, output, sample),
            ])
        finally:
            session.cancel()
        return {
            Tasks.UMBRELA: {g.passage_id: g.grade for g in grades},
            Tasks.SUPPORT: {f"{i}:{j.passage_id}": j.label for i, row in enumerate(support) for j in row},
            "nugget_assignment": {n.text: (a.assignment if a.status == "ok" else None)
                                  for n, a in zip(nuggets.nuggets, assigned)},
            Tasks.NO_ANSWER: {"answered": answered.value},
        }


async def _gather(jobs: Sequence[Awaitable[Any]]) -> list[Any]:
    """Run every job concurrently; on an error cancel the rest and raise it (the first judge outage preferred)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_as_coroutine(job)) for job in jobs]
    except BaseExceptionGroup as errors:
        raise _first(errors) from None
    return [task.result() for task in tasks]


async def _as_coroutine(job: Awaitable[T]) -> T:
    return await job


def _first(errors: BaseExceptionGroup) -> BaseException:
    flat: list[BaseException] = []
    stack: list[BaseException] = [errors]
    while stack:
        error = stack.pop(0)
        if isinstance(error, BaseExceptionGroup):
            stack.extend(error.exceptions)
        else:
            flat.append(error)
    from open_rag_eval.core.errors import JudgeUnavailable  # noqa: PLC0415

    return next((e for e in flat if isinstance(e, JudgeUnavailable)), flat[0])


def pools(outputs: Sequence[RAGOutput]) -> dict[str, list[Passage]]:
    """query id -> the union of its runs' passages, first-seen order, de-duplicated by passage id."""
    result: dict[str, list[Passage]] = {}
    seen: dict[str, set[str]] = {}
    for output in outputs:
        pool, ids = result.setdefault(output.query_id, []), seen.setdefault(output.query_id, set())
        for passage in output.passages:
            if passage.id not in ids:
                ids.add(passage.id)
                pool.append(passage)
    return result
