"""Controls: judgments whose right answer is known without people, built from the run's own data (docs/judge-health.md).

Every control is one item of a pair built around one query (or statement, or answer): a *high* item the judge must rate
high and a *low* item it must rate low. The pairs per task (the high item; the low item; each one's expected label in
brackets):

- ``umbrela``: the query followed by the system's own answer to it, as a passage (grade 2 or 3); the passage of another
  query that shares fewest words with the query (grade 0 or 1)
- ``support``: a sentence of a passage, against that passage (Full Support); the same sentence against the passage of
  another query that shares fewest words with it (No Support)
- ``no_answer``: the system's own answer (not a refusal) to the query (yes); a canonical refusal (no)
- ``nugget_assign``: a nugget quoted verbatim from the answer (support); a sentence of another query's passage, sharing
  fewest words with the answer (not_support)
- ``context_useful``: the answer itself as the passage, for that answer (useful); the passage of another query sharing
  fewest words with the answer (not useful)

A pair is *told apart* when both of its items get the expected side. A judge that gives one answer to everything
tells no pair apart. Controls are asked through the run's judge with the run's prompts and options (so they are
planned, counted, cached and replayed like any judgment) but are kept out of the metrics and out of the parse-class
table. Item building is pure and seeded; asking is ``run_controls``.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.types import AnswerPart, Passage, RAGOutput
from open_rag_eval.health.check import FAIL, INCONCLUSIVE, MIN_PAIRS, PASS, WEAK
from open_rag_eval.judge.base import Judge, guard_calls
from open_rag_eval.metrics.interface import CALL_FAILED
from open_rag_eval.metrics.criteria import CriteriaSession, column, judge_grade
from open_rag_eval.metrics.graders import CONTROL_TASKS, Graders
from open_rag_eval.metrics.lexical import is_refusal
from open_rag_eval.metrics.nuggets import ScoredNugget
from open_rag_eval.scoring.stats import wilson

__all__ = ["CONTROL_TASKS", "FAIL", "INCONCLUSIVE", "MIN_PAIRS", "PASS", "REFUSAL", "WEAK", "Control", "Graders",
           "Outcome", "ask_controls", "build_controls", "is_criterion", "verdict_of", "controls_for", "detail",
           "judge_controls", "run_controls", "summarize"]

REFUSAL = "I don't know. The sources I was given do not contain the information needed to answer this question."
_WORD = re.compile(r"[a-z0-9]+")
_MARKER = re.compile(r"\[[0-9]+(?:\s*,\s*[0-9]+)*\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_STOP = frozenset("a an and are as at be by for from has have in is it its of on or that the this to was were with "
                  "what which who how why when where do does did".split())


@dataclass(frozen=True)
class Control:
    """One control item: a query, the material judged, and the side the judge must put it on."""

    task: str
    pair: int  # pairs are numbered within a task
    expect: str  # "high" or "low"
    query_id: str
    query: str
    text: str  # the passage (umbrela, support), the answer (no_answer, nugget_assign)
    statement: str = ""  # support: the statement; nugget_assign: the nugget
    built: str = ""  # how the item was made, in words
    source: tuple[str, str] | None = None  # (query id, passage id) of the passage the item was taken from
    passages: tuple[Passage, ...] = ()  # a criterion: the passages shown with the answer


@dataclass(frozen=True)
class Outcome:
    control: Control
    label: str | None  # the judge's label; None: no verdict (the call failed or the reply did not parse)
    reason: str | None = None
    ordered: bool | None = None  # a criterion's pair: the high item graded above the low one (both items)

    @property
    def correct(self) -> bool | None:
        if self.label is None:
            return None
        if is_criterion(self.control.task):
            return self.ordered
        return _side(self.control.task, self.label) == self.control.expect


def is_criterion(task: str) -> bool:
    return task.startswith("criteria.")


def _side(task: str, label: str) -> str:
    """Which side a label is on: high or low (or neither: a partial label, the wrong side for both items)."""
    if task == Tasks.UMBRELA:
        return "high" if label in ("2", "3") else "low"
    if task == Tasks.SUPPORT:
        return {"FS": "high", "NS": "low"}.get(label, "neither")
    if task in (Tasks.NO_ANSWER, Tasks.CONTEXT_USEFUL):
        return {"yes": "high", "no": "low"}.get(label, "neither")
    return {"support": "high", "not_support": "low"}.get(label, "neither")


# -- building (pure, seeded) ------------------------------------------------------------------------------

def _words(text: str) -> set[str]:
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _STOP}


def _sentences(text: str, min_words: int = 5, max_words: int = 40) -> list[str]:
    found = [" ".join(_MARKER.sub(" ", s).split()) for s in _SENTENCE.split(text.strip())]
    return [s for s in found if min_words <= len(s.split()) <= max_words]


@dataclass(frozen=True)
class _Query:
    query_id: str
    query: str
    passages: tuple[Passage, ...]
    answer: str  # the first answer of the query that is not a refusal ("" when none)


def _queries(outputs: Sequence[RAGOutput]) -> list[_Query]:
    seen: dict[str, _Query] = {}
    for output in outputs:
        if output.error is not None:
            continue
        answer = " ".join(output.plain_answer.split())
        known = seen.get(output.query_id)
        usable = answer if answer and not is_refusal(answer) else ""
        if known is None:
            seen[output.query_id] = _Query(output.query_id, output.query, output.passages, usable)
        elif not known.answer and usable:
            seen[output.query_id] = _Query(known.query_id, known.query, known.passages, usable)
    return list(seen.values())


POOL_MAX = 512  # passages an unrelated one is picked from (a spread sample of a larger run's)
ATTEMPTS = 50  # queries tried per task before it gives up finding pairs


@dataclass(frozen=True)
class _Pool:
    """The passages an unrelated one is picked from, with their words computed once: every passage of a run of up to
    ``POOL_MAX``, else an evenly spread sample; passages longer than twice the run's median are left out."""

    entries: tuple[tuple[str, Passage, frozenset[str]], ...]
    _openings: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict, compare=False, repr=False)

    def opening(self, text: str) -> tuple[str, frozenset[str]]:
        """``_opening`` of ``text`` and its words, computed once per text (every pair of a build asks them again)."""
        found = self._openings.get(text)
        if found is None:
            first = _opening(text)
            found = self._openings[text] = (first, frozenset(_words(first)))
        return found

    @classmethod
    def of(cls, queries: Sequence[_Query]) -> _Pool:
        lengths = sorted(len(p.text) for q in queries for p in q.passages)
        limit = 2 * lengths[len(lengths) // 2] if lengths else 0
        usable = [(q.query_id, p) for q in queries for p in q.passages if p.text.strip() and len(p.text) <= limit]
        step = max(1, -(-len(usable) // POOL_MAX))
        return cls(tuple((qid, p, frozenset(_words(p.text))) for qid, p in usable[::step]))


LOW_OVERLAP = 0.25  # a passage sharing at most this share of the target's words is unrelated enough for a low item


@dataclass
class _Used:
    """The passages (by text) the run's low items already took, and the queries the current task's took: pairs are
    independent tests only when they do not all rest on one passage (or one query's passages)."""

    passages: set[str] = field(default_factory=set)
    queries: set[str] = field(default_factory=set)

    def take(self, qid: str, passage: Passage) -> Passage:
        self.passages.add(passage.text)
        self.queries.add(qid)
        return passage


def _unrelated(target: str, pool: _Pool, exclude: str, used: _Used | None = None,
               fits: Callable[[Passage], bool] | None = None) -> tuple[str, Passage] | None:
    """(its query, the passage) of another query for a low item (one that ``fits``, when given): among those sharing
    at most ``LOW_OVERLAP`` of ``target``'s words (else those sharing the fewest), a passage no earlier low item took,
    then one of a query none took, then the fewest shared words, the shortest, the first seen (controls cost little,
    so long passages are not in the pool). ``used`` records the choice."""
    words = _words(target)
    used = used if used is not None else _Used()
    scored = [(len(words & theirs) / len(words) if words else 0.0, qid, passage)
              for qid, passage, theirs in pool.entries if qid != exclude and (fits is None or fits(passage))]
    if not scored:
        return None
    least = min(share for share, _, _ in scored)
    best = min(((passage.text in used.passages, qid in used.queries, share, len(passage.text), i), qid, passage)
               for i, (share, qid, passage) in enumerate(scored) if share <= max(LOW_OVERLAP, least))
    _, qid, passage = best
    return qid, used.take(qid, passage)


def build_controls(outputs: Sequence[RAGOutput], tasks: Sequence[str], pairs: int, seed: int = 0) -> list[Control]:
    """Up to ``pairs`` pairs per task from the run's outputs (queries chosen with ``seed``). Pairs that need
    another query (an unrelated passage) are not built when the run has a single query."""
    queries = _queries(outputs)
    pool = _Pool.of(queries)
    order = list(queries)
    random.Random(seed).shuffle(order)
    items: list[Control] = []
    used = _Used()
    for task in tasks:
        made, used.queries = 0, set()
        for q in order[:ATTEMPTS]:
            if made >= pairs:
                break
            pair = (_criterion_pair(task, q, order, made, used) if is_criterion(task)
                    else _BUILDERS[task](q, pool, made, used))
            if pair:
                items.extend(pair)
                made += 1
    return items


def _umbrela_pair(q: _Query, queries: _Pool, n: int, used: _Used) -> list[Control]:
    found = _unrelated(q.query, queries, q.query_id, used) if q.answer else None
    if found is None:
        return []
    qid, low = found
    return [Control(Tasks.UMBRELA, n, "high", q.query_id, q.query, f"{q.query} {q.answer}",
                    built="the query followed by the system's answer to it"),
            Control(Tasks.UMBRELA, n, "low", q.query_id, q.query, low.text,
                    built=f"passage {low.id} of query {qid}, sharing few words with the query",
                    source=(qid, low.id))]


def _support_pair(q: _Query, queries: _Pool, n: int, used: _Used) -> list[Control]:
    for passage in q.passages:
        sentences = _sentences(passage.text)
        if not sentences:
            continue
        statement = sentences[0]
        found = _unrelated(statement, queries, q.query_id, used)
        if found is None:
            return []
        qid, low = found
        return [Control(Tasks.SUPPORT, n, "high", q.query_id, q.query, passage.text, statement,
                        f"the first sentence of passage {passage.id}, against that passage", (q.query_id, passage.id)),
                Control(Tasks.SUPPORT, n, "low", q.query_id, q.query, low.text, statement,
                        f"the same sentence against passage {low.id} of query {qid}", (qid, low.id))]
    return []


def _no_answer_pair(q: _Query, queries: _Pool, n: int, used: _Used) -> list[Control]:
    if not q.answer:
        return []
    return [Control(Tasks.NO_ANSWER, n, "high", q.query_id, q.query, q.answer,
                    built="the system's answer (not a refusal)"),
            Control(Tasks.NO_ANSWER, n, "low", q.query_id, q.query, REFUSAL, built="a canonical refusal")]


def _opening(text: str) -> str:
    """The first twelve words of ``text``'s first sentence of at least three words, without its end punctuation."""
    return next((" ".join(s.split()[:12]).rstrip(".,;:!?") for s in _sentences(text, 3)), "")


def _assign_pair(q: _Query, queries: _Pool, n: int, used: _Used) -> list[Control]:
    quoted = _opening(q.answer)
    answer = _words(q.answer)

    def absent_from(passage: Passage) -> str:  # its opening, when that shares less than half its words with the answer
        first, words = queries.opening(passage.text)
        return first if first and (len(words & answer) / len(words) if words else 0.0) < 0.5 else ""

    found = _unrelated(q.answer, queries, q.query_id, used, lambda p: bool(absent_from(p))) if quoted else None
    if found is None:
        return []
    qid, low = found
    absent = absent_from(low)
    return [Control(Tasks.NUGGET_ASSIGN, n, "high", q.query_id, q.query, q.answer, quoted,
                    "a nugget quoted verbatim from the answer"),
            Control(Tasks.NUGGET_ASSIGN, n, "low", q.query_id, q.query, q.answer, absent,
                    f"a sentence of passage {low.id} of query {qid}, absent from the answer", (qid, low.id))]


def _useful_pair(q: _Query, queries: _Pool, n: int, used: _Used) -> list[Control]:
    found = _unrelated(q.answer, queries, q.query_id, used) if q.answer else None
    if found is None:
        return []
    qid, low = found
    return [Control(Tasks.CONTEXT_USEFUL, n, "high", q.query_id, q.query, q.answer, q.answer,
                    "the answer itself as the passage"),
            Control(Tasks.CONTEXT_USEFUL, n, "low", q.query_id, q.query, low.text, q.answer,
                    f"passage {low.id} of query {qid}, sharing few words with the answer", (qid, low.id))]


def _criterion_pair(task: str, q: _Query, queries: Sequence[_Query], n: int, used: _Used) -> list[Control]:
    """A criterion's pair: the system's answer to the query (high) against the answer to another question that
    shares the fewest words with this one (low), each with the query's passages and without citation markers.
    Whatever the criterion asks of an answer to this question, an answer to another question should not meet it
    better: the pair is told apart when the high item's grade is above the low item's."""
    words = _words(q.query)
    others = [(o.answer in used.passages, o.query_id in used.queries, len(words & _words(o.answer)), i, o)
              for i, o in enumerate(queries) if o.query_id != q.query_id and o.answer and o.answer != q.answer]
    if not q.answer or not others:
        return []
    *_, other = min(others, key=lambda entry: entry[:4])
    used.passages.add(other.answer)
    used.queries.add(other.query_id)
    return [Control(task, n, "high", q.query_id, q.query, q.answer, built="the system's answer to the query",
                    passages=q.passages),
            Control(task, n, "low", q.query_id, q.query, other.answer, passages=q.passages,
                    built=f"the answer to query {other.query_id} (another question, sharing fewest words with it)",
                    source=(other.query_id, "answer"))]


_BUILDERS = {Tasks.UMBRELA: _umbrela_pair, Tasks.SUPPORT: _support_pair, Tasks.NO_ANSWER: _no_answer_pair,
             Tasks.NUGGET_ASSIGN: _assign_pair, Tasks.CONTEXT_USEFUL: _useful_pair}


# -- asking (through the run's judge) ----------------------------------------------------------------------

async def run_controls(judge: Judge, controls: Sequence[Control], graders: Graders) -> list[Outcome]:
    """Every control, concurrently, through ``judge`` with the run's graders; a nugget pair is one request."""
    singles = [c for c in controls if c.task != Tasks.NUGGET_ASSIGN]
    assign: dict[tuple[str, int], list[Control]] = {}
    for c in controls:
        if c.task == Tasks.NUGGET_ASSIGN:
            assign.setdefault((c.query_id, c.pair), []).append(c)
    session = graders.criteria_session(judge) if graders.criteria_session is not None else None
    jobs: list[Awaitable[Outcome | list[Outcome]]] = [_ask_one(judge, c, graders, session) for c in singles]
    jobs += [_ask_nuggets(judge, pair, graders) for pair in assign.values()]
    try:
        done = await asyncio.gather(*jobs)
    finally:
        if session is not None:
            session.cancel()
    found = [o for part in done for o in (part if isinstance(part, list) else [part])]
    rank = {id(c): i for i, c in enumerate(controls)}
    return _ordered_pairs(sorted(found, key=lambda o: rank[id(o.control)]))


def _ordered_pairs(outcomes: list[Outcome]) -> list[Outcome]:
    """A criterion's outcomes with ``ordered`` set on both items of each pair: high graded above low (None when
    either has no grade)."""
    grades: dict[tuple[str, int], dict[str, float]] = {}
    for o in outcomes:
        if is_criterion(o.control.task) and o.label is not None:
            grades.setdefault((o.control.task, o.control.pair), {})[o.control.expect] = float(o.label)
    out = []
    for o in outcomes:
        pair = grades.get((o.control.task, o.control.pair), {})
        both = "high" in pair and "low" in pair
        out.append(replace(o, ordered=pair["high"] > pair["low"]) if is_criterion(o.control.task) and both else o)
    return out


async def _ask_one(judge: Judge, c: Control, graders: Graders, session: CriteriaSession | None = None) -> Outcome:
    if is_criterion(c.task) and session is not None:
        return await _ask_criterion(c, graders, session)
    if c.task == Tasks.UMBRELA and graders.umbrela is not None:
        grade = await graders.umbrela.grade(judge, c.query, Passage(id="control", text=c.text))
        ok = grade.grade is not None and grade.valid
        return Outcome(c, str(grade.grade) if ok else None, None if ok else (grade.reason or "no grade"))
    if c.task == Tasks.SUPPORT and graders.citation is not None:
        output = RAGOutput(query_id=c.query_id, query=c.query, passages=(Passage(id="control", text=c.text),),
                           answer=(AnswerPart(text=c.statement, citations=("control",)),))
        (judged, *_), *_ = await graders.citation.judge_output(judge, output)
        return Outcome(c, judged.label, judged.reason)
    if c.task == Tasks.NO_ANSWER and graders.no_answer is not None:
        output = RAGOutput(query_id=c.query_id, query=c.query, answer=(AnswerPart(text=c.text),))
        reply = await graders.no_answer.classify(judge, output)
        return Outcome(c, reply.value, reply.reason)
    if c.task == Tasks.CONTEXT_USEFUL and graders.useful is not None:
        useful = await graders.useful(judge, c.query, c.statement, c.text)
        return Outcome(c, None if useful.value is None else ("yes" if useful.value else "no"), useful.reason)
    return Outcome(c, None, "the run does not judge this task")


async def _ask_criterion(c: Control, graders: Graders, session: CriteriaSession) -> Outcome:
    spec = next((s for s in graders.criteria if column(s.name) == c.task), None)
    if spec is None:
        return Outcome(c, None, "the run does not judge this criterion")
    output = RAGOutput(query_id=c.query_id, query=c.query, passages=c.passages, answer=(AnswerPart(text=c.text),))
    reply = await judge_grade(session, spec, output)
    if isinstance(reply, str):
        return Outcome(c, None, reply)
    if reply.value is None:
        return Outcome(c, None, reply.reason)
    if c.expect == "high" and reply.value[0] <= spec.scale.low:  # nothing can be graded below it: no test
        return Outcome(c, None, f"the system's answer got the scale's lowest grade ({reply.value[0]}): an answer "
                                "to another question cannot be graded below it")
    return Outcome(c, str(reply.value[0]), reply.reason)


async def _ask_nuggets(judge: Judge, pair: list[Control], graders: Graders) -> list[Outcome]:
    if graders.nuggets is None:
        return [Outcome(c, None, "the run does not judge this task") for c in pair]
    ordered = sorted(pair, key=lambda c: (c.pair + (c.expect == "low")) % 2)  # high first on even pairs
    nuggets = [ScoredNugget(c.statement, "vital", "ok") for c in ordered]
    assigned = await graders.nuggets.assign(judge, ordered[0].query, ordered[0].text, nuggets)
    return [Outcome(c, a.assignment if a.status == "ok" else None, a.reason) for c, a in zip(ordered, assigned)]


# -- what the controls say ---------------------------------------------------------------------------------



def summarize(outcomes: Sequence[Outcome], min_told_apart: float = 0.5,
              pass_told_apart: float = 0.5) -> dict[str, dict[str, Any]]:
    """Per task: items, judged, correct, ``accuracy`` (share of judged items on the expected side) with its Wilson
    95% interval; pairs, pairs with both verdicts, pairs told apart and their share with its interval; the labels the
    judge gave; and the verdict (``verdict_of``)."""
    rows: dict[str, dict[str, Any]] = {}
    for task in dict.fromkeys(o.control.task for o in outcomes):
        mine = [o for o in outcomes if o.control.task == task]
        rows[task] = _task_summary(mine, min_told_apart, pass_told_apart)
    return rows


def verdict_of(judged: int, low: float | None, high: float | None, min_told_apart: float = 0.5,
               pass_told_apart: float = 0.5) -> str:
    """What ``judged`` pairs with both verdicts say, from the Wilson 95% interval (``low``, ``high``) of the share told
    apart: ``inconclusive`` with fewer than ``MIN_PAIRS``; ``fail`` when the interval lies wholly below
    ``min_told_apart`` (the judge cannot tell its controls apart); ``pass`` only when its lower bound reaches
    ``pass_told_apart`` (the judge is shown to tell most of them apart); else ``weak`` (neither shown: told apart in
    fewer than half the pairs, or too few pairs to say more)."""
    if judged < MIN_PAIRS or low is None or high is None:
        return INCONCLUSIVE
    if high < min_told_apart:
        return FAIL
    return PASS if low >= pass_told_apart else WEAK


def _task_summary(outcomes: Sequence[Outcome], min_told_apart: float, pass_told_apart: float) -> dict[str, Any]:
    judged = [o for o in outcomes if o.correct is not None]
    correct = sum(1 for o in judged if o.correct)
    accuracy, low, high = wilson(correct, len(judged))
    pairs: dict[int, list[Outcome]] = {}
    for o in outcomes:
        pairs.setdefault(o.control.pair, []).append(o)
    full = [p for p in pairs.values() if len(p) == 2 and all(o.correct is not None for o in p)]
    apart = sum(1 for p in full if all(o.correct for o in p))
    share, a_low, a_high = wilson(apart, len(full))
    verdict = verdict_of(len(full), a_low, a_high, min_told_apart, pass_told_apart)
    labels: dict[str, dict[str, int]] = {"high": {}, "low": {}}
    for o in judged:
        side = labels[o.control.expect]
        side[str(o.label)] = side.get(str(o.label), 0) + 1
    reasons = sorted({o.reason for o in outcomes if o.correct is None and o.reason})
    calls_failed = sum(1 for o in outcomes if o.label is None and (o.reason or "").startswith(CALL_FAILED))
    return {"items": len(outcomes), "judged": len(judged), "correct": correct, "accuracy": accuracy,
            "accuracy_ci": [low, high], "pairs": len(pairs), "pairs_judged": len(full), "told_apart": apart,
            "told_apart_share": share, "told_apart_ci": [a_low, a_high], "labels": labels, "verdict": verdict,
            "levels": {"fail_below": min_told_apart, "pass_from": pass_told_apart},
            "no_verdict_reasons": reasons[:3], "calls_failed": calls_failed}


def detail(outcomes: Sequence[Outcome]) -> list[dict[str, Any]]:
    """Every control with its verdict, for manifest.json (texts cut to 200 characters)."""
    return [{"task": o.control.task, "pair": o.control.pair, "expect": o.control.expect,
             "query_id": o.control.query_id, "built": o.control.built, "label": o.label, "correct": o.correct,
             **({"source": {"query_id": o.control.source[0], "passage_id": o.control.source[1]}}
                if o.control.source else {}),
             **({"statement": o.control.statement[:200]} if o.control.statement else {}),
             "text": o.control.text[:200], **({"reason": o.reason} if o.reason else {})} for o in outcomes]


async def judge_controls(judge: Judge, outputs: Sequence[RAGOutput], graders: Graders, pairs: int,
                         min_told_apart: float = 0.5, seed: int = 0) -> dict[str, Any]:
    """Build and ask the run's controls; ``{"state", "tasks", "items"}`` for the health report. The controls'
    judgments are recorded apart (they are not part of the run's parse-class table or label distribution)."""
    return await ask_controls(judge, controls_for(outputs, graders, pairs, seed), graders, min_told_apart)


def controls_for(outputs: Sequence[RAGOutput], graders: Graders, pairs: int, seed: int = 0
                 ) -> list[Control] | dict[str, Any]:
    """The controls of ``judge_controls``, built now (the outputs are not needed past here), or the health report's
    section saying why there are none."""
    tasks = graders.tasks()
    if not tasks:
        return {"state": "not run: the run judges no task that has controls", "tasks": {}, "items": []}
    items = build_controls(outputs, tasks, pairs, seed)
    if not items:
        return {"state": "not run: the run's data gave no control (they need answers, passages and two queries)",
                "tasks": {}, "items": []}
    return items


async def ask_controls(judge: Judge, items: list[Control] | dict[str, Any], graders: Graders,
                       min_told_apart: float = 0.5, pass_told_apart: float = 0.5) -> dict[str, Any]:
    """The health report's controls section: ``items`` (of ``controls_for``) asked, or its section as it is."""
    from open_rag_eval.core.recording import recording  # noqa: PLC0415

    if isinstance(items, dict):
        return items
    with recording(), guard_calls():  # a control's failed call is a failed control, never an outage
        outcomes = await run_controls(judge, items, graders)
    return {"state": "run", "tasks": summarize(outcomes, min_told_apart, pass_told_apart), "items": detail(outcomes)}
