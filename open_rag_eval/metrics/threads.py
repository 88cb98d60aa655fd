"""Model inference whose values do not depend on the machine's thread count.

torch splits a matrix product's sums over its intra-op threads, so the same embedding computed with 2 threads and
with 8 differs in the last bits -- a local run, one Ray node and two Ray nodes would not write the same bytes. The
embedding and BERTScore computations therefore run with ``MODEL_THREADS`` torch threads, whatever the process
uses elsewhere (torch's thread count is process-wide: one such computation at a time, the previous count restored).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["MODEL_THREADS", "model_threads"]

MODEL_THREADS = 1
_LOCK = threading.Lock()


@contextmanager
def model_threads() -> Iterator[None]:
    import torch  # noqa: PLC0415

    with _LOCK:
        before = torch.get_num_threads()
        torch.set_num_threads(MODEL_THREADS)
        try:
            yield
        finally:
            torch.set_num_threads(before)
