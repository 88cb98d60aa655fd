"""The simulated judge's brain: a pure function from chat messages to a reply text.

``answer(messages)`` recognises which published prompt it was sent (by phrases of the quoted templates, see
the methods specification) and answers in exactly the format that prompt asks for, from the prompt's own
content, by word overlap. It is deterministic, fast, and means nothing about a real system (per kind: the prompt it
is recognised by -> its reply):

- ``umbrela``: UMBRELA "bing" prompt (zero- or few-shot) -> ``##final score: G``; G from query/passage overlap (G alone
  for vectara's ``<query>``/``<passage>`` variant)
- ``umbrela_basic``: UMBRELA "basic" prompt (zero- or few-shot) -> one line of explanation, then G alone
- ``nugget_create``: nugget creator ("Update the list of atomic nuggets") -> a Python list of nuggets
- ``nugget_importance``: nugget scorer ("vital or okay") -> a Python list of ``vital``/``okay``
- ``nugget_assign``: nugget assigner, 3-grade or 2-grade -> a Python list of support labels
- ``support``: TREC 2024 support prompt -> ``Full Support`` / ``Partial Support`` / ``No Support``
- ``no_answer``: answer-attempt classifier -> ``yes`` / ``no`` (refusal phrases give ``no``)
- ``generate_query``: our test-set prompt ("You write test questions") -> JSON: a question from the passage's salient
  words
- ``claim_extract``: claim extraction ("You split an answer into atomic claims") -> JSON: each sentence's clauses (split
  at ``;`` and ``, and``) as claims; refusal sentences none
- ``claim_verify``: claim verification ("You check claims against numbered source texts") -> JSON: a claim is supported
  by the sources holding >= 60% of its content words
- ``context_useful``: context usefulness -> JSON ``{"useful": 1}`` when the passage holds >= 25% of the answer's content
  words
- ``context_relevance``: both context-relevance prompts -> JSON rating: 0 no query word in the context, 1 under half, 2
  otherwise
- ``rubric``: the rubric judges ("You grade one answer ... on one criterion") -> JSON reason and score 0-10:
  faithfulness and citation accuracy the share of the answer's content words in the sources, relevance and completeness
  the share of the question's in the answer, coherence the share of sentences ending in . ! or ? (times 10, rounded)
- ``criteria``: a user's criterion (``type: criteria``: "against one criterion that its developers wrote") -> JSON
  reason and score: the share s of the criterion's content words found in the answer; yes when s >= 0.5 (yes/no scale),
  else the grade low + s * (high - low), rounded
- ``criteria_steps``: a criterion's evaluation steps ("You write the steps a careful grader follows") -> JSON: three
  fixed steps naming the criterion
- ``answer_questions``: answer relevance's question generation ("You write the questions that an answer answers") ->
  JSON: N questions from the answer's salient words; refusal when the answer declines, noncommittal when it says "it
  depends"
- ``answer_relevance``: judged answer relevance ("You rate how well an answer addresses a question") -> JSON: refusal as
  above, else rating 0 no question word in the answer, 1 under half, 2 otherwise
- ``rag_guide_context_relevance``: the RAG guide's "Rate how relevant this context is to the query (0-10)" -> the number
  alone: the share of the query's content words in the context, times 10, rounded
- ``rag_guide_context_precision``: the RAG guide's "Is this context relevant to the query? Answer 1 for yes, 0 for no"
  -> ``1`` when the context holds at least half of the query's content words, else ``0``
- ``rag_guide_claims``: the RAG guide's "Extract individual factual claims from this answer" -> one claim per line: each
  sentence's clauses as for ``claim_extract`` (a sentence without claims, e.g. a refusal, as itself)
- ``rag_guide_verify``: the RAG guide's "Is this claim supported by the context? Answer YES or NO" -> ``YES`` when the
  context holds >= 60% of the claim's content words, else ``NO``
- ``rag_guide_answer_relevance``: the RAG guide's "Rate how well this answer addresses the question (0-10)" -> the
  number alone: the share of the question's content words in the answer, times 10, rounded
- ``rag_guide_correctness``: the RAG guide's "Compare the answer to the ground truth" -> the number alone: the share of
  the ground truth's content words in the answer, times 10, rounded
- ``unknown``: anything else -> a fixed generic reply

Overlap is measured on "content words": lower-cased alphanumeric words minus a short stop-word list, crudely
stemmed (a plural "s" dropped, then the first five letters kept, so "causes"/"caused" match).
"""

