"""Atomic file writes: a temp file in the same folder, fsync, then rename. Readers never see half a file.

Everything written here passes through ``redaction.SecretStream``: no registered secret reaches an output file."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from open_rag_eval.redaction import SecretStream

__all__ = ["atomic_write", "atomic_write_json", "atomic_write_text"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Path, write: Callable[[TextIO], None]) -> None:
    """Call ``write`` with a UTF-8 text handle on a temp file beside ``path``; rename it into place when done."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            stream = SecretStream(handle)
            write(stream)  # type: ignore[arg-type]
            stream.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text))


def atomic_write_json(path: Path, data: Any) -> None:
    """Strict JSON, streamed to the file: NaN and infinities are refused (the writer turns them into null first)."""

    def write(handle: TextIO) -> None:
        json.dump(data, handle, indent=2, ensure_ascii=False, allow_nan=False)
        handle.write("\n")

    atomic_write(path, write)
