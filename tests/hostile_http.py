"""Payloads of misbehaving HTTP servers, shared by the judge and RAG-connector fault tests."""

from __future__ import annotations

import functools
import json
import struct
import zlib

__all__ = ["BOMB_EXPANDED", "deep_json", "gzip_bomb", "huge_json"]

BOMB_EXPANDED = 1 << 30  # the gzip bomb inflates to 1 GiB of zeros


@functools.cache
def gzip_bomb() -> bytes:
    """About 1 MB of valid gzip that inflates to 1 GiB: 1 MiB blocks of zeros, each byte-aligned by a full flush,
    repeated (a fresh block after a full flush compresses to the same bytes), with the true CRC and size."""
    zeros = b"\0" * (1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    first = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    block = packer.compress(zeros) + packer.flush(zlib.Z_FULL_FLUSH)
    end = packer.flush()[:-8]  # the final empty block, without the trailer for 2 MiB
    crc = 0
    for _ in range(BOMB_EXPANDED >> 20):
        crc = zlib.crc32(zeros, crc)
    return first + block * ((BOMB_EXPANDED >> 20) - 1) + end + struct.pack("<II", crc, BOMB_EXPANDED & 0xFFFFFFFF)


def deep_json(depth: int = 100_000) -> str:
    """An array nested ``depth`` levels deep: valid JSON that a recursive parser cannot read."""
    return "[" * depth + "]" * depth


def huge_json(megabytes: int, key: str = "answer") -> str:
    """A JSON object whose ``key`` holds ``megabytes`` MB of text."""
    return json.dumps({key: "x" * (megabytes * 1_000_000)})
