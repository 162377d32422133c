"""Errors whose message is written for the person using the app (shown as is, never a stack trace)."""

from __future__ import annotations

import sqlalchemy.exc as sa_exc


class UserError(ValueError):
    """Something the user can fix or retry; the message says what."""


DATABASE_DOWN = "The database cannot be reached just now; everything saved before is kept. Try again in a moment."

NOT_STORED = "The database cannot be reached just now: your message was not saved. Send it again in a moment."


class DatabaseUnavailable(UserError):
    """The relational database is down or restarting (a PostgreSQL restart, a lost connection)."""

    def __init__(self, message: str = DATABASE_DOWN):
        super().__init__(message)


def database_down(exc: BaseException) -> bool:
    """Whether `exc` is the database being unreachable (not a bad statement or a broken row): the
    driver's operational errors, and any error on a connection the server dropped."""
    if isinstance(exc, DatabaseUnavailable):
        return True
    if isinstance(exc, (sa_exc.OperationalError, sa_exc.InterfaceError)):
        return True
    return isinstance(exc, sa_exc.DBAPIError) and bool(exc.connection_invalidated)
