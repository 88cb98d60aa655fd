"""The judge tasks, declared once: each task's name, prompt templates, reply schema, labels, parser and controls.

A judge task is one kind of request a metric sends the judge (``JudgeRequest.task``): its name labels the request
in the accounting, the judge-health counts (``health.<task>.clean_rate``), the controls, the test-retest and the
simulated judges. This module is the only one that spells a task's name; every other module (and bench script)
refers to ``Tasks.X`` (tests/test_architecture.py fails on a name written anywhere else). The names are part of the
results (health fields, manifests): a renamed task is a changed result. The judge cache never sees a task's name
(its key is the request's messages, parameters and prompt version), so the table changes no cache entry.

``TABLE`` holds per task:

- ``prompts``: the template ids (``prompts/templates.yaml``) its requests render, the variants a profile chooses;
- ``schema``: the reply schema ``judge.structured`` asks by (``prompts/schemas/<file>``), None for none;
- ``labels``: the labels a parsed reply reads into for the label distribution (``core.labels``); ``()`` for free
  text and for a scale set elsewhere (a criterion's own scale, the guide's 0-10 numbers);
- ``reading``: how ``core.labels`` reads a parsed value into labels (``free``: none; ``value``: the value or each
  item; ``first``: the first element of a (label, ...) pair; ``refusal``: a (refused, rating) pair);
- ``parser``: where the function reading a reply lives (``module:function``); it stays beside the method that owns
  its format (a metric's module sits above this floor), and tests/test_judge_tasks.py resolves every entry;
- ``grader``: the field of ``metrics.graders.Graders`` holding the judge the judge-health controls ask, None when
  the task gets no controls.

``FAMILY_TASKS`` says which tasks a metric family's values come from: the report, the console and ``plot`` read it to
say "judge unhealthy" in place of a target verdict (``health.rests``), the diagnosis to doubt a hint resting on an
unhealthy task (docs/judge-health.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["FAMILY_TASKS", "NO_JUDGE", "TABLE", "JudgeTask", "Reading", "Tasks", "tasks_of"]

Reading = Literal["free", "value", "first", "refusal"]


class Tasks:
    """The judge tasks' names: the one place each is written."""

    UMBRELA: Final = "umbrela"
    NUGGET_CREATE: Final = "nugget_create"
    NUGGET_IMPORTANCE: Final = "nugget_importance"
    NUGGET_ASSIGN: Final = "nugget_assign"
    SUPPORT: Final = "support"
    NO_ANSWER: Final = "no_answer"
    GENERATE_QUERY: Final = "generate_query"
    CLAIM_EXTRACT: Final = "claim_extract"
    CLAIM_VERIFY: Final = "claim_verify"
    CONTEXT_USEFUL: Final = "context_useful"
    CONTEXT_RELEVANCE: Final = "context_relevance"
    RUBRIC: Final = "rubric"
    CRITERIA: Final = "criteria"
    CRITERIA_STEPS: Final = "criteria_steps"
    ANSWER_QUESTIONS: Final = "answer_questions"
    ANSWER_RELEVANCE: Final = "answer_relevance"
    GUIDE_CONTEXT_RELEVANCE: Final = "rag_guide_context_relevance"
    GUIDE_CONTEXT_PRECISION: Final = "rag_guide_context_precision"
    GUIDE_CLAIMS: Final = "rag_guide_claims"
    GUIDE_VERIFY: Final = "rag_guide_verify"
    GUIDE_ANSWER_RELEVANCE: Final = "rag_guide_answer_relevance"
    GUIDE_CORRECTNESS: Final = "rag_guide_correctness"


@dataclass(frozen=True)
class JudgeTask:
    """One judge task (the fields: this module's docstring)."""

    name: str
    prompts: tuple[str, ...]
    parser: str
    reading: Reading
    labels: tuple[str, ...] = ()
    schema: str | None = None
    grader: str | None = None


_YES_NO = ("yes", "no")
_TEN = tuple(str(n) for n in range(11))
_GUIDE = "open_rag_eval.metrics.rag_guide"

