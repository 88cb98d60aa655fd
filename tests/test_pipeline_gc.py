"""The cyclic collector's thresholds while a run evaluates and writes, and after."""

from __future__ import annotations

import gc

from open_rag_eval.run.memory import GC_THRESHOLDS, fewer_collections


def test_a_run_raises_the_collector_thresholds_and_the_last_overlapping_run_restores_them() -> None:
    before = gc.get_threshold()
    with fewer_collections():
        assert gc.get_threshold() == GC_THRESHOLDS
        with fewer_collections():  # a second run in the same process (the service)
            assert gc.get_threshold() == GC_THRESHOLDS
        assert gc.get_threshold() == GC_THRESHOLDS  # the first is still going
    assert gc.get_threshold() == before


def test_the_thresholds_come_back_when_a_run_fails() -> None:
    before = gc.get_threshold()
    try:
        with fewer_collections():
            raise RuntimeError("the judge went away")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before


def test_releasing_memory_collects_cyclic_garbage() -> None:
    import weakref

    from open_rag_eval.run.memory import release_memory

    class Node:
        pass

    with fewer_collections():
        a, b = Node(), Node()
        a.other, b.other = b, a  # type: ignore[attr-defined]  # a cycle: only the collector frees it
        gone = weakref.ref(a)
        del a, b
        release_memory()
        assert gone() is None
