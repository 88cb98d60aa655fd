"""The rehearsal judge of ``--dry-run``: the evaluators run their own code against it, so the plan counts exactly
the requests a run would send, and it answers at once with the reply each method asks for.

Replies (their sizes give the completion-token estimate):

    umbrela            ``##final score: 2`` (the basic prompt: a one-sentence explanation, then the grade)
    nugget_create      the previous list plus 1 nugget per passage of the window, at most the prompt's cap; each
                       nugget is about eight words (the method asks for 1-12)
    nugget_importance  one label per nugget (``vital``)
    nugget_assign      one label per nugget (``partial_support``, the longest label)
    support            ``Full Support``
    no_answer          ``yes``
    generate_query     a JSON object with a 15-word question (and a 40-word answer when the prompt asks for one)
    claim_extract      one claim per numbered sentence: the sentence itself (so distinct sentences make distinct
                       verification requests, as real claims do); an answer that is only ``NO_ANSWER`` is a refusal
    claim_verify       every claim supported, by source 1
    context_useful     ``{"useful": 1}``
    context_relevance  ``{"rating": 2}``
    rubric             ``{"reason": "...", "score": 7}`` (a reason of typical length)
    answer_questions   N questions of 12 words (a bare NO_ANSWER: a refusal); answer_relevance ``{"rating": 2}``
    rag_guide_*        the RAG guide's prompts: ``7`` for its 0-10 scores, ``1`` for context precision, ``YES`` for a
                       claim; its claim extraction lists the answer's sentences, one per line

Every grade is 2, so every passage feeds nugget creation: an upper bound on creation windows. Requests are counted
once per identity (task, messages, params, prompt version, sample), as the judge's cache and in-flight
de-duplication count them. Every reply parses, so re-asks are not rehearsed; the plan states their bound.
Tokens are estimated with ``open_rag_eval.judge.tokens``.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Coroutine, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.judge.base import Completion, JudgeRequest
from open_rag_eval.judge.tokens import chat_tokens, count_tokens

__all__ = ["NUGGETS_PER_PASSAGE", "PlannedCall", "RehearsalJudge", "context_need", "expected_reply", "reply_need",
           "rough_prompt_tokens", "run_sync"]

T = TypeVar("T")
NUGGETS_PER_PASSAGE = 1
_NUGGET = "nugget {} states one atomic fact about eight words"
_EXPLANATION = "The passage is related to the query and partly answers it, with some extra information.\n2"
_LABELS = {Tasks.NUGGET_IMPORTANCE: "vital", Tasks.NUGGET_ASSIGN: "partial_support"}
_INITIAL = re.compile(r"Initial Nugget List Length: ([0-9]+)")
_CAP = re.compile(r"at most ([0-9]+) nuggets")
_SEGMENT = re.compile(r"^\[[0-9]+\] ", re.MULTILINE)
_COUNT = re.compile(r"label each of the ([0-9]+) nuggets")
_SENTENCE = re.compile(r"^\[([0-9]+)\] (.*)$", re.MULTILINE)
_CRITERIA_SCALE = re.compile(r"Score the answer from ([0-9]+) to ([0-9]+) on this criterion only")
_CLAIM = re.compile(r"^\(([0-9]+)\) ", re.MULTILINE)
_FIXED = {Tasks.CONTEXT_USEFUL: '{"useful": 1}', Tasks.CONTEXT_RELEVANCE: '{"rating": 2}',
          Tasks.RUBRIC: '{"reason": "The answer addresses the question and its statements follow from the sources, '
                    'with one minor gap.", "score": 7}'}

# the RAG guide's prompts (metrics: [rag_guide]): a number, a 0/1, a YES; claims are the answer's sentences
_GUIDE = {Tasks.GUIDE_CONTEXT_RELEVANCE: "7", Tasks.GUIDE_CONTEXT_PRECISION: "1", Tasks.GUIDE_CLAIMS: "",
          Tasks.GUIDE_VERIFY: "YES", Tasks.GUIDE_ANSWER_RELEVANCE: "7", Tasks.GUIDE_CORRECTNESS: "7"}


@dataclass(frozen=True)
class PlannedCall:
    """One distinct request a run would send, with its estimated tokens."""

    task: str
    prompt_tokens: int
    completion_tokens: int
    context_need: int = 0  # what ``judge.context_tokens`` is checked against (``context_need``)


def rough_prompt_tokens(messages: Sequence[tuple[str, str]]) -> int:
    """A rough count (4 characters a token, 4 per message): the judge's pacing and context budget use it."""
    return sum(len(content) // 4 + 4 for _, content in messages)


def reply_need(request: JudgeRequest, cap: int = 0) -> int:
    """The reply tokens a request needs: the size of the reply its method asks for (``expected_reply``), a quarter
    more and 16 tokens of slack, never more than the reply cap (``max_tokens``; 0: none). Not the cap itself: a
    4,096-token cap on a nugget list of 300 tokens would make every prompt look too long for a small context."""
    need = math.ceil(count_tokens(expected_reply(request)) * 1.25) + 16
    return min(need, cap) if cap > 0 else need


def context_need(request: JudgeRequest, cap: int = 0) -> int:
    """The context a request takes: its prompt (rough count) and the reply it needs."""
    return rough_prompt_tokens(request.messages) + reply_need(request, cap)


def expected_reply(request: JudgeRequest) -> str:
    """The reply the method asks for, of its expected size (see the module docstring)."""
    user = request.messages[-1][1]
    if request.task == Tasks.UMBRELA:
        return _EXPLANATION if user.rstrip().endswith("Explanation:") else "##final score: 2"
    if request.task == Tasks.NUGGET_CREATE:
        initial = _INITIAL.search(user)
        cap = _CAP.search(user)
        count = (int(initial.group(1)) if initial else 0) + NUGGETS_PER_PASSAGE * len(_SEGMENT.findall(user))
        count = min(count, int(cap.group(1))) if cap else count
        return repr([_NUGGET.format(i + 1) for i in range(count)])
    if request.task in _LABELS:
        labels = _COUNT.search(user)
        return repr([_LABELS[request.task]] * (int(labels.group(1)) if labels else 0))
    if request.task == Tasks.SUPPORT:
        return "Full Support"
    if request.task == Tasks.NO_ANSWER:
        return "yes"
    if request.task == Tasks.CLAIM_EXTRACT:
        sentences = _SENTENCE.findall(user)
        if [text.strip() for _, text in sentences] == ["NO_ANSWER"]:
            return json.dumps({"refusal": True, "claims": []})
        return json.dumps({"refusal": False, "claims": [{"sentence": int(n), "claim": text} for n, text in sentences]})
    if request.task == Tasks.CLAIM_VERIFY:
        verdicts = [{"claim": int(n), "supported": True, "sources": [1]} for n in _CLAIM.findall(user)]
        return json.dumps({"verdicts": verdicts})
    if request.task == Tasks.CRITERIA:
        scale = _CRITERIA_SCALE.search(user)
        score: str | int = "yes" if scale is None else (int(scale.group(1)) + int(scale.group(2)) + 1) // 2
        return json.dumps({"reason": "The answer meets the criterion in most respects, with one minor gap.",
                           "score": score})
    if request.task == Tasks.CRITERIA_STEPS:
        return json.dumps({"steps": ["Read the criterion and note what it asks of the answer.",
                                     "Find the parts of the answer that bear on it.",
                                     "Decide how fully the answer meets it, on the criterion's scale."]})
    if request.task in _FIXED:
        return _FIXED[request.task]
    if request.task == Tasks.ANSWER_QUESTIONS:
        answer = re.search(r"Answer: (.*)", user)
        if answer and answer.group(1).strip() == "NO_ANSWER":
            return json.dumps({"refusal": True, "noncommittal": False, "questions": []})
        asked = re.search(r"Write ([0-9]+) different questions", user)
        questions = [" ".join(["word"] * 12) + "?"] * (int(asked.group(1)) if asked else 3)
        return json.dumps({"refusal": False, "noncommittal": False, "questions": questions})
    if request.task == Tasks.ANSWER_RELEVANCE:
        answer = re.search(r"Answer: (.*)", user)
        refusal = bool(answer and answer.group(1).strip() == "NO_ANSWER")
        return json.dumps({"refusal": refusal, "rating": None if refusal else 2})
    if request.task in _GUIDE:
        return _GUIDE[request.task] if request.task != Tasks.GUIDE_CLAIMS else "\n".join(
            s for s in re.split(r"(?<=[.!?])\s+", user.strip()) if s)  # one claim per sentence of the answer
    if request.task == Tasks.GENERATE_QUERY:
        reply = {"question": " ".join(["word"] * 15)}
        return json.dumps(reply | {"answer": " ".join(["word"] * 40)}
                          if '"question": "...", "answer"' in user else reply)
    return ""


class RehearsalJudge:
    """A ``Judge`` that answers instantly with ``expected_reply`` and records every distinct request."""

    planning = True  # metrics skip work that makes no judge call (e.g. loading an embedding model)

    model = "rehearsal"
    simulated = False

    def __init__(self) -> None:
        self.requests: dict[Hashable, PlannedCall] = {}

    async def complete(self, request: JudgeRequest) -> Completion:
        text = expected_reply(request)
        key = (request.task, request.messages, repr(sorted(request.params.items())), request.prompt_version,
               request.sample)
        call = self.requests.get(key)
        if call is None:
            cap = request.params.get("max_tokens", request.params.get("max_completion_tokens", 0))
            call = PlannedCall(request.task, chat_tokens(content for _, content in request.messages),
                               count_tokens(text), context_need(request, cap if isinstance(cap, int) else 0))
            self.requests[key] = call
        return Completion(text=text, prompt_tokens=call.prompt_tokens, completion_tokens=call.completion_tokens)


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion from sync code, also when an event loop is already running here."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
