"""The app's configuration: every environment variable the app reads beyond the memory library's is declared
on a field here (`name: int = env(VARIABLE, default)`), read once at start by `AppSettings.from_env` and
passed on; memory/settings.py declares the memory's own and the reader itself. These two modules are the
only ones that read the environment (tests/test_config_reads.py); this one lives in sessions/, the lowest
room the app's entry points (app.py, `python -m sessions`) and ui/ all import, and the memory library
never imports it (data flows ui -> sessions -> memory). docs/settings.md lists every variable.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from memory.settings import Settings, env, env_names, read_env

_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1", "[::1]")


@dataclass(frozen=True)
class Limits:
    """Per-user bounds of the session service (the build pool and import rate in sessions/work.py, the stored
    sessions and memories in the service); 0 turns a bound off."""

    imports_per_hour: int = env("MEMORY_MAX_IMPORTS_PER_HOUR", 5, lo=0)
    sessions: int = env("MEMORY_MAX_SESSIONS", 500, lo=0)
    memories: int = env("MEMORY_MAX_MEMORIES", 20000, lo=0)
    build_workers: int = env("MEMORY_BUILD_WORKERS", 1, lo=1, hi=64)  # threads that build memory
    build_nice: int = env("MEMORY_BUILD_NICE", 10, lo=0, hi=19)  # their CPU priority (Unix nice)


@dataclass(frozen=True)
class IdentityConfig:
    """Which user ids are served (sessions/users.py); MEMORY_NEW_USERS_PER_HOUR defaults to 10 where the app is
    public: a Space or a non-loopback listen address."""

    issued_only: bool = env("MEMORY_ISSUED_IDS_ONLY", False)  # the library default; the app's default is on
    new_users_per_hour: int = env("MEMORY_NEW_USERS_PER_HOUR", 0, lo=0)  # per client address; 0: no bound
    behind_proxy: bool = False  # on a Space: the client address is the first X-Forwarded-For hop


@dataclass(frozen=True)
class Serving:
    """How many events of each pool run at once (ui/fairness.py)."""

    concurrency: int = env("MEMORY_CONCURRENCY", 4, lo=1, hi=256)  # replies running at once
    # Waiting builds hold a Gradio worker thread each while they wait in BuildPool: bounded.
    build_waiting: int = env("MEMORY_BUILD_WAITING", 8, lo=1, hi=1024)


@dataclass(frozen=True)
class Page:
    """What the page draws (ui/)."""

    # Most recent memories sent to the graph page (ui/graph_view.py); retrieved and searched-for ones are
    # always added.
    graph_max_nodes: int = env("GRAPH_MAX_NODES", 1500, lo=1)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Page:
        """The page's settings alone, for ui/graph_view.py's defaults (app.py has refused a bad value first)."""
        return cls(**read_env(cls, os.environ if env is None else env))


def listens_publicly(server_name: str) -> bool:
    """Whether the app's listen address (GRADIO_SERVER_NAME) is reachable from other machines."""
    name = (server_name or "127.0.0.1").strip().lower()
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        return False
    try:
        return not ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return True  # a host name other than localhost (or 0.0.0.0 / ::): other machines can reach it


def llm_change_allowed(env: Mapping[str, str]) -> bool:
    """May visitors choose the LLM backend, model and URL? Locked on public deployments by default.

    MEMORY_LOCK_LLM=1 always locks; MEMORY_ALLOW_LLM_CHANGE=1 opts in; otherwise a Space
    (SPACE_ID) or a non-loopback listen address (GRADIO_SERVER_NAME) locks it.
    """
    if env.get("MEMORY_LOCK_LLM", "0") == "1":
        return False
    if env.get("MEMORY_ALLOW_LLM_CHANGE", "0") == "1":
        return True
    return not (env.get("SPACE_ID") or listens_publicly(env.get("GRADIO_SERVER_NAME", "")))


@dataclass(frozen=True)
class AppSettings:
    """Everything the app reads from the environment, once: the memory's settings and the app's own."""

    memory: Settings = field(default_factory=Settings)
    limits: Limits = field(default_factory=Limits)
    identity: IdentityConfig = field(default_factory=IdentityConfig)
    serving: Serving = field(default_factory=Serving)
    page: Page = field(default_factory=Page)
    allow_llm_change: bool = True  # visitors may pick backend/model/URL (llm_change_allowed)
    database_url: str = env("DATABASE_URL", "", secret=True)  # "" = MEMORY_DATA_DIR/sessions.sqlite3
    # The key of the browser-stored user id; "" = a random one kept in the data dir (app.browser_secret).
    browser_secret: str = env("MEMORY_BROWSER_SECRET", "", secret=True)
    # "Sign in with Hugging Face" as the identity (sessions/users.py), and the key of its ids.
    hf_login: bool = env("MEMORY_HF_LOGIN", False)
    hf_id_secret: str = env("MEMORY_HF_ID_SECRET", "", secret=True)
    # Gradio's MCP server (/gradio_api/mcp/) with the memory endpoints as tools (docs/mcp.md). When unset:
    # on where the app listens on loopback only, off on a Space or a public address.
    mcp: bool = env("MEMORY_MCP", True)
    # Every API and MCP call must bring an agent key (Settings → Agent keys; docs/mcp.md); /new_user is then
    # refused. Off: a key, or an id /new_user issued to an API client (a page's id is refused alone either way).
    require_agent_keys: bool = env("MEMORY_REQUIRE_AGENT_KEYS", False)

    # Read by from_env's rules (the deployment's reach, the LLM lock) or before it (load_dotenv_file), not
    # declared on a field. GRADIO_SERVER_PORT is read by Gradio's launch() alone.
    DERIVED: ClassVar[tuple[str, ...]] = (
        "MEMORY_DOTENV",
        "GRADIO_SERVER_NAME",
        "GRADIO_SERVER_PORT",
        "MEMORY_LOCK_LLM",
        "MEMORY_ALLOW_LLM_CHANGE",
    )

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> AppSettings:
        """InvalidSetting (which variable, its value, what is allowed) for a value the app cannot use."""
        e = dict(os.environ if env is None else env)
        public = bool(e.get("SPACE_ID")) or listens_publicly(e.get("GRADIO_SERVER_NAME", ""))
        identity = read_env(IdentityConfig, e)
        identity.setdefault("issued_only", True)
        identity.setdefault("new_users_per_hour", 10 if public else 0)
        own = read_env(cls, e)
        own.setdefault("mcp", not public)
        return cls(
            memory=Settings.from_env(e),
            limits=Limits(**read_env(Limits, e)),
            identity=IdentityConfig(**identity, behind_proxy=bool(e.get("SPACE_ID"))),
            serving=Serving(**read_env(Serving, e)),
            page=Page.from_env(e),
            allow_llm_change=llm_change_allowed(e),
            **own,
        )

    @classmethod
    def variables(cls) -> list[str]:
        """Every environment variable the app reads (docs/settings.md documents each one)."""
        return sorted({*env_names(cls), *cls.DERIVED, *Settings.variables()})


def load_dotenv_file() -> None:
    """The deployment's .env into the environment, before anything reads it; MEMORY_DOTENV=0 skips it (the
    tests set it). Called by the entry points only (app.py, `python -m sessions`)."""
    if os.environ.get("MEMORY_DOTENV", "1") != "0":
        from dotenv import load_dotenv

        load_dotenv()
