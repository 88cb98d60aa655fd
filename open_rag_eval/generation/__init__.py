"""Test-set generation (``open-rag-eval generate-queries``): a corpus in, a queries CSV with golden labels out.

``corpus`` reads the passages; ``testset`` samples them, asks the judge for a question per passage, parses, and
de-duplicates.
"""
