"""The error records the project logs, collected in a test (whatever handlers the CLI sets up)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def logged_errors() -> Iterator[list[logging.LogRecord]]:
    """Every ERROR (or worse) record the ``open_rag_eval`` loggers emit inside the block, in order."""
    records: list[logging.LogRecord] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Collect(level=logging.ERROR)
    logger = logging.getLogger("open_rag_eval")
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
