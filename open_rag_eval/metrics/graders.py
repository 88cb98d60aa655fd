"""The judges the judge-health controls ask (``open_rag_eval.health.controls``), as the evaluators that own them
declare them (``evaluators.base.Contract.graders``): one value both floors above read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, fields

from open_rag_eval.core.judge_tasks import TABLE, Tasks
from open_rag_eval.judge.base import Judge
from open_rag_eval.metrics._judging import Asked
from open_rag_eval.metrics.citation import CitationJudge
from open_rag_eval.metrics.criteria import CriteriaSession, CriterionSpec, column
from open_rag_eval.metrics.no_answer import NoAnswerClassifier
from open_rag_eval.metrics.nuggets import Nuggetizer
from open_rag_eval.metrics.umbrela import UmbrelaGrader

__all__ = ["CONTROL_TASKS", "Graders"]

# the tasks that get controls, in the order they are asked (each names its grader in ``core.judge_tasks.TABLE``)
CONTROL_TASKS = (Tasks.UMBRELA, Tasks.SUPPORT, Tasks.NO_ANSWER, Tasks.NUGGET_ASSIGN, Tasks.CONTEXT_USEFUL)


@dataclass
class Graders:
    """The run's own judges of the tasks that get controls (None: the run does not judge that task)."""

    umbrela: UmbrelaGrader | None = None
    citation: CitationJudge | None = None
    no_answer: NoAnswerClassifier | None = None
    nuggets: Nuggetizer | None = None
    # the generation family's context usefulness: (judge, question, answer, passage) -> the judge's 0/1
    useful: Callable[[Judge, str, str, str], Awaitable[Asked[bool]]] | None = None
    # the criteria evaluator's criteria that get controls (task ``criteria.<name>``), and its session for a judge
    criteria: tuple[CriterionSpec, ...] = ()
    criteria_session: Callable[[Judge], CriteriaSession] | None = None

    def tasks(self) -> list[str]:
        criteria = [column(spec.name) for spec in self.criteria] if self.criteria_session is not None else []
        return [task for task in CONTROL_TASKS if self.of(task) is not None] + criteria

    def of(self, task: str) -> object | None:
        """The grader of ``task`` (its field named by the task's ``grader`` in the table), None for none."""
        field = TABLE[task].grader
        return None if field is None else getattr(self, field)

    def joined(self, later: Graders) -> Graders:
        """These graders, each one missing taken from ``later`` (the run's first evaluator declaring a grader
        of a task is the one its controls ask)."""
        def mine(name: str) -> bool:
            value = getattr(self, name)
            return value is not None and value != ()

        return Graders(**{f.name: getattr(self, f.name) if mine(f.name) else getattr(later, f.name)
                          for f in fields(self)})
