"""Test-set generation: one judge-written question (and optionally a reference answer) per sampled passage.

``generate(judge, passages, n, seed, with_answers)`` samples ``n`` passages (seeded), asks the judge with our own
prompt (``generation.query`` / ``generation.query_answer``, versioned data files), parses each reply strictly (one
JSON object with a non-empty ``question`` string, and ``answer`` with answers), and drops duplicates: the same
normalised text, or a token Jaccard similarity of at least ``NEAR_DUPLICATE`` with a question kept before it (in
sample order). A failed call or an unparseable reply is counted with its reason, never replaced by a question.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from open_rag_eval import prompts
from open_rag_eval.core.errors import JudgeCallError
from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.generation.corpus import CorpusPassage
from open_rag_eval.inputs.contexts import derived_query_id
from open_rag_eval.judge.base import Judge, JudgeRequest, Priority
from open_rag_eval.core.parsing import parse_json_object

__all__ = ["NEAR_DUPLICATE", "TASK", "Generated", "Outcome", "generate", "jaccard", "normalise", "parse_reply",
           "request_for", "sample"]

TASK = Tasks.GENERATE_QUERY
NEAR_DUPLICATE = 0.8
PARAMS = {"temperature": 0, "max_tokens": 300}
_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class Generated:
    query_id: str
    query: str
    passage_id: str
    reference_answer: str = ""


@dataclass
class Outcome:
    asked: int = 0
    generated: list[Generated] = field(default_factory=list)
    duplicates: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)  # (passage id, reason)


def sample(passages: Sequence[CorpusPassage], n: int, seed: int) -> list[CorpusPassage]:
    """``n`` passages (all of them when there are fewer), in a seeded random order."""
    return random.Random(seed).sample(list(passages), min(n, len(passages)))


def request_for(passage: CorpusPassage, with_answers: bool) -> JudgeRequest:
    template = prompts.load("generation.query_answer" if with_answers else "generation.query")
    return JudgeRequest.chat(TASK, template.render(passage=passage.text), params=PARAMS,
                             prompt_version=template.sha256, priority=Priority.LEAF)


def parse_reply(text: str, with_answers: bool) -> tuple[str, str]:
    """(question, answer) from a reply that is one JSON object (optionally in one ```json fence); ``ValueError``
    naming what is wrong otherwise."""
    value = parse_json_object(text)
    question = _field(value, "question")
    if not normalise(question):
        raise ValueError("the question has no words")
    return question, _field(value, "answer") if with_answers else ""


def _field(value: dict[str, object], name: str) -> str:
    text = value.get(name)
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"the reply has no non-empty '{name}' string")
    return " ".join(text.split())


def normalise(text: str) -> str:
    return " ".join(_WORD.findall(text.lower()))


def jaccard(a: str, b: str) -> float:
    left, right = set(normalise(a).split()), set(normalise(b).split())
    return len(left & right) / len(left | right) if left | right else 1.0


async def _ask(judge: Judge, passage: CorpusPassage, with_answers: bool) -> tuple[str, str] | str:
    """(question, answer), or the reason it failed."""
    try:
        completion = await judge.complete(request_for(passage, with_answers))
    except JudgeCallError as error:
        return f"judge call failed: {error}"
    try:
        return parse_reply(completion.text, with_answers)
    except ValueError as error:
        return f"unparseable reply: {error}"


async def generate(judge: Judge, passages: Sequence[CorpusPassage], n: int, seed: int,
                   with_answers: bool = False) -> Outcome:
    chosen = sample(passages, n, seed)
    replies = await asyncio.gather(*(_ask(judge, p, with_answers) for p in chosen))
    outcome, kept = Outcome(asked=len(chosen)), set[str]()
    for passage, reply in zip(chosen, replies):
        if isinstance(reply, str):
            outcome.failures.append((passage.id, reply))
            continue
        question, answer = reply
        key = normalise(question)
        if key in kept or any(jaccard(question, g.query) >= NEAR_DUPLICATE for g in outcome.generated):
            outcome.duplicates += 1
            continue
        kept.add(key)
        outcome.generated.append(Generated(derived_query_id(question), question, passage.id, answer))
    return outcome