from __future__ import annotations

import ast
import functools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.judge.tokens import count_tokens

__all__ = [
    "GENERIC_REPLY",
    "KINDS",
    "UNPARSEABLE_REPLY",
    "Reply",
    "answer",
    "classify",
    "content_words",
    "count_tokens",
    "generated_question",
    "obeyed",
    "reply",
    "salient_words",
]

GENERIC_REPLY = "I am a simulated judge and did not recognise this request."
UNPARSEABLE_REPLY = "I am not sure how to judge this."  # parses as nothing for every prompt kind

_STOP_WORDS = (
    "a an and are as at be been but by can did do does for from had has have how i if in into is it its of on "
    "or s so such than that the their them then there these they this those to was were what when where which "
    "who whom why will with would you your"
)
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_MARKER = re.compile(r"\[[0-9]+(?:\s*,\s*[0-9]+)*\]")
_DOTALL = re.DOTALL

# (kind, phrase) in the order tried; phrases are matched on whitespace-normalised text
_MARKERS: tuple[tuple[str, str], ...] = (
    (Tasks.NUGGET_CREATE, "Update the list of atomic nuggets"),
    (Tasks.NUGGET_IMPORTANCE, "nuggets either a vital or okay"),
    (Tasks.NUGGET_IMPORTANCE, "nuggets either as vital or okay"),  # vectara's wording
    (Tasks.NUGGET_ASSIGN, "nuggets either as support"),
    (Tasks.UMBRELA, "you must provide a score on an integer scale of 0 to 3"),
    ("umbrela_basic", "You are an expert judge of a content"),
    (Tasks.SUPPORT, "evaluate whether each statement is supported by its corresponding citations"),
    (Tasks.NO_ANSWER, "the answer is an attempt to answer the query"),
    (Tasks.GENERATE_QUERY, "You write test questions for evaluating"),
    (Tasks.CLAIM_EXTRACT, "You split an answer into atomic claims"),
    (Tasks.CLAIM_VERIFY, "You check claims against numbered source texts"),
    (Tasks.CONTEXT_USEFUL, "You judge whether a retrieved passage was useful for arriving at an answer"),
    (Tasks.CONTEXT_RELEVANCE, "You rate how relevant a retrieved context is for answering a question"),
    (Tasks.CONTEXT_RELEVANCE, "As an expert assessing the relevance of a Context to a Question"),
    (Tasks.RUBRIC, "You grade one answer of a question-answering system on one criterion"),
    (Tasks.CRITERIA_STEPS, "You write the steps a careful grader follows to judge answers"),
    (Tasks.CRITERIA, "against one criterion that its developers wrote"),
    (Tasks.ANSWER_QUESTIONS, "You write the questions that an answer answers"),
    (Tasks.ANSWER_RELEVANCE, "You rate how well an answer addresses a question"),
    # the RAG evaluation & optimisation guide's own prompts (metrics: [rag_guide]): system messages quoted as printed
    (Tasks.GUIDE_CONTEXT_RELEVANCE, "Rate how relevant this context is to the query (0-10). Return only the number."),
    (Tasks.GUIDE_CONTEXT_PRECISION, "Is this context relevant to the query? Answer 1 for yes, 0 for no."),
    (Tasks.GUIDE_CLAIMS, "Extract individual factual claims from this answer. List each claim on a new line."),
    (Tasks.GUIDE_VERIFY, "Is this claim supported by the context? Answer YES or NO."),
    (Tasks.GUIDE_ANSWER_RELEVANCE, "Rate how well this answer addresses the question (0-10). Return only the number."),
    (Tasks.GUIDE_CORRECTNESS, "Compare the answer to the ground truth. Rate factual correctness 0-10 where:"),
)
KINDS: tuple[str, ...] = tuple(dict.fromkeys(kind for kind, _ in _MARKERS)) + ("unknown",)

_REFUSALS = (
    "no_answer", "no answer", "no result", "not enough information", "insufficient information",
    "don't know", "do not know", "dont know", "cannot answer", "can't answer", "cant answer", "unable to answer",
    "unable to find", "could not find", "couldn't find", "does not contain", "do not have enough",
    "don't have enough", "no information", "i'm sorry", "i am sorry",
)


