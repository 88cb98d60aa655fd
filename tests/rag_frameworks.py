"""Tiny RAG systems built from the real LangChain and LlamaIndex packages with their fake/mock components, named in
connector configs as ``tests.rag_frameworks:...``. Nothing here calls a network or loads model weights."""

from __future__ import annotations

from operator import itemgetter
from typing import Any

CORPUS = [
    ("d1", "Solar", "Solar power converts sunlight into electricity with photovoltaic cells."),
    ("d2", "Sky", "The sky is blue because air scatters short blue wavelengths of sunlight more."),
    ("d3", "Tides", "Tides are caused by the gravitational pull of the moon on the oceans."),
]


def _words(text: str) -> set[str]:
    return {word.strip(".,?").lower() for word in text.split() if len(word) > 3}


def _ranked(query: str) -> list[tuple[str, str, str]]:
    """The corpus by word overlap with the query, best two first (a deterministic retriever)."""
    return sorted(CORPUS, key=lambda row: (-len(_words(query) & _words(row[2])), row[0]))[:2]


def langchain_chain() -> Any:
    """A retrieval chain shaped like ``create_retrieval_chain``: {input} -> {input, context, answer}; the answer
    comes from ``FakeListLLM`` and cites the first document."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.language_models import FakeListLLM
    from langchain_core.prompts import PromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough

    class OverlapRetriever(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun
                                    ) -> list[Document]:
            return [Document(page_content=text, metadata={"source": pid, "title": title, "score": 1.0 / rank})
                    for rank, (pid, title, text) in enumerate(_ranked(query), start=1)]

    llm = FakeListLLM(responses=["It is explained by the first source [1]. The second source adds detail [2]."])
    prompt = PromptTemplate.from_template("Answer from the sources.\n{context}\nQuestion: {input}")
    return (RunnablePassthrough.assign(context=itemgetter("input") | OverlapRetriever())
            .assign(answer=prompt | llm))


def langchain_lambda() -> Any:
    """A ``RunnableLambda`` over the plain query string returning its own keys."""
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    def answer(query: str) -> dict[str, Any]:
        if "fail" in query:
            raise RuntimeError("the index is offline")
        docs = [Document(page_content=text, metadata={"doc": pid}) for pid, _, text in _ranked(query)]
        return {"output": f"About {query.rstrip('?')} [2].", "docs": docs}

    return RunnableLambda(answer)


def llamaindex_engine() -> Any:
    """A ``VectorStoreIndex`` over the corpus with ``MockEmbedding``, answered by ``MockLLM``."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    documents = [Document(text=text, metadata={"doc": pid, "title": title}) for pid, title, text in CORPUS]
    index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(llm=MockLLM(max_tokens=12), similarity_top_k=2)


def llamaindex_default_ids() -> Any:
    """A ``VectorStoreIndex`` built anew at each call from documents without chosen ids (LlamaIndex gives documents
    and nodes random UUIDs): the connector must still give the same passage ids every build."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    documents = [Document(text=text, metadata={"title": title}) for _, title, text in CORPUS]
    index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(llm=MockLLM(max_tokens=12), similarity_top_k=3)


def llamaindex_named_documents() -> Any:
    """Documents with chosen ids (as ``SimpleDirectoryReader(filename_as_id=True)`` gives): ids name the document
    and the chunk's start."""
    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import MockLLM

    documents = [Document(text=text, id_=f"{pid}.txt", metadata={"title": title}) for pid, title, text in CORPUS]
    index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
    return index.as_query_engine(llm=MockLLM(max_tokens=12), similarity_top_k=3)


def llamaindex_custom() -> Any:
    """A custom query engine over a custom retriever: the answer cites the second node; "fail" raises."""
    from llama_index.core.base.response.schema import Response
    from llama_index.core.query_engine import CustomQueryEngine
    from llama_index.core.schema import NodeWithScore, TextNode

    class OverlapEngine(CustomQueryEngine):
        def custom_query(self, query_str: str) -> Response:
            if "fail" in query_str:
                raise ValueError("no index loaded")
            nodes = [NodeWithScore(node=TextNode(id_=pid, text=text, metadata={"title": title}), score=0.5 / rank)
                     for rank, (pid, title, text) in enumerate(_ranked(query_str), start=1)]
            return Response(response="The answer is in the second node [2]. Nothing else.", source_nodes=nodes)

    return OverlapEngine()


def langchain_slow() -> Any:
    """An async ``RunnableLambda`` that never answers within a test's deadline."""
    import asyncio

    from langchain_core.runnables import RunnableLambda

    async def hang(query: Any) -> dict[str, Any]:
        await asyncio.sleep(60)
        return {}

    return RunnableLambda(hang)


NOT_A_CHAIN = 42


def _declines(query: str) -> bool:
    return not _words(query) & {word for _, _, text in CORPUS for word in _words(text)}


def langchain_refusing() -> Any:
    """A ``RunnableLambda`` that says itself when it declines (``refused``): a query none of whose longer words the
    corpus holds is declined; "maybe" in the query gives a flag that is not a boolean."""
    from langchain_core.documents import Document
    from langchain_core.runnables import RunnableLambda

    def answer(inputs: dict[str, Any]) -> dict[str, Any]:
        query = inputs["input"]
        if _declines(query):
            return {"answer": "Please ask about solar power, the sky or tides.", "context": [], "refused": True}
        docs = [Document(page_content=text, metadata={"id": pid}) for pid, _, text in _ranked(query)]
        return {"answer": "See the first source [1].", "context": docs,
                "refused": "maybe" if "maybe" in query else False}

    return RunnableLambda(answer)


def llamaindex_refusing() -> Any:
    """A custom query engine that puts ``refused`` in its response's metadata (declining like ``langchain_refusing``);
    "silent" in the query leaves the metadata empty, "maybe" sets a flag that is not a boolean."""
    from llama_index.core.base.response.schema import Response
    from llama_index.core.query_engine import CustomQueryEngine
    from llama_index.core.schema import NodeWithScore, TextNode

    class RefusingEngine(CustomQueryEngine):
        def custom_query(self, query_str: str) -> Response:
            if _declines(query_str):
                return Response(response="I cannot answer that from my sources.", source_nodes=[],
                                metadata={"refused": True})
            nodes = [NodeWithScore(node=TextNode(id_=pid, text=text), score=1.0) for pid, _, text in _ranked(query_str)]
            metadata = {} if "silent" in query_str else {"refused": 1 if "maybe" in query_str else False}
            return Response(response="See the first node [1].", source_nodes=nodes, metadata=metadata)

    return RefusingEngine()
