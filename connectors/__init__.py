"""Connectors: how open-rag-eval asks a live RAG system for its outputs.

The connectors we ship, each imported only when a config names it (``type: http``, ``langchain``, ``llamaindex``,
``vectara``, ``bm25`` or ``module:Class`` for your own). ``open_rag_eval.run.fetch`` runs any connector (resolve,
fetch, journal for resume); the ``connector:`` section itself is validated in ``open_rag_eval.config.connector``.

The adapters import only the public API (names of ``open_rag_eval`` itself); ``.importlinter`` checks it. The
distribution ships this package beside ``open_rag_eval``; ``OPEN_RAG_EVAL`` marks it as ours, so a ``connectors``
package of another distribution that shadows it is refused by name instead of half-working
(``open_rag_eval.registry``, docs/architecture.md).
"""

OPEN_RAG_EVAL = True  # the marker open_rag_eval.registry looks for before it uses a built-in connector
