"""``VectaraConnector``: ask a Vectara corpus through its REST query API v2, ``repeats`` times per query.

One corpus: ``POST {base_url}/v2/corpora/{corpus_key}/query``; several: ``POST {base_url}/v2/query`` with
``search.corpora``. The body asks for ``search.limit`` results and a generated summary with numeric citations::

    {"query": "...", "search": {"limit": 10},
     "generation": {"max_used_search_results": 5, "citations": {"style": "numeric"}, "response_language": "auto"},
     "stream_response": false}

(``search`` and ``generation`` options are merged over these defaults, e.g. ``generation_preset_name``.) The reply's
``search_results`` become the passages, in order: ``text``, ``score``, ``document_metadata.title`` (or
``part_metadata.title``), and the ``document_id`` as the id (a second part of one document gets ``#2``...). The
``summary`` is the answer; its ``[n]`` markers cite the n-th search result and are mapped to that passage's id.
The query API has no field saying the summary declines to answer, so ``refused`` stays null and refusals are read
from the answer (the no-answer judgment, else the lexical detector), as for any system that does not say.

The API key is read from the environment variable ``api_key_env`` (sent as ``x-api-key``) and redacted from every
message, log line and output file. Transport, retries and failures are the HTTP connector's: a bounded reply, a total
deadline per request, 429/5xx retried with backoff, a call that still fails kept as a failed output with its reason.

    connector:
      type: vectara
      queries: queries.csv
      repeats: 2
      options: {corpus_key: my-corpus, api_key_env: VECTARA_API_KEY, limit: 10}
"""

from __future__ import annotations

import os
from typing import Any, ClassVar
from urllib.parse import quote

import httpx2
from pydantic import BaseModel, ConfigDict, Field

from connectors.http import HttpConnector, HttpOptions, Malformed
from connectors.inprocess import unique_ids
from open_rag_eval import AnswerPart, ConfigError, Passage, RAGOutput, segment_answer

__all__ = ["VectaraConnector", "VectaraOptions"]


class VectaraOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    corpus_key: str | list[str]
    base_url: str = "https://api.vectara.io"
    api_key_env: str = "VECTARA_API_KEY"
    limit: int = Field(10, ge=1, le=1000)  # search results = passages
    max_used_search_results: int = Field(5, ge=1, le=1000)  # of which the summary may use
    generate: bool = True  # False: search only, no summary (the answer is empty)
    response_language: str = "auto"
    search: dict[str, Any] = {}  # merged over the search defaults (context_configuration, reranker...)
    generation: dict[str, Any] = {}  # merged over the generation defaults (generation_preset_name...)
    concurrency: int = Field(4, ge=1, le=256)
    timeout_s: float = Field(60.0, gt=0, le=86_400)
    max_reply_mb: float = Field(32.0, gt=0, le=4096)
    retries: int = Field(3, ge=0, le=20)
    backoff_s: float = Field(0.5, ge=0, le=3600)


class VectaraConnector(HttpConnector):
    Options: ClassVar[type[BaseModel]] = VectaraOptions

    def __init__(self, options: VectaraOptions, *, http_client: httpx2.AsyncClient | None = None) -> None:
        if not os.environ.get(options.api_key_env):
            raise ConfigError(f"environment variable {options.api_key_env} is not set (the Vectara API key)",
                              path="connector.options.api_key_env")
        self.vectara = options
        super().__init__(_http_options(options), http_client=http_client)

    def _output(self, reply: Any, qid: str, query: str, run: int, latency_ms: float) -> RAGOutput:
        if not isinstance(reply, dict):
            raise Malformed(f"the reply is not a JSON object (got {type(reply).__name__})")
        passages = _passages(reply.get("search_results"))
        summary = reply.get("summary") if self.vectara.generate else ""
        if summary is None:
            raise Malformed("the reply has no 'summary' (generation failed or was not returned)")
        if not isinstance(summary, str):
            raise Malformed(f"'summary' is not text (got {type(summary).__name__})")
        return RAGOutput(query_id=qid, query=query, run=run, passages=passages, answer=_cited(summary, passages),
                         answer_text=summary, latency_ms=round(latency_ms, 3))


def _http_options(options: VectaraOptions) -> HttpOptions:
    base = options.base_url.rstrip("/")
    corpora = [options.corpus_key] if isinstance(options.corpus_key, str) else options.corpus_key
    if not corpora or not all(corpora):
        raise ConfigError("at least one corpus key is needed", path="connector.options.corpus_key")
    search: dict[str, Any] = {"limit": options.limit}
    if len(corpora) == 1:
        url = f"{base}/v2/corpora/{quote(corpora[0], safe='')}/query"
    else:
        url = f"{base}/v2/query"
        search["corpora"] = [{"corpus_key": key} for key in corpora]
    body: dict[str, Any] = {"query": "{query}", "search": {**search, **options.search}, "stream_response": False}
    if options.generate:
        body["generation"] = {"max_used_search_results": options.max_used_search_results,
                              "citations": {"style": "numeric"}, "response_language": options.response_language,
                              **options.generation}
    return HttpOptions(url=url, body=body, headers={"Accept": "application/json"},
                       secret_headers={"x-api-key": {"env": options.api_key_env}},  # type: ignore[dict-item]
                       concurrency=options.concurrency, timeout_s=options.timeout_s,
                       max_reply_mb=options.max_reply_mb, retries=options.retries, backoff_s=options.backoff_s)


def _passages(results: Any) -> tuple[Passage, ...]:
    if results is None:
        return ()
    if not isinstance(results, list):
        raise Malformed(f"'search_results' is not a list (got {type(results).__name__})")
    rows = []
    for rank, item in enumerate(results, start=1):
        if not isinstance(item, dict) or not isinstance(item.get("text"), str):
            raise Malformed(f"search result {rank} has no text")
        title = _title(item)
        score = item.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
            raise Malformed(f"search result {rank}'s score is not a number")
        rows.append((str(item.get("document_id") or rank), item["text"], title,
                     None if score is None else float(score)))
    ids = unique_ids([row[0] for row in rows])
    return tuple(Passage(id=pid, text=text, title=title, score=score) for pid, (_, text, title, score) in zip(ids, rows))


def _title(item: dict[str, Any]) -> str | None:
    for key in ("document_metadata", "part_metadata"):
        metadata = item.get(key)
        if isinstance(metadata, dict) and metadata.get("title") is not None:
            return str(metadata["title"])
    return None


def _cited(summary: str, passages: tuple[Passage, ...]) -> tuple[AnswerPart, ...]:
    """The summary's statements; ``[n]`` (the n-th search result) mapped to that passage's id."""
    if not summary.strip():
        return ()
    by_rank = {str(rank): p.id for rank, p in enumerate(passages, start=1)}
    parts = segment_answer(summary, list(by_rank))
    return tuple(AnswerPart(text=part.text, citations=tuple(dict.fromkeys(by_rank.get(c, c) for c in part.citations)))
                 for part in parts)