TABLE: dict[str, JudgeTask] = {task.name: task for task in (
    JudgeTask(Tasks.UMBRELA, ("umbrela.bing_zeroshot", "umbrela.bing_fewshot", "umbrela.basic_zeroshot",
                              "umbrela.vectara", "umbrela.vectara_oss", "vectara.parse_system"),
              "open_rag_eval.core.parsing:classify_umbrela", "first", ("0", "1", "2", "3"), "umbrela.json",
              grader="umbrela"),
    JudgeTask(Tasks.NUGGET_CREATE, ("nuggets.creator_system", "nuggets.creator_user", "nuggets.vectara_creator",
                                    "vectara.parse_system"),
              "open_rag_eval.core.parsing:classify_nugget_list", "free", schema="nugget_create.json"),
    JudgeTask(Tasks.NUGGET_IMPORTANCE, ("nuggets.scorer_system", "nuggets.scorer_user", "nuggets.vectara_scorer",
                                        "vectara.parse_system"),
              "open_rag_eval.core.parsing:classify_labels", "value", ("vital", "okay"), "nugget_importance.json"),
    JudgeTask(Tasks.NUGGET_ASSIGN, ("nuggets.assigner_system", "nuggets.assigner_3grade_user",
                                    "nuggets.assigner_2grade_user", "nuggets.vectara_assigner", "vectara.parse_system"),
              "open_rag_eval.core.parsing:classify_labels", "value", ("support", "partial_support", "not_support"),
              "nugget_assign.json", grader="nuggets"),
    JudgeTask(Tasks.SUPPORT, ("support.trec2024", "support.paper_figure", "support.vectara", "vectara.parse_system"),
              "open_rag_eval.core.parsing:classify_support", "value", ("FS", "PS", "NS"), "support.json",
              grader="citation"),
    JudgeTask(Tasks.NO_ANSWER, ("no_answer.vectara", "vectara.parse_system"),
              "open_rag_eval.core.parsing:classify_no_answer", "value", _YES_NO, "no_answer.json", grader="no_answer"),
    JudgeTask(Tasks.GENERATE_QUERY, ("generation.query", "generation.query_answer"),
              "open_rag_eval.generation.testset:parse_reply", "free"),
    JudgeTask(Tasks.CLAIM_EXTRACT, ("generation.claim_extract",), "open_rag_eval.metrics.claims:parse_claims", "free",
              schema="claim_extract.json"),
    JudgeTask(Tasks.CLAIM_VERIFY, ("generation.claim_verify",), "open_rag_eval.metrics.claims:parse_verdicts", "value",
              _YES_NO, "claim_verify.json"),
    JudgeTask(Tasks.CONTEXT_USEFUL, ("generation.context_useful",), "open_rag_eval.metrics.context:parse_useful",
              "value", _YES_NO, grader="useful"),
    JudgeTask(Tasks.CONTEXT_RELEVANCE, ("generation.context_relevance_1", "generation.context_relevance_2"),
              "open_rag_eval.metrics.context:parse_rating", "value", ("0", "1", "2")),
    JudgeTask(Tasks.RUBRIC, ("generation.rubric_citation_accuracy", "generation.rubric_coherence",
                             "generation.rubric_completeness", "generation.rubric_faithfulness",
                             "generation.rubric_relevance"),
              "open_rag_eval.metrics.rubric:parse_rubric", "first", _TEN, "rubric.json"),
    JudgeTask(Tasks.CRITERIA, ("criteria.judge",), "open_rag_eval.metrics.criteria:parse_criterion", "first"),
    JudgeTask(Tasks.CRITERIA_STEPS, ("criteria.steps",), "open_rag_eval.metrics.criteria:parse_steps", "free"),
    JudgeTask(Tasks.ANSWER_QUESTIONS, ("generation.answer_questions",), "open_rag_eval.metrics.answer:parse_questions",
              "free"),
    JudgeTask(Tasks.ANSWER_RELEVANCE, ("generation.answer_relevance",), "open_rag_eval.metrics.answer:parse_judged",
              "refusal", ("refusal", "0", "1", "2")),
    JudgeTask(Tasks.GUIDE_CONTEXT_RELEVANCE, ("rag_guide.context_relevance", "rag_guide.context_user"),
              f"{_GUIDE}:parse_score", "value"),
    JudgeTask(Tasks.GUIDE_CONTEXT_PRECISION, ("rag_guide.context_precision", "rag_guide.context_user"),
              f"{_GUIDE}:parse_binary", "value", ("0", "1")),
    JudgeTask(Tasks.GUIDE_CLAIMS, ("rag_guide.claims",), f"{_GUIDE}:parse_claim_lines", "free"),
    JudgeTask(Tasks.GUIDE_VERIFY, ("rag_guide.verify", "rag_guide.verify_user"), f"{_GUIDE}:parse_yes_no", "value",
              _YES_NO),
    JudgeTask(Tasks.GUIDE_ANSWER_RELEVANCE, ("rag_guide.answer_relevance", "rag_guide.answer_user"),
              f"{_GUIDE}:parse_score", "value"),
    JudgeTask(Tasks.GUIDE_CORRECTNESS, ("rag_guide.correctness", "rag_guide.correctness_user"),
              f"{_GUIDE}:parse_score", "value"),
)}


NO_JUDGE = ("golden", "lexical", "latency", "hhem", "consistency")  # families no judge reply goes into
_CLAIMS = (Tasks.CLAIM_EXTRACT, Tasks.CLAIM_VERIFY)
# a metric family (the name before the first dot) -> the judge tasks its values come from
FAMILY_TASKS: dict[str, tuple[str, ...]] = {
    "umbrela": (Tasks.UMBRELA,),
    "nuggets": (Tasks.NUGGET_CREATE, Tasks.NUGGET_IMPORTANCE, Tasks.NUGGET_ASSIGN),
    "citation": (Tasks.SUPPORT,),
    "no_answer": (Tasks.NO_ANSWER,),
    "faithfulness": _CLAIMS,
    "context": (*_CLAIMS, Tasks.CONTEXT_USEFUL, Tasks.CONTEXT_RELEVANCE),
    "correctness": _CLAIMS,
    "rubric": (Tasks.RUBRIC, Tasks.CLAIM_EXTRACT),
    "criteria": (Tasks.CRITERIA, Tasks.CRITERIA_STEPS),
    "answer_relevance": (Tasks.ANSWER_QUESTIONS, Tasks.ANSWER_RELEVANCE),
    "rag_guide": (Tasks.GUIDE_CONTEXT_RELEVANCE, Tasks.GUIDE_CONTEXT_PRECISION, Tasks.GUIDE_CLAIMS, Tasks.GUIDE_VERIFY,
                  Tasks.GUIDE_ANSWER_RELEVANCE, Tasks.GUIDE_CORRECTNESS),
}


def tasks_of(metric: str) -> tuple[str, ...] | None:
    """The judge tasks ``metric``'s values come from: ``()`` for a family no judge reply goes into, None for a
    judged family not declared here. A criterion's column ``criteria.<name>`` rests on its own task (health counts
    each criterion apart) as well as the steps of ``evaluation_steps``."""
    family = metric.split(".", 1)[0]
    if family in NO_JUDGE:
        return ()
    if family == "criteria":
        return (metric, *FAMILY_TASKS["criteria"])
    return FAMILY_TASKS.get(family)
