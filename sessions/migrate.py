"""Migrate a data dir by hand and print what happened (the app does the same at every start).

    python -m sessions.migrate DATA_DIR                 # SQLite in DATA_DIR (upgraded in place)
    DATABASE_URL=postgresql://... python -m sessions.migrate DATA_DIR   # copy it into PostgreSQL

Prints the schema versions applied, the rows copied (PostgreSQL), the graph sessions moved out
of JSON files, and what the database holds afterwards.
"""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path

import sqlalchemy as sa

from . import migrations, schema
from .graph_store import SqlGraphStore
from .store import open_store


def files(data: Path) -> list[str]:
    """The data dir's files, without Chroma's and SQLite's own (-wal, -shm) working files."""
    return sorted(
        str(p.relative_to(data))
        for p in data.rglob("*")
        if p.is_file() and "chroma" not in p.parts and not p.name.endswith(("-wal", "-shm"))
    )


def summary(engine) -> dict[str, int]:
    with engine.connect() as c:
        return {
            t.name: int(c.execute(sa.select(sa.func.count()).select_from(t)).scalar())
            for t in schema.metadata.sorted_tables
        }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir", type=Path)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="  %(name)s: %(message)s")
    data = args.data_dir
    before = files(data)
    print(f"data dir {data}: {len(before)} files (Chroma not counted)")
    for p in before:
        print("  ", p)
    store = open_store(data)
    print(
        f"database: {store.engine.url.render_as_string(hide_password=True)}, "
        f"schema version {migrations.version(store.engine)}"
    )
    moved = SqlGraphStore(store.engine).import_json_folders(data)
    for k, n in moved.items():
        print(f"graph of user {k[:12]}...: {n} session part(s) moved from JSON into the database")
    print("rows now:", ", ".join(f"{k}={v}" for k, v in summary(store.engine).items()))
    after = files(data)
    print("files kept (renamed, nothing deleted):", ", ".join(p for p in after if p not in before) or "-")
    store.engine.dispose()


if __name__ == "__main__":
    os.environ.setdefault("MEMORY_DOTENV", "0")
    main()
