"""Connectors: how open-rag-eval asks a live RAG system for its outputs.

``base`` runs any connector (resolve, fetch, journal for resume); the other modules are the connectors we ship,
each imported only when a config names it (``type: http``, ``langchain``, ``llamaindex``, ``vectara`` or
``module:Class`` for your own). The ``connector:`` section itself is validated in ``open_rag_eval.config.connector``.
"""
