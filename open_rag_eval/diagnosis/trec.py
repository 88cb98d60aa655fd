"""Diagnosis of the TREC 2024 metrics: a symptom in the scores and the part of the system it points to.

Pure functions over metric means (of a whole evaluation, or of one query), and the run's judge-health section
(manifest.json ``health``). Judge health comes first: when the judge's replies for a task are unhealthy, the judge is
named as the likely cause, and the hints built on that task say so instead of blaming retrieval or the generator.
Thresholds are the ``trec_*`` rules' (``diagnosis.rules``), configurable through ``DiagnosisOptions``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from open_rag_eval.core.judge_tasks import Tasks
from open_rag_eval.diagnosis.options import DiagnosisOptions
from open_rag_eval.diagnosis.rules import rule_named
from open_rag_eval.core.types import EvalResult

__all__ = ["TASKS", "adjusted_means", "answer_evidence", "diagnose", "doubt", "outputs_for_means", "hedge",
           "judge_line", "run_means", "shaky", "system_hints", "tally_answered", "thresholds", "uncertain_note",
           "unhealthy_tasks"]

Means = Mapping[str, float | None]
Threshold = Callable[[str, str], float]  # (rule, check) -> threshold
# the judge tasks each hint area rests on
TASKS = {"retrieval": (Tasks.UMBRELA,),
         "generation": (Tasks.UMBRELA, Tasks.NUGGET_CREATE, Tasks.NUGGET_IMPORTANCE, Tasks.NUGGET_ASSIGN),
         "citations": (Tasks.SUPPORT,), "no answer": (Tasks.NO_ANSWER, Tasks.UMBRELA)}


def _get(means: Means, metric: str) -> float | None:
    value = means.get(metric)
    return None if value is None else float(value)


ANSWER_GRADE = 3  # UMBRELA 3: "dedicated to the query and contains the exact answer"


def answer_evidence(outputs: Iterable[Mapping[str, Any]]) -> bool | None:
    """Did any retrieved passage hold the answer to this question (an UMBRELA grade of 3)? None when nothing was
    graded. A 2 ("some answer, unclear or among other information") is what judges give a passage about the query's
    subject that does not answer it (a question about a future race, passages about the race: the demo's q5, which
    the simulated judge and a 0.5B model grade 2 and people grade 1), so it does not show that an answer was there to
    give: blaming the generator for declining needs the exact answer among its passages."""
    grades = [g.get("grade") for o in outputs
              for g in ((o.get("details") or {}).get("umbrela") or {}).get("grades") or []]
    graded = [g for g in grades if isinstance(g, (int, float))]
    return None if not graded else any(g >= ANSWER_GRADE for g in graded)


def run_means(outputs: Iterable[Mapping[str, Any]], means: Mapping[str, float | None]) -> tuple[dict[str, Any], int]:
    """The run's means for the diagnosis with correct refusals set apart: (means where ``no_answer.answered`` is the
    share answered among outputs that had an answer to give, number of correct refusals)."""
    answered: list[float] = []
    refusals = sum(tally_answered(output, answered) for output in outputs)
    return adjusted_means(means, answered, refusals), refusals


def tally_answered(output: Mapping[str, Any], answered: list[float]) -> int:
    """One output of ``run_means``: 1 when it is a correct refusal, else 0 (its no-answer score, if any, is appended
    to ``answered``); outputs may so be read one at a time."""
    value = (output.get("scores") or {}).get("no_answer.answered")
    if value is None:
        return 0
    if value < 0.5 and answer_evidence([output]) is False:
        return 1
    answered.append(float(value))
    return 0


def adjusted_means(means: Mapping[str, float | None], answered: list[float], refusals: int) -> dict[str, Any]:
    """``run_means``'s means from its tally."""
    adjusted = dict(means)
    if refusals:
        adjusted["no_answer.answered"] = sum(answered) / len(answered) if answered else None
    return adjusted


def outputs_for_means(result: EvalResult) -> list[dict[str, Any]]:
    """What ``run_means`` reads of each output (its no-answer score, its UMBRELA grades), from a run's result."""
    outputs: dict[tuple[str, int], dict[str, Any]] = {}
    for score in result.scores:
        if score.metric == "no_answer.answered" and score.run is not None:
            entry = outputs.setdefault((score.query_id, score.run), {"scores": {}, "details": {}})
            entry["scores"][score.metric] = score.value
    for detail in result.details:
        if detail.section == "umbrela" and detail.run is not None:
            entry = outputs.setdefault((detail.query_id, detail.run), {"scores": {}, "details": {}})
            entry["details"]["umbrela"] = detail.data
    return list(outputs.values())


def thresholds(options: DiagnosisOptions | None = None) -> Threshold:
    """The threshold of a ``trec_*`` rule's check under ``options`` (the defaults without)."""
    chosen = options or DiagnosisOptions()

    def threshold(rule: str, check: str) -> float:
        found = rule_named(rule)
        assert found is not None, rule
        return chosen.threshold(found, next(c for c in found.checks if c.name == check))

    return threshold


def diagnose(means: Means, *, evidence: bool | None = None, health: Mapping[str, Any] | None = None,
             options: DiagnosisOptions | None = None) -> list[tuple[str, str]]:
    """(area, hint) pairs: the judge first when ``health`` (manifest.json's section) says it is unhealthy, then the
    most upstream: retrieval, generation, citations, support, declines. A hint resting on an unhealthy judge task
    says so instead of blaming the system.

    Declining when nothing retrieved holds the answer (``evidence`` False: no passage graded 3; unknown:
    a mean grade under 1) is a correct refusal: it is said as such, never as a retrieval problem.
    """
    hints = [(area, text) for _, area, text in system_hints(means, evidence, thresholds(options), options)]
    unhealthy = unhealthy_tasks(health)
    if not unhealthy:
        return hints
    return [("judge", judge_line(unhealthy))] + [(area, doubt(text, area, unhealthy)) for area, text in hints]


