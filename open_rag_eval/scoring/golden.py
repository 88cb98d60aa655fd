"""Golden-label retrieval measures with trec_eval semantics (docs/methods.md, golden-label metrics and decision 7). Pure, no I/O.

Ranking: ``trec_ranking`` orders scored documents the way trec_eval does -- score descending, ties broken by docid
in *descending* strcmp order (Python's code-point order equals strcmp's order on UTF-8 bytes). A list without scores
keeps its order, which differs from trec_eval only where trec_eval would have seen ties.

Per query (``query_measures``), with R = number of judged documents whose grade >= ``relevance_level``:

    p@k          #relevant in top k / k (a ranking shorter than k is padded with non-relevant documents)
    recall@k     #relevant documents in top k / R (fractional recall, trec_eval ``recall.k``); 0 when R = 0
    recall_all@k 1 when all R relevant documents are in the top k (binary); missing (None) when R = 0
    hit@k        1 when at least one relevant document is in the top k (trec_eval ``success.k``; the "Recall@K"
                 of tools that count the queries with a hit)
    mrr          1 / rank of the first relevant document over the whole ranking (``recip_rank``, no cut-off)
    mrr@k        the same when that document is in the top k, else 0
    ap           trec_eval ``map``: sum of precision at each relevant rank / R
    map@k        ``map_cut.k``: the same restricted to the top k, still divided by R
    ndcg@k       ``ndcg_cut.k``: linear gains = raw grades > 0; IDCG from all judged grades > 0; the relevance level
                 does not affect it

A ranking may name a document more than once (``k`` counting chunks when chunk ids are mapped to documents): every
position of a relevant document is relevant for p@k, hit@k, mrr and mrr@k, while recall@k, recall_all@k, ap, map@k
and ndcg@k count a document once, at its first position (so they stay within 0..1).

With no relevant document (R = 0), ``no_relevant`` says what recall@k, recall_all@k and hit@k are:

    trec            recall@k 0, hit@k 0, recall_all@k missing (the default)
    missing         all three missing, left out of the mean
    one             all three 1 ("nothing to find, nothing missed")
    empty_retrieval all three 1 when nothing was retrieved in the top k, else 0 (a correct refusal to retrieve)

``no_relevant_hit`` gives hit@k a rule of its own (the RAG guide's code: recall 1 but hit 0 when R = 0, i.e.
``no_relevant: one`` with ``no_relevant_hit: trec``); None: hit@k follows ``no_relevant``.

Averages (``mean_measures``): unweighted over queries; a missing value (recall_all@k with R = 0) is left out.
``evaluated_queries`` says which queries are averaged: those in both run and qrels, plus (``complete=True``,
trec_eval ``-c``) qrels queries absent from the run, which then score as an empty ranking.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from open_rag_eval.scoring.retrieval import average_precision, ndcg_at_k, precision_at_k, reciprocal_rank

__all__ = [
    "MEASURES",
    "NO_RELEVANT",
    "NO_RELEVANT_RULES",
    "evaluated_queries",
    "mean_measures",
    "measure_names",
    "query_measures",
    "trec_ranking",
]

MEASURES = ("p@k", "recall@k", "recall_all@k", "hit@k", "mrr", "ap", "map@k", "ndcg@k", "mrr@k")
NO_RELEVANT = "no relevant documents"
NO_RELEVANT_RULES = ("trec", "missing", "one", "empty_retrieval")


def trec_ranking(scored: Iterable[tuple[str, float]]) -> list[str]:
    """Docids by score descending, ties by docid descending (trec_eval's order)."""
    return [docid for docid, _ in sorted(scored, key=lambda item: (item[1], item[0]), reverse=True)]


def measure_names(k_values: Sequence[int]) -> list[str]:
    """Concrete measure names in a stable order: ``p@1, p@3, recall@1, ..., mrr, ap, ...``."""
    names: list[str] = []
    for measure in MEASURES:
        if "@k" in measure:
            names.extend(measure.replace("@k", f"@{k}") for k in k_values)
        else:
            names.append(measure)
    return names


def query_measures(
    ranking: Sequence[str],
    qrels: Mapping[str, int],
    k_values: Sequence[int],
    relevance_level: int = 1,
    pad: bool = True,
    no_relevant: str = "trec",
    no_relevant_hit: str | None = None,
) -> dict[str, float | None]:
    """All measures of one query; ``None`` marks a missing value (R = 0, see ``no_relevant``; p@k > n without ``pad``).

    ``ranking`` holds docids best first (a docid may repeat, see the module doc); unjudged documents are
    non-relevant.
    """
    for rule in (no_relevant, no_relevant_hit or no_relevant):
        if rule not in NO_RELEVANT_RULES:
            raise ValueError(f"no_relevant must be one of {', '.join(NO_RELEVANT_RULES)}")
    rules = {"recall@": no_relevant, "recall_all@": no_relevant, "hit@": no_relevant_hit or no_relevant}
    first = _first_positions(ranking)
    rels = [qrels.get(docid, 0) >= relevance_level for docid in ranking]
    new_rels = [rel and is_first for rel, is_first in zip(rels, first)]
    gains = [float(qrels.get(docid, 0)) if is_first else 0.0 for docid, is_first in zip(ranking, first)]
    n_rel = sum(1 for grade in qrels.values() if grade >= relevance_level)
    out: dict[str, float | None] = {}
    for k in k_values:
        found = sum(new_rels[:k])
        out[f"p@{k}"] = precision_at_k(rels, k, pad=pad)
        out[f"recall@{k}"] = found / n_rel if n_rel else 0.0
        out[f"recall_all@{k}"] = (1.0 if found == n_rel else 0.0) if n_rel else None
        out[f"hit@{k}"] = 1.0 if any(rels[:k]) else 0.0
        out[f"map@{k}"] = average_precision(new_rels, n_rel, k)
        out[f"ndcg@{k}"] = ndcg_at_k(gains, [float(g) for g in qrels.values()], k)
        out[f"mrr@{k}"] = reciprocal_rank(rels[:k])
        for name, rule in rules.items():
            if not n_rel and rule != "trec":
                out[f"{name}{k}"] = {"missing": None, "one": 1.0, "empty_retrieval": 0.0 if ranking[:k] else 1.0}[rule]
    out["mrr"] = reciprocal_rank(rels)
    out["ap"] = average_precision(new_rels, n_rel)
    return {name: out[name] for name in measure_names(k_values)}


def _first_positions(ranking: Sequence[str]) -> list[bool]:
    """Whether each position holds its document's first appearance."""
    seen: set[str] = set()
    first: list[bool] = []
    for docid in ranking:
        first.append(docid not in seen)
        seen.add(docid)
    return first


def evaluated_queries(run_qids: Iterable[str], qrels_qids: Iterable[str], complete: bool = False) -> list[str]:
    """Queries trec_eval averages over, in qrels order: in both run and qrels; with ``complete`` all qrels queries."""
    in_run = set(run_qids)
    return [qid for qid in qrels_qids if complete or qid in in_run]


def mean_measures(per_query: Iterable[Mapping[str, float | None]]) -> dict[str, float | None]:
    """Unweighted mean of each measure over queries, missing values left out (None when no query has a value)."""
    values: dict[str, list[float]] = {}
    for measures in per_query:
        for name, value in measures.items():
            bucket = values.setdefault(name, [])
            if value is not None:
                bucket.append(value)
    return {name: (math.fsum(vals) / len(vals) if vals else None) for name, vals in values.items()}
