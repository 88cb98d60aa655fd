"""The project's metric families, in the order results are written (``open_rag_eval.core.catalogue``).

To add a family: one ``register(Family(...))`` below (or in a plugin), declaring every column the metric writes;
then run ``tests/test_catalogue.py``, which says what docs/RESULTS.md must show (``catalogue.markdown_table()``).
"""

from __future__ import annotations

import math

from open_rag_eval.core.catalogue import Column as C
from open_rag_eval.core.catalogue import Family, register

__all__ = ["ANSWER_RELEVANCE", "ANSWER_RELEVANCE_JUDGED", "CONTEXT_RELEVANCE", "FAITHFULNESS", "FAITHFULNESS_CITED",
           "RAG_GUIDE", "RAG_GUIDE_NAMES", "context_precision", "rag_guide", "rubric"]

GRADES = (0.0, 3.0)
_RETEST_KINDS = ("umbrela|support|nugget_assignment|no_answer|claim_extract|claim_refusal|claim_verify|"
                 "context_useful|context_relevance|rubric|answer_relevance|criteria")
_STATS = "mean|median|std|cv|iqr|min|max|variance|range|cai"


def _tally(pattern: str, definition: str) -> C:
    return C(pattern, definition, range=None, lower=True, kind="tally")


def _count(pattern: str, definition: str, lower: bool = False) -> C:
    return C(pattern, definition, range=None, lower=lower, kind="count")


register(Family("umbrela", "Passage relevance (UMBRELA)", "each retrieved passage graded 0-3 by the judge", (
    C("umbrela.mean", "mean grade of the retrieved passages", "UMBRELA mean grade (0-3)", "UMBRELA", GRADES,
      headline=1, target=1.5, plot=True),
    C("umbrela.p@k", "share of the top k passages graded relevant (>= 2)"),
    C("umbrela.ap@k", "average precision at k, vectara's (R = relevant in the top k)"),
    C("umbrela.map@k", "average precision at k, trec_eval's (R = relevant among the judged passages)"),
    C("umbrela.mrr", "reciprocal rank of the first relevant passage"),
    C("umbrela.ndcg@k", "nDCG at k over the grades"),
    _tally("umbrela.n_invalid", "unparseable replies, kept as grade 0"),
    _tally("umbrela.n_failed", "calls that failed: no grade"),
), judged=True, evaluator="trec"))

register(Family("nuggets", "Answer completeness (nuggets)", "AutoNuggetizer: facts the answer should hold", (
    C("nuggets.all", "nuggets supported (partial = 0.5) / nuggets", "Nugget recall (all)"),
    C("nuggets.all_strict", "nuggets fully supported / nuggets"),
    C("nuggets.vital", "vital nuggets supported (partial = 0.5) / vital nuggets", "Vital nugget recall", "vital"),
    C("nuggets.vital_strict", "vital nuggets fully supported / vital nuggets (the TREC 2024 primary score)",
      "Vital nugget recall (strict)", "vital strict", headline=2, target=0.5, plot=True),
    C("nuggets.weighted", "vital and half-weighted okay nuggets supported", "Weighted nugget score", "weighted",
      headline=3, target=0.5),
    C("nuggets.weighted_strict", "the weighted score counting full support only", "Weighted nugget score (strict)"),
    _tally("nuggets.n_defaulted", "nuggets whose importance was defaulted (none: an importance that cannot be had "
                                   "fails the query's nugget list, with its reason)"),
    _tally("nuggets.n_failed", "nuggets with no assignment (failed judgment)"),
    _tally("nuggets.n_create_failed", "creation windows of the query whose reply never parsed"),
), judged=True, evaluator="trec"))

