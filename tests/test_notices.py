"""Warnings about many items, tallied: one line per kind with its count and first items (core/notices.py)."""

from __future__ import annotations

import asyncio
import logging

import pytest

from open_rag_eval.core.notices import note, tallied


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records]


def test_a_kind_is_one_line_with_its_count_and_first_items_nested_blocks_share_it(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING), tallied():
        for i in range(2000):
            note("unknown", "citations that name no retrieved passage", f"line {i + 1} (7)")
        with tallied():  # a reader inside a door: the outer block prints
            note("retest", "re-judging failed", "q1 run 1 sample 2: HTTP 500", unit="sample(s)")
        assert _lines(caplog) == []  # nothing before the block ends
    assert _lines(caplog) == [
        "2000 output(s): citations that name no retrieved passage; first: line 1 (7); line 2 (7); line 3 (7) and "
        "1997 more",
        "1 sample(s): re-judging failed; first: q1 run 1 sample 2: HTTP 500"]


def test_outside_a_block_a_note_is_logged_at_once_and_a_failed_block_prints_nothing(
        caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        note("unknown", "citations that name no retrieved passage", "in.jsonl:3 (7)")
        with pytest.raises(ValueError), tallied():
            note("unknown", "citations that name no retrieved passage", "in.jsonl:4 (7)")
            raise ValueError("bad input")  # its one error line stands alone
    assert _lines(caplog) == ["in.jsonl:3 (7): citations that name no retrieved passage"]


def test_notes_from_tasks_of_the_block_are_tallied_together(caplog: pytest.LogCaptureFixture) -> None:
    async def one(i: int) -> None:
        await asyncio.sleep(0)
        note("retest", "re-judging failed", f"q{i}", unit="sample(s)")

    async def block() -> None:
        with tallied():
            await asyncio.gather(*(one(i) for i in range(5)))

    with caplog.at_level(logging.WARNING):
        asyncio.run(block())
    assert _lines(caplog) == ["5 sample(s): re-judging failed; first: q0; q1; q2 and 2 more"]
