"""The app's maintenance commands, run with the same environment as the app (MEMORY_DATA_DIR,
DATABASE_URL, CHROMA_HOST, ...; like app.py, this entry point reads it through
sessions.settings.AppSettings, and passes it on):

    python -m sessions check [--repair | --drop] [--data-dir DIR]
        read every stored JSON value of every user; a damaged one is quarantined and reported
        (exit 1), `--repair` rebuilds it where it can be rebuilt (or drops it), `--drop` drops it
    python -m sessions migrate DATA_DIR
        migrate a data dir by hand and print what happened (the app does the same at every start):
        SQLite in DATA_DIR is upgraded in place; with DATABASE_URL set it is copied into PostgreSQL
    python -m sessions idle --days 90 [--delete]
        report users idle for more than 90 days; only with --delete are they deleted (sessions,
        messages, both memories), each deletion printed. Users are shown by a short fingerprint
        of their id (the id itself is their credential). Best run while the app is stopped: the
        embedded Chroma is not meant to be shared by two processes.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import logging
import sys
from pathlib import Path

import sqlalchemy as sa

from memory.errors import InvalidSetting

from . import damage, migrations, schema
from .graph_store import SqlGraphStore
from .settings import AppSettings, load_dotenv_file
from .store import Store, open_store
from .users import UserKey, fingerprint, idle_users, last_activity


def check(args: argparse.Namespace) -> int:
    settings = AppSettings.from_env()
    data_dir = settings.memory.data_dir if args.data_dir is None else args.data_dir
    # Opening the store applies the migrations (the quarantine table).
    store = Store.for_data_dir(Path(data_dir), settings.database_url.strip())
    rep = damage.scan(store.engine)
    if args.repair or args.drop:
        damage.repair_all(store.engine, SqlGraphStore(store.engine), rep, drop=args.drop)
    print(damage.render(rep))
    damaged_left = rep.findings and not (args.repair or args.drop)
    return 1 if damaged_left or rep.integrity not in ("", "ok") else 0


def _files(data: Path) -> list[str]:
    """The data dir's files, without Chroma's and SQLite's own (-wal, -shm) working files."""
    return sorted(
        str(p.relative_to(data))
        for p in data.rglob("*")
        if p.is_file() and "chroma" not in p.parts and not p.name.endswith(("-wal", "-shm"))
    )


def _row_counts(engine) -> dict[str, int]:
    with engine.connect() as c:
        return {
            t.name: int(c.execute(sa.select(sa.func.count()).select_from(t)).scalar())
            for t in schema.metadata.sorted_tables
        }


def migrate(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="  %(name)s: %(message)s")
    data = args.data_dir
    before = _files(data)
    print(f"data dir {data}: {len(before)} files (Chroma not counted)")
    for p in before:
        print("  ", p)
    store = open_store(data, AppSettings.from_env().database_url)
    print(
        f"database: {store.engine.url.render_as_string(hide_password=True)}, "
        f"schema version {migrations.version(store.engine)}"
    )
    moved = SqlGraphStore(store.engine).import_json_folders(data)
    for k, n in moved.items():
        print(f"graph of user {k[:12]}...: {n} session part(s) moved from JSON into the database")
    print("rows now:", ", ".join(f"{k}={v}" for k, v in _row_counts(store.engine).items()))
    after = _files(data)
    print("files kept (renamed, nothing deleted):", ", ".join(p for p in after if p not in before) or "-")
    store.engine.dispose()
    return 0


def _service():
    from memory.agent import MemoryAgent

    from .service import open_service

    settings = AppSettings.from_env()
    agent = MemoryAgent.from_settings(settings.memory)
    return open_service(settings.memory, agent, database_url=settings.database_url, locks=agent.locks)


def idle(args: argparse.Namespace, service=None, out=sys.stdout, now: float | None = None) -> int:
    if service is None:
        service = _service()
    users = idle_users(service.store, args.days, now)
    total = len(last_activity(service.store.engine))
    print(f"{total} users; {len(users)} idle for more than {args.days:g} days.", file=out)
    for uid, last in users:
        n_sessions = len(service.store.sessions(uid))
        when = _dt.datetime.fromtimestamp(last, _dt.UTC).strftime("%Y-%m-%d")
        print(f"  user {fingerprint(uid)}  last active {when}  {n_sessions} sessions", file=out)
    if not args.delete:
        if users:
            print("Nothing deleted (report only). Add --delete to delete these users.", file=out)
        return 0
    for uid, _ in users:
        service.rooms.data.forget(UserKey(uid))  # a key read from the database: the server acts for this user
        print(f"  deleted user {fingerprint(uid)}", file=out)
    print(f"Deleted {len(users)} idle users.", file=out)
    return 0


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m sessions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    c = sub.add_parser("check", help="find (and repair) damaged stored values")
    c.add_argument("--repair", action="store_true", help="rebuild (or drop) every damaged value")
    c.add_argument("--drop", action="store_true", help="drop every damaged value instead of rebuilding")
    c.add_argument("--data-dir", help="the app's data dir (default: the app's, from MEMORY_DATA_DIR)")
    m = sub.add_parser("migrate", help="migrate a data dir by hand and print what happened")
    m.add_argument("data_dir", type=Path)
    i = sub.add_parser("idle", help="report (and with --delete, delete) idle users")
    i.add_argument("--days", type=float, required=True, help="idle for more than this many days")
    i.add_argument("--delete", action="store_true", help="delete the idle users (default: report only)")
    return ap


def main(argv: list[str] | None = None, service=None, out=sys.stdout, now: float | None = None) -> int:
    """`service`, `out` and `now` are for tests of the idle report."""
    load_dotenv_file()  # the app's .env, as app.py reads it, for every command
    ap = parser()
    args = ap.parse_args(argv)
    if args.command == "idle" and args.days < 1:
        ap.error("--days must be at least 1")
    try:
        if args.command == "check":
            return check(args)
        if args.command == "migrate":
            return migrate(args)
        return idle(args, service, out, now)
    except InvalidSetting as e:  # a bad environment variable: say which, as app.py does
        raise SystemExit(f"Cannot run: {e} (docs/settings.md lists every setting).") from None


if __name__ == "__main__":
    sys.exit(main())
