"""The schema is defined once: the tables in sessions/schema.py are what the migrations build.

An empty SQLite file and an empty PostgreSQL database are migrated the way the app does at start
(`sessions.migrations.upgrade`), then reflected; every table of the metadata must be there with the same
columns, nullability, primary key, type family and server default, and nothing else. A column added
to the metadata without its migration (or a migration the metadata does not know) fails here.
"""

from __future__ import annotations

import uuid

import pytest
import sqlalchemy as sa

from sessions import migrations, schema
from tests.pg_server import postgres, unavailable_reason

# Type families: SQLite reflects the declared names, PostgreSQL its own (DOUBLE PRECISION, BIGINT ...).
FAMILIES = {
    sa.Text: "text",
    sa.String: "text",
    sa.Integer: "integer",
    sa.BigInteger: "integer",
    sa.SmallInteger: "integer",
    sa.Float: "float",
    sa.Double: "float",
    sa.REAL: "float",
    sa.Numeric: "float",
}
IGNORED = {"schema_version"}  # the migrations' own bookkeeping table


def family(t: sa.types.TypeEngine) -> str:
    for cls in type(t).__mro__:
        if cls in FAMILIES:
            return FAMILIES[cls]
    return type(t).__name__.lower()


def default_text(d) -> str | None:
    """A server default as comparable text: '{}', 'chat', '' (quotes and PostgreSQL casts removed)."""
    if d is None:
        return None
    text = str(getattr(d, "arg", d))
    text = text.split("::", 1)[0]  # PostgreSQL: 'chat'::text
    return text.strip().strip("'")


def shape_of_metadata() -> dict:
    return {
        t.name: {
            c.name: (
                family(c.type),
                bool(c.nullable) and not c.primary_key,
                c.primary_key,
                default_text(c.server_default),
            )
            for c in t.columns
        }
        for t in schema.metadata.sorted_tables
    }


def shape_of_database(engine: sa.Engine) -> dict:
    insp = sa.inspect(engine)
    out = {}
    for name in insp.get_table_names():
        if name in IGNORED:
            continue
        pk = set(insp.get_pk_constraint(name)["constrained_columns"])
        out[name] = {
            c["name"]: (
                family(c["type"]),
                bool(c["nullable"]) and c["name"] not in pk,
                c["name"] in pk,
                default_text(c.get("default")),
            )
            for c in insp.get_columns(name)
        }
    return out


def differences(want: dict, got: dict) -> list[str]:
    out = [f"table {t}: in the metadata, not made by the migrations" for t in want.keys() - got.keys()]
    out += [f"table {t}: made by the migrations, not in the metadata" for t in got.keys() - want.keys()]
    for t in want.keys() & got.keys():
        for c in want[t].keys() | got[t].keys():
            if want[t].get(c) != got[t].get(c):
                out.append(f"{t}.{c}: metadata {want[t].get(c)} != database {got[t].get(c)}")
    return sorted(out)


def migrated_sqlite(tmp_path) -> sa.Engine:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'sessions.sqlite3'}")
    migrations.upgrade(engine)
    return engine


def test_the_migrations_build_exactly_the_metadata_on_sqlite(tmp_path):
    engine = migrated_sqlite(tmp_path)
    try:
        assert migrations.version(engine) == migrations.LATEST
        assert differences(shape_of_metadata(), shape_of_database(engine)) == []
    finally:
        engine.dispose()


def test_the_migrations_build_exactly_the_metadata_on_postgresql():
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with postgres(fsync=False) as url:
        admin = sa.create_engine(url, isolation_level="AUTOCOMMIT")
        name = "schema" + uuid.uuid4().hex[:8]
        with admin.connect() as c:
            c.exec_driver_sql(f"CREATE DATABASE {name}")
        admin.dispose()
        engine = sa.create_engine(url.rsplit("/", 1)[0] + "/" + name)
        try:
            migrations.upgrade(engine)
            assert migrations.version(engine) == migrations.LATEST
            assert differences(shape_of_metadata(), shape_of_database(engine)) == []
        finally:
            engine.dispose()


def test_a_column_missing_from_the_migrations_is_reported(tmp_path):
    """The check itself: a metadata column no migration adds shows up as a difference."""
    engine = migrated_sqlite(tmp_path)
    try:
        want = shape_of_metadata()
        want["messages"]["mood"] = ("text", True, False, None)
        assert differences(want, shape_of_database(engine)) == [
            "messages.mood: metadata ('text', True, False, None) != database None"
        ]
    finally:
        engine.dispose()
