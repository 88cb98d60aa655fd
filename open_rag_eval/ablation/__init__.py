"""Ablation: run a grid of variants of one config on the same queries and compare each with a baseline variant.

``options`` is the ``ablate:`` section's schema (the config reads only it); ``variants`` builds and checks the
variant configs; ``table`` compares their results (paired tests, Holm, the best variant per metric); ``run`` runs
them through the normal pipeline, resumably, and writes the comparison. The command is ``open-rag-eval ablate``
(docs/ablation.md).
"""