register(Family("citation", "Citation support", "each cited passage judged FS/PS/NS for its statement", (
    C("citation.precision", "citations that support their statement (PS = 0.5)", "Citation support precision"),
    C("citation.recall", "statements supported by a citation (PS = 0.5)", "Citation support recall"),
    C("citation.f1", "F1 of citation precision and recall", "Citation support F1", "cite F1", headline=4,
      target=0.7, plot=True),
    C("citation.precision_strict", "precision with partial support counted 0"),
    C("citation.recall_strict", "recall with partial support counted 0"),
    C("citation.f1_strict", "F1 with partial support counted 0", "Citation support F1 (strict)"),
    _tally("citation.fabricated", "citations to passages that do not exist"),
    _tally("citation.n_unparsed", "support replies that did not parse"),
    _tally("citation.n_failed", "support judgments that failed"),
    _count("citation.n_cited", "statements with a judged citation"),
    _count("citation.n_unlabelled", "cited statements left out of precision and recall: no parsed label", True),
), judged=True, evaluator="trec"))

register(Family("no_answer", "Answered or declined", "whether the system answered", (
    C("no_answer.answered", "1 answered, 0 declined", "Answered", "answered", headline=6, target=0.8),
), judged=True, evaluator="trec"))

register(Family("hhem", "Factual consistency (HHEM)", "Vectara's HHEM model, answer against its passages", (
    C("hhem.score", "factual consistency of the answer with its passages", "HHEM factual consistency", "HHEM",
      headline=5, target=0.5, plot=True),
    C("hhem.hallucinated", "1 when the score is under the threshold", "Hallucinated (HHEM)", lower=True),
), evaluator="trec"))

register(Family("golden", "Golden labels (qrels, reference answers)", "retrieval against relevance labels", (
    C("golden.p@k", "precision at k"),
    C("golden.recall@k", "relevant documents in the top k / relevant documents", headline=8, target=0.7),
    C("golden.recall_all@k", "Recall-All at k (undefined with no relevant documents)"),
    C("golden.hit@k", "1 when the top k holds a relevant document", "Hit rate @k (queries with a relevant result)"),
    C("golden.mrr", "reciprocal rank of the first relevant document"),
    C("golden.ap", "average precision over the whole ranking"),
    C("golden.map@k", "average precision within the top k"),
    C("golden.ndcg@k", "nDCG at k", headline=7, target=0.5),
    C("golden.mrr@k", "MRR within the top k"),
), evaluator="golden"))

register(Family("lexical", "Lexical overlap with reference answers", "word overlap, no judge", (
    C("lexical.groundedness", "share of the answer's content words found in the passages"),
    C("lexical.ungrounded", "1 when groundedness is under its threshold", lower=True),
    C("lexical.grounded", "1 when grounded (its mean is the grounded ratio)", "Grounded answers (share)"),
    C("lexical.keyword_coverage", "share of the expected keywords in the answer"),
    C("lexical.context_overlap", "overlap of the answer with its context"),
    C("lexical.keyword_score", "keyword score of the answer"),
    C("lexical.citation_compliance", "the answer cites as many sources as required"),
    C("lexical.has_sources", "1 when the answer cites a source"),
    C("lexical.refusal_correct", "1 when a refusal is expected and given, or an answer expected and given"),
), evaluator="golden"))

register(Family("latency", "Latency", "time the system took", (
    _count("latency.ms", "the system's response time in milliseconds", True),
), evaluator="golden"))

register(Family("consistency", "Consistency across runs", "the runs of one query compared (per query, run=all)", (
    C("consistency.rougeL", "mean ROUGE-L F1 over each pair of runs", "ROUGE-L across runs", plot=True),
    C("consistency.<rouge1|rouge2|rougeLsum>", "mean ROUGE F1 over each pair of runs"),
    C("consistency.<rouge1|rouge2|rougeL|rougeLsum>_<precision|recall>",
      "with rouge.measures: ROUGE precision or recall, the earlier run of a pair the reference"),
    C("consistency.bertscore_f1", "mean BERTScore F1 over each pair of runs", "BERTScore F1 across runs",
      plot=True, bound=False, possible=(-math.inf, 1.0)),  # rescaled BERTScore can go below 0
    C(f"consistency.<metric>.<{_STATS}>", "a metric's spread across the runs of a query (std and variance over "
      "n - ddof)"),
), evaluator="consistency"))

