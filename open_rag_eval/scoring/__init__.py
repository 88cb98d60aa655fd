"""Pure math, no I/O: retrieval measures, TREC method scores, statistics."""
