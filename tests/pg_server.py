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


@contextmanager
def postgres(fsync: bool = True):
    """Yields a SQLAlchemy URL (postgresql+psycopg://app@127.0.0.1:PORT/memchat)."""
    bindir, user = pg_bin(), _run_as()
    assert bindir is not None, "PostgreSQL is not installed"
    root = Path(tempfile.mkdtemp(prefix="pg-test-"))
    data, port = root / "data", free_port()
    if user:
        pw = pwd.getpwnam(user)
        os.chown(root, pw.pw_uid, pw.pw_gid)

    def run(*cmd):
        full = (["runuser", "-u", user, "--"] if user else []) + [str(c) for c in cmd]
        subprocess.run(full, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=root)

    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1" + ("" if fsync else " -c fsync=off")
    try:
        run(bindir / "initdb", "-D", data, "-U", "app", "--auth=trust", "-E", "UTF8", "--no-instructions")
        run(bindir / "pg_ctl", "-D", data, "-o", opts, "-l", root / "server.log", "-w", "-t", "60", "start")
        try:
            run(bindir / "createdb", "-h", "127.0.0.1", "-p", port, "-U", "app", "memchat")
            yield f"postgresql+psycopg://app@127.0.0.1:{port}/memchat"
        finally:
            run(bindir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(root, ignore_errors=True)
