"""``Bm25Connector``: a small reference RAG pipeline that runs offline -- BM25 retrieval over a folder of text files
and an extractive answerer that cites the passages it quotes.

Retrieval: every file under ``corpus`` matching ``glob`` is a document (id: its path inside the folder, e.g.
``queen.txt``); with ``chunk_words`` set, a document is cut into chunks of that many words overlapping by
``chunk_overlap`` words, with ids ``queen.txt#0``, ``queen.txt#1``... (``doc_id_separator: "#"`` in the golden
evaluator maps a chunk to its document). The index is built once per connector by the ``bm25s`` package (Lucene's
BM25, k1 = ``k1``, b = ``b``; lower-cased words, English stopwords removed unless ``stopwords: none``). A query
retrieves its ``top_k`` best passages scoring above ``min_score``; passages that share no word with the query
(BM25 score 0) are never returned, so a query none of whose words the corpus holds retrieves nothing.

Answer (``answer: sentences``): the ``answer_sentences`` sentences of the retrieved passages that score best against
the query (BM25 again, over those sentences; ties keep retrieval order), in retrieval order, each followed by ``[n]``,
the rank of the passage it was taken from, then a ``Sources:`` section listing the cited passages. Nothing retrieved,
or no sentence sharing a word with the query, gives the refusal ``NO_ANSWER``, and the output says so itself
(``refused`` true; false for every answer). ``answer: top_passage`` is the stub
generator of small demo pipelines: the first passage's text cut to ``answer_chars`` characters, citing it.

    connector:
      type: bm25
      queries: data/bm25_queries.csv
      options: {corpus: data/bm25_corpus, top_k: 3, answer_sentences: 2}

``corpus`` is relative to the config's folder. Needs the ``bm25`` extra (``bm25s``), imported when the connector is
built.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field, model_validator

from connectors.inprocess import InProcessOptions, Reply, fetch_each, require
from open_rag_eval import NO_ANSWER, ConfigError, Passage, RAGOutput, split_answer

__all__ = ["Bm25Connector", "Bm25Options", "chunk_words", "compose_answer"]

MAX_CORPUS_FILES = 100_000
MAX_TOP_K = 1000  # passages retrieved per query, at most


class Bm25Options(InProcessOptions):
    corpus: str  # a folder of text files, relative to the config's folder
    glob: str = Field("*.txt", min_length=1)  # which files are documents ("**/*.md" for a tree)
    top_k: int = Field(3, ge=1, le=MAX_TOP_K)
    min_score: float = Field(0.0, ge=0)  # passages scoring at most this are not retrieved
    chunk_words: int | None = Field(None, ge=1)  # None: whole documents are the passages
    chunk_overlap: int = Field(0, ge=0)
    answer: Literal["sentences", "top_passage"] = "sentences"  # top_passage: the first passage, cut (a stub)
    answer_sentences: int = Field(2, ge=1, le=50)
    answer_chars: int = Field(300, ge=1)  # top_passage: characters kept of the first passage
    k1: float = Field(1.5, ge=0, le=10)
    b: float = Field(0.75, ge=0, le=1)
    stopwords: Literal["en", "none"] = "en"
    sources_section: bool = True  # end the answer with "Sources:" and the cited passage ids

    @model_validator(mode="after")
    def _overlap_below_size(self) -> Bm25Options:
        if self.chunk_words is not None and self.chunk_overlap >= self.chunk_words:
            raise ValueError("chunk_overlap must be smaller than chunk_words")
        if self.chunk_words is None and self.chunk_overlap:
            raise ValueError("chunk_overlap needs chunk_words")
        return self


@dataclass(frozen=True)
class _Index:
    passages: tuple[Passage, ...]
    retriever: Any  # bm25s.BM25


def chunk_words(text: str, size: int | None, overlap: int) -> list[str]:
    """``text`` cut into chunks of ``size`` words, each starting ``size - overlap`` words after the previous one
    (the last chunk may be shorter; no chunk lies wholly inside the previous one). ``size`` None: the whole text."""
    words = text.split()
    if size is None or len(words) <= size:
        return [" ".join(words)] if words else []
    step = size - overlap
    starts = range(0, len(words) - overlap, step)
    return [" ".join(words[start:start + size]) for start in starts]


def compose_answer(ranked: Sequence[tuple[int, int, str]], n: int, passage_ids: Sequence[str],
                   sources: bool) -> str:
    """The answer from the best sentences: ``ranked`` holds (passage rank, sentence position, text) best first;
    the first ``n`` are put back in retrieval order, each cited ``[rank]``; then the sources section."""
    chosen = sorted(ranked[:n], key=lambda item: (item[0], item[1]))
    if not chosen:
        return NO_ANSWER
    body = " ".join(f"{text} [{rank}]" for rank, _, text in chosen)
    if not sources:
        return body
    cited = sorted({rank for rank, _, _ in chosen})
    return body + "\n\nSources:\n" + "\n".join(f"[{rank}] {passage_ids[rank - 1]}" for rank in cited)


class Bm25Connector:
    """BM25 retrieval + extractive answers over a folder of text files (see the module docstring)."""

    Options: ClassVar[type[BaseModel]] = Bm25Options
    PATH_OPTIONS: ClassVar[tuple[str, ...]] = ("corpus",)  # relative to the config's folder

    def __init__(self, options: Bm25Options) -> None:
        self.bm25s = require("bm25s", "bm25")
        logging.getLogger("bm25s").setLevel(logging.WARNING)  # a line per index built is noise here
        self.options = options
        self.index = self._build(self._documents())

    def _documents(self) -> list[tuple[str, str]]:
        folder = Path(self.options.corpus)
        path = "connector.options.corpus"
        if not folder.is_dir():
            raise ConfigError(f"corpus folder '{self.options.corpus}' does not exist (or is not a folder)", path=path)
        files = sorted(p for p in folder.glob(self.options.glob) if p.is_file())[:MAX_CORPUS_FILES + 1]
        if not files:
            raise ConfigError(f"no file in '{self.options.corpus}' matches '{self.options.glob}'", path=path)
        if len(files) > MAX_CORPUS_FILES:
            raise ConfigError(f"more than {MAX_CORPUS_FILES} files match; this reference pipeline is for small "
                              "corpora", path=path)
        documents = []
        for file in files:
            try:
                text = file.read_text(encoding="utf-8-sig")
            except (OSError, UnicodeDecodeError) as error:
                raise ConfigError(f"cannot read corpus file '{file.name}': {error}", path=path) from None
            documents.append((file.relative_to(folder).as_posix(), text))
        return documents

    def _build(self, documents: list[tuple[str, str]]) -> _Index:
        options, passages = self.options, []
        for doc_id, text in documents:
            chunks = chunk_words(text, options.chunk_words, options.chunk_overlap)
            for number, chunk in enumerate(chunks):
                pid = doc_id if options.chunk_words is None else f"{doc_id}#{number}"
                passages.append(Passage(id=pid, text=chunk, title=Path(doc_id).stem))
        if not passages:
            raise ConfigError(f"the corpus '{options.corpus}' has no text", path="connector.options.corpus")
        return _Index(tuple(passages), self._retriever([p.text for p in passages]))

    def _retriever(self, texts: Sequence[str]) -> Any:
        retriever = self.bm25s.BM25(k1=self.options.k1, b=self.options.b)
        retriever.index(self._tokens(texts), show_progress=False)
        return retriever

    def _tokens(self, texts: Sequence[str], *, ids: bool = True) -> Any:
        stopwords = None if self.options.stopwords == "none" else self.options.stopwords
        return self.bm25s.tokenize(list(texts), stopwords=stopwords, show_progress=False, return_ids=ids)

    def _scores(self, retriever: Any, query: str, k: int, floor: float = 0.0) -> list[tuple[int, float]]:
        """(index, score) of the best ``k`` texts, best first (ties: the earlier text first), leaving out those
        scoring ``floor`` or less (0: those that share no word with ``query``)."""
        words = self._tokens([query], ids=False)[0]
        if not words:  # nothing left of the query but stopwords
            return []
        scores = [float(s) for s in retriever.get_scores(words)]
        hits = [(i, s) for i, s in enumerate(scores) if s > floor]
        return sorted(hits, key=lambda hit: (-hit[1], hit[0]))[:k]

    async def fetch(self, queries: Sequence[tuple[str, str]], repeats: int) -> list[RAGOutput]:
        return await fetch_each(queries, repeats, self.options, self._ask)

    async def _ask(self, query: str) -> Reply:
        text, passages = await asyncio.to_thread(self.answer, query)
        return text, passages, text == NO_ANSWER

    def answer(self, query: str) -> tuple[str, tuple[Passage, ...]]:
        """The answer text and the retrieved passages for one query (synchronous; ``fetch`` runs it in a thread)."""
        k = min(self.options.top_k, len(self.index.passages))
        hits = self._scores(self.index.retriever, query, k, self.options.min_score)
        passages = tuple(self.index.passages[i].model_copy(update={"score": round(s, 6)}) for i, s in hits)
        if self.options.answer == "top_passage":
            cut = passages[0].text[: self.options.answer_chars].strip() if passages else ""
            return compose_answer([(1, 0, cut)] if cut else [], 1, [p.id for p in passages],
                                  self.options.sources_section), passages
        sentences = [(rank, position, part.text) for rank, passage in enumerate(passages, start=1)
                     for position, part in enumerate(split_answer(passage.text, ())[0])]
        if not sentences:
            return NO_ANSWER, passages
        scored = self._scores(self._retriever([text for _, _, text in sentences]), query, len(sentences))
        ranked = [sentences[i] for i, _ in scored]
        return compose_answer(ranked, self.options.answer_sentences, [p.id for p in passages],
                              self.options.sources_section), passages
