"""The users' room of the front door: who may be served (ids to keys, resolved once per event) and each
user's saved settings (the memory options and the chosen LLM)."""

from __future__ import annotations

from memory.dates import today
from memory.settings import LLMConfig, Options, Settings
from memory.url_guard import check_url

from . import users as _prefs
from .store import Store
from .users import Identity, UserKey, own_key


class UserRoom:
    def __init__(
        self, settings: Settings, store: Store, identity: Identity, allow_llm_change: bool, url_check=check_url
    ):
        self.settings, self.store, self.identity = settings, store, identity
        self.allow_llm_change = allow_llm_change  # may visitors choose the LLM (sessions.settings.llm_change_allowed)?
        self.url_check = url_check or check_url  # verdict on a user-supplied base URL (memory.url_guard)

    # --- identity: the edge of each event resolves its user here, once --------------------------------
    def user(self, user_id: object) -> UserKey:
        """The key the user is stored and served under (sessions/users.py); InvalidUserId for an id that
        may not be used. A UserKey passes as it is: the rooms take keys and never check them again."""
        return self.identity.check(user_id)

    def new_user(self, request=None) -> str:
        """Issue a new user id (a secret: whoever holds it reads that user's memory), rate-limited per client
        address (that of the Gradio `request`, or a plain address string). Its first session is born here."""
        client = request if isinstance(request, str) else self.identity.client_of(request)
        uid = self.identity.issue(client)
        self.store.open_session(UserKey.of(uid), today())  # the user's first session is born
        return uid

    def sign_in(self, account_id: str) -> str:
        """A signed-in account's user id (sessions/users.py, derived on the server), registered on
        its first sign-in; not rate-limited: one account is one user."""
        uid = self.identity.register(account_id)
        self.store.open_session(UserKey.of(uid), today())  # the user's first session is born
        return uid

    def is_known(self, user_id: object) -> bool:
        return self.identity.known(user_id)

    # --- settings of a user ----------------------------------------------------------------------------
    def prefs(self, key: UserKey) -> dict:
        return self.store.get_prefs(own_key(key))

    def options(self, key: UserKey, strategy: str | None = None) -> Options:
        return _prefs.options_for(self.settings.options, self.prefs(key), strategy)

    def llm(self, key: UserKey) -> LLMConfig | None:
        return _prefs.llm_for(self.settings.llm, self.prefs(key), self.allow_llm_change)

    def choices(self, key: UserKey, strategy: str | None = None) -> tuple[Options, LLMConfig | None]:
        """The options and the LLM of one reply, from one read of the user's settings."""
        p = self.prefs(key)
        return _prefs.options_for(self.settings.options, p, strategy), _prefs.llm_for(
            self.settings.llm, p, self.allow_llm_change
        )

    def llm_public(self, key: UserKey) -> dict:
        return _prefs.llm_public(self.settings.llm, self.prefs(key), self.allow_llm_change)

    def save_settings(self, key: UserKey, options: dict, llm: dict | None = None) -> Options:
        """Validate and save; raises InvalidOptions (message for people) and keeps the old values."""
        p = self.prefs(key)
        new = dict(p, options=dict(p.get("options") or {}, **_prefs.validated_options(self.settings.options, options)))
        if llm is not None:
            chosen = _prefs.validated_llm(llm, self.settings.llm, self.allow_llm_change, self.url_check)
            if chosen is not None:
                new["llm"] = chosen
        self.store.set_prefs(key, new)
        return _prefs.options_for(self.settings.options, new)

    def set_strategy(self, key: UserKey, strategy: str) -> Options:
        p = self.prefs(key)
        opts = _prefs.options_for(self.settings.options, p, strategy)  # raises InvalidOptions on an unknown one
        self.store.set_prefs(key, dict(p, strategy=strategy))
        return opts
