"""AutoNuggetizer (docs/methods.md): create -> score importance -> keep top 20 -> assign -> A / V / W.

Creation is iterative over windows of segments (each window's reply replaces the list), so windows run in order;
importance windows and assignment windows run concurrently. Failures follow docs/methods.md (decisions):
a creation window that fails keeps the previous list (flagged ``defaulted``); importance that cannot be had fails
the query's nugget list with the reason (never a defaulted ``okay``: castorini would drop the nuggets, an earlier
version of ours kept them as ``okay``); an assignment that cannot be had is
``failed`` and earns 0 (castorini), counted in ``nuggets.n_failed``; creation windows that failed are counted in
``nuggets.n_create_failed`` (on every output of the query). Every judgment carries its reply's parse class
(docs/judge-health.md); ``parse: strict`` re-asks labels outside the method's label set instead of keeping them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from open_rag_eval.core.judge_tasks import TABLE, Tasks
from open_rag_eval.core.parsing import classify_labels, classify_nugget_list
from open_rag_eval.judge.base import Judge, JudgeRequest, Priority
from open_rag_eval.metrics._judging import Asked, ask
from open_rag_eval.metrics.structured import ResponseFormat
from open_rag_eval.metrics.structured import params as structured_params
from open_rag_eval.prompts import load
from open_rag_eval.scoring.trec import nugget_scores, select_nuggets
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["AssignedNugget", "NuggetList", "NuggetOptions", "Nuggetizer", "ScoredNugget", "nugget_result"]

PROMPT_MAX_NUGGETS = 30  # the reference always renders 30 into the creator prompt (docs/methods.md, departure 7)
MAX_TOKENS = 4096
SENTINEL = "Not enough information, no answer found"
ASSIGNER = {"grade3": "nuggets.assigner_3grade_user", "grade2": "nuggets.assigner_2grade_user"}
# (system, user) template ids per step; vectara's texts name their fields differently, so both names are rendered
VECTARA_PROMPTS = {"create": ("vectara.parse_system", "nuggets.vectara_creator"),
                   "score": ("vectara.parse_system", "nuggets.vectara_scorer"),
                   "assign": ("vectara.parse_system", "nuggets.vectara_assigner")}
SCORE_NAMES = ("all", "all_strict", "vital", "vital_strict", "weighted", "weighted_strict")
IMPORTANCE_LABELS = TABLE[Tasks.NUGGET_IMPORTANCE].labels  # ("vital", "okay")
_GRADE3 = TABLE[Tasks.NUGGET_ASSIGN].labels  # support, partial_support, not_support
ASSIGN_LABELS = {"grade3": _GRADE3, "grade2": (_GRADE3[0], _GRADE3[2])}


class NuggetOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min_grade: int = Field(1, ge=0, le=3)  # segments with UMBRELA grade >= min_grade feed creation
    max_nuggets: int = Field(30, ge=1)
    max_final_nuggets: int = Field(20, ge=1)
    window: int = Field(10, ge=1)
    assign_mode: Literal["grade3", "grade2"] = "grade3"
    max_trials: int = Field(5, ge=1, le=500)  # attempts per window when the reply does not parse (reference: 500)
    no_answer_sentinel: bool = False
    parse: Literal["reference", "strict"] = "reference"  # strict: labels outside the method's set are re-asked
    # windows: castorini's windows of `window` segments; iterative: vectara's one context refined `iterations` times
    creation: Literal["windows", "iterative"] = "windows"
    iterations: int = Field(5, ge=1, le=50)
    pool: Literal["query", "output"] = "query"  # one list per query (its runs' passages) or per output
    seed: int | None = None  # fixed sampling seed of every nugget call (vectara: 42)
    prompts: Literal["castorini", "vectara"] = "castorini"  # whose prompt texts (vectara's: 3-grade assignment only)
    max_tokens: int | None = Field(MAX_TOKENS, ge=1)  # None: not sent (vectara sets no limit)
    response_format: ResponseFormat = "text"  # vectara: its JSON schemas (metrics.structured)

    @model_validator(mode="after")
    def _vectara_grades(self) -> NuggetOptions:
        if self.prompts == "vectara" and self.assign_mode != "grade3":
            raise ValueError("vectara's nugget prompts assign 3 grades: use assign_mode grade3 with prompts vectara")
        return self

    def templates(self, step: str) -> tuple[str, str]:
        """(system, user) template ids of ``step`` (create, score, assign)."""
        if self.prompts == "vectara":
            return VECTARA_PROMPTS[step]
        castorini = {"create": ("nuggets.creator_system", "nuggets.creator_user"),
                     "score": ("nuggets.scorer_system", "nuggets.scorer_user"),
                     "assign": ("nuggets.assigner_system", ASSIGNER[self.assign_mode])}
        return castorini[step]


@dataclass(frozen=True)
class ScoredNugget:
    text: str
    importance: str  # vital | okay | failed
    status: str  # ok | failed (its window's importance could not be had)
    parse: str = field(default="clean", compare=False)  # parse class of its window's importance reply
    reason: str | None = field(default=None, compare=False)  # why its importance failed


@dataclass(frozen=True)
class AssignedNugget:
    assignment: str
    status: str  # ok | failed
    reason: str | None = None
    parse: str = field(default="clean", compare=False)  # parse class of its window's assignment reply


@dataclass
class NuggetList:
    """The nugget list of one query, shared by every run of it."""

    nuggets: list[ScoredNugget] = field(default_factory=list)
    status: str = "ok"  # ok | defaulted (a creation window kept the previous list) | failed
    notes: list[str] = field(default_factory=list)
    n_segments: int = 0
    create_parse: list[str] = field(default_factory=list)  # parse class of each creation window's reply
    n_create_failed: int = 0  # creation windows without a parsed reply (they kept the previous list)
    step: str = "creation"  # the step that failed, when the list failed: creation or importance


@dataclass
class Nuggetizer:
    options: NuggetOptions = field(default_factory=NuggetOptions)

    def _request(self, task: str, system: str, user: str, version: str, temperature: float,
                 sample: int) -> JudgeRequest:
        params: dict[str, float | int] = {"temperature": temperature}
        if self.options.max_tokens is not None:
            params["max_tokens"] = self.options.max_tokens
        if self.options.seed is not None:
            params["seed"] = self.options.seed
        params.update(structured_params(task, self.options.response_format))
        return JudgeRequest.chat(task, user, system=load(system).text, params=params, prompt_version=version,
                                 sample=sample, priority=Priority.CHAIN)

    async def build(self, judge: Judge, query: str, segments: Sequence[str]) -> NuggetList:
        """Create, score and select the nugget list of a query from its segments (retrieval order)."""
        if not segments and self.options.no_answer_sentinel:
            return NuggetList([ScoredNugget(SENTINEL, "vital", "ok")], "ok", ["no segment: sentinel nugget"], 0)
        windows: list[tuple[str, bool]] = []
        texts, status, notes = await self.create(judge, query, segments, windows)
        classes, n_failed = [klass for klass, _ in windows], sum(1 for _, ok in windows if not ok)
        if status == "failed":
            return NuggetList([], "failed", notes, len(segments), classes, n_failed)
        scored = await self.score(judge, query, texts)
        lost = [n for n in scored if n.status == "failed"]
        if lost:  # never a defaulted importance: the list cannot be ranked nor weighted without it
            note = f"importance of {len(lost)} of {len(scored)} nuggets failed: {lost[0].reason}"
            return NuggetList([], "failed", [*notes, note], len(segments), classes, n_failed, step="importance")
        chosen = select_nuggets([(n, n.importance) for n in scored], self.options.max_final_nuggets)
        return NuggetList([nugget for nugget, _ in chosen], status, notes, len(segments), classes, n_failed)

    async def create(self, judge: Judge, query: str, segments: Sequence[str],
                     windows_out: list[tuple[str, bool]] | None = None) -> tuple[list[str], str, list[str]]:
        """The nugget list from the segments; ``windows_out`` receives (parse class, parsed) per creation call."""
        outcomes = [] if windows_out is None else windows_out
        if self.options.creation == "iterative":
            return await self._create_iterative(judge, query, segments, outcomes)
        nuggets: list[str] = []
        notes: list[str] = []
        size = self.options.window
        windows = [segments[i:i + size] for i in range(0, len(segments), size)]
        for number, window in enumerate(windows, start=1):
            reply = await self._ask_create(judge, query, window, nuggets)
            outcomes.append((reply.parse, reply.value is not None))
            if reply.value is None:
                kept = "kept the previous list" if nuggets else "no list yet"
                notes.append(f"window {number}: {reply.reason}; {kept}")
                continue
            nuggets = reply.value[: self.options.max_nuggets]
        if windows and len(notes) == len(windows):
            return [], "failed", notes
        return nuggets, "defaulted" if notes else "ok", notes

    async def _create_iterative(self, judge: Judge, query: str, segments: Sequence[str],
                                outcomes: list[tuple[str, bool]]) -> tuple[list[str], str, list[str]]:
        """vectara's creation: every segment in one context, the list refined up to ``iterations`` times. It stops
        once the list holds ``max_nuggets``, when a reply returns the list unchanged (the next request would be the
        same one, with the same reply), or when a reply does not parse (likewise); a failed refinement keeps the
        previous list."""
        nuggets: list[str] = []
        if not segments:
            return nuggets, "ok", []
        for number in range(1, self.options.iterations + 1):
            reply = await self._ask_create(judge, query, segments, nuggets)
            outcomes.append((reply.parse, reply.value is not None))
            if reply.value is None:
                if number == 1:
                    return [], "failed", [f"iteration 1: {reply.reason}; no list was made"]
                return nuggets, "defaulted", [f"iteration {number}: {reply.reason}; kept the previous list"]
            updated = reply.value[: self.options.max_nuggets]
            if updated == nuggets or len(updated) >= self.options.max_nuggets:
                return updated, "ok", []
            nuggets = updated
        return nuggets, "ok", []

    async def _ask_create(self, judge: Judge, query: str, segments: Sequence[str],
                          nuggets: list[str]) -> Asked[list[str]]:
        system, user_id = self.options.templates("create")
        template = load(user_id)
        context = "\n".join(f"[{j + 1}] {segment}" for j, segment in enumerate(segments))
        user = template.render(query=query, context=context, nuggets=nuggets, nuggets_length=len(nuggets),
                               creator_max_nuggets=PROMPT_MAX_NUGGETS, initial_nuggets=nuggets,
                               initial_nuggets_length=len(nuggets), max_nuggets=self.options.max_nuggets)
        return await ask(judge, lambda t, s: self._request(Tasks.NUGGET_CREATE, system, user, template.sha256, t, s),
                         classify_nugget_list, trials=self.options.max_trials)

    async def score(self, judge: Judge, query: str, texts: Sequence[str]) -> list[ScoredNugget]:
        size = self.options.window
        windows = [list(texts[i:i + size]) for i in range(0, len(texts), size)]
        parts = await asyncio.gather(*(self._score_window(judge, query, window) for window in windows))
        return [nugget for part in parts for nugget in part]

    async def _score_window(self, judge: Judge, query: str, window: list[str]) -> list[ScoredNugget]:
        system, user_id = self.options.templates("score")
        template = load(user_id)
        user = template.render(query=query, nuggets=window, num_nuggets=len(window), len_nuggets=len(window))
        reply = await ask(judge, lambda t, s: self._request(Tasks.NUGGET_IMPORTANCE, system, user, template.sha256,
                                                            t, s),
                          lambda text: classify_labels(text, len(window), IMPORTANCE_LABELS, self.options.parse),
                          trials=self.options.max_trials)
        if reply.value is None:
            return [ScoredNugget(text, "failed", "failed", reply.parse, reply.reason) for text in window]
        return [ScoredNugget(text, label, "ok", reply.parse) for text, label in zip(window, reply.value, strict=True)]

    async def assign(self, judge: Judge, query: str, answer: str, nuggets: Sequence[ScoredNugget],
                     sample: int = 0) -> list[AssignedNugget]:
        size = self.options.window
        windows = [[n.text for n in nuggets[i:i + size]] for i in range(0, len(nuggets), size)]
        parts = await asyncio.gather(*(self._assign_window(judge, query, answer, w, sample) for w in windows))
        return [label for part in parts for label in part]

    async def _assign_window(self, judge: Judge, query: str, answer: str, window: list[str],
                             sample: int) -> list[AssignedNugget]:
        system, user_id = self.options.templates("assign")
        template = load(user_id)
        allowed = ASSIGN_LABELS[self.options.assign_mode]
        user = template.render(query=query, context=answer, nuggets=window, num_nuggets=len(window),
                               generated_passage=answer, len_nuggets=len(window))
        reply = await ask(judge, lambda t, s: self._request(Tasks.NUGGET_ASSIGN, system, user, template.sha256, t, s),
                          lambda text: classify_labels(text, len(window), allowed, self.options.parse),
                          trials=self.options.max_trials, sample=sample)
        if reply.value is None:
            return [AssignedNugget("failed", "failed", reply.reason, reply.parse) for _ in window]
        return [AssignedNugget(label, "ok", None, reply.parse) for label in reply.value]


def nugget_result(output: RAGOutput, nuggets: NuggetList, assigned: Sequence[AssignedNugget],
                  options: NuggetOptions) -> tuple[list[Score], Detail]:
    """Scores and detail of one output: missing values when the list or every assignment failed."""
    rows = [{"text": n.text, "importance": n.importance, "importance_status": n.status, "importance_parse": n.parse,
             "assignment": a.assignment, "assignment_status": a.status, "assignment_parse": a.parse,
             **({"reason": a.reason} if a.reason else {})}
            for n, a in zip(nuggets.nuggets, assigned, strict=True)]
    data: dict[str, Any] = {"nuggets": rows, "min_grade": options.min_grade, "mode": options.assign_mode,
                            "creation_status": nuggets.status, "creation_notes": nuggets.notes,
                            "creation_parse": list(nuggets.create_parse), "n_segments": nuggets.n_segments}
    if not nuggets.nuggets and nuggets.status != "failed":  # nothing to recall: 0 by the method's convention
        data["note"] = f"no nuggets: no passage of the query graded >= {options.min_grade}, or the judge listed none"
    detail = Detail(query_id=output.query_id, run=output.run, section="nuggets", data=data)
    reason = _missing_reason(nuggets, assigned)
    n_defaulted = sum(1 for n in nuggets.nuggets if n.status == "defaulted")
    n_failed = sum(1 for a in assigned if a.status == "failed")
    if reason is not None:
        scores = [Score.failed(output, f"nuggets.{name}", reason) for name in SCORE_NAMES]
    else:
        values = nugget_scores([(n.importance, a.assignment) for n, a in zip(nuggets.nuggets, assigned)])
        scores = [Score.ok(output, f"nuggets.{name}", values[name]) for name in SCORE_NAMES]
    scores += [Score.ok(output, "nuggets.n_defaulted", n_defaulted), Score.ok(output, "nuggets.n_failed", n_failed),
               Score.ok(output, "nuggets.n_create_failed", nuggets.n_create_failed)]
    return scores, detail


def _missing_reason(nuggets: NuggetList, assigned: Sequence[AssignedNugget]) -> str | None:
    if nuggets.status == "failed":
        return f"nugget {nuggets.step} failed: " + "; ".join(nuggets.notes)
    if assigned and all(a.status == "failed" for a in assigned):
        return f"nugget assignment failed: {assigned[0].reason}"
    return None
