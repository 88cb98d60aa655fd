"""Open the judge cache and the sweep history; every SQLite or file failure becomes one ``StorageError`` line that
names the file and what to do (exit 5). Nothing degrades silently: a cache that cannot be used stops the run before
any judging (``judge.cache: false`` runs without one, on purpose).

How long to wait for a database another process holds locked: ``OPEN_RAG_EVAL_DB_TIMEOUT_S`` (default 30 s).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from open_rag_eval.core.errors import StorageError

__all__ = ["Database", "connect", "db_path", "db_timeout_s", "explain", "guard", "probe"]

TIMEOUT_ENV = "OPEN_RAG_EVAL_DB_TIMEOUT_S"
_OPEN: dict[str, int] = {}  # file -> connections this process has open on it
_OPEN_LOCK = threading.Lock()


@dataclass(frozen=True)
class Database:
    """What a file is for: ``what`` names it in messages, ``setting`` is the config key that chooses it,
    ``tables`` the columns our schema gives each table (a file whose tables differ belongs to another program)."""

    what: str
    setting: str
    tables: Mapping[str, frozenset[str]]


def db_timeout_s(default: float = 30.0) -> float:
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw.strip() else default
    except ValueError:
        return default
    return value if 0 <= value < 86400 else default


def explain(error: BaseException, path: Path, db: Database) -> StorageError:
    """The one line for a failure of ``db`` at ``path``."""
    text = str(error).lower()
    redo = f"or set {db.setting} to another path"
    if path.is_dir():
        problem = f"is a folder, not a {db.what} file: set {db.setting} to a file path"
    elif "not a database" in text or "malformed" in text or "encrypted" in text:
        problem = (f"is not a usable {db.what} (corrupt, truncated or another kind of file): move it away "
                   f"(a new one is created) {redo}")
    elif "locked" in text or "busy" in text:
        problem = (f"the {db.what} is locked by another process (waited {db_timeout_s():g}s): let it finish, raise "
                   f"{TIMEOUT_ENV}, {redo}")
    elif "readonly" in text or "read-only" in text or isinstance(error, PermissionError):
        problem = f"the {db.what} is read-only: make the file and its folder writable, {redo}"
    elif "full" in text or "no space" in text:
        problem = f"the disk holding the {db.what} is full: free some space, {redo}"
    elif "disk i/o" in text or "too large" in text:
        problem = f"the {db.what} cannot be written (disk full or failing: {error}): free some space, {redo}"
    elif "unable to open" in text:
        problem = f"the {db.what} cannot be opened (missing folder or no permission): check the path, {redo}"
    else:
        problem = f"the {db.what} failed: {error}; {redo}"
    return StorageError(problem, path=path)


@contextmanager
def guard(path: Path, db: Database) -> Iterator[None]:
    """Turn SQLite and file errors raised inside into the one-line ``StorageError`` (a broken constraint or a
    misused API is a bug of ours, and stays what it is)."""
    try:
        yield
    except (sqlite3.IntegrityError, sqlite3.ProgrammingError, sqlite3.InterfaceError):
        raise
    except (sqlite3.Error, OSError) as error:
        raise explain(error, path, db) from None


def db_path(raw: str | Path, base_dir: Path, db: Database) -> Path:
    """The file a setting names (``setting_path``); an empty setting is an error, never the folder."""
    if not str(raw).strip():
        raise StorageError(f"the {db.what} path is empty: set it to a file path", path=db.setting)
    return setting_path(raw, base_dir)


def setting_path(raw: str | Path, base_dir: Path) -> Path:
    """The path a config setting names: ``~`` expanded, relative to ``base_dir`` (the config's folder) unless
    absolute, normalised (no link followed)."""
    path = Path(os.path.expanduser(str(raw)))
    return Path(os.path.normpath(path if path.is_absolute() else Path(base_dir) / path))


def _check_schema(connection: sqlite3.Connection, path: Path, db: Database) -> None:
    tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    tables.discard("sqlite_sequence")
    if tables and not tables & db.tables.keys():
        raise StorageError(f"is a SQLite database of another program (tables {', '.join(sorted(tables))}), not a "
                           f"{db.what}: set {db.setting} to another path", path=path)
    for table, columns in db.tables.items():
        if table not in tables:
            continue
        found = {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}
        missing = sorted(columns - found)
        if missing:
            raise StorageError(f"is not a {db.what} of this version (table {table} lacks {', '.join(missing)}): "
                               f"move it away or set {db.setting} to another path", path=path)


class _Counted(sqlite3.Connection):
    """A connection that tells ``_OPEN`` when it is closed."""

    _key: str | None = None

    def close(self) -> None:
        key, self._key = self._key, None
        super().close()
        if key is not None:
            _closed(key)


def _closed(key: str) -> None:
    with _OPEN_LOCK:
        _OPEN[key] -= 1
        if not _OPEN[key]:
            del _OPEN[key]


def _open(path: Path, readonly: bool, timeout: float) -> sqlite3.Connection:
    """A connection to ``path``, refused when the file is damaged (``_damaged``). The file is read for that only while
    this process has no connection open on it: reading it means closing a descriptor of it, and closing any descriptor
    of a file drops every POSIX lock this process holds on it -- the locks SQLite's open connections rely on (another
    job's judge cache, the other connection of the same cache). Other processes would then write under them and the
    database would be corrupted."""
    key = os.path.realpath(path)
    with _OPEN_LOCK:
        if not _OPEN.get(key) and _damaged(path):
            raise sqlite3.DatabaseError("file is not a database (damaged or truncated)")
        _OPEN[key] = _OPEN.get(key, 0) + 1  # counted before it is opened: no other thread reads the file meanwhile
    try:
        target, uri = (f"{path.resolve().as_uri()}?mode=ro", True) if readonly else (str(path), False)
        connection = sqlite3.connect(target, uri=uri, timeout=timeout, check_same_thread=False, isolation_level=None,
                                     factory=_Counted)
    except BaseException:
        _closed(key)
        raise
    connection._key = key
    return connection


def _damaged(path: Path) -> bool:
    """Not empty, yet no whole SQLite file: no SQLite header, or shorter than its own header says (SQLite would
    silently start over on a few stray bytes, or read zeros for the missing pages)."""
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
        size = path.stat().st_size
    except OSError:
        return False
    if size == 0:
        return False  # an empty file is a new database
    if len(header) < 100 or not header.startswith(b"SQLite format 3\0"):
        return True
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    valid = header[24:28] == header[92:96]  # the in-header size is valid for this version of the file
    return valid and pages > 0 and size < pages * page_size


def connect(path: Path, db: Database, *, schema: str = "", readonly: bool = False) -> sqlite3.Connection:
    """A checked connection: the file is a database with our tables (created unless ``readonly``), in WAL mode."""
    path = Path(path)
    connection: sqlite3.Connection | None = None
    with guard(path, db):
        try:
            if path.is_dir():
                raise sqlite3.OperationalError("is a directory")
            timeout = db_timeout_s()
            if not readonly:
                path.parent.mkdir(parents=True, exist_ok=True)
            connection = _open(path, readonly, timeout)
            connection.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            _set_up(connection, path, db, schema, readonly, time.monotonic() + timeout)
            return connection
        except BaseException:
            if connection is not None:
                connection.close()
            raise


def _set_up(connection: sqlite3.Connection, path: Path, db: Database, schema: str, readonly: bool,
            deadline: float) -> None:
    """Check the tables, switch to WAL and create the schema. While another process creates the same new file,
    SQLite can answer "database is locked" at once, without waiting (a journal-mode switch, or a lock it cannot
    upgrade): those steps are tried again until the busy timeout's deadline."""
    while True:
        try:
            _check_schema(connection, path, db)
            if not readonly:
                connection.execute("PRAGMA journal_mode = WAL")
                connection.executescript(schema)
                version = connection.execute("PRAGMA user_version").fetchone()[0]
                connection.execute(f"PRAGMA user_version = {int(version)}")  # can we write? (read-only, full...)
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or time.monotonic() >= deadline:
                raise
            time.sleep(0.05)


def probe(path: Path, db: Database) -> StorageError | None:
    """What would stop a run from using ``path`` (read-only checks: nothing is created or changed)."""
    try:
        if path.is_dir():
            return explain(sqlite3.OperationalError("is a directory"), path, db)
        if not path.exists():
            base = path.parent
            while not base.exists() and base.parent != base:
                base = base.parent
            if not base.is_dir() or not os.access(base, os.W_OK | os.X_OK):
                return StorageError(f"the {db.what} cannot be created: {base} is not a writable folder; "
                                    f"set {db.setting} to another path", path=path)
            return None
        connection = connect(path, db, readonly=True)
        try:
            with guard(path, db):
                row = connection.execute("PRAGMA quick_check").fetchone()
            if row is None or row[0] != "ok":
                return explain(sqlite3.DatabaseError("database disk image is malformed"), path, db)
        finally:
            connection.close()
        if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK | os.X_OK):
            return explain(sqlite3.OperationalError("attempt to write a readonly database"), path, db)
    except StorageError as error:
        return error
    return None
