"""Signed-in accounts as user ids: "Sign in with Hugging Face" (MEMORY_HF_LOGIN=1, on a Space).

A signed-in account's user id is derived on the server: a keyed hash (HMAC-SHA256) of the account's
stable id with a secret from the environment (MEMORY_HF_ID_SECRET). So the same account gets the same
memory in every browser, no id shows the username, and nobody without the secret can compute an
account's id. The stable id is the OpenID subject (`sub`), which stays when an account is renamed;
the username only when a profile has no subject.

Account ids start with ACCOUNT_PREFIX, so a page that loads without a signed-in profile (the person
signed out) drops its stored copy of an account id instead of serving it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping

from memory.errors import InvalidSetting

from .ids import USER_ID_RE

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
