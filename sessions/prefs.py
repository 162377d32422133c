"""Per-user preferences: the memory options and the LLM backend chosen in the settings panel.

Values are validated by `memory.settings.Options` (InvalidOptions carries a
message for people) before they are saved, so stored prefs are always valid.
API keys never come from a user: they stay in the process settings (env/.env)
and are attached only when the chosen endpoint is the one the key was
configured for, so typing another base URL cannot send the key elsewhere.

On a public deployment the choice is locked (memory.settings.llm_change_allowed):
saving another LLM is refused and saved choices are ignored. Where it is allowed, a
base URL other than the deployer's is checked by memory.url_guard: one that is or
resolves to a loopback, private, link-local (metadata) or otherwise non-public
address is refused when saved, and every request to it is checked again.
"""

from __future__ import annotations

from dataclasses import replace
from urllib.parse import urlparse

from memory.errors import InvalidOptions
from memory.settings import BACKENDS, LLMConfig, Options
from memory.text import clean_text
from memory.url_guard import UnsafeURL, check_url

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
