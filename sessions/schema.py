"""The schema, defined once: the tables as the code queries them.

`metadata` is the one definition of the current schema: the code queries these tables, and they are
created and changed only by the numbered migrations of sessions/migrations.py, so a change here needs a
new migration there. tests/test_schema_agrees.py migrates an empty SQLite and an empty PostgreSQL database
and compares what they hold with `metadata`, column by column. This module holds data only: it imports no
other module of the app, so every module can import it.
"""

from __future__ import annotations

import sqlalchemy as sa

# --- schema ------------------------------------------------------

metadata = sa.MetaData()

users = sa.Table(
    "users",
    metadata,
    sa.Column("user_id", sa.Text, primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("prefs", sa.Text, nullable=False, server_default="{}"),
    sa.Column("api_client", sa.Integer, nullable=False, server_default="0"),  # migration 7: issued by /new_user
)

sessions = sa.Table(
    "sessions",
    metadata,
    sa.Column("user_id", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, primary_key=True),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("date", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False),
    sa.Column("source", sa.Text, nullable=False, server_default="chat"),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("closed_at", sa.Float),
    sa.Column("close_error", sa.Text),
    sa.Column("report", sa.Text),
)

messages = sa.Table(
    "messages",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("role", sa.Text, nullable=False),
    sa.Column("speaker", sa.Text, nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("status", sa.Text, nullable=False, server_default="ok"),
    sa.Column("error", sa.Text),
    sa.Column("strategy", sa.Text),
    sa.Column("reply_to", sa.Integer),
    sa.Column("trace", sa.Text),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("source_turn_id", sa.Text),  # migration 4: the turn's id in an imported history
    sa.Column("turn_no", sa.Integer),  # migration 8: the message's number in its session (its turn id)
)

compares = sa.Table(
    "compares",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("user_id", sa.Text, nullable=False),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("message", sa.Text, nullable=False),
    sa.Column("results", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)

# THEANINE graph (migration 2), keyed like the data dir and Chroma: by a hash of the user id.
graph_memories = sa.Table(
    "graph_memories",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("memory_id", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("event", sa.Text, nullable=False),
    sa.Column("time", sa.Text, nullable=False),
    sa.Column("ts", sa.Text, nullable=False),
    sa.Column("turns", sa.Text, nullable=False),  # JSON list of turn ids
    sa.Column("speaker", sa.Text, nullable=False),
    sa.Column("built_by", sa.Text, nullable=False, server_default=""),  # migration 4: how it was made
    sa.Column("excerpt", sa.Text, nullable=False, server_default=""),  # migration 4: source dialogue
)

graph_edges = sa.Table(
    "graph_edges",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("src", sa.Text, primary_key=True),
    sa.Column("dst", sa.Text, primary_key=True),
    sa.Column("relation", sa.Text, nullable=False),
    sa.Column("owner", sa.Text, nullable=False),  # the session whose close made the edge
)

graph_sessions = sa.Table(
    "graph_sessions",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, primary_key=True),
    sa.Column("built_at", sa.Float, nullable=False),
)

graph_versions = sa.Table(
    "graph_versions",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
)

memory_versions = sa.Table(
    "memory_versions",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("kind", sa.Text, primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
)

# Damaged stored values (migration 5; sessions/damage.py): one row per bad JSON value, keyed by
# the user's hash; `raw` keeps the stored text as it was.
quarantine = sa.Table(
    "quarantine",
    metadata,
    sa.Column("user_key", sa.Text, primary_key=True),
    sa.Column("tbl", sa.Text, primary_key=True),
    sa.Column("row_key", sa.Text, primary_key=True),
    sa.Column("col", sa.Text, primary_key=True),
    sa.Column("session_id", sa.Text, nullable=False, server_default=""),
    sa.Column("raw", sa.Text),
    sa.Column("found_at", sa.Float, nullable=False),
)

# Agent keys (migration 7; sessions/agent_keys.py): a person's keys for MCP clients and scripts, stored as a
# hash of the key; `prefix` is the key's first characters, not secret, to tell keys apart in a list.
agent_keys = sa.Table(
    "agent_keys",
    metadata,
    sa.Column("key_hash", sa.Text, primary_key=True),
    sa.Column("user_key", sa.Text, nullable=False),
    sa.Column("prefix", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("last_used_at", sa.Float),
    sa.Column("revoked_at", sa.Float),
)
