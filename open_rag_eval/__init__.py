"""open-rag-eval: evaluate RAG systems with LLM judges, the way the TREC 2024 RAG Track did."""

from open_rag_eval._version import __version__

__all__ = ["__version__"]
