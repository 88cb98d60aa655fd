"""The core vocabulary: types, errors, parsing, segmentation, redaction, progress."""