register(Family("consistency.judge", "Judge test-retest", "the same judgments asked again, labels compared", (
    C(f"consistency.judge.<{_RETEST_KINDS}>.flip_rate", "share of items whose labels are not all equal",
      lower=True),
    C(f"consistency.judge.<{_RETEST_KINDS}>.alpha", "Krippendorff's alpha over the repeats",
      bound=False, possible=(-math.inf, 1.0)),  # below 0 when the judge disagrees with itself more than chance
    C(f"consistency.judge.<{_RETEST_KINDS}>.crossing", "share of items whose labels cross the threshold",
      lower=True),
), judged=True, evaluator="consistency"))

register(Family("health", "Judge health", "summary.csv only: the parse class of the judge's replies, their labels "
                "and the controls, per task", (
    C("health.<task>.clean_rate", "share of the task's replies that parsed cleanly"),
    C("health.<task>.<fallback|echo|invalid|failed|reasked>_rate", "share of the task's replies of that class",
      lower=True),
    C("health.support.low_labelled_output_rate", "share of outputs whose cited statements are mostly unlabelled",
      lower=True),
    C("health.<task>.top_label_share", "share of the task's labels that are its commonest label (degenerate: one "
      "label for >= 95% of >= 20)", lower=True),
    C("health.<task>.label_entropy", "entropy in bits of the task's label distribution (0: one label for "
      "everything)", range=None, possible=(0.0, math.inf)),
    C("health.<task>.control_accuracy", "share of the task's controls (judgments whose answer is known) judged on "
      "the right side, with its Wilson 95% interval"),
    C("health.<task>.controls_told_apart", "share of the task's control pairs told apart (both items right), with "
      "its Wilson 95% interval"),
)))

register(Family("faithfulness", "Faithfulness (claims checked against the passages)",
                "answer claims verified by the judge", (
    C("faithfulness.score", "answer claims supported by the retrieved passages / claims",
      "Faithfulness (claims supported by the context)", "faithful", headline=9, plot=True),
    C("faithfulness.cited", "claims supported by a passage their sentence cites / claims",
      "Cited-passage faithfulness (claims supported by their citations)", "cited faithful", headline=10, plot=True),
    _count("faithfulness.n_claims", "claims in the answer"),
    _count("faithfulness.n_uncited", "claims whose sentence cites no retrieved passage", True),
), judged=True, evaluator="generation"))

register(Family("context", "Retrieved context (precision, recall, relevance)", "the passages judged for the answer", (
    C("context.precision_answer", "average precision over the passages judged useful for the answer",
      "Context precision (useful for the answer)", "ctx precision", plot=True),
    C("context.precision_reference", "average precision over the passages judged useful for the reference",
      "Context precision (useful for the reference)"),
    C("context.recall", "reference claims supported by the retrieved passages / reference claims",
      "Context recall (reference claims in the context)", "ctx recall", headline=11, plot=True),
    _count("context.n_reference_claims", "claims in the reference answer"),
    C("context.relevance", "two 0-2 ratings of the passages, mean / 2", "Context relevance (0-2 rating / 2)",
      plot=True),
), judged=True, evaluator="generation"))

register(Family("correctness", "Answer correctness (claims vs the reference answer)",
                "answer claims against the reference answer's", (
    C("correctness.f1", "claim F1 against the reference: tp / (tp + (fp + fn) / 2)",
      "Answer correctness (claim F1 vs the reference)", "correct F1", headline=12, plot=True),
    C("correctness.precision", "answer claims the reference supports / answer claims",
      "Answer claims the reference supports"),
    C("correctness.recall", "reference claims the answer covers / reference claims",
      "Reference claims the answer covers"),
    C("correctness.score", "F1 blended with semantic similarity (blend: true)",
      "Answer correctness (F1 blended with similarity)"),
    _count("correctness.tp", "answer claims the reference supports"),
    _count("correctness.fp", "answer claims the reference does not support", True),
    _count("correctness.fn", "reference claims the answer misses", True),
), judged=True, evaluator="generation"))

register(Family("answer_relevance", "Answer relevance to the question", "a refusal leaves both missing, never 0", (
    C("answer_relevance.score", "mean cosine of questions the judge writes from the answer to the question",
      "Answer relevance (generated questions vs the question, embeddings)"),
    C("answer_relevance.judged", "the judge's 0-2 rating of how well the answer addresses the question / 2",
      "Answer relevance (judge's 0-2 rating / 2)"),
), judged=True, evaluator="generation"))

