"""Report users idle for more than N days and, only when asked, delete them.

    python -m sessions.idle --days 90            # report only: nothing is changed
    python -m sessions.idle --days 90 --delete   # delete those users (sessions, messages, both memories)

Nothing is ever deleted without --delete, and every deletion is printed. Users are
shown by a short fingerprint of their id (the id itself is their credential). Run it
with the same environment as the app (MEMORY_DATA_DIR, CHROMA_HOST, ...), best while
the app is stopped (the embedded Chroma is not meant to be shared by two processes).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import sys
import time

from memory.userspace import user_key

from .ids import UserKey

DAY = 86400.0


def fingerprint(user_id: str) -> str:
    """What the report prints for a user: the start of its key (the id is a credential)."""
    return user_key(user_id)[:12]


def idle_users(store, days: float, now: float | None = None) -> list[tuple[str, float]]:
    """(user id, last activity) of users whose latest activity is more than `days` days old."""
    cutoff = (time.time() if now is None else now) - days * DAY
    return [(u, t) for u, t in store.last_activity() if t < cutoff]


def _service():
    from memory.agent import MemoryAgent
    from memory.settings import Settings

    from .service import SessionService

    if os.environ.get("MEMORY_DOTENV", "1") != "0":  # the app's .env, as app.py reads it
        from dotenv import load_dotenv

        load_dotenv()
    settings = Settings.from_env()
    return SessionService(settings, MemoryAgent.from_settings(settings))


def main(argv: list[str] | None = None, service=None, out=sys.stdout, now: float | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m sessions.idle", description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=float, required=True, help="idle for more than this many days")
    p.add_argument("--delete", action="store_true", help="delete the idle users (default: report only)")
    a = p.parse_args(argv)
    if a.days < 1:
        p.error("--days must be at least 1")
    if service is None:
        service = _service()
    users = idle_users(service.store, a.days, now)
    total = len(service.store.last_activity())
    print(f"{total} users; {len(users)} idle for more than {a.days:g} days.", file=out)
    for uid, last in users:
        n_sessions = len(service.store.sessions(uid))
        when = _dt.datetime.fromtimestamp(last, _dt.UTC).strftime("%Y-%m-%d")
        print(f"  user {fingerprint(uid)}  last active {when}  {n_sessions} sessions", file=out)
    if not a.delete:
        if users:
            print("Nothing deleted (report only). Add --delete to delete these users.", file=out)
        return 0
    for uid, _ in users:
        service.forget(UserKey(uid))  # a key read from the database: the server acts for this user
        print(f"  deleted user {fingerprint(uid)}", file=out)
    print(f"Deleted {len(users)} idle users.", file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
