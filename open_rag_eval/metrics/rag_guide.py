"""``metrics: [rag_guide]`` -- the RAG evaluation & optimisation guide's own LLM-judged definitions (its RAGAS-style
evaluator), so a team coming from it gets the numbers its definitions give, under names that cannot be mistaken for
ours (docs/seeds.md, "The RAG guide's own definitions"). Its prompts are quoted as versioned files
(``rag_guide.*`` in templates.yaml), sent as a system and a user message at temperature 0 with its token limits.

``rag_guide.context_relevance``  each retrieved context scored 0-10 for the query (one call per context); the mean / 10
``rag_guide.context_precision``  each context judged relevant 1 / 0 (one call per context); sum(precision@i x rel_i)
                                 / sum(rel_i) in rank order, 0 when none is relevant
``rag_guide.faithfulness``       the judge lists the answer's claims one per line, then each claim is verified YES/NO
                                 against the contexts joined by newlines (one call per claim); supported / claims,
                                 **1.0 when there is no claim** (the guide's definition; ours leaves it undefined)
``rag_guide.answer_relevance``   the 0-10 score of how well the answer addresses the question / 10
``rag_guide.answer_correctness`` the 0-10 score of the answer against the ``reference_answer`` / 10 (missing without
                                 a reference: the guide computes it only with a ground truth)
``rag_guide.overall``            the mean of context relevance, faithfulness and answer relevance

Where the guide invents a number our rules win (docs/seeds.md lists the departures): a reply that does not read as
its prompt asks -- a number 0-10, a 0 or 1, a YES or NO -- is asked once more, then the value is missing with its
reason (the guide writes 0.5, 0, or "not supported"); one missing part leaves a mean over contexts or claims, and
``overall``, missing; without retrieved contexts, context relevance and precision are missing (the guide writes 0)
and every claim is unsupported without a call. Claims are the lines of the extraction reply as the guide reads them.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.core.parsing import CLEAN, INVALID, Parsed
from open_rag_eval.judge.base import JudgeRequest, Priority
from open_rag_eval.judge.replies import BLANK
from open_rag_eval.metrics._generation import NO_PASSAGES, NO_REFERENCE, reference_of
from open_rag_eval.metrics._judging import Asked, ask
from open_rag_eval.metrics.claims import TEMPERATURES, TRIALS, ClaimSession, source_text
from open_rag_eval.core.families import RAG_GUIDE_NAMES, rag_guide
from open_rag_eval.metrics.rubric import cited_answer
from open_rag_eval.prompts import load
from open_rag_eval.scoring.rag_guide import guide_context_precision, guide_context_relevance, guide_faithfulness, \
    guide_overall, guide_scaled
from open_rag_eval.core.types import Detail, RAGOutput, Score

__all__ = ["NAMES", "TASKS", "RagGuide", "parse_binary", "parse_claim_lines", "parse_score", "parse_yes_no"]

T = TypeVar("T")
NAMES = tuple(rag_guide(name) for name in RAG_GUIDE_NAMES)
# judge task -> (system template, user template, max_tokens as the guide sets them, priority)
TASKS: dict[str, tuple[str, str | None, int, int]] = {
    Tasks.GUIDE_CONTEXT_RELEVANCE: ("rag_guide.context_relevance", "rag_guide.context_user", 5, Priority.LEAF),
    Tasks.GUIDE_CONTEXT_PRECISION: ("rag_guide.context_precision", "rag_guide.context_user", 5, Priority.LEAF),
    Tasks.GUIDE_CLAIMS: ("rag_guide.claims", None, 300, Priority.CHAIN_START),  # the user message is the answer
    Tasks.GUIDE_VERIFY: ("rag_guide.verify", "rag_guide.verify_user", 5, Priority.CHAIN),
    Tasks.GUIDE_ANSWER_RELEVANCE: ("rag_guide.answer_relevance", "rag_guide.answer_user", 5, Priority.LEAF),
    Tasks.GUIDE_CORRECTNESS: ("rag_guide.correctness", "rag_guide.correctness_user", 5, Priority.LEAF),
}
_NO = re.compile(r"\bNO\b")


def parse_score(text: str) -> Parsed[float]:
    """The guide's ``float(reply.strip())``, kept only when it is a finite number from 0 to 10."""
    try:
        value = float(text.strip())
    except ValueError:
        return Parsed(None, INVALID)
    return Parsed(value, CLEAN) if math.isfinite(value) and 0 <= value <= 10 else Parsed(None, INVALID)


