"""A run's memory: Python's cyclic collector less often while outputs are evaluated; the C heap's large blocks
mapped on their own, and its free pages handed back after each window; the run's garbage and the C heap's free
pages handed back before the report is drawn."""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Iterator
from typing import Any

__all__ = ["GC_THRESHOLDS", "MMAP_THRESHOLD", "fewer_collections", "fixed_mmap_threshold", "release_memory",
           "trim_heap"]


GC_THRESHOLDS = (50_000, 20, 100)
_gc_runs: list[tuple[int, int, int]] = []  # the thresholds before the first run still going
MMAP_THRESHOLD = 128 * 1024  # glibc's default start; fixed, so it no longer rises with the blocks a run frees
_M_MMAP_THRESHOLD = -3  # mallopt's parameter (malloc.h)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Python's cyclic collector less often while outputs are evaluated: a large run holds hundreds of thousands
    of small objects, which the default thresholds scan again and again (a quarter of the CPU of a 1,000-output run;
    measured with ``bench/scale_bench.py``). Memory is unchanged: cycles are still collected, in larger batches.
    Overlapping runs (the service) restore the thresholds once, when the last of them ends."""
    if not _gc_runs:
        _gc_runs.append(gc.get_threshold())
        gc.set_threshold(*GC_THRESHOLDS)
    else:
        _gc_runs.append(_gc_runs[0])
    try:
        yield
    finally:
        saved = _gc_runs.pop()
        if not _gc_runs:
            gc.set_threshold(*saved)


def release_memory() -> None:
    """Collect the run's cyclic garbage (kept longer by ``fewer_collections``) and hand the C heap's free pages
    back to the system (glibc's ``malloc_trim``; elsewhere nothing): a 2,000-output run's RSS drops by a sixth
    before its report is drawn, so the report does not add its memory on top of the evaluation's."""
    gc.collect()
    trim_heap()


def fixed_mmap_threshold() -> bool:
    """Keep the C heap's blocks of ``MMAP_THRESHOLD`` bytes and more in mappings of their own (glibc's
    ``mallopt(M_MMAP_THRESHOLD)``; elsewhere nothing, False). Process-wide; called once a run starts.

    By default glibc raises the threshold to the size of each large block freed (up to 32 MB), so once a run has
    freed its first large blocks the later ones are cut from the heap, between blocks that live on, and the heap
    keeps growing: by about 0.1 MB per 1,000 outputs even with ``trim_heap`` after each window (measured at
    30,000 outputs); with the threshold fixed it stayed flat (43.2 MB from window 4 to window 20 of 20,000
    outputs). Results are unchanged: only where the bytes live."""
    libc = _libc()
    if libc is None:
        return False
    return bool(libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def trim_heap() -> bool:
    """Hand the C heap's free pages back to the system (glibc's ``malloc_trim(0)``; elsewhere nothing, False).

    Called after each window of a run: a window's large strings and buffers (prompts, request bodies, replies,
    its pickled results) come from the C heap, and what they leave free there is not all reused by the next
    window; without a trim those free pages stay resident, so a run's RSS grew with its number of outputs (about
    0.2 MB per 1,000 outputs, measured at 30,000 outputs with the bytes in use flat) although nothing it keeps
    does. Results are unchanged: only free memory is returned."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


@functools.cache
def _libc() -> Any:
    """glibc, loaded once (None: not glibc)."""
    import ctypes  # noqa: PLC0415 (only here: none of it before a run's first judge request)

    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018 (both there, or not glibc)
    except (OSError, AttributeError):
        return None
    return libc
