"""Golden-label retrieval measures with trec_eval semantics (docs/methods.md, golden-label metrics and decision 7). Pure, no I/O.

Ranking: ``trec_ranking`` orders scored documents the way trec_eval does -- score descending, ties broken by docid
in *descending* strcmp order (Python's code-point order equals strcmp's order on UTF-8 bytes). A list without scores
keeps its order, which differs from trec_eval only where trec_eval would have seen ties.

Per query (``query_measures``), with R = number of judged documents whose grade >= ``relevance_level``:

    p@k          #relevant in top k / k (a ranking shorter than k is padded with non-relevant documents)
    recall@k     #relevant in top k / R; 0 when R = 0
    recall_all@k 1 when all R relevant documents are in the top k; missing (None) when R = 0
    hit@k        1 when at least one relevant document is in the top k (trec_eval ``success.k``)
    mrr          1 / rank of the first relevant document over the whole ranking (``recip_rank``)
    ap           trec_eval ``map``: sum of precision at each relevant rank / R
    map@k        ``map_cut.k``: the same restricted to the top k, still divided by R
    ndcg@k       ``ndcg_cut.k``: linear gains = raw grades > 0; IDCG from all judged grades > 0; the relevance level
                 does not affect it

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
    "evaluated_queries",
    "mean_measures",
    "measure_names",
    "query_measures",
    "trec_ranking",
]

MEASURES = ("p@k", "recall@k", "recall_all@k", "hit@k", "mrr", "ap", "map@k", "ndcg@k")
NO_RELEVANT = "no relevant documents"


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
) -> dict[str, float | None]:
    """All measures of one query; ``None`` marks a missing value (recall_all@k when R = 0; p@k > n without ``pad``).

    ``ranking`` holds distinct docids best first; unjudged documents are non-relevant.
    """
    rels = [qrels.get(docid, 0) >= relevance_level for docid in ranking]
    gains = [float(qrels.get(docid, 0)) for docid in ranking]
    n_rel = sum(1 for grade in qrels.values() if grade >= relevance_level)
    out: dict[str, float | None] = {}
    for k in k_values:
        found = sum(rels[:k])
        out[f"p@{k}"] = precision_at_k(rels, k, pad=pad)
        out[f"recall@{k}"] = found / n_rel if n_rel else 0.0
        out[f"recall_all@{k}"] = (1.0 if found == n_rel else 0.0) if n_rel else None
        out[f"hit@{k}"] = 1.0 if found else 0.0
        out[f"map@{k}"] = average_precision(rels, n_rel, k)
        out[f"ndcg@{k}"] = ndcg_at_k(gains, [float(g) for g in qrels.values()], k)
    out["mrr"] = reciprocal_rank(rels)
    out["ap"] = average_precision(rels, n_rel)
    return {name: out[name] for name in measure_names(k_values)}


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
