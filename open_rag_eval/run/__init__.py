"""One evaluation run: the pipeline, fetch and resume, results, manifest, checks, the atomic generation."""
