"""``LangChainConnector``: ask a LangChain Runnable (a chain, a graph, a ``RunnableLambda``) ``repeats`` times per query.

``chain`` names the object as ``"module:attr"`` (imported from the working folder like ``python -m``): a Runnable, or
a function/class called with no arguments that returns one. Each call sends ``{input_key: query}`` (or the query
itself when ``input_key`` is null) through ``ainvoke`` (``invoke`` in a worker thread when there is no ``ainvoke``).
The result is a dict: ``answer_key`` holds the answer (text, or a message whose ``content`` is text) and
``documents_key`` the source Documents -- ``page_content`` is the passage text, ``metadata[id_key]`` its id (else the
Document's ``id``, else its rank 1, 2, ...), ``metadata[title_key]`` / ``metadata[score_key]`` its title and score.
The defaults match ``create_retrieval_chain`` (``input`` / ``answer`` / ``context``). ``refused_key`` names a
boolean the chain sets when it declines to answer (the output's ``refused``: true, false, or null when it does not
say; another value, or a result without the key, is a failed output). Inline ``[n]`` markers cite the n-th
document. A call that raises, times out or returns something else becomes a failed output with the reason.

    connector:
      type: langchain
      queries: queries.csv
      repeats: 3
      options: {chain: "my_rag:chain", answer_key: answer, documents_key: context, id_key: source}

Needs the ``langchain`` extra (``langchain-core``), imported only when the connector is built.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from connectors.inprocess import (InProcessOptions, Malformed, Reply, fetch_each, load_target, number,
                                                refusal_flag, require, unique_ids)
from open_rag_eval import Passage, RAGOutput

__all__ = ["LangChainConnector", "LangChainOptions"]


class LangChainOptions(InProcessOptions):
    chain: str  # "module:attr": a Runnable, or a zero-argument factory of one
    input_key: str | None = "input"  # None: the query string itself is the input
    answer_key: str | None = "answer"  # None: the result itself is the answer
    documents_key: str | None = "context"  # None: the system returns no documents
    id_key: str = "id"
    title_key: str = "title"
    score_key: str = "score"
    refused_key: str | None = None  # a boolean the chain sets when it declines to answer


class LangChainConnector:
    Options: ClassVar[type[BaseModel]] = LangChainOptions

    def __init__(self, options: LangChainOptions) -> None:
        require("langchain_core", "langchain")
        self.options = options
        self.chain = load_target(options.chain, ("ainvoke", "invoke"), option="chain")

    async def fetch(self, queries: Sequence[tuple[str, str]], repeats: int) -> list[RAGOutput]:
        return await fetch_each(queries, repeats, self.options, self._ask)

    async def _ask(self, query: str) -> Reply:
        payload: Any = query if self.options.input_key is None else {self.options.input_key: query}
        if hasattr(self.chain, "ainvoke"):
            result = await self.chain.ainvoke(payload)
        else:
            result = await asyncio.to_thread(self.chain.invoke, payload)
        return self._map(result)

    def _map(self, result: Any) -> Reply:
        options = self.options
        if options.answer_key is None and options.documents_key is None and options.refused_key is None:
            return _text(result, "the result"), (), None
        if not isinstance(result, dict):
            raise Malformed(f"the chain returned {type(result).__name__}, not a dict with "
                            f"'{options.answer_key or options.documents_key or options.refused_key}'")
        refused = None
        if options.refused_key is not None:
            refused = refusal_flag(_field(result, options.refused_key), f"'{options.refused_key}'")
        answer = _text(_field(result, options.answer_key), f"'{options.answer_key}'") if options.answer_key else ""
        documents = _field(result, options.documents_key) if options.documents_key else []
        if documents is None:
            documents = []
        if not isinstance(documents, (list, tuple)):
            raise Malformed(f"'{options.documents_key}' is not a list (got {type(documents).__name__})")
        return answer, self._passages(documents), refused

    def _passages(self, documents: Sequence[Any]) -> tuple[Passage, ...]:
        options, rows = self.options, []
        for rank, document in enumerate(documents, start=1):
            text = getattr(document, "page_content", None)
            if not isinstance(text, str):
                raise Malformed(f"document {rank} has no page_content text (got {type(document).__name__})")
            metadata = getattr(document, "metadata", None) or {}
            pid = metadata.get(options.id_key) or getattr(document, "id", None) or rank
            title = metadata.get(options.title_key)
            rows.append((str(pid), text, None if title is None else str(title),
                         number(metadata.get(options.score_key), f"document {rank}'s {options.score_key}")))
        ids = unique_ids([row[0] for row in rows])
        return tuple(Passage(id=pid, text=text, title=title, score=score)
                     for pid, (_, text, title, score) in zip(ids, rows))


def _field(result: dict[str, Any], key: str) -> Any:
    if key not in result:
        raise Malformed(f"the chain's result has no '{key}' (it has: {', '.join(map(str, result)) or 'nothing'})")
    return result[key]


def _text(value: Any, what: str) -> str:
    content = getattr(value, "content", value)  # an AIMessage holds its text in .content
    if content is None:
        return ""
    if not isinstance(content, str):
        raise Malformed(f"{what} is not text (got {type(content).__name__})")
    return content
