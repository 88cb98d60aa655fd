"""The diagnosis rules: a symptom in the metric means, the advice it calls for, and where its threshold comes from.

A rule holds one or more checks, all of which must hold for it to fire. A check reads one metric -- the first of its
candidate names the run has -- and compares its mean with a threshold (``<``, ``>`` or ``>=``). The generation
metrics' names come from ``open_rag_eval.core.families``, which the metrics write with, so a rule cannot read a
column that does not exist (tests/test_diagnosis.py runs the evaluators and checks it). Thresholds and metric names
are configurable per check as ``<rule>.<check>`` (``diagnosis.thresholds`` / ``diagnosis.metrics``).

Defaults and their sources (docs/diagnosis.md has the table):

- ResearchMate's evaluation module (Open RAG Benchmark): Recall@10 as a hit rate (our ``golden.hit@10``) under 0.50
  and MRR under 0.20 are "poor retrieval", over 0.80 and 0.40 "good"; an answer with under 10% of its words in the
  passages is "ungrounded"; its table of symptoms gives the advice.
- the RAG evaluation & optimisation guide (RAGAS-style): one threshold, 0.7, for context relevance, faithfulness,
  answer relevance and completeness, with a list of strategies for each.
- ``trec_*``: the report's hints on the TREC 2024 metrics (UMBRELA, nuggets, citation support, HHEM, no-answer),
  with their own thresholds; their logic (refusals set apart when nothing retrieved holds an answer) is in
  ``diagnosis.trec``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from open_rag_eval.core import families as col

__all__ = ["CRITERIA_COLUMNS", "RULES", "Check", "Rule", "rule_named"]


@dataclass(frozen=True)
class Check:
    name: str  # the check's name within its rule: "<rule>.<name>" in the config
    metrics: tuple[str, ...]  # candidates: the first one the run has is read
    op: Literal["<", ">", ">="]
    threshold: float


@dataclass(frozen=True)
class Rule:
    name: str
    area: str  # retrieval | ranking | grounding | generation | citations | no answer
    checks: tuple[Check, ...]
    symptom: str
    advice: str
    source: str  # where the default thresholds (and advice) come from
    replaces: tuple[str, ...] = ()  # more general rules this one makes redundant when it fires
    custom: bool = False  # evaluated by diagnosis.trec (refusals and evidence need more than thresholds)


CRITERIA_COLUMNS = "criteria.*"  # every column of the criteria evaluator (the user names them)
_GUIDE = "the RAG evaluation & optimisation guide (0.7 for every generation metric; its strategies)"
_RETRIEVAL_STRATEGIES = ("improve the chunking strategy; use hybrid search (semantic + keyword); try query expansion "
                         "or rewriting; retrieve more documents")

RULES: tuple[Rule, ...] = (
    Rule("low_recall", "retrieval", (Check("recall", ("golden.hit@10",), "<", 0.50),),
         "few queries find a relevant passage in the top 10",
         "poor embeddings or chunking: check the chunk boundaries, try another embedding model, retrieve more "
         "passages", "ResearchMate (Recall@10 < 0.50 is poor retrieval; its table of symptoms)"),
    Rule("low_mrr", "ranking", (Check("mrr", ("golden.mrr",), "<", 0.20),),
         "the first relevant passage comes late", "tune the retriever's scoring, consider a reranker",
         "ResearchMate (MRR < 0.20 is poor retrieval)"),
    Rule("ranked_too_low", "ranking",
         (Check("recall", ("golden.hit@10",), ">", 0.80), Check("mrr", ("golden.mrr",), "<", 0.40)),
         "relevant passages are found but ranked too low", "tune the retriever's scoring, consider a reranker",
         "ResearchMate (High Recall@10, Low MRR; > 0.80 and 0.40 are its good bounds)", replaces=("low_mrr",)),
    Rule("low_groundedness", "grounding", (Check("ungrounded", ("lexical.ungrounded",), ">", 0.0),),
         "some answers are ungrounded (under the groundedness threshold of the golden evaluator, 10% of their "
         "content words in the passages by default)",
         "hallucination or paraphrasing: check the generated answers by hand and inspect the ungrounded queries",
         "ResearchMate (answers under 10% token overlap are flagged ungrounded)"),
    Rule("good_retrieval_bad_generation", "generation",
         (Check("recall", ("golden.hit@10",), ">", 0.80), Check("ungrounded", ("lexical.ungrounded",), ">", 0.0)),
         "retrieval is good but some answers are ungrounded",
         "good retrieval, bad generation: look at the prompt and how the context is formatted",
         "ResearchMate (High Recall, Low Groundedness)", replaces=("low_groundedness",)),
    Rule("low_context_relevance", "retrieval",
         (Check("relevance", (col.CONTEXT_RELEVANCE, col.rag_guide("context_relevance")), "<", 0.7),),
         "the retrieved context is not relevant to the query", _RETRIEVAL_STRATEGIES, _GUIDE),
    Rule("low_context_precision", "ranking",
         (Check("precision", (col.context_precision("reference"), col.context_precision("answer"),
                             col.rag_guide("context_precision")), "<", 0.7),),
         "relevant passages are not at the top of the context",
         "rank relevant passages first: a reranker, or a relevance threshold on what is retrieved",
         "the RAG evaluation & optimisation guide (its 0.7; the advice is ours: it gives none for this metric)"),
    Rule("low_faithfulness", "grounding",
         (Check("faithfulness", (col.FAITHFULNESS, col.rubric("faithfulness"), col.rag_guide("faithfulness")), "<",
                0.7),),
         "answers make claims the context does not support",
         "use more restrictive prompts; require citations; lower the temperature; filter retrieved documents by "
         "a relevance threshold", _GUIDE),
    Rule("low_answer_relevance", "generation",
         (Check("relevance", (col.ANSWER_RELEVANCE, col.ANSWER_RELEVANCE_JUDGED, col.rubric("relevance"),
                             col.rag_guide("answer_relevance")), "<", 0.7),),
         "answers do not address the question",
         "improve the system prompt; add query classification; use chain-of-thought prompting; filter the context "
         "to the most relevant", _GUIDE),
    Rule("low_completeness", "generation",
         (Check("completeness", (col.rubric("completeness"),), "<", 0.7),),
         "answers leave parts of the question unanswered",
         "retrieve more documents; use multi-query retrieval; improve document coverage; add follow-up generation",
         _GUIDE),
    Rule("low_keyword_coverage", "generation", (Check("coverage", ("lexical.keyword_coverage",), "<", 0.7),),
         "answers miss expected keywords",
         "retrieve more documents; use multi-query retrieval; improve document coverage",
         "the RAG evaluation & optimisation guide's 0.7 and completeness strategies (RAG-answer-eval-demo, which defines the metric, gives no threshold)"),
    # the TREC 2024 metrics (diagnosis.trec); their thresholds are ours
    Rule("trec_relevance", "retrieval", (Check("umbrela", ("umbrela.mean",), "<", 1.0),),
         "passages are mostly judged not relevant", "look at retrieval (index, chunking, query rewriting, top-k) "
         "before the generator", "ours (UMBRELA grade 1 = related but not answering)", custom=True),
    Rule("trec_missing_facts", "generation",
         (Check("umbrela", ("umbrela.mean",), ">=", 1.5), Check("vital", ("nuggets.vital_strict",), "<", 0.5)),
         "relevant passages are retrieved but strict vital nugget recall is low",
         "the answer leaves out facts the passages hold (prompt, context truncation, answer length)", "ours",
         custom=True),
    Rule("trec_citation_support", "citations", (Check("precision", ("citation.precision",), "<", 0.5),),
         "citation support precision is low", "statements cite passages that do not support them", "ours",
         custom=True),
    Rule("trec_no_citations", "citations", (Check("cited", ("citation.n_cited",), "<", 0.001),),
         "the answers cite nothing, so citation support is undefined (not low)",
         "add citation markers: end each statement with the passages it rests on, e.g. 'Paris is the capital [1].'",
         "ours", replaces=("trec_citation_support",), custom=True),
    Rule("trec_fabricated_citations", "citations", (Check("fabricated", ("citation.fabricated",), ">", 0.0),),
         "answers cite passages that were not retrieved", "the generator invents source ids", "ours", custom=True),
    Rule("trec_hhem", "support", (Check("hhem", ("hhem.score",), "<", 0.5),),
         "low HHEM factual consistency", "the answer says things the passages do not support",
         "ours (0.5 is HHEM's own boundary)", custom=True),
    Rule("trec_declines", "no answer", (Check("answered", ("no_answer.answered",), "<", 0.8),),
         "many answers decline", "see whether the passages hold an answer; if they do, the generator is too "
         "cautious", "ours", custom=True),
    # one finding per criterion of the user's own (type: criteria) whose mean is under the threshold: evaluated by
    # diagnosis.check for every criteria.<name> column the run has (the names are the user's)
    Rule("low_criterion", "generation", (Check("criterion", (CRITERIA_COLUMNS,), "<", 0.7),),
         "one of your own criteria is met by few answers",
         "read the judge's reasons for the lowest-scoring answers (the report's criteria detail) and change the "
         "system prompt or the retrieval that this criterion depends on; check the criterion's wording if the "
         "reasons show the judge read it otherwise than you meant",
         _GUIDE, custom=True),
)


def rule_named(name: str) -> Rule | None:
    return next((rule for rule in RULES if rule.name == name), None)