@dataclass(frozen=True)
class Reply:
    kind: str
    query: str  # the query the prompt is about ("" when the prompt names none, e.g. support)
    text: str


def _stem(word: str) -> str:
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    return word[:5]


def content_words(text: str) -> set[str]:
    """Lower-cased words minus stop words, crudely stemmed (a plural s dropped, then the first 5 letters)."""
    return {_stem(word) for word in _WORD.findall(text.lower()) if word not in _STOP}


def _fraction(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / len(whole) if whole else 0.0


def classify(text: str) -> str:
    flat = " ".join(text.split())
    for kind, phrase in _MARKERS:
        if phrase in flat:
            return kind
    return "unknown"


def _last(label: str, rest: str, text: str) -> re.Match[str] | None:
    """The match of ``label + rest`` that starts at the last possible occurrence of ``label``."""
    pattern = re.compile(re.escape(label) + rest, _DOTALL)
    start = text.rfind(label)
    while start >= 0:
        match = pattern.match(text, start)
        if match is not None:
            return match
        start = text.rfind(label, 0, start)
    return None


def _literal_list(text: str) -> list[str] | None:
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return None
    return [str(item) for item in value] if isinstance(value, list) else None


def _py_list(items: Sequence[str]) -> str:
    return json.dumps(list(items), ensure_ascii=False)


# --- UMBRELA -------------------------------------------------------------------------------------------

def umbrela_grade(query: str, passage: str) -> int:
    share = _fraction(content_words(passage), content_words(query))
    return 0 if share == 0 else 1 if share < 0.34 else 2 if share < 0.67 else 3


_BASIC_WHY = ("shares none of", "shares a few of", "shares many of", "covers nearly all of")


_TAGGED = re.compile(r"<query>\s*(.*?)\s*</query>\s*<passage>\s*(.*?)\s*</passage>", _DOTALL)


def _umbrela(text: str, basic: bool) -> Reply | None:
    end = r"\n\s*(?:##final score|Explanation:)" if basic else r"\n\s*Split this problem into steps"
    match = _last("Query: ", r"(.*?)\n\s*Passage: (.*?)" + end, text)
    tagged = _TAGGED.search(text) if match is None and not basic else None
    if tagged is not None:  # vectara's prompt for GPT-OSS and Qwen (umbrela.vectara_oss): the score value only
        query, passage = tagged.group(1).strip(), tagged.group(2).strip()
        return Reply(Tasks.UMBRELA, query, str(umbrela_grade(query, passage)))
    if match is None:
        return None
    query, passage = match.group(1).strip(), match.group(2).strip()
    grade = umbrela_grade(query, passage)
    if basic:
        return Reply("umbrela_basic", query, f"The passage {_BASIC_WHY[grade]} the query terms.\n{grade}")
    return Reply(Tasks.UMBRELA, query, f"##final score: {grade}")


# --- nuggets -------------------------------------------------------------------------------------------

def _nugget_text(sentence: str) -> str:
    words = _MARKER.sub(" ", sentence).replace('"', "").split()[:12]
    return " ".join(words).rstrip(".,;:!?")


def _segment_nuggets(segment: str, query_words: set[str]) -> list[str]:
    sentences = [s for s in _SENTENCE.split(segment.strip()) if s.strip()]
    scored = sorted(
        ((len(content_words(s) & query_words), i, s) for i, s in enumerate(sentences)), key=lambda t: (-t[0], t[1])
    )
    picked = [s for score, _, s in scored[:2] if score > 0]
    return [text for text in map(_nugget_text, picked) if text]


def create_nuggets(query: str, context: str, initial: Sequence[str], limit: int) -> list[str]:
    """Merge the initial list with up to two nuggets per segment (its sentences sharing most words with the query,
    none from a segment sharing none); most query overlap first; at most ``limit``."""
    query_words = content_words(query)
    nuggets, seen = list(initial), {n.lower() for n in initial}
    for segment in re.split(r"(?m)^\[[0-9]+\]\s*", context):
        for nugget in _segment_nuggets(segment, query_words):
            if nugget.lower() not in seen:
                seen.add(nugget.lower())
                nuggets.append(nugget)
    ranked = sorted(enumerate(nuggets), key=lambda t: (-len(content_words(t[1]) & query_words), t[0]))
    return [nugget for _, nugget in ranked][:limit]


def _create(text: str) -> Reply | None:
    query = re.search(r"Search Query: (.*?)\n", text)
    context = re.search(r"Context:\s*\n(.*?)\n\s*(?:Search Query:|Initial Nugget List:)", text, _DOTALL)
    initial = re.search(r"Initial Nugget List: (.*?)\n", text)
    limit = re.search(r"at most ([0-9]+) nuggets", text)
    if query is None or context is None:
        return None
    start = _literal_list(initial.group(1)) if initial else []
    nuggets = create_nuggets(query.group(1).strip(), context.group(1), start or [],
                             int(limit.group(1)) if limit else 30)
    return Reply(Tasks.NUGGET_CREATE, query.group(1).strip(), _py_list(nuggets))


def _nugget_list(text: str) -> tuple[list[str], int] | None:
    found = re.search(r"Nugget List: (.*?)\n", text + "\n")
    count = re.search(r"label each of the ([0-9]+) nuggets", text)
    nuggets = _literal_list(found.group(1)) if found else None
    if nuggets is None:
        return None
    return nuggets, int(count.group(1)) if count else len(nuggets)


def importance(query: str, nugget: str) -> str:
    return "vital" if _fraction(content_words(nugget), content_words(query)) >= 0.5 else "okay"


def assignment(nugget: str, passage: str, grades: int = 3) -> str:
    share = _fraction(content_words(passage), content_words(nugget))
    if grades == 2:
        return "support" if share >= 0.75 else "not_support"
    return "support" if share >= 0.75 else "partial_support" if share >= 0.4 else "not_support"


def _importance(text: str) -> Reply | None:
    query, listed = re.search(r"Search Query: (.*?)\n", text), _nugget_list(text)
    if query is None or listed is None:
        return None
    nuggets, count = listed
    labels = [importance(query.group(1), n) for n in nuggets][:count] + ["okay"] * max(0, count - len(nuggets))
    return Reply(Tasks.NUGGET_IMPORTANCE, query.group(1).strip(), _py_list(labels))


def _assign(text: str) -> Reply | None:
    found = re.search(r"Search Query: (.*?)\n\s*Passage: (.*?)\n\s*Nugget List: ", text, _DOTALL)
    listed = _nugget_list(text)
    if found is None or listed is None:
        return None
    nuggets, count = listed
    grades = 3 if "partial_support" in text.split("Search Query:")[0] else 2
    labels = [assignment(n, found.group(2), grades) for n in nuggets][:count]
    labels += ["not_support"] * max(0, count - len(labels))
    return Reply(Tasks.NUGGET_ASSIGN, found.group(1).strip(), _py_list(labels))


# --- support and no-answer ------------------------------------------------------------------------------

def support_label(statement: str, citation: str) -> str:
    share = _fraction(content_words(citation), content_words(_MARKER.sub(" ", statement)))
    return "Full Support" if share >= 0.7 else "Partial Support" if share >= 0.35 else "No Support"


def _support(text: str) -> Reply | None:
    # the organisers' script ends with "Response:"; the paper's Fig. 1 wording ends with the citation
    match = _last("Statement: ", r"(.*?)\n\s*Citation: (.*?)(?:\n\s*Response:|\s*\Z)", text)
    if match is None:
        return None
    return Reply(Tasks.SUPPORT, "", support_label(match.group(1), match.group(2)))


def attempted(answer_text: str) -> str:
    flat = " ".join(answer_text.lower().split())
    return "no" if not flat or any(phrase in flat for phrase in _REFUSALS) else "yes"


def _no_answer(text: str) -> Reply | None:
    match = _last("Query: ", r"(.*?)\n\s*Answer: (.*?)\n\s*Your Response:", text)
    if match is None:
        return None
    return Reply(Tasks.NO_ANSWER, match.group(1).strip(), attempted(match.group(2)))


# --- test-set generation ----------------------------------------------------------------------------------

def salient_words(passage: str, count: int = 4) -> list[str]:
    """The passage's ``count`` most frequent content words (ties: first seen first), in passage order."""
    words = [w for w in _WORD.findall(passage.lower()) if w not in _STOP and len(w) > 2 and not w.isdigit()]
    first = {w: i for i, w in reversed(list(enumerate(words)))}
    ranked = sorted(first, key=lambda w: (-words.count(w), first[w]))[:count]
    return sorted(ranked, key=first.__getitem__)


def generated_question(passage: str) -> str:
    words = salient_words(passage)
    if not words:
        return ""
    listed = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return f"What is said about {listed}?"


def _generate(text: str) -> Reply | None:
    found = re.search(r"\nPassage:\n(.*)\n\s*Reply with one JSON object", text, _DOTALL)
    if found is None:
        return None
    passage = found.group(1)
    reply = {"question": generated_question(passage)}
    if '"question": "...", "answer"' in text:
        first = _SENTENCE.split(passage.strip())[0].split()
        reply["answer"] = " ".join(first[:40])
    return Reply(Tasks.GENERATE_QUERY, "", json.dumps(reply, ensure_ascii=False))


# --- generation metrics: claims, their verification, context usefulness and relevance ----------------------

_NUMBERED = re.compile(r"^\[([0-9]+)\] (.*)$", re.MULTILINE)
_CLAIM_LINE = re.compile(r"^\(([0-9]+)\) (.*)$", re.MULTILINE)
_CLAUSE = re.compile(r";\s+|,\s+and\s+")


def sentence_claims(sentence: str) -> list[str]:
    """The claims of one sentence: its clauses split at "; " and ", and " (a refusal sentence has none)."""
    if attempted(sentence) == "no":
        return []
    clauses = [c.strip().rstrip(".!?;,").strip() for c in _CLAUSE.split(_MARKER.sub(" ", sentence))]
    return [" ".join(c.split()) + "." for c in clauses if content_words(c)]


def _section(text: str, start: str, end: str) -> str:
    found = re.search(re.escape(start) + r"\n(.*?)\n\s*" + re.escape(end), text, _DOTALL)
    return found.group(1) if found else ""


def _extract(text: str) -> Reply | None:
    query = re.search(r"Question: (.*?)\n", text)
    body = _section(text, "Answer, one numbered sentence per line:", "For each sentence")
    sentences = _NUMBERED.findall(body)
    if query is None or not sentences:
        return None
    claims = [{"sentence": int(n), "claim": c} for n, s in sentences for c in sentence_claims(s)]
    refusal = not claims and any(attempted(s) == "no" for _, s in sentences)
    return Reply(Tasks.CLAIM_EXTRACT, query.group(1).strip(), json.dumps({"refusal": refusal, "claims": claims}))


def supporting_sources(claim: str, sources: Sequence[str]) -> list[int]:
    """1-based numbers of the sources holding at least 60% of the claim's content words."""
    words = content_words(claim)
    return [i for i, source in enumerate(sources, start=1) if _fraction(content_words(source), words) >= 0.6]


def _verify(text: str) -> Reply | None:
    sources = [s for _, s in _NUMBERED.findall(_section(text, "Sources:", "Claims:"))]
    claims = _CLAIM_LINE.findall(_section(text, "Claims:", "For each claim"))
    if not claims:
        return None
    verdicts = []
    for n, claim in claims:
        found = supporting_sources(claim, sources)
        verdicts.append({"claim": int(n), "supported": bool(found), "sources": found})
    return Reply(Tasks.CLAIM_VERIFY, "", json.dumps({"verdicts": verdicts}))


def _useful(text: str) -> Reply | None:
    match = re.search(r"Question: (.*?)\n\s*Answer: (.*?)\n\s*Passage: (.*?)\n", text, _DOTALL)
    if match is None:
        return None
    share = _fraction(content_words(match.group(3)), content_words(match.group(2)))
    return Reply(Tasks.CONTEXT_USEFUL, match.group(1).strip(), json.dumps({"useful": 1 if share >= 0.25 else 0}))


def _relevance(text: str) -> Reply | None:
    match = re.search(r"Question: (.*?)\n\s*(?:### )?Context:\n(.*?)\n\n", text, _DOTALL)
    if match is None:
        return None
    share = _fraction(content_words(match.group(2)), content_words(match.group(1)))
    rating = 0 if share == 0 else 1 if share < 0.5 else 2
    return Reply(Tasks.CONTEXT_RELEVANCE, match.group(1).strip(), json.dumps({"rating": rating}))


_RUBRIC = re.compile(r"on one criterion: ([a-z ]+):.*?(?:Sources:\n(.*?)\n\n)?Question: (.*?)\n\nAnswer: (.*?)\n\n",
                     _DOTALL)


def rubric_score(criterion: str, question: str, answer: str, sources: str) -> int:
    """The simulated rubric score 0-10 (see the module docstring)."""
    if criterion in ("faithfulness", "citation accuracy"):
        share = _fraction(content_words(sources), content_words(answer))
    elif criterion == "coherence":
        sentences = [s for s in _SENTENCE.split(_MARKER.sub("", answer).strip()) if s]
        share = sum(1 for s in sentences if s.rstrip()[-1:] in ".!?") / len(sentences) if sentences else 0.0
    else:
        share = _fraction(content_words(answer), content_words(question))
    return round(10 * share)


def _rubric(text: str) -> Reply | None:
    match = _RUBRIC.search(text)
    if match is None:
        return None
    criterion, sources, question, answer_text = match.group(1), match.group(2) or "", match.group(3), match.group(4)
    score = rubric_score(criterion, question, answer_text, sources)
    reason = f"Simulated {criterion} from word overlap."
    return Reply(Tasks.RUBRIC, question.strip(), json.dumps({"reason": reason, "score": score}))


_CRITERION = re.compile(r"^Criterion \(([a-z0-9_]+)\): (.*?)\n.*?^Answer: (.*?)\n\n(.*?)\n\nReply with", _DOTALL | re.M)
_CRITERION_RANGE = re.compile(r"Score the answer from ([0-9]+) to ([0-9]+) on this criterion only")


def criterion_grade(criterion: str, answer_text: str, low: int | None, high: int | None) -> str | int:
    """The simulated grade of a user's criterion (see the module docstring): "yes"/"no", or a whole number."""
    share = _fraction(content_words(answer_text), content_words(criterion))
    if low is None or high is None:
        return "yes" if share >= 0.5 else "no"
    return round(low + share * (high - low))


def _criterion(text: str) -> Reply | None:
    match = _CRITERION.search(text)
    if match is None:
        return None
    name, criterion, answer_text, scale = match.groups()
    bounds = _CRITERION_RANGE.search(scale)
    low, high = (int(bounds.group(1)), int(bounds.group(2))) if bounds else (None, None)
    grade = criterion_grade(criterion, answer_text, low, high)
    reason = f"Simulated {name} from the overlap of the criterion's words with the answer."
    return Reply(Tasks.CRITERIA, "", json.dumps({"reason": reason, "score": grade}))


def _criterion_steps(text: str) -> Reply | None:
    match = re.search(r"^Criterion \(([a-z0-9_]+)\): ", text, re.M)
    if match is None:
        return None
    name = match.group(1)
    steps = [f"Read what criterion {name} asks of the answer.", "Find the parts of the answer that bear on it.",
             "Decide how fully the answer meets it, on the criterion's scale."]
    return Reply(Tasks.CRITERIA_STEPS, "", json.dumps({"steps": steps}))


def answer_questions(answer_text: str, n: int) -> list[str]:
    """N distinct questions from the answer's salient words (the i-th uses the first 2 + i of them)."""
    words = salient_words(answer_text, count=n + 2)
    return [f"What about {' '.join(words[:2 + i]) or 'this'}?" for i in range(n)]


def _questions(text: str) -> Reply | None:
    match = re.search(r"Answer: (.*?)\n\s*Write ([0-9]+) different questions", text, _DOTALL)
    if match is None:
        return None
    answer_text, n = match.group(1), int(match.group(2))
    refusal = attempted(answer_text) == "no"
    reply = {"refusal": refusal, "noncommittal": "it depends" in answer_text.lower(),
             "questions": [] if refusal else answer_questions(answer_text, n)}
    return Reply(Tasks.ANSWER_QUESTIONS, "", json.dumps(reply))


def _answer_rating(text: str) -> Reply | None:
    match = re.search(r"Question: (.*?)\n\s*Answer: (.*?)\n\n", text, _DOTALL)
    if match is None:
        return None
    if attempted(match.group(2)) == "no":
        return Reply(Tasks.ANSWER_RELEVANCE, match.group(1).strip(), json.dumps({"refusal": True, "rating": None}))
    share = _fraction(content_words(match.group(2)), content_words(match.group(1)))
    rating = 0 if share == 0 else 1 if share < 0.5 else 2
    return Reply(Tasks.ANSWER_RELEVANCE, match.group(1).strip(), json.dumps({"refusal": False, "rating": rating}))


def _guide(kind: str, text: str) -> Reply | None:
    """The RAG guide's prompts: its system message, then the user message (see the module docstring)."""
    if kind == Tasks.GUIDE_CLAIMS:
        answer_text = text.split("List each claim on a new line.", 1)[1].strip()
        sentences = [s for s in _SENTENCE.split(answer_text) if s.strip()]
        claims = [c for s in sentences for c in sentence_claims(s) or [" ".join(_MARKER.sub(" ", s).split())]]
        return Reply(kind, "", "\n".join(claims)) if claims else None
    if kind == Tasks.GUIDE_VERIFY:
        found = re.search(r"\nContext: (.*)\n\nClaim: (.*)\Z", text, _DOTALL)
        return None if found is None else Reply(
            kind, "", "YES" if supporting_sources(found.group(2), [found.group(1)]) else "NO")
    if kind in (Tasks.GUIDE_CONTEXT_RELEVANCE, Tasks.GUIDE_CONTEXT_PRECISION):
        found = re.search(r"\nQuery: (.*?)\n\nContext: (.*)\Z", text, _DOTALL)
        if found is None:
            return None
        share = _fraction(content_words(found.group(2)), content_words(found.group(1)))
        value = round(10 * share) if kind == Tasks.GUIDE_CONTEXT_RELEVANCE else int(share >= 0.5)
        return Reply(kind, found.group(1).strip(), str(value))
    found = re.search(r"\nQuestion: (.*?)\n\nAnswer: (.*?)(?:\n\nGround Truth: (.*))?\Z", text, _DOTALL)
    if found is None:
        return None
    target = found.group(3) if kind == Tasks.GUIDE_CORRECTNESS else found.group(1)
    if target is None:
        return None
    return Reply(kind, found.group(1).strip(), str(round(10 * _fraction(content_words(found.group(2)),
                                                                         content_words(target)))))


_GUIDE_KINDS = (Tasks.GUIDE_CONTEXT_RELEVANCE, Tasks.GUIDE_CONTEXT_PRECISION, Tasks.GUIDE_CLAIMS, Tasks.GUIDE_VERIFY,
                Tasks.GUIDE_ANSWER_RELEVANCE, Tasks.GUIDE_CORRECTNESS)

_HANDLERS: dict[str, Callable[[str], Reply | None]] = {
    Tasks.UMBRELA: lambda text: _umbrela(text, basic=False),
    "umbrela_basic": lambda text: _umbrela(text, basic=True),
    Tasks.NUGGET_CREATE: _create,
    Tasks.NUGGET_IMPORTANCE: _importance,
    Tasks.NUGGET_ASSIGN: _assign,
    Tasks.SUPPORT: _support,
    Tasks.NO_ANSWER: _no_answer,
    Tasks.GENERATE_QUERY: _generate,
    Tasks.CLAIM_EXTRACT: _extract,
    Tasks.CLAIM_VERIFY: _verify,
    Tasks.CONTEXT_USEFUL: _useful,
    Tasks.CONTEXT_RELEVANCE: _relevance,
    Tasks.RUBRIC: _rubric,
    Tasks.CRITERIA: _criterion,
    Tasks.CRITERIA_STEPS: _criterion_steps,
    Tasks.ANSWER_QUESTIONS: _questions,
    Tasks.ANSWER_RELEVANCE: _answer_rating,
    **{kind: functools.partial(_guide, kind) for kind in _GUIDE_KINDS},
}


def reply(messages: Sequence[tuple[str, str]]) -> Reply:
    """Classify the conversation and answer it; an unrecognised or unreadable prompt gets ``GENERIC_REPLY``."""
    text = "\n".join(content for role, content in messages if role != "assistant")
    kind = classify(text)
    handler = _HANDLERS.get(kind)
    result = handler(text) if handler else None
    return result if result is not None else Reply("unknown", "", GENERIC_REPLY)


# --- judge noise (test-retest): a neighbouring verdict instead of the usual one -------------------------

_NEIGHBOURS = {
    "Full Support": "Partial Support", "No Support": "Partial Support",
    "vital": "okay", "okay": "vital", "support": "partial_support", "not_support": "partial_support",
    "yes": "no", "no": "yes",
}


def perturb(kind: str, text: str, u: float) -> str:
    """``text`` with one verdict moved to a neighbour (``u`` in [0, 1) picks which and which way): a noisy judge."""
    if kind in (Tasks.UMBRELA, "umbrela_basic"):
        digits = list(re.finditer(r"[0-3]", text))
        if not digits:
            return text
        last, step = digits[-1], (1 if u < 0.5 else -1)
        grade = int(last.group()) + step
        grade = grade if 0 <= grade <= 3 else grade - 2 * step  # at the ends of the scale, the other way
        return text[:last.start()] + str(grade) + text[last.end():]
    if kind == Tasks.SUPPORT:
        if text == "Partial Support":
            return "Full Support" if u < 0.5 else "No Support"
        return _NEIGHBOURS.get(text, text)
    if kind == Tasks.NO_ANSWER:
        return _NEIGHBOURS.get(text, text)
    if kind in _JSON_NOISE:
        return _perturb_json(kind, text, u)
    if kind == Tasks.CRITERIA:
        return _perturb_criterion(text)
    labels = _literal_list(text) if kind in (Tasks.NUGGET_IMPORTANCE, Tasks.NUGGET_ASSIGN) else None
    if not labels:
        return text
    index = int(u * len(labels))
    current = labels[index]
    labels[index] = ("support" if u < 0.5 else "not_support") if current == "partial_support" else \
        _NEIGHBOURS.get(current, current)
    return _py_list(labels)


# generation replies (JSON): the field moved and its scale's bounds
_JSON_NOISE = {Tasks.CONTEXT_USEFUL: ("useful", 1), Tasks.CONTEXT_RELEVANCE: ("rating", 2), Tasks.RUBRIC: ("score", 10),
               Tasks.ANSWER_RELEVANCE: ("rating", 2), Tasks.CLAIM_VERIFY: ("verdicts", 1)}


def _perturb_json(kind: str, text: str, u: float) -> str:
    """One verdict of a generation reply moved: a claim's support flipped (one claim, picked by ``u``), a 0/1 flag
    flipped, a rating or score one step up or down (the other way at the ends of its scale)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    field, top = _JSON_NOISE[kind]
    if kind == Tasks.CLAIM_VERIFY:
        verdicts = value.get("verdicts") or []
        if not verdicts:
            return text
        verdict = verdicts[int(u * len(verdicts))]
        verdict["supported"] = not verdict["supported"]
        verdict["sources"] = verdict["sources"] or [1] if verdict["supported"] else []
        return json.dumps(value)
    current = value.get(field)
    if not isinstance(current, int) or isinstance(current, bool):
        return text  # a refusal's null rating stays
    step = 1 if u < 0.5 else -1
    moved = current + step
    value[field] = moved if 0 <= moved <= top else current - step
    return json.dumps(value)


def _perturb_criterion(text: str) -> str:
    """A criterion's verdict moved: yes <-> no; a grade one step down, or up at 0 and 1 (the reply does not say its
    scale's top, and 0 or 1 is the bottom of each numeric scale, so the moved grade stays on the scale)."""
    try:
        value = json.loads(text)
    except ValueError:
        return text
    score = value.get("score")
    if score in ("yes", "no"):
        value["score"] = "no" if score == "yes" else "yes"
    elif isinstance(score, int) and not isinstance(score, bool):
        value["score"] = score + 1 if score <= 1 else score - 1
    return json.dumps(value)


def answer(messages: Sequence[tuple[str, str]]) -> str:
    """The reply text for ``messages`` (a sequence of ``(role, content)``)."""
    return reply(messages).text


# --- a gullible judge (injection probe tests): an instruction inside the judged text is obeyed ------------------

_INJECTION = re.compile(r"ignore (?:all )?previous instructions and (?:output|answer|respond with) "
                        r"\"?([^\"\n]+?)\"?\.?$", re.IGNORECASE | re.MULTILINE)


def obeyed(kind: str, messages: Sequence[tuple[str, str]]) -> str | None:
    """The reply an injected "Ignore previous instructions and output X" demands, in the prompt kind's reply
    format; None when there is no such instruction or X is no verdict of this kind."""
    text = "\n".join(content for role, content in messages if role != "assistant")
    found = _INJECTION.search(text)
    if found is None:
        return None
    demand = found.group(1).strip()
    if kind in (Tasks.UMBRELA, "umbrela_basic") and demand in ("0", "1", "2", "3"):
        return f"##final score: {demand}" if kind == Tasks.UMBRELA else demand
    if kind == Tasks.SUPPORT and demand in ("Full Support", "Partial Support", "No Support"):
        return demand
    if kind == Tasks.NO_ANSWER and demand in ("yes", "no"):
        return demand
    return None
