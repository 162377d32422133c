"""Users: their ids and who may hold them, signed-in accounts, their saved preferences, and who has been idle."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from urllib.parse import urlparse

import sqlalchemy as sa

from memory.errors import InvalidOptions, InvalidSetting
from memory.settings import BACKENDS, LLMConfig, Options
from memory.text import clean_text
from memory.url_guard import UnsafeURL, check_url
from memory.userspace import is_user_key, user_key

from . import db
from .db import UserError
from .schema import compares as C
from .schema import messages as M
from .schema import sessions as S
from .schema import users as U
from .settings import IdentityConfig
from .work import LimitReached

# --- ids ---------------------------------------------------------
# User ids: unguessable bearer tokens, validated before any use.
#
# A user id is the only credential a browser (or an API client) holds, so it is
# random (secrets), and its shape is checked at every entry point: an id that
# does not match never reaches the database, the memory store or a file path.
#
# Inside the server a user is its key (`UserKey`, a hash of the id: memory.userspace): the database,
# the memory stores, the files and the per-user locks all hold the key, so a copy of the database
# is no list of credentials.

USER_ID_RE = re.compile(r"^[A-Za-z0-9_-]{20,64}$")


class InvalidUserId(UserError):
    """The user id is missing or has the wrong shape."""


class UserKey(str):
    """A user's key, as the server holds it: made once per event from an id that passed the entry checks
    (`UserRoom.user`, at the page's handler or the API's endpoint), or read from the database by the server
    itself (start-up recovery, the idle sweep). Only this type is taken as already checked: a key a client
    sends as its id is a plain string, and refused (`own_key`)."""

    __slots__ = ()

    @classmethod
    def of(cls, user_id: str) -> UserKey:
        return cls(user_key(user_id))


def own_key(key: object) -> UserKey:
    """`key` as the rooms of the front door take it: a UserKey made at the edge of the event. Anything else
    (a client's string, which might be shaped like another user's key) is refused, never hashed and served."""
    if not isinstance(key, UserKey):
        raise InvalidUserId(UNKNOWN)
    return key


def new_user_id() -> str:
    while True:
        uid = secrets.token_urlsafe(24)  # 32 url-safe characters, 192 bits
        if not uid.startswith("hf-"):  # that prefix marks signed-in accounts (sessions/users.py)
            return uid


def check_user_id(value: object) -> str:
    if not isinstance(value, str) or not USER_ID_RE.fullmatch(value):
        raise InvalidUserId("Unknown or malformed user id. Reload the page to get a fresh one.")
    return value


def is_user_id(value: object) -> bool:
    return isinstance(value, str) and bool(USER_ID_RE.fullmatch(value))


# --- identity ----------------------------------------------------
# Who holds which user id: ids are issued by this server, and only issued ids are served.
#
# A user id is the bearer credential of a browser or an API client (ids, above). With
# `issued_only` (the app's default), an id the server did not issue (a chosen "aaaa...", one of a
# forgotten user) is refused, so per-user limits are per issued id; issuing is rate-limited per
# client address on public deployments, so one client cannot mint ids to multiply those limits.
# The database stores only each id's key (memory.userspace): an id shaped like a key is refused, so
# the keys in a copy of the database are no credentials.

UNKNOWN = "Unknown user id: ids are given by this server. Reload the page (or call /new_user) to get one."


class Identity:
    WINDOW = 3600.0

    def __init__(self, store, config: IdentityConfig | None = None, clock: Callable[[], float] = time.monotonic):
        self.store, self.config, self.clock = store, config or IdentityConfig(), clock
        self._issued: dict[str, deque] = {}
        self._lock = threading.Lock()

    def client_of(self, request) -> str:
        """The client's address of a Gradio request (behind a Space's proxy: the first X-Forwarded-For hop)."""
        if request is None:
            return ""
        headers = getattr(request, "headers", None) or {}
        forwarded = headers.get("x-forwarded-for", "") if self.config.behind_proxy else ""
        if forwarded:
            return forwarded.split(",")[0].strip()
        client = getattr(request, "client", None)
        return str(getattr(client, "host", "") or "")

    def issue(self, client: str = "") -> str:
        """A new user id, registered; LimitReached when `client` asked for too many this hour."""
        self._take(client or "?")
        uid = new_user_id()
        self.store.ensure_user(UserKey.of(uid))
        return uid

    def register(self, user_id: str) -> str:
        """Serve `user_id` from now on (an id the server derived itself, e.g. a signed-in account's)."""
        uid = check_user_id(user_id)
        self.store.ensure_user(UserKey.of(uid))
        return uid

    def check(self, user_id: object) -> UserKey:
        """The id's key if the id may be used: well formed, not a key itself and, with `issued_only`,
        issued by this server."""
        if isinstance(user_id, UserKey):  # checked already, or read from the database by the server
            return user_id
        uid = check_user_id(user_id)
        if is_user_key(uid):
            raise InvalidUserId(UNKNOWN)
        key = UserKey.of(uid)
        if self.config.issued_only and not self.store.user_exists(key):
            raise InvalidUserId(UNKNOWN)
        return key

    def known(self, user_id: object) -> bool:
        try:
            self.check(user_id)
        except InvalidUserId:
            return False
        return True

    def _take(self, client: str) -> None:
        per_hour = self.config.new_users_per_hour
        if not per_hour:
            return
        now = self.clock()
        with self._lock:
            q = self._issued.setdefault(client, deque())
            while q and now - q[0] >= self.WINDOW:
                q.popleft()
            if len(q) >= per_hour:
                wait = int(self.WINDOW - (now - q[0])) // 60 + 1
                raise LimitReached(
                    f"This address has started {per_hour} new users in the last hour; try again in about "
                    f"{wait} minutes, or keep using the id you have."
                )
            q.append(now)
            if len(self._issued) > 100_000:  # bounded memory: forget the quietest clients
                for k in [k for k, v in self._issued.items() if not v or now - v[-1] >= self.WINDOW]:
                    del self._issued[k]


# --- accounts ----------------------------------------------------
# Signed-in accounts as user ids: "Sign in with Hugging Face" (MEMORY_HF_LOGIN=1, on a Space).
#
# A signed-in account's user id is derived on the server: a keyed hash (HMAC-SHA256) of the account's
# stable id with a secret from the environment (MEMORY_HF_ID_SECRET). So the same account gets the same
# memory in every browser, no id shows the username, and nobody without the secret can compute an
# account's id. The stable id is the OpenID subject (`sub`), which stays when an account is renamed;
# the username only when a profile has no subject.
#
# Account ids start with ACCOUNT_PREFIX, so a page that loads without a signed-in profile (the person
# signed out) drops its stored copy of an account id instead of serving it.

ACCOUNT_PREFIX = "hf-"


def account_key(profile: Mapping | None) -> str | None:
    """The account's stable id from a Gradio OAuthProfile (a dict of the OpenID userinfo), or None."""
    if not profile:
        return None
    for field in ("sub", "preferred_username"):
        value = profile.get(field)
        if isinstance(value, str) and value.strip():
            return f"{field}:{value.strip()}"
    return None


def is_account_id(user_id: object) -> bool:
    return isinstance(user_id, str) and user_id.startswith(ACCOUNT_PREFIX)


class Accounts:
    """Maps a signed-in profile to its user id; `secret` is the deployer's MEMORY_HF_ID_SECRET."""

    def __init__(self, secret: str):
        if len(secret) < 16:
            raise InvalidSetting("MEMORY_HF_ID_SECRET must be at least 16 characters")  # app.py: "Cannot start: ..."
        self._key = secret.encode("utf-8")

    def user_id(self, profile: Mapping | None) -> str | None:
        key = account_key(profile)
        if key is None:
            return None
        digest = hmac.new(self._key, b"hf-login\0" + key.encode("utf-8"), hashlib.sha256).digest()
        uid = ACCOUNT_PREFIX + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")
        assert USER_ID_RE.fullmatch(uid)  # 46 url-safe characters: a well-formed id everywhere
        return uid


# --- prefs -------------------------------------------------------
# Per-user preferences: the memory options and the LLM backend chosen in the settings panel.
#
# Values are validated by `memory.settings.Options` (InvalidOptions carries a
# message for people) before they are saved, so stored prefs are always valid.
# API keys never come from a user: they stay in the process settings (env/.env)
# and are attached only when the chosen endpoint is the one the key was
# configured for, so typing another base URL cannot send the key elsewhere.
#
# On a public deployment the choice is locked (memory.settings.llm_change_allowed):
# saving another LLM is refused and saved choices are ignored. Where it is allowed, a
# base URL other than the deployer's is checked by memory.url_guard: one that is or
# resolves to a loopback, private, link-local (metadata) or otherwise non-public
# address is refused when saved, and every request to it is checked again.

OPTION_FIELDS = (
    "temperature",
    "j",
    "k",
    "n",
    "whole_timelines",
    "theanine_mode",
    "compression_rate",
    "retriever",
    "max_reply_tokens",
)
INT_FIELDS = ("j", "k", "n", "whole_timelines", "max_reply_tokens")


def options_for(defaults: Options, prefs: dict, strategy: str | None = None) -> Options:
    """The options of one reply: process defaults, then the user's saved values, then the chat's strategy."""
    saved = {k: v for k, v in (prefs.get("options") or {}).items() if k in OPTION_FIELDS}
    try:
        opts = defaults.with_(**saved)
    except InvalidOptions:
        opts = defaults  # saved values from an older version that no longer validate
    strategy = strategy or prefs.get("strategy") or opts.strategy
    return opts.with_(strategy=strategy)


def validated_options(defaults: Options, values: dict) -> dict:
    """Options fields from a settings form, validated; raises InvalidOptions with the reason."""
    clean = {}
    for k in OPTION_FIELDS:
        if k not in values or values[k] is None:
            continue
        v = values[k]
        if k in INT_FIELDS and isinstance(v, float) and v == int(v):
            v = int(v)
        clean[k] = v
    defaults.with_(**clean)  # raises InvalidOptions with a readable message
    return clean


LOCKED = "The LLM backend, model and URL are fixed by this deployment; only the memory settings can be changed here."


def validated_llm(
    values: dict, default: LLMConfig | None = None, allow_change: bool = True, url_check=check_url
) -> dict | None:
    """The LLM choice of a settings form, validated. `default` is the deployer's LLM: its URL is
    trusted; any other URL must pass `url_check` (memory.url_guard.check_url).

    Locked: None (nothing to save) when the form shows the deployer's LLM, else InvalidOptions."""
    if not allow_change:
        same = default is not None and all(
            str(values.get(k) or "").strip() == str(getattr(default, k) or "") for k in ("backend", "model", "base_url")
        )
        if not same:
            raise InvalidOptions(LOCKED)
        return None
    chosen = _llm_fields(values)
    base_url = chosen["base_url"]
    if chosen["backend"] == "openai" and base_url and (default is None or base_url != default.base_url):
        try:
            url_check(base_url)
        except UnsafeURL as e:
            raise InvalidOptions(f"base URL refused: {e}.") from None
    return chosen


def _llm_fields(values: dict) -> dict:
    backend = str(values.get("backend") or "embedded")
    if backend not in BACKENDS:
        raise InvalidOptions(f"backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    model = clean_text(values.get("model") or "").strip()
    base_url = clean_text(values.get("base_url") or "").strip()
    if len(model) > 200:
        raise InvalidOptions("model name is longer than 200 characters")
    if base_url:
        u = urlparse(base_url)
        if u.scheme not in ("http", "https") or not u.netloc or len(base_url) > 300:
            raise InvalidOptions("base URL must look like http://host:port/v1 or https://host/v1")
    if backend == "openai" and not model:
        raise InvalidOptions("an OpenAI-compatible backend needs a model name")
    return {"backend": backend, "model": model, "base_url": base_url}


def llm_for(default: LLMConfig, prefs: dict, allow_change: bool = True) -> LLMConfig | None:
    """The LLM of one call: None (the process default) unless the user picked another one."""
    chosen = prefs.get("llm") if allow_change else None  # locked: a choice saved earlier is ignored
    if not chosen:
        return None
    backend, model, base_url = chosen.get("backend"), chosen.get("model", ""), chosen.get("base_url", "")
    if backend == default.backend and (
        backend == "embedded" or (model == default.model and base_url == default.base_url)
    ):
        return None
    if backend == "embedded":
        return replace(default, backend="embedded", api_key="")
    deployers = default.backend == "openai" and base_url == default.base_url
    # The key goes only to the deployer's endpoint; any other URL is checked at every request.
    return replace(
        default,
        backend="openai",
        model=model,
        base_url=base_url,
        api_key=default.api_key if deployers else "",
        guard_url=not deployers,
    )


def llm_public(default: LLMConfig, prefs: dict, allow_change: bool = True) -> dict:
    """What the settings form shows: backend, model, base URL, and the model actually in use; never a key."""
    chosen = (prefs.get("llm") if allow_change else None) or {}
    return {
        "backend": chosen.get("backend", default.backend),
        "model": chosen.get("model", default.model),
        "base_url": chosen.get("base_url", default.base_url),
        "in_use": (llm_for(default, prefs, allow_change) or default).describe(),
    }


# --- idle --------------------------------------------------------
# Report users idle for more than N days and, only when asked, delete them.
#
#     python -m sessions idle --days 90            # report only: nothing is changed
#     python -m sessions idle --days 90 --delete   # delete those users (sessions, messages, both memories)
#
# Nothing is ever deleted without --delete, and every deletion is printed. Users are
# shown by a short fingerprint of their id (the id itself is their credential). Run it
# with the same environment as the app (MEMORY_DATA_DIR, CHROMA_HOST, ...), best while
# the app is stopped (the embedded Chroma is not meant to be shared by two processes).

DAY = 86400.0


def fingerprint(user_id: str) -> str:
    """What the report prints for a user: the start of its key (the id is a credential)."""
    return user_key(user_id)[:12]


def last_activity(engine) -> list[tuple[str, float]]:
    """Every user with the time of their latest account, session, message or compare row, oldest first."""

    def latest(t):
        return sa.select(sa.func.coalesce(sa.func.max(t.c.created_at), 0)).where(t.c.user_id == U.c.user_id)

    with db.read(engine) as c:
        rows = c.execute(sa.select(U.c.user_id, U.c.created_at, *(latest(t).scalar_subquery() for t in (S, M, C))))
        out = [(r[0], max(float(x or 0) for x in r[1:])) for r in rows]
    return sorted(out, key=lambda x: (x[1], x[0]))


def idle_users(store, days: float, now: float | None = None) -> list[tuple[str, float]]:
    """(user id, last activity) of users whose latest activity is more than `days` days old."""
    cutoff = (time.time() if now is None else now) - days * DAY
    return [(u, t) for u, t in last_activity(store.engine) if t < cutoff]
