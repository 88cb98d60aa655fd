"""One run per output folder: an exclusive lock file ``.<folder>.lock`` beside the folder, holding the owner's pid.

The lock is an ``flock`` on that file, so the kernel drops it when its process dies: a lock file left by a killed
run is simply taken over. The owner deletes the file when it is done (while still holding the lock; a run that
opened the old file notices it was replaced and tries again).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from types import TracebackType

from open_rag_eval.core.errors import StorageError

__all__ = ["FolderLock", "held_by", "lock_path"]

log = logging.getLogger(__name__)


def lock_path(folder: Path) -> Path:
    return folder.parent / f".{folder.name}.lock"


def _holder(fd: int) -> str:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 64).decode("ascii", "replace").strip()
    return text if text.isascii() and text.isdigit() else "unknown"


def held_by(path: Path) -> str | None:
    """The pid of the live run holding the lock file ``path`` (None: nobody holds it; a stale file is not held)."""
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return _holder(fd)
    finally:
        os.close(fd)
    return None


class FolderLock:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = lock_path(folder)
        self._fd: int | None = None

    def acquire(self) -> None:
        import fcntl

        for _ in range(10):
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as error:
                raise StorageError(f"cannot create the lock file of the output folder: {error.strerror}",
                                   path=self.path) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = _holder(fd)
                os.close(fd)
                raise StorageError(f"the output folder is in use by another run (pid {holder}); wait for it to "
                                   "finish or choose another output folder", path=self.folder) from None
            if self._same_file(fd):
                previous = _holder(fd)
                if previous != "unknown" and previous != str(os.getpid()):
                    log.debug("taking over the lock of %s left by pid %s, which is no longer running",
                              self.folder, previous)
                os.ftruncate(fd, 0)
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, f"{os.getpid()}\n".encode("ascii"))
                self._fd = fd
                return
            os.close(fd)  # the previous owner deleted the file between our open and our lock: try again
        raise StorageError("cannot lock the output folder (its lock file keeps changing)", path=self.path)

    def _same_file(self, fd: int) -> bool:
        try:
            return os.fstat(fd).st_ino == os.stat(self.path).st_ino
        except FileNotFoundError:
            return False

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        except OSError:
            pass
        os.close(self._fd)
        self._fd = None

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self.release()
