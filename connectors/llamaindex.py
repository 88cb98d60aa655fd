"""``LlamaIndexConnector``: ask a LlamaIndex query engine ``repeats`` times per query.

``query_engine`` names it as ``"module:attr"`` (imported from the working folder like ``python -m``): a query engine,
or a function/class called with no arguments that returns one (e.g. ``index.as_query_engine()`` built once). Each call
is ``aquery(query)`` (``query`` in a worker thread when there is no ``aquery``); the response's ``response`` is the
answer text and its ``source_nodes`` the passages: an id (below), its text, its score, ``metadata[title_key]`` as
the title.

Passage ids are stable across index builds, so qrels line up with them (``passage_ids``): ``metadata[id_key]`` when
``id_key`` is set; otherwise (``auto``, the default) the node's own id when someone chose it, but LlamaIndex's
default ids are random UUIDs made anew at every build, so such a node gets ``<document id>#<start offset>`` when
its source document's id is not random either (``SimpleDirectoryReader(filename_as_id=True)`` gives file names),
else ``sha256:<first 16 hex digits of the chunk's text>`` (the same text is the same passage in every build).
``passage_ids: node`` keeps LlamaIndex's ids as they are; ``content`` always uses the text's hash. Inline ``[n]`` markers cite the n-th source node (as LlamaIndex's
``CitationQueryEngine`` writes them). ``refused_key`` names a boolean in the response's ``metadata`` that the engine
sets when it declines to answer (the output's ``refused``: true, false, or null when it does not say; another value,
or metadata without the key, is a failed output). A call that raises or times out becomes a failed output with the
reason.

    connector:
      type: llamaindex
      queries: queries.csv
      repeats: 3
      options: {query_engine: "my_index:query_engine"}

Needs the ``llamaindex`` extra (``llama-index-core``), imported only when the connector is built.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import BaseModel

from connectors.inprocess import (InProcessOptions, Malformed, Reply, fetch_each, load_target, number,
                                                refusal_flag, require, unique_ids)
from open_rag_eval import Passage, RAGOutput

__all__ = ["LlamaIndexConnector", "LlamaIndexOptions"]


class LlamaIndexOptions(InProcessOptions):
    query_engine: str  # "module:attr": a query engine, or a zero-argument factory of one
    id_key: str | None = None  # None: passage_ids decides
    passage_ids: Literal["auto", "node", "content"] = "auto"  # see the module docstring
    title_key: str = "title"
    refused_key: str | None = None  # a boolean in the response's metadata: the engine declined to answer


class LlamaIndexConnector:
    Options: ClassVar[type[BaseModel]] = LlamaIndexOptions

    def __init__(self, options: LlamaIndexOptions) -> None:
        require("llama_index.core", "llamaindex")
        self.options = options
        self.engine = load_target(options.query_engine, ("aquery", "query"), option="query_engine")

    async def fetch(self, queries: Sequence[tuple[str, str]], repeats: int) -> list[RAGOutput]:
        return await fetch_each(queries, repeats, self.options, self._ask)

    async def _ask(self, query: str) -> Reply:
        if hasattr(self.engine, "aquery"):
            response = await self.engine.aquery(query)
        else:
            response = await asyncio.to_thread(self.engine.query, query)
        answer = getattr(response, "response", _NONE)
        if answer is _NONE:
            raise Malformed(f"the query engine returned {type(response).__name__}, not a response")
        if answer is not None and not isinstance(answer, str):
            raise Malformed(f"the response is not text (got {type(answer).__name__}; streaming is not supported)")
        return answer or "", self._passages(getattr(response, "source_nodes", None) or []), self._refused(response)

    def _refused(self, response: Any) -> bool | None:
        key = self.options.refused_key
        if key is None:
            return None
        metadata = getattr(response, "metadata", None) or {}
        if key not in metadata:
            keys = ", ".join(map(str, metadata)) or "nothing"
            raise Malformed(f"the response's metadata has no '{key}' (it has: {keys})")
        return refusal_flag(metadata[key], f"the response's metadata '{key}'")

    def _passages(self, nodes: Sequence[Any]) -> tuple[Passage, ...]:
        rows = []
        for rank, scored in enumerate(nodes, start=1):
            node = getattr(scored, "node", scored)
            getter = getattr(node, "get_content", None)
            text = getter() if callable(getter) else getattr(node, "text", None)
            if not isinstance(text, str):
                raise Malformed(f"source node {rank} has no text (got {type(node).__name__})")
            metadata = getattr(node, "metadata", None) or {}
            own = metadata.get(self.options.id_key) if self.options.id_key else None
            pid = own or passage_id(node, text, self.options.passage_ids) or rank
            title = metadata.get(self.options.title_key)
            rows.append((str(pid), text, None if title is None else str(title),
                         number(getattr(scored, "score", None), f"source node {rank}'s score")))
        ids = unique_ids([row[0] for row in rows])
        return tuple(Passage(id=pid, text=text, title=title, score=score)
                     for pid, (_, text, title, score) in zip(ids, rows))


_NONE = object()
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)


def content_id(text: str) -> str:
    """``sha256:`` and the first 16 hex digits of the text's SHA-256: the same chunk, the same id, in every build."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def passage_id(node: Any, text: str, rule: str) -> str | None:
    """A node's passage id under ``rule`` (auto, node or content; see the module docstring)."""
    own = getattr(node, "node_id", None)
    if rule == "node":
        return str(own) if own else None
    if rule == "content":
        return content_id(text)
    if own and not _UUID.match(str(own)):
        return str(own)  # an id someone chose
    document, start = getattr(node, "ref_doc_id", None), getattr(node, "start_char_idx", None)
    if document and not _UUID.match(str(document)) and isinstance(start, int):
        return f"{document}#{start}"
    return content_id(text)
