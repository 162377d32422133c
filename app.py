"""Run the memory chat app: `python app.py`, then open http://127.0.0.1:7860.

Configured by environment variables (or .env), read once, at start, by `AppSettings.from_env`
(sessions/settings.py) and listed in docs/settings.md. The memory's own settings (memory.settings.Settings:
the LLM, where memory lives, the strategies' options) are passed to the memory library; the app's (how users
share the server, the per-user bounds, which ids are served, the database, the browser secret,
sign-in, MCP) are passed to the session service and the page. Where it listens (GRADIO_SERVER_NAME /
GRADIO_SERVER_PORT) is read by Gradio's launch().
"""

from __future__ import annotations

import importlib.util
import logging
import os
import secrets
import threading
from pathlib import Path

from memory.errors import InvalidSetting
from memory.files import remove_scratch_dirs_on_sigterm

# The app's settings live in sessions/settings.py (`python -m sessions` reads them too); named here as well.
from sessions.settings import AppSettings, listens_publicly, llm_change_allowed, load_dotenv_file

__all__ = ["AppSettings", "build", "listens_publicly", "llm_change_allowed", "main"]

log = logging.getLogger("app")


def load_env() -> None:
    # Before anything reads the environment; MEMORY_DOTENV=0 skips .env (the tests use it).
    load_dotenv_file()
    os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    # Memory builds compute on their own low-priority thread (sessions.work.BuildPool): no tokenizers pool
    # that would run them at full priority.
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def kept_secret(path: Path) -> str:
    """A random secret made once and kept in the data dir (mode 0600)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(32))
    return path.read_text().strip()


def browser_secret(settings: AppSettings) -> str:
    """The key that encrypts each browser's user id; stable, so a restart keeps every user's history."""
    return settings.browser_secret or kept_secret(Path(settings.memory.data_dir) / "browser_state.secret")


def accounts(settings: AppSettings):
    """With MEMORY_HF_LOGIN=1: the signed-in accounts' ids, keyed by MEMORY_HF_ID_SECRET (or, when unset,
    a secret kept in the data dir: losing the data dir then changes every account's id)."""
    if not settings.hf_login:
        return None
    from gradio import oauth, utils

    from sessions.users import Accounts

    if utils.get_space() is None or not oauth.OAUTH_CLIENT_ID:
        # Gradio's OAuth needs a Space with `hf_oauth: true` (off one it would ask this machine's HF login).
        log.warning("MEMORY_HF_LOGIN=1 needs a Space with hf_oauth: true in its README; sign-in is off")
        return None

    if not settings.hf_id_secret:
        log.warning("MEMORY_HF_LOGIN=1 without MEMORY_HF_ID_SECRET: account ids are keyed by a secret in the data dir")
    return Accounts(settings.hf_id_secret or kept_secret(Path(settings.memory.data_dir) / "hf_login.secret"))


def build(settings: AppSettings | None = None):
    from memory.agent import MemoryAgent
    from memory.locks import UserLocks
    from sessions import open_service
    from ui import build_demo

    settings = settings or AppSettings.from_env()
    memory = settings.memory
    log.info("data dir %s; %s", memory.data_dir, memory.llm.describe())
    locks = UserLocks()  # the one owner of per-user exclusion, for the agent and the service
    agent = MemoryAgent.from_settings(memory, locks=locks)
    service = open_service(
        memory,
        agent,
        locks=locks,
        limits=settings.limits,
        identity=settings.identity,
        allow_llm_change=settings.allow_llm_change,
        database_url=settings.database_url,
    )
    if service.store.postgres and not memory.chroma_host:
        log.warning(
            "DATABASE_URL is set but CHROMA_HOST is not: vectors stay in this process's data dir, "
            "so other replicas will not find this replica's memories (README: Scale out)"
        )
    # Sessions whose memory build was cut short (crash, LLM outage) are built again in the background.
    threading.Thread(target=service.rooms.sessions.recover_pending_closes, name="recover-closes", daemon=True).start()
    if not settings.allow_llm_change:
        log.info("LLM choice locked for visitors (public deployment; MEMORY_ALLOW_LLM_CHANGE=1 unlocks it)")
    demo = build_demo(
        service,
        memory,
        browser_secret(settings),
        allow_llm_change=settings.allow_llm_change,
        accounts=accounts(settings),
        serving=settings.serving,
        require_agent_keys=settings.require_agent_keys,
    )
    # Replies share one pool (ui.fairness); memory builds wait in the service's own build pool.
    demo.queue(default_concurrency_limit=settings.serving.concurrency)
    return demo


class RedactSecrets(logging.Filter):
    """Replaces the API key (registered by the session service) in every log line and traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        from memory.text import redact

        msg = record.getMessage()
        clean = redact(msg)
        if clean != msg:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def mcp_server(settings: AppSettings) -> bool:
    """Whether to serve Gradio's MCP server (MEMORY_MCP; by default only where the app listens on loopback)."""
    if not settings.mcp:
        log.info("MCP server off (MEMORY_MCP=1 turns it on; docs/mcp.md)")
        return False
    if importlib.util.find_spec("mcp") is None:  # an environment installed before gradio[mcp] was required
        log.warning("MCP server off: the mcp package is missing (pip install -r requirements.txt)")
        return False
    return True


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactSecrets())
    logging.getLogger("mcp").setLevel(logging.WARNING)  # the MCP server logs every request at INFO
    load_env()
    remove_scratch_dirs_on_sigterm()  # a server stopped by SIGTERM leaves no scratch folder behind
    try:  # before ui/ is imported: it takes its defaults (GRAPH_MAX_NODES) from the checked environment
        settings = AppSettings.from_env()
        demo = build(settings)
    except InvalidSetting as e:  # a bad environment variable: say which, without a traceback
        raise SystemExit(f"Cannot start: {e} (docs/settings.md lists every setting).") from None
    from ui import launch_kwargs
    from ui.api import mcp_lifespan

    # GRADIO_SERVER_NAME / GRADIO_SERVER_PORT are read by launch(); the default is 127.0.0.1:7860.
    # The MCP server (http://127.0.0.1:7860/gradio_api/mcp/) offers the memory endpoints only (ui.api.MCP_TOOLS);
    # mcp_server is always given, so Gradio's own GRADIO_MCP_SERVER variable is not read.
    demo.launch(**launch_kwargs(), mcp_server=mcp_server(settings), app_kwargs={"lifespan": mcp_lifespan(demo)})


if __name__ == "__main__":
    main()