register(Family("answer_similarity", "Answer similarity to the reference (embeddings)", "no judge", (
    C("answer_similarity.score", "cosine of the answer's and the reference's embeddings",
      "Answer similarity (embedding cosine to the reference)"),
), evaluator="generation"))

register(Family("rag_guide", "The RAG evaluation & optimisation guide's own definitions",
                "an unreadable reply is missing with its reason, never the guide's 0.5 or 0", (
    C("rag_guide.context_relevance", "each context's 0-10 judge score, mean / 10",
      "RAG guide: context relevance (mean 0-10 score / 10)"),
    C("rag_guide.context_precision", "each context judged relevant 0/1; precision over the relevant ranks",
      "RAG guide: context precision (binary relevance, ranked)"),
    C("rag_guide.faithfulness", "claims judged YES / claims; 1 when there is no claim",
      "RAG guide: faithfulness (claims judged YES / claims; no claim = 1)"),
    C("rag_guide.answer_relevance", "0-10 judge score / 10", "RAG guide: answer relevance (0-10 / 10)"),
    C("rag_guide.answer_correctness", "0-10 judge score against the reference / 10",
      "RAG guide: answer correctness vs the reference (0-10 / 10)"),
    C("rag_guide.overall", "mean of context relevance, faithfulness and answer relevance",
      "RAG guide: overall (mean of context relevance, faithfulness, answer relevance)"),
), judged=True, evaluator="generation"))

register(Family("rubric", "Rubric judges (0-10 scores, shown on 0-1)", "the judge's 0-10 score / 10; never a default", (
    C("rubric.faithfulness", "claims backed by the passages", "Rubric: faithfulness (0-10 / 10)"),
    C("rubric.relevance", "the answer addresses the question", "Rubric: relevance (0-10 / 10)"),
    C("rubric.completeness", "the answer covers what the question asks", "Rubric: completeness (0-10 / 10)"),
    C("rubric.coherence", "the answer reads as one clear whole", "Rubric: coherence (0-10 / 10)"),
    C("rubric.citation_accuracy", "the citations point to passages that back the sentence",
      "Rubric: citation accuracy (0-10 / 10)"),
), judged=True, evaluator="generation"))

register(Family("criteria", "Your own criteria (yes/no or graded, shown on 0-1)",
                "the user's criteria in plain language, judged per output (docs/criteria.md)", (
    C("criteria.<name>", "a criterion of the config's: yes = 1, no = 0, a grade g of low..high as (g - low) / "
      "(high - low)"),
), judged=True, evaluator="criteria"))

# Names the generation metrics write with and the diagnosis rules read (one spelling; declared above).
FAITHFULNESS = "faithfulness.score"
FAITHFULNESS_CITED = "faithfulness.cited"
CONTEXT_RELEVANCE = "context.relevance"
ANSWER_RELEVANCE = "answer_relevance.score"  # ragas's: generated questions vs the question, embeddings
ANSWER_RELEVANCE_JUDGED = "answer_relevance.judged"  # the judge's 0-2 rating / 2
RAG_GUIDE = "rag_guide"  # the RAG evaluation & optimisation guide's own definitions (``metrics: [rag_guide]``)
RAG_GUIDE_NAMES = ("context_relevance", "context_precision", "faithfulness", "answer_relevance", "answer_correctness",
                   "overall")


def context_precision(against: str) -> str:
    """``context.precision_answer`` / ``context.precision_reference``."""
    return f"context.precision_{against}"


def rubric(criterion: str) -> str:
    """``rubric.<criterion>``: faithfulness, relevance, completeness, coherence, citation_accuracy."""
    return f"rubric.{criterion}"


def rag_guide(name: str) -> str:
    """``rag_guide.<name>``, one of ``RAG_GUIDE_NAMES``."""
    assert name in RAG_GUIDE_NAMES, name
    return f"{RAG_GUIDE}.{name}"