def judge_line(unhealthy: list[str]) -> str:
    return (f"the judge's replies are unhealthy for {', '.join(unhealthy)} (see Judge health): scores built on them "
            "may show the judge's noise, not the system's; fix the judge (model, prompt, parse profile) before "
            "acting on the hints below")


def unhealthy_tasks(health: Mapping[str, Any] | None) -> list[str]:
    """The unhealthy tasks manifest.json's health section lists (before it listed them: the tasks its problems
    name)."""
    if not health or health.get("healthy", True):
        return []
    if isinstance(health.get("unhealthy_tasks"), list):
        return [str(task) for task in health["unhealthy_tasks"]]
    problems = [str(p) for p in health.get("problems") or []]
    return [task for task in (health.get("tasks") or {}) if any(p.startswith(f"{task}:") for p in problems)]


def shaky(area: str, unhealthy: list[str]) -> list[str]:
    """The unhealthy judge tasks a hint of ``area`` rests on."""
    return [task for task in TASKS.get(area, ()) if task in unhealthy]


def uncertain_note(tasks: list[str]) -> str:
    return f"uncertain: the judge's {', '.join(tasks)} replies are unhealthy"


def hedge(text: str, area: str) -> str:
    """A hint's words when the judge behind it is unhealthy: a decline is not blamed on the generator."""
    if area == "no answer":
        return text.replace("so the generator is too cautious", "but check the judge before the generator")
    return text


def doubt(text: str, area: str, unhealthy: list[str]) -> str:
    tasks = shaky(area, unhealthy)
    return f"{hedge(text, area)} ({uncertain_note(tasks)})" if tasks else text


def system_hints(means: Means, evidence: bool | None, t: Threshold,
                 options: DiagnosisOptions | None = None) -> list[tuple[str, str, str]]:
    """(rule, area, hint) for the ``trec_*`` rules that fire (and are not disabled by ``options``)."""
    hints: list[tuple[str, str, str]] = []
    umbrela, vital = _get(means, "umbrela.mean"), _get(means, "nuggets.vital_strict")
    precision, hhem = _get(means, "citation.precision"), _get(means, "hhem.score")
    answered, fabricated = _get(means, "no_answer.answered"), _get(means, "citation.fabricated")
    low, high = t("trec_relevance", "umbrela"), t("trec_missing_facts", "umbrela")
    no_evidence = evidence is False or (evidence is None and umbrela is not None and umbrela < low)
    cautious = answered is not None and answered < t("trec_declines", "answered")
    declined_on_no_evidence = answered is not None and answered < 0.5 and no_evidence
    if declined_on_no_evidence:
        hints.append(("trec_declines", "no answer", "declined to answer, and no retrieved passage holds the answer "
                      "(no UMBRELA grade 3): a correct refusal given this evidence"))
    elif umbrela is not None and umbrela < low:
        hints.append(("trec_relevance", "retrieval", f"passages are mostly judged not relevant (mean UMBRELA grade "
                      f"{umbrela:.2f} < {low:g}): look at retrieval (index, chunking, query rewriting, top-k) before "
                      "the generator"))
    declined = answered is not None and answered < 0.5  # a refusal has no facts or citations to judge
    if umbrela is not None and umbrela >= high and vital is not None and vital < t("trec_missing_facts", "vital") \
            and not declined:
        hints.append(("trec_missing_facts", "generation", f"relevant passages are retrieved (UMBRELA {umbrela:.2f}) "
                      f"but strict vital nugget recall is low ({vital:.2f}): the answer leaves out facts the passages "
                      "hold (prompt, context truncation, answer length)"))
    cited = _get(means, "citation.n_cited")
    if cited is not None and cited < t("trec_no_citations", "cited") and precision is None and not declined:
        hints.append(("trec_no_citations", "citations", "the answers cite nothing (no citation markers), so "
                      "citation support is undefined, not low: to score it, end each statement with the passages it "
                      "rests on, e.g. 'Paris is the capital of France [1].' ([1]: the first passage, or a passage id)"))
    if precision is not None and precision < t("trec_citation_support", "precision") and not declined:
        hints.append(("trec_citation_support", "citations", f"citation support precision is low ({precision:.2f}): "
                      "statements cite passages that do not support them (citation placement or the citation "
                      "instruction)"))
    if fabricated is not None and fabricated > t("trec_fabricated_citations", "fabricated"):
        hints.append(("trec_fabricated_citations", "citations", f"citations to passages that were not retrieved "
                      f"({fabricated:.2f} per answer): the generator invents source ids"))
    if hhem is not None and hhem < t("trec_hhem", "hhem") and not declined:
        hints.append(("trec_hhem", "support", f"low HHEM factual consistency ({hhem:.2f}): the answer says things "
                      "the passages do not support (hallucination or outside knowledge)"))
    if cautious and answered is not None and not declined_on_no_evidence:
        where = ("and passages holding the answer were found, so the generator is too cautious"
                 if evidence is True or (umbrela is not None and umbrela >= high)
                 else "open these queries to see whether their passages hold an answer")
        hints.append(("trec_declines", "no answer", f"{1.0 - answered:.0%} of answers decline to answer; {where}"))
    disabled = set() if options is None else set(options.disable) if options.enabled else {h[0] for h in hints}
    return [hint for hint in hints if hint[0] not in disabled]
