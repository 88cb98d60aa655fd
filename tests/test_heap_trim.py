"""The C heap's free pages go back to the system after each window of a run, so a run's RSS does not grow with its
number of outputs through memory it has already freed."""

from __future__ import annotations

import asyncio
import ctypes
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from open_rag_eval.core.types import EvalResult, Passage, RAGOutput, Score
from open_rag_eval.run import loop
from open_rag_eval.run.generation import Generation
from open_rag_eval.run.memory import trim_heap
from open_rag_eval.run.spill import Spill


def _window(index: int) -> tuple[list[RAGOutput], list[EvalResult]]:
    outputs = [RAGOutput(query_id=f"q{index}", query=f"query {index}", run=run,
                         passages=(Passage(id="1", text="a passage"),), answer_text="an answer") for run in (1, 2)]
    scores = [Score.ok(output, "m", 1.0) for output in outputs]
    return outputs, [EvalResult(scores=scores)]


def test_the_heap_is_trimmed_after_each_window_is_spilled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spilled: list[int] = []  # the windows in the spill at each trim

    async def windows() -> AsyncIterator[tuple[list[RAGOutput], list[EvalResult]]]:
        for index in range(3):
            yield _window(index)

    with Generation(tmp_path / "out") as generation, Spill(generation.path / "spill") as spill:
        monkeypatch.setattr(loop, "trim_heap", lambda: spilled.append(spill.n_windows) or True)
        asyncio.run(loop._spill_windows(windows(), spill, generation, None))
    assert spilled == [1, 2, 3]


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def _glibc() -> bool:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim  # noqa: B018 (present or not)
    except (OSError, AttributeError):
        return False
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _glibc(), reason="glibc's malloc_trim, /proc")
def test_trimming_hands_freed_heap_pages_back() -> None:
    # 64 MB of buffers from the C heap (each below malloc's mmap threshold), then one small block allocated after
    # them and kept: freeing the buffers leaves their pages free below it, resident until the heap is trimmed
    buffers = [bytearray(b"x" * 8000) for _ in range(8192)]
    kept = [bytearray(b"y" * 8000) for _ in range(4)]
    del buffers
    freed = _rss_mb()
    assert trim_heap() is True
    assert freed - _rss_mb() > 32  # most of the 64 MB freed is no longer resident
    assert kept[0][0] == ord("y")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                     "fsmblks", "uordblks", "fordblks", "keepcost")]


def _mallinfo() -> _Mallinfo2:
    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = _Mallinfo2
    return libc.mallinfo2()  # type: ignore[no-any-return]


def _mallinfo2() -> bool:
    try:
        ctypes.CDLL("libc.so.6").mallinfo2  # noqa: B018 (glibc 2.33 and later)
    except (OSError, AttributeError):
        return False
    return True


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _mallinfo2(), reason="glibc's mallopt, mallinfo2")
def test_a_large_block_is_mapped_on_its_own_after_larger_ones_were_freed() -> None:
    from open_rag_eval.run.memory import fixed_mmap_threshold

    size = _mallinfo().fordblks + 2**20  # more than all the heap's free bytes: no free block can hold it
    freed = bytearray(size + 8 * 2**20)  # freed: glibc's default then cuts blocks of up to its size from the heap
    del freed
    assert fixed_mmap_threshold() is True
    before = _mallinfo().hblkhd  # bytes of the blocks mapped on their own
    block = bytearray(size)
    assert _mallinfo().hblkhd - before >= len(block)
