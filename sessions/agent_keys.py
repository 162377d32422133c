"""Agent keys: what an MCP client or a script holds instead of a person's user id.

A person makes a key in the page's Settings, names it after the agent that will hold it, and sees it
once. The database keeps only its SHA-256 (a key is 256 random bits, so a plain hash cannot be
reversed or guessed) and its first characters (`prefix`, not secret) to tell keys apart in the list.
A key opens its owner's memory and no other; revoking it refuses it from then on, and Forget me
deletes the owner's keys with everything else.

The browser's user id is the page's credential; it is kept in the browser's storage, encrypted with
a secret that the page itself serves, so anyone holding the browser profile can read it. The API and
MCP therefore do not take a page's id alone (`UserAuth` in ui/api.py): an agent brings a key. Ids that
/new_user issued to an API client (never shown to a page) are still served alone, unless the
deployment requires keys for every call (MEMORY_REQUIRE_AGENT_KEYS).
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import sqlalchemy as sa

from memory.text import clean_text
from memory.userspace import user_key

from . import db
from .db import UserError
from .schema import agent_keys as K
from .schema import users as U
from .users import UserKey

KEY_PREFIX = "mem."  # a "." is never in a user id (users.USER_ID_RE): a key sent as user_id is recognised
SHOWN_CHARS = len(KEY_PREFIX) + 8  # what the list shows of a key: "mem.AbC9-xyz"
MAX_NAME_CHARS = 60
MAX_KEYS = 20  # live keys per person: enough agents, and a bound on the rows a page can add
LAST_USE_EVERY_S = 60.0  # a key's last use is written at most this often (one write per call is waste)

NOT_A_KEY = "That is not an agent key (keys start with “mem.”): copy the whole key from Settings → Agent keys."
UNKNOWN_KEY = (
    "Unknown agent key: it was never made here, or its person used Forget me. Make one in Settings → Agent keys."
)


HOW = "make an agent key in the page's Settings → Agent keys and send it as the header “Authorization: Bearer <key>”"
NO_KEY = f"No agent key was sent (and no user id): {HOW}."
KEYS_ONLY = f"This server takes API and MCP calls with an agent key only, and none was sent: {HOW}."
PAGE_ID_ALONE = (
    "A browser's user id alone does not open its memory through the API or MCP (the page keeps it in browser "
    f"storage that does not protect it): {HOW}; user_id may then be left empty."
)
KEY_AS_ID = "That is an agent key, given as user_id: send it as the header “Authorization: Bearer <key>” instead."
OTHERS = (
    "This agent key opens another person's memory, not that of the user id given: leave user_id empty to use "
    "the key's own memory."
)
NOT_BEARER = "The Authorization header must read “Bearer <agent key>”."


class KeyRefused(UserError):
    """An agent key (or the lack of one) that cannot open the memory asked for; the message says why."""


@dataclass(frozen=True)
class AgentKey:
    """One key as its owner sees it in Settings: never the key itself."""

    prefix: str
    name: str
    created_at: float
    last_used_at: float | None
    revoked_at: float | None


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def is_key_shaped(value: object) -> bool:
    return isinstance(value, str) and value.startswith(KEY_PREFIX) and 20 < len(value) <= 100


def bearer(authorization: str | None) -> str:
    """The agent key of an Authorization header ("" when there is none). Another scheme is not ours (a proxy's
    Basic login), nor a Hugging Face token (gradio_client sends one to a Space: "Bearer hf_...")."""
    scheme, _, value = str(authorization or "").strip().partition(" ")
    value = value.strip()
    if is_key_shaped(scheme):
        raise KeyRefused(NOT_BEARER)  # the key without its scheme
    if scheme.lower() != "bearer" or not value or value.startswith("hf_"):
        return ""
    if not is_key_shaped(value):
        raise KeyRefused(NOT_A_KEY)
    return value


def when(t: float | None) -> str:
    """A stored time as people read it in a message or the list (UTC, to the minute)."""
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(t)) if t else "never"


class AgentKeys:
    def __init__(self, engine):
        self.engine = engine

    # --- the owner's side: Settings -------------------------------------------------------------
    def create(self, user: UserKey, name: str) -> tuple[str, AgentKey]:
        """A new key for `user` named `name`: (the key, shown once and never again; its row)."""
        name = clean_text(name or "").strip()[:MAX_NAME_CHARS]
        if not name:
            raise UserError("Name the key after the agent that will hold it (e.g. “Claude Desktop”).")
        if len([k for k in self.list(user) if not k.revoked_at]) >= MAX_KEYS:
            raise UserError(f"You have {MAX_KEYS} live agent keys; revoke one before making another.")
        key = KEY_PREFIX + secrets.token_urlsafe(32)
        row = AgentKey(key[:SHOWN_CHARS], name, time.time(), None, None)
        with db.write(self.engine) as c:
            c.execute(
                K.insert().values(
                    key_hash=hash_key(key), user_key=str(user), prefix=row.prefix, name=name, created_at=row.created_at
                )
            )
        return key, row

    def list(self, user: UserKey) -> list[AgentKey]:
        """The person's keys, newest first, revoked ones included (they say when)."""
        with db.read(self.engine) as c:
            rows = c.execute(
                sa.select(K.c.prefix, K.c.name, K.c.created_at, K.c.last_used_at, K.c.revoked_at)
                .where(K.c.user_key == str(user))
                .order_by(K.c.created_at.desc())
            ).all()
        return [AgentKey(*r) for r in rows]

    def revoke(self, user: UserKey, prefix: str) -> int:
        """Revoke the person's live key(s) shown as `prefix`; how many were revoked (only their own)."""
        with db.write(self.engine) as c:
            return c.execute(
                K.update()
                .where(K.c.user_key == str(user), K.c.prefix == str(prefix or ""), K.c.revoked_at.is_(None))
                .values(revoked_at=time.time())
            ).rowcount

    # --- the agent's side: a call to the API or MCP ------------------------------------------------
    def owner(self, key: str) -> UserKey:
        """The user a key opens; KeyRefused (why, for people) for a malformed, unknown or revoked key."""
        if not is_key_shaped(key):
            raise KeyRefused(NOT_A_KEY)
        h = hash_key(key)
        with db.read(self.engine) as c:
            row = c.execute(sa.select(K.c.user_key, K.c.revoked_at, K.c.last_used_at).where(K.c.key_hash == h)).first()
        if row is None:
            raise KeyRefused(UNKNOWN_KEY)
        if row.revoked_at:
            raise KeyRefused(
                f"This agent key was revoked on {when(row.revoked_at)}: its person can make a new one in "
                "Settings → Agent keys."
            )
        now = time.time()
        if not row.last_used_at or now - row.last_used_at >= LAST_USE_EVERY_S:
            with db.write(self.engine) as c:
                c.execute(K.update().where(K.c.key_hash == h).values(last_used_at=now))
        return UserKey(row.user_key)

    def user_for(
        self, user_id: str, authorization: str, check_id: Callable[[str], UserKey], require_keys: bool
    ) -> UserKey:
        """Whose memory an API or MCP call may use: the owner of the call's agent key (a `user_id` given
        beside it must be the owner's), else, unless `require_keys`, a user id issued to an API client by
        /new_user. `check_id` is the service's check of an id (InvalidUserId for one it does not serve)."""
        key = bearer(authorization)
        user_id = str(user_id or "").strip()
        if key:
            owner = self.owner(key)
            if user_id and user_key(user_id) != owner:
                raise KeyRefused(OTHERS)
            return owner
        if require_keys:
            raise KeyRefused(KEYS_ONLY)
        if is_key_shaped(user_id):
            raise KeyRefused(KEY_AS_ID)
        if not user_id:
            raise KeyRefused(NO_KEY)
        user = check_id(user_id)
        if not self.is_api_client(user):
            raise KeyRefused(PAGE_ID_ALONE)
        return user

    # --- which ids an API client was issued -------------------------------------------------------
    def mark_api_client(self, user: UserKey) -> None:
        """`user` was issued to an API client by /new_user (its id was never in a browser)."""
        with db.write(self.engine) as c:
            c.execute(U.update().where(U.c.user_id == str(user)).values(api_client=1))

    def is_api_client(self, user: UserKey) -> bool:
        with db.read(self.engine) as c:
            return bool(c.execute(sa.select(U.c.api_client).where(U.c.user_id == str(user))).scalar())
