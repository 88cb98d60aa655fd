"""Connectors: how open-rag-eval asks a live RAG system for its outputs.

The connectors we ship, each imported only when a config names it (``type: http``, ``langchain``, ``llamaindex``,
``vectara``, ``bm25`` or ``module:Class`` for your own). ``open_rag_eval.run.fetch`` runs any connector (resolve,
fetch, journal for resume); the ``connector:`` section itself is validated in ``open_rag_eval.config.connector``.
"""
