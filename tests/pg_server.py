"""A real, throwaway PostgreSQL server for tests and benchmarks: initdb + pg_ctl on a free port.

PostgreSQL refuses to run as root, and CI runs as root: then the cluster directory is created
for, and the server run as, the `postgres` (or `nobody`) user through runuser. Trust
authentication on 127.0.0.1 only; the directory is removed on exit.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from contextlib import contextmanager
from pathlib import Path

from tests.servers import free_port


def pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def _run_as() -> str | None:
    """The user to run the server as: ourselves unless root, else postgres / nobody."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise RuntimeError("running as root and neither user postgres nor nobody exists")


def unavailable_reason() -> str | None:
    if pg_bin() is None:
        return "PostgreSQL is not installed (Debian package postgresql; .ci/run installs it)"
    if os.geteuid() == 0 and not shutil.which("runuser"):
        return "running as root without runuser: cannot start PostgreSQL as a non-root user"
    return None


class PgServer:
    """One throwaway cluster that a test may stop and start again (a database restart); `url` stays valid."""

    def __init__(self, fsync: bool = True):
        bindir, self.user = pg_bin(), _run_as()
        assert bindir is not None, "PostgreSQL is not installed"
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="pg-test-"))
        self.data, self.port = self.root / "data", free_port()
        if self.user:
            pw = pwd.getpwnam(self.user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1" + ("" if fsync else " -c fsync=off")
        self.url = f"postgresql+psycopg://app@127.0.0.1:{self.port}/memchat"

    def _run(self, *cmd) -> None:
        full = (["runuser", "-u", self.user, "--"] if self.user else []) + [str(c) for c in cmd]
        subprocess.run(full, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=self.root)

    def create(self) -> None:
        self._run(
            self.bindir / "initdb", "-D", self.data, "-U", "app", "--auth=trust", "-E", "UTF8", "--no-instructions"
        )
        self.start()
        self._run(self.bindir / "createdb", "-h", "127.0.0.1", "-p", self.port, "-U", "app", "memchat")

    def start(self) -> None:
        """Returns once the server accepts connections (pg_ctl -w)."""
        self._run(
            self.bindir / "pg_ctl",
            "-D",
            self.data,
            "-o",
            self.opts,
            "-l",
            self.root / "server.log",
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        """Returns once the server is down (pg_ctl -w); "fast" ends every client connection, like a restart."""
        self._run(self.bindir / "pg_ctl", "-D", self.data, "-m", mode, "-w", "stop")

    def running(self) -> bool:
        full = (["runuser", "-u", self.user, "--"] if self.user else []) + [
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "status",
        ]
        return subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=self.root).returncode == 0

    def remove(self) -> None:
        try:
            if self.data.exists() and self.running():
                self.stop()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


@contextmanager
def pg_server(fsync: bool = True):
    """Yields a started PgServer (stop()/start() restart it); removed on exit."""
    server = PgServer(fsync)
    try:
        server.create()
        yield server
    finally:
        server.remove()


@contextmanager
def postgres(fsync: bool = True):
    """Yields a SQLAlchemy URL (postgresql+psycopg://app@127.0.0.1:PORT/memchat)."""
    with pg_server(fsync) as server:
        yield server.url
