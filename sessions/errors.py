"""Errors whose message is written for the person using the app (shown as is, never a stack trace)."""


class UserError(ValueError):
    """Something the user can fix or retry; the message says what."""