def parse_binary(text: str) -> Parsed[int]:
    """The guide's ``int(reply.strip())``, kept only when it is 0 or 1."""
    try:
        value = int(text.strip())
    except ValueError:
        return Parsed(None, INVALID)
    return Parsed(value, CLEAN) if value in (0, 1) else Parsed(None, INVALID)


def parse_yes_no(text: str) -> Parsed[bool]:
    """Supported when "YES" is in the upper-cased reply (the guide's test); not supported when it says NO; a reply
    with neither does not read (the guide counts it as not supported)."""
    upper = text.upper()
    if "YES" in upper:
        return Parsed(True, CLEAN)
    return Parsed(False, CLEAN) if _NO.search(upper) else Parsed(None, INVALID)


def parse_claim_lines(text: str) -> Parsed[tuple[str, ...]]:
    """The guide's claims: every non-blank line of the reply, stripped."""
    return Parsed(tuple(line.strip() for line in text.split("\n") if line.strip()), CLEAN)


def answer_as_given(output: RAGOutput) -> str:
    """The answer the system gave, citation markers included (rebuilt from its statements when it came as them)."""
    if output.answer_text.strip():
        return output.answer_text.strip()
    return cited_answer(output, {p.id: i for i, p in enumerate(output.passages, start=1)})


