"""The tables as the code queries them (the current schema). They are created and changed only by
sessions/migrations.py; a change here needs a new migration there."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

users = sa.Table(
    "users",
    metadata,
    sa.Column("user_id", sa.Text, primary_key=True),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("prefs", sa.Text, nullable=False, server_default="{}"),
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

# Damaged stored values (migration 5; sessions/quarantine.py): one row per bad JSON value, keyed by
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
