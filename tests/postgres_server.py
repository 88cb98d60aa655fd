"""A throwaway PostgreSQL server for tests, started from the machine's installed server binaries (initdb, pg_ctl).

Debian/Ubuntu: ``apt-get install postgresql`` puts them in ``/usr/lib/postgresql/<version>/bin``. PostgreSQL
refuses to run as root: as root the server runs as the ``postgres`` user (created by that package).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
from pathlib import Path

__all__ = ["PostgresServer", "postgres_bin", "unavailable"]


def postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    return Path(on_path).parent if on_path else None


def unavailable() -> str | None:
    """Why no server can be started here (None: it can)."""
    if postgres_bin() is None:
        return "PostgreSQL server binaries are not installed (Debian: apt-get install -y postgresql)"
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        return "running as root without runuser: PostgreSQL cannot be started"
    if os.geteuid() == 0:
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run the server as"
    return None


class ServerCommandFailed(subprocess.CalledProcessError):
    """A server command failed; unlike its base class, its message carries what the command printed."""

    def __str__(self) -> str:
        return f"{super().__str__()}\n{self.stderr}\n{self.stdout}"[-4000:]


class PostgresServer:
    def __init__(self, folder: Path, port: int) -> None:
        self.bin = postgres_bin()
        assert self.bin is not None
        self.folder, self.port = folder, port
        self.data = folder / "pgdata"
        self.socket = folder / "sock"

    def _run(self, *args: str) -> subprocess.CompletedProcess[str]:
        command = [str(self.bin / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if done.returncode:  # say why: the exception alone names only the command
            raise ServerCommandFailed(done.returncode, command, done.stdout, done.stderr)
        return done

    def start(self) -> str:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.socket.mkdir(exist_ok=True)
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
            shutil.chown(self.socket, "postgres")
            os.chmod(self.folder, 0o755)
            for parent in self.folder.parents:  # the postgres user must reach the folder
                if parent == Path("/"):
                    break
                os.chmod(parent, os.stat(parent).st_mode | 0o011)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        options = (f"-p {self.port} -k {self.socket} -c listen_addresses=127.0.0.1 -c fsync=off "
                   "-c max_connections=100")
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.folder / "postgres.log"), "-w",
                  "start")
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "evals")
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/evals"

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            pass
