"""The ``golden`` evaluator: metrics from labels the user already has. No judge.

Retrieval (``golden.*``, trec_eval semantics, see ``open_rag_eval.scoring.golden``) comes from one of:

- ``run:`` + ``qrels:`` -- a TREC run file is evaluated directly; one row set per query (``run`` = 1) for the
  queries in both files, plus qrels-only queries when ``complete`` (trec_eval ``-c``); the outputs then get
  only the lexical checks;
- ``qrels:`` alone -- the qrels label the passages of the RAG outputs;
- neither -- each output's ``labels.relevant_ids``.

With qrels, an output whose query has no qrels entry falls back to its own ``relevant_ids``; an output with no
relevance labels at all gets no retrieval rows (as trec_eval ignores a run's unjudged queries). Passages are ranked
in list order (``passage_order: list``) or by their scores with trec_eval's tie rule (``score``). Passage ids map to
document ids (``doc_id_separator: "#"`` turns ``doc7#3`` into ``doc7``; ``doc_id_pattern`` is a regex whose group
``doc``, else its first group, is the document id); a document counts once, at the rank of its first passage, so any
retrieved chunk of a relevant document is a hit. Labels name documents. ``k_counts: chunks`` keeps every passage
in the ranking instead (k then counts chunks, as tools that cut the top k chunks before mapping them do); ``id_map``
(a JSON object id -> name, such as a file-id mapping) turns a document named by its name into its id.
``no_relevant`` says how recall@k, recall_all@k and hit@k treat a query with an empty set of relevant documents;
``no_relevant_hit`` gives hit@k its own rule.

Lexical checks (``lexical.*``, see ``open_rag_eval.metrics.lexical``) and ``latency.ms`` are per output. Context
overlap reads the text of the ``grounding_ids`` documents from ``corpus`` when one is given (a folder of text files,
a corpus CSV, or an Open RAG Benchmark folder), else from the retrieved passages of those documents; an empty
``grounding_ids`` list (``must_be_grounded_in: []``) is an empty gold context: no answer token is found in it
(overlap 0.0), as the answer-eval demo defines it; without ``grounding_ids`` the retrieved passages are the context.
Refusals come
from the system's own ``refused`` flag when the output has one, else from the no-answer judgment when an evaluator
before this one produced ``no_answer.answered``, else from the lexical detector. An output the system failed to
produce gets its applicable metrics as missing values.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from open_rag_eval.scoring.retrieval import MAX_K
from open_rag_eval.evaluators.base import Context, Contract, Evaluator, Plan, Read
from open_rag_eval.metrics import lexical as lx
from open_rag_eval.scoring.golden import (
    MEASURES,
    NO_RELEVANT,
    evaluated_queries,
    measure_names,
    query_measures,
    trec_ranking,
)
from open_rag_eval.inputs.datasets import names_to_ids, read_documents, read_id_map, read_query_set
from open_rag_eval.inputs.trec_files import Qrels, Run, check_overlap, read_qrels, read_run
from open_rag_eval.core.types import Detail, EvalResult, Labels, RAGOutput, Score

__all__ = ["METRICS", "GoldenEvaluator", "GoldenOptions"]

log = logging.getLogger(__name__)

RETRIEVAL_METRICS = tuple(f"golden.{name}" for name in MEASURES)
LEXICAL_METRICS = ("lexical.groundedness", "lexical.ungrounded", "lexical.keyword_coverage", "lexical.context_overlap",
                   "lexical.keyword_score", "lexical.citation_compliance", "lexical.has_sources",
                   "lexical.refusal_correct", "lexical.grounded")
METRICS = RETRIEVAL_METRICS + LEXICAL_METRICS + ("latency.ms",)
FAMILIES = ("golden", "lexical", "latency")


class GoldenOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    k_values: list[int] = Field(default_factory=lambda: [1, 3, 5, 10], min_length=1)
    relevance_level: int = 1
    qrels: str | None = None  # TREC qrels file
    run: str | None = None  # TREC run file (needs qrels)
    complete: bool = False  # trec_eval -c: qrels queries missing from the run score 0 (run-file mode only)
    doc_id_separator: str | None = None
    doc_id_pattern: str | None = None
    passage_order: Literal["list", "score"] = "list"
    k_counts: Literal["documents", "chunks"] = "documents"  # chunks: a document's every passage keeps its rank
    id_map: str | None = None  # JSON object id -> name: documents named by their name count as their id
    no_relevant: Literal["trec", "missing", "one", "empty_retrieval"] = "trec"  # R = 0: recall@k, recall_all@k, hit@k
    # R = 0: hit@k by a rule of its own (the RAG guide: recall 1, hit 0); None: as no_relevant
    no_relevant_hit: Literal["trec", "missing", "one", "empty_retrieval"] | None = None
    pad_precision: bool = True  # False: p@k is missing when fewer than k documents were retrieved
    metrics: list[str] | None = None  # names of METRICS or families; None = all
    groundedness_threshold: float = Field(0.1, ge=0, le=1)
    alpha: float = Field(0.5, ge=0, le=1)
    sources_header: str = Field("Sources", min_length=1)
    required_citations: int = Field(1, ge=0)  # when an output has no required_citations label
    stopwords: list[str] | None = None  # replaces the built-in English list
    tokenizer: Literal["content", "alnum"] = "content"  # groundedness and context overlap
    keyword_match: Literal["word", "substring"] = "word"
    empty_score: float | None = Field(None, ge=0, le=1)  # a share with nothing to count (no keyword, no answer token)
    corpus: str | None = None  # the gold documents' own text, for context overlap
    labels: str | None = None  # a query set (inputs.datasets) whose labels fill the outputs' missing ones

    @field_validator("k_values")
    @classmethod
    def _positive_distinct(cls, value: list[int]) -> list[int]:
        if any(not 1 <= k <= MAX_K for k in value) or len(set(value)) != len(value):
            raise ValueError(f"k_values must be distinct positive integers, at most {MAX_K}")
        return value

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, value: list[str] | None) -> list[str] | None:
        unknown = [name for name in value or [] if name not in METRICS and name not in FAMILIES]
        if unknown:
            raise ValueError(f"unknown metric(s) {unknown}; valid choices: {', '.join(FAMILIES + METRICS)}")
        return value

    @field_validator("doc_id_pattern")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as error:
                raise ValueError(f"not a valid regular expression: {error}") from None
        return value

    @model_validator(mode="after")
    def _consistent(self) -> GoldenOptions:
        if self.run and not self.qrels:
            raise ValueError("'run' needs 'qrels'")
        if self.doc_id_separator and self.doc_id_pattern:
            raise ValueError("give either 'doc_id_separator' or 'doc_id_pattern', not both")
        return self

    def wants(self, metric: str) -> bool:
        """Whether a concrete metric (``golden.p@5``) is selected."""
        if self.metrics is None:
            return True
        template = re.sub(r"@[0-9]+$", "@k", metric)
        return template in self.metrics or metric.split(".")[0] in self.metrics


class GoldenEvaluator:
    name: ClassVar[str] = "golden"
    Options: ClassVar[type[BaseModel]] = GoldenOptions

    # file options, relative to the config's folder
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ("qrels", "run", "id_map", "corpus", "labels")

    def __init__(self, options: GoldenOptions, base_dir: Path | None = None) -> None:
        self.options = options
        where = (lambda name: base_dir / name) if base_dir is not None else Path
        self.qrels: Qrels | None = read_qrels(where(options.qrels)) if options.qrels else None
        self.run: Run | None = read_run(where(options.run)) if options.run else None
        if self.run is not None and self.qrels is not None and options.run:
            unjudged = check_overlap(self.run, self.qrels, str(where(options.run)))
            if unjudged:
                log.warning("golden: %d of %d queries of the run have no judgments in the qrels (no values for "
                            "them), e.g. %s", len(unjudged), len(self.run), ", ".join(unjudged[:3]))
        self.names_to_ids = names_to_ids(read_id_map(where(options.id_map))) if options.id_map else {}
        self.corpus: dict[str, str] | None = read_documents(where(options.corpus)) if options.corpus else None
        self.labels: dict[str, Labels] = {q.query_id: q.labels for q in read_query_set(where(options.labels))} \
            if options.labels else {}
        self._pattern = re.compile(options.doc_id_pattern) if options.doc_id_pattern else None
        self._names = [f"golden.{name}" for name in measure_names(options.k_values)
                       if options.wants(f"golden.{name}")]

    @classmethod
    def metric_names(cls, options: GoldenOptions, before: Sequence[str] = ()) -> list[str]:
        """Every metric these options can produce (config checks name them)."""
        retrieval = [f"golden.{name}" for name in measure_names(options.k_values)]
        return [name for name in [*retrieval, *LEXICAL_METRICS, "latency.ms"] if options.wants(name)]

    def plan(self, outputs: Sequence[RAGOutput], evaluators: Sequence[Evaluator] = ()) -> Plan:
        return Plan(notes=["golden: labels only, no judge calls"])

    def contract(self) -> Contract:
        """Output by output, so a run may be evaluated window by window; not with a TREC ``run`` file of its own.
        The retrieval metrics read passages and labels; the lexical checks read the answer."""
        lexical = tuple(name for name in LEXICAL_METRICS if self.options.wants(name))
        reads: set[Read] = {"passages", "labels", *(("answer", "scores") if lexical else ())}
        return Contract(reads=frozenset(reads), answer_metrics=lexical, window_runs=0 if self.run is None else None,
                        own_rows=self.run is not None, order="input")

    def forget(self) -> None:
        """Nothing of a window is kept."""

    async def evaluate(self, outputs: Sequence[RAGOutput], ctx: Context) -> EvalResult:
        result = EvalResult()
        outputs = [self._labelled(output) for output in outputs]
        if self.run is not None:
            result.extend(self._evaluate_run())
        else:
            for output in outputs:
                result.extend(self._evaluate_output(output))
        judged = {(s.query_id, s.run): s for s in ctx.previous.scores if s.metric == "no_answer.answered"}
        confusion: list[tuple[bool, bool]] = []
        for output in outputs:
            result.extend(self._lexical(output, judged, confusion))
        if confusion:
            log.info("golden: refusal confusion %s", lx.refusal_confusion(confusion))
        ctx.progress("outputs", len(outputs))
        return result

    def _labelled(self, output: RAGOutput) -> RAGOutput:
        """``output`` with the labels of the ``labels`` file where it has none of its own."""
        extra = self.labels.get(output.query_id)
        if extra is None:
            return output
        own = output.labels.model_dump(exclude_none=True)
        return output.model_copy(update={"labels": Labels(**{**extra.model_dump(exclude_none=True), **own})})

    def doc_id(self, passage_id: str) -> str:
        """The document a passage belongs to (its id under ``id_map``)."""
        doc = self._doc_name(passage_id)
        return self.names_to_ids.get(doc, doc)

    def _doc_name(self, passage_id: str) -> str:
        if self.options.doc_id_separator:
            head, sep, _ = passage_id.rpartition(self.options.doc_id_separator)
            return head if sep and head else passage_id
        if self._pattern:
            match = self._pattern.match(passage_id)
            if match:
                if "doc" in self._pattern.groupindex:
                    return match.group("doc")
                return match.group(1) if self._pattern.groups else match.group(0)
        return passage_id

    def _rows(self, qid: str, run: int, ranking: list[str], labels: dict[str, int], source: str) -> EvalResult:
        opts = self.options
        values = query_measures(ranking, labels, opts.k_values, opts.relevance_level, opts.pad_precision,
                                opts.no_relevant, opts.no_relevant_hit)
        scores = []
        for name in self._names:
            value = values[name.removeprefix("golden.")]
            reason = "fewer than k documents retrieved" if name.startswith("golden.p@") else NO_RELEVANT
            scores.append(Score(query_id=qid, run=run, metric=name, value=value, error=None if value is not None
                                else reason))
        n_rel = sum(1 for grade in labels.values() if grade >= opts.relevance_level)
        data = {"source": source, "relevance_level": opts.relevance_level, "n_relevant": n_rel,
                "ranking": ranking[: max(opts.k_values)], "k_counts": opts.k_counts, "no_relevant": opts.no_relevant,
                "no_relevant_hit": opts.no_relevant_hit or opts.no_relevant}
        return EvalResult(scores=scores, details=[Detail(query_id=qid, run=run, section="golden", data=data)])

    def _evaluate_run(self) -> EvalResult:
        assert self.run is not None and self.qrels is not None
        result = EvalResult()
        for qid in evaluated_queries(self.run, self.qrels, self.options.complete):
            entries = self.run.get(qid, [])
            ranking = trec_ranking((entry.docid, entry.score) for entry in entries)
            result.extend(self._rows(qid, 1, ranking, self.qrels[qid], "run"))
        return result

    def _labels(self, output: RAGOutput) -> dict[str, int] | None:
        if self.qrels is not None and output.query_id in self.qrels:
            return self.qrels[output.query_id]
        return output.labels.relevant_ids

    def _evaluate_output(self, output: RAGOutput) -> EvalResult:
        labels = self._labels(output)
        if labels is None or not self._names:
            return EvalResult()
        reason = None
        if output.error is not None:
            reason = f"the system gave no output: {output.error}"
        elif self.options.passage_order == "score" and any(p.score is None for p in output.passages):
            reason = "passage_order 'score' needs a score on every passage"
        if reason:
            return EvalResult(scores=[Score.failed(output, name, reason) for name in self._names])
        return self._rows(output.query_id, output.run, self._ranking(output), labels, "passages")

    def _ranking(self, output: RAGOutput) -> list[str]:
        passages = [(p.id, p.score if p.score is not None else 0.0) for p in output.passages]
        ids = trec_ranking(passages) if self.options.passage_order == "score" else [pid for pid, _ in passages]
        docs = [self.doc_id(passage_id) for passage_id in ids]
        return docs if self.options.k_counts == "chunks" else list(dict.fromkeys(docs))

    # -- lexical checks -------------------------------------------------------------------------------------------

    def _lexical_names(self, output: RAGOutput) -> list[str]:
        labels = output.labels
        names = ["lexical.groundedness", "lexical.ungrounded", "lexical.grounded", "lexical.citation_compliance",
                 "lexical.has_sources"]
        if labels.expected_keywords is not None or labels.grounding_ids is not None:
            names += ["lexical.keyword_coverage", "lexical.context_overlap", "lexical.keyword_score"]
        if labels.expected_refusal is not None:
            names.append("lexical.refusal_correct")
        if output.latency_ms is not None:
            names.append("latency.ms")
        return [name for name in names if self.options.wants(name)]

    def _lexical(self, output: RAGOutput, judged: dict[tuple[str, int | None], Score],
                 confusion: list[tuple[bool, bool]]) -> EvalResult:
        names = self._lexical_names(output)
        if output.error is not None:
            reason = f"the system gave no output: {output.error}"
            return EvalResult(scores=[Score.failed(output, name, reason) for name in names])
        values: dict[str, float | str] = {}  # a str is the reason a value is missing
        data: dict[str, object] = {}
        self._grounding(output, values)
        if {"lexical.keyword_coverage", "lexical.context_overlap", "lexical.keyword_score"} & set(names):
            self._keywords(output, values, data)
        self._citations(output, values, data)
        if "lexical.refusal_correct" in names:
            self._refusal(output, judged.get(output.key), values, data, confusion)
        if output.latency_ms is not None:
            values["latency.ms"] = output.latency_ms
        scores = [Score.ok(output, name, value) if isinstance(value, float | int) else Score.failed(output, name, value)
                  for name in names for value in [values[name]]]
        return EvalResult(scores=scores, details=[Detail(query_id=output.query_id, run=output.run, section="lexical",
                                                         data=data)])

    @property
    def _stopwords(self) -> frozenset[str] | None:
        words = self.options.stopwords
        return None if words is None else frozenset(word.casefold() for word in words)

    def _share(self, answer: str, context: list[str]) -> float | str:
        """Token support of ``answer`` in ``context``; ``empty_score`` or the reason when the answer has no token."""
        share = lx.token_support(answer, context, self._stopwords, self.options.tokenizer)
        if share is not None:
            return share
        return self.options.empty_score if self.options.empty_score is not None else "the answer has no content words"

    def _grounding(self, output: RAGOutput, values: dict[str, float | str]) -> None:
        names = ("lexical.groundedness", "lexical.ungrounded", "lexical.grounded")
        if _answer(output).strip().upper() == "NO_ANSWER":
            values.update(dict.fromkeys(names, "the system declined (NO_ANSWER)"))
            return
        share = self._share(_answer(output), [p.text for p in output.passages])
        if isinstance(share, str):
            values.update(dict.fromkeys(names, share))
            return
        values["lexical.groundedness"] = share
        values["lexical.ungrounded"] = float(share < self.options.groundedness_threshold)
        values["lexical.grounded"] = float(share >= self.options.groundedness_threshold)

    def _keywords(self, output: RAGOutput, values: dict[str, float | str], data: dict[str, object]) -> None:
        opts = self.options
        keywords = output.labels.expected_keywords or ()
        coverage, found = lx.keyword_coverage(_answer(output), keywords, opts.keyword_match)
        data["keywords_found"] = found
        data["keywords_missing"] = [keyword for keyword in keywords if keyword not in found]
        data.update(keyword_match=opts.keyword_match, tokenizer=opts.tokenizer)
        if coverage is None:
            coverage = opts.empty_score
        values["lexical.keyword_coverage"] = coverage if coverage is not None else "no expected keywords"
        context = self._gold_context(output, data)
        overlap = context if isinstance(context, str) else self._share(_answer(output), context)
        values["lexical.context_overlap"] = overlap
        if isinstance(coverage, float | int) and isinstance(overlap, float | int):
            values["lexical.keyword_score"] = lx.keyword_score(coverage, overlap, opts.alpha)
        else:
            values["lexical.keyword_score"] = "needs both keyword_coverage and context_overlap"

    def _gold_context(self, output: RAGOutput, data: dict[str, object]) -> list[str] | str:
        """The text context overlap is measured against, or the reason there is none."""
        grounding = list(output.labels.grounding_ids or ())
        if output.labels.grounding_ids is not None and not grounding:  # grounded in nothing: an empty gold context
            data["context_source"] = "none (an empty grounding list)"
            return []
        if self.corpus is not None and grounding:
            missing = [doc for doc in grounding if doc not in self.corpus]
            data["context_source"] = "corpus"
            if missing:
                return f"grounding document(s) not in the corpus: {', '.join(missing)}"
            return [self.corpus[doc] for doc in grounding]
        data["context_source"] = "passages"
        wanted = set(grounding)
        return [p.text for p in output.passages if not wanted or p.id in wanted or self.doc_id(p.id) in wanted]

    def _citations(self, output: RAGOutput, values: dict[str, float | str], data: dict[str, object]) -> None:
        cited = {citation for part in output.answer for citation in part.citations}
        required = output.labels.required_citations
        required = self.options.required_citations if required is None else required
        has_sources = lx.has_sources_section(output.answer_text, self.options.sources_header)
        listed = lx.sources_entries(output.answer_text, self.options.sources_header)
        n_citations = max(len(cited), len(listed))
        values["lexical.has_sources"] = float(has_sources)
        values["lexical.citation_compliance"] = lx.citation_compliance(has_sources, n_citations, required)
        data.update(n_citations=n_citations, n_cited_passages=len(cited), n_sources_entries=len(listed),
                    required_citations=required)

    def _refusal(self, output: RAGOutput, judgment: Score | None, values: dict[str, float | str],
                 data: dict[str, object], confusion: list[tuple[bool, bool]]) -> None:
        expected = bool(output.labels.expected_refusal)
        if output.refused is not None:
            confusion.append((expected, output.refused))
            values["lexical.refusal_correct"] = float(output.refused == expected)
            data.update(refused=output.refused, expected_refusal=expected, refusal_source="system")
            return
        if judgment is not None and judgment.value is None:
            values["lexical.refusal_correct"] = f"the no-answer judgment failed: {judgment.error}"
            return
        refused = judgment.value == 0 if judgment is not None else lx.is_refusal(output.answer_text or _answer(output))
        confusion.append((expected, refused))
        values["lexical.refusal_correct"] = float(refused == expected)
        data.update(refused=refused, expected_refusal=expected,
                    refusal_source="no_answer" if judgment is not None else "lexical")


def _answer(output: RAGOutput) -> str:
    """The answer's words: its statements when segmented (citation markers removed), else the text as given."""
    return output.plain_answer if output.answer else _MARKERS.sub(" ", output.answer_text)


_MARKERS = re.compile(r"\[\s*[0-9]+(?:\s*,\s*[0-9]+)*\s*\]")
