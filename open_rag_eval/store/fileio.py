"""Atomic file writes: a temp file in the same folder, fsync, then rename. Readers never see half a file.

Everything written here passes through ``redaction.SecretStream`` (no registered secret reaches an output file),
and every byte through ``write_bytes`` (one place to see, and in tests to fail, every write).
"""

from __future__ import annotations

import io
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from open_rag_eval.core.redaction import SecretStream

__all__ = ["append_text", "atomic_stream", "atomic_write", "atomic_write_json", "atomic_write_text", "fsync_dir", "write_bytes"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _encoded(write: Callable[[TextIO], object]) -> bytes:
    """What ``write`` writes to a text handle, secrets removed, as UTF-8."""
    buffer = io.StringIO(newline="")
    stream = SecretStream(buffer)
    write(stream)  # type: ignore[arg-type]
    stream.flush()
    return buffer.getvalue().encode("utf-8")


def write_bytes(fd: int, data: bytes) -> None:
    """Write all of ``data`` to ``fd`` (the low-level write every file of ours goes through)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


class _FileText:
    """A text handle onto a file descriptor: UTF-8, every byte through ``write_bytes``."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, text: str) -> int:
        write_bytes(self._fd, text.encode("utf-8"))
        return len(text)

    def flush(self) -> None:
        pass


def atomic_write(path: Path, write: Callable[[TextIO], object]) -> None:
    """Call ``write`` with a text handle; what it writes goes (secrets removed, in blocks) into a temp file beside
    ``path``, which is then renamed there. Memory holds a block, not the file."""
    with atomic_stream(path) as handle:
        write(handle)


@contextmanager
def atomic_stream(path: Path) -> Iterator[TextIO]:
    """``atomic_write`` as a block: the handle's text (secrets removed) becomes ``path`` when the block ends without
    an error, and nothing at all otherwise (e.g. written window by window by an async run)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            stream = SecretStream(_FileText(fd))
            yield stream  # type: ignore[misc]
            stream.flush()
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; results are ordinary files
        os.replace(tmp, path)
    except OSError as error:
        Path(tmp).unlink(missing_ok=True)
        if error.filename is None:  # a failed write names no file: name the one being written
            raise OSError(error.errno, error.strerror or str(error), str(path)) from error
        raise
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_text(path: Path, text: str) -> None:
    """Append ``text`` to ``path`` and fsync (a journal line survives a kill once this returns)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
    try:
        write_bytes(fd, _encoded(lambda handle: handle.write(text)))
        os.fsync(fd)
    except OSError as error:
        raise OSError(error.errno, error.strerror or str(error), str(path)) from error
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    """Make a rename inside ``path`` durable (a no-op where folders cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda handle: handle.write(text))


def atomic_write_json(path: Path, data: Any) -> None:
    """Strict JSON: NaN and infinities are refused (the writer turns them into null first)."""

    def write(handle: TextIO) -> None:
        json.dump(data, handle, indent=2, ensure_ascii=False, allow_nan=False)
        handle.write("\n")

    atomic_write(path, write)