class RagGuide:
    """The guide's six columns for one output (see the module docstring)."""

    def __init__(self, options: Any = None) -> None:
        self.options = options

    def names(self) -> list[str]:
        return list(NAMES)

    async def score(self, session: ClaimSession, output: RAGOutput) -> tuple[list[Score], list[Detail]]:
        contexts = [source_text(p) for p in output.passages]
        answer = answer_as_given(output)
        data: dict[str, Any] = {}
        relevance, precision, faithfulness, answer_relevance, correctness = await asyncio.gather(
            self._per_context(session, output, contexts, Tasks.GUIDE_CONTEXT_RELEVANCE, parse_score, data),
            self._per_context(session, output, contexts, Tasks.GUIDE_CONTEXT_PRECISION, parse_binary, data),
            self._faithfulness(session, contexts, answer, data),
            self._scored(session, Tasks.GUIDE_ANSWER_RELEVANCE, {"question": output.query, "answer": answer}, data),
            self._correctness(session, output, answer, data))
        values: dict[str, float | str] = {
            "context_relevance": _value(relevance, guide_context_relevance),
            "context_precision": _value(precision, guide_context_precision),
            "faithfulness": faithfulness, "answer_relevance": answer_relevance, "answer_correctness": correctness}
        values["overall"] = _overall(values)
        scores = [Score.ok(output, rag_guide(name), value) if isinstance(value, float)
                  else Score.failed(output, rag_guide(name), value) for name, value in values.items()]
        return scores, [Detail(query_id=output.query_id, run=output.run, section="rag_guide", data=data)]

    async def _per_context(self, session: ClaimSession, output: RAGOutput, contexts: Sequence[str], task: str,
                           parse: Callable[[str], Parsed[T]], data: dict[str, Any]) -> list[T] | str:
        """Every context's judgment in rank order, or why the mean over them is missing."""
        if not contexts:
            return NO_PASSAGES
        replies = await asyncio.gather(*(self._ask(session, task, {"query": output.query, "context": c}, parse)
                                         for c in contexts))
        data[task.removeprefix("rag_guide_")] = [_row(reply, passage_id=p.id, value=reply.value)
                                                 for p, reply in zip(output.passages, replies, strict=True)]
        failed = next((i for i, r in enumerate(replies) if r.value is None), None)
        if failed is not None:
            what = task.removeprefix("rag_guide_").replace("_", " ")
            return f"{what} of passage {output.passages[failed].id} failed: {replies[failed].reason}"
        return [r.value for r in replies]  # type: ignore[misc]

    async def _faithfulness(self, session: ClaimSession, contexts: Sequence[str], answer: str,
                            data: dict[str, Any]) -> float | str:
        if not answer:
            data["faithfulness"] = {"claims": [], "note": "the answer is empty: no claim (1.0, the guide's rule)"}
            return guide_faithfulness([])
        extracted = await self._ask(session, Tasks.GUIDE_CLAIMS, {"answer": answer}, parse_claim_lines)
        row: dict[str, Any] = _row(extracted, claims=[{"claim": c} for c in extracted.value or ()])
        data["faithfulness"] = row
        if extracted.value is None and BLANK in (extracted.reason or ""):  # it answered, listing nothing
            row.update(claims=[], note="a blank reply lists no claim (1.0, the guide's rule)")
            return guide_faithfulness([])
        if extracted.value is None:
            return f"claim extraction failed: {extracted.reason}"
        claims = extracted.value
        if not contexts:  # nothing to support a claim: every claim unsupported, no call
            row["claims"] = [{"claim": claim, "supported": False, "note": NO_PASSAGES} for claim in claims]
            return guide_faithfulness([False] * len(claims))
        context = "\n".join(contexts)
        verdicts = await asyncio.gather(*(self._ask(session, Tasks.GUIDE_VERIFY, {"context": context, "claim": c},
                                                    parse_yes_no) for c in claims))
        row["claims"] = [{"claim": claim, **_row(v, supported=v.value)} for claim, v in zip(claims, verdicts,
                                                                                            strict=True)]
        failed = next((i for i, v in enumerate(verdicts) if v.value is None), None)
        if failed is not None:
            return f"verification of claim {failed + 1} failed: {verdicts[failed].reason}"
        return guide_faithfulness([bool(v.value) for v in verdicts])

    async def _correctness(self, session: ClaimSession, output: RAGOutput, answer: str,
                           data: dict[str, Any]) -> float | str:
        reference = reference_of(output)
        if reference is None:
            return NO_REFERENCE
        fields = {"question": output.query, "answer": answer, "reference": reference.strip()}
        return await self._scored(session, Tasks.GUIDE_CORRECTNESS, fields, data)

    async def _scored(self, session: ClaimSession, task: str, fields: dict[str, str],
                      data: dict[str, Any]) -> float | str:
        """A 0-10 score / 10, or why it is missing."""
        reply = await self._ask(session, task, fields, parse_score)
        data[task.removeprefix("rag_guide_")] = _row(reply, score=reply.value)
        what = task.removeprefix("rag_guide_").replace("_", " ")
        return f"{what} failed: {reply.reason}" if reply.value is None else guide_scaled(reply.value)

    @staticmethod
    def _ask(session: ClaimSession, task: str, fields: dict[str, str],
             parse: Callable[[str], Parsed[T]]) -> asyncio.Future[Asked[T]]:
        """One judgment, shared by every metric and run that sends the same messages."""
        system_id, user_id, max_tokens, priority = TASKS[task]
        system = load(system_id)
        user = load(user_id).render(**fields) if user_id else fields["answer"]
        params = {"max_tokens": max_tokens}
        return session.shared(("rag_guide", task, user), ask(  # type: ignore[return-value]
            session.judge, lambda t, s: JudgeRequest.chat(task, user, system=system.text,
                                                          params={"temperature": t, **params},
                                                          prompt_version=system.sha256, sample=s, priority=priority),
            parse, trials=TRIALS, temperatures=TEMPERATURES, sample=session.sample))


def _row(reply: Asked[Any], **extra: Any) -> dict[str, Any]:
    """A judgment in the detail: its status and parse class, what it gave, why it failed."""
    return {"status": reply.status, "parse": reply.parse, **extra, **({"error": reply.reason} if reply.reason else {})}


def _value(parts: list[Any] | str, formula: Callable[[list[Any]], float | None]) -> float | str:
    if isinstance(parts, str):
        return parts
    value = formula(parts)
    return NO_PASSAGES if value is None else value


def _overall(values: dict[str, float | str]) -> float | str:
    parts = ("context_relevance", "faithfulness", "answer_relevance")
    missing = [name for name in parts if not isinstance(values[name], float)]
    if missing:
        return f"is missing: {', '.join(rag_guide(name) for name in missing)} has no value"
    value = guide_overall(*(float(values[name]) for name in parts))
    assert value is not None
    return value
