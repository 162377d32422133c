"""Settings → Agent keys: a person makes a key for an MCP client or a script, sees it once, lists and revokes them.

The keys themselves are sessions/agent_keys.py's; here is only what the page shows. A new key appears in
one block, once: any later action of the panel replaces that block, and the server keeps only its hash.
"""

from __future__ import annotations

import gradio as gr

from sessions import SessionService
from sessions.agent_keys import AgentKey, when
from sessions.service import user_message

from .events import FAST
from .html_text import esc
from .panels import status_html

INTRO = (
    "An agent key lets an MCP client (Claude Desktop, Cursor, ...) or a script read and write **your** memory "
    "through the API, without this browser's id. Name each key after the agent that holds it; it is shown "
    "once, and the server keeps only its hash. Revoke a key when the agent should stop. "
    "Setup: docs/mcp.md (README: *The memory as MCP tools*)."
)


def shown_once_html(key: str, name: str, mcp_url: str) -> str:
    """The new key, with the client setup that uses it: the only time the page shows it."""
    config = esc(
        '{"mcpServers": {"memory-chat": {"command": "npx", "args": ["mcp-remote", '
        f'"{mcp_url}", "--header", "Authorization: Bearer ${{MEMORY_KEY}}"], '
        f'"env": {{"MEMORY_KEY": "{key}"}}}}}}}}'
    )
    return (
        f'<div class="mc-status mc-ok" id="new-key-once"><b>Your key for “{esc(name)}”</b> (copy it now: it is '
        f'not shown again)<br><code class="mc-agent-key" style="user-select: all; overflow-wrap: anywhere">'
        f"{esc(key)}</code><br><span class='mc-muted'>An MCP client sends it as the header "
        f"<code>Authorization: Bearer &lt;key&gt;</code>; e.g. Claude Desktop through mcp-remote:</span>"
        f'<pre class="mc-raw">{config}</pre></div>'
    )


def list_html(keys: list[AgentKey]) -> str:
    if not keys:
        return '<p class="mc-muted" id="no-keys">No agent keys yet.</p>'
    rows = "".join(
        f"<tr><td data-label='Name'>{esc(k.name)}</td>"
        f"<td data-label='Key' style='width: auto'><code>{esc(k.prefix)}…</code></td>"
        f"<td data-label='Made'>{when(k.created_at)}</td><td data-label='Last use'>{when(k.last_used_at)}</td>"
        f"<td data-label='State'>{'revoked ' + when(k.revoked_at) if k.revoked_at else 'live'}</td></tr>"
        for k in keys
    )
    head = "".join(f"<th>{h}</th>" for h in ("Name", "Key", "Made", "Last use", "State"))
    return f'<table class="mc-table" id="key-table"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def choices(keys: list[AgentKey]) -> list[tuple[str, str]]:
    """The live keys, for the revoke menu: (name and prefix, prefix)."""
    return [(f"{k.name} ({k.prefix}…)", k.prefix) for k in keys if not k.revoked_at]


class KeyHandlers:
    """What the panel's events do; each returns (new key block, list, revoke menu, status)."""

    def __init__(self, service: SessionService):
        self.service, self.keys = service, service.agent_keys

    def _view(self, uid, shown: str = "", status: str = "") -> tuple:
        keys = self.keys.list(self.service.rooms.users.user(uid))
        menu = choices(keys)
        return shown, list_html(keys), gr.update(choices=menu, value=menu[0][1] if menu else None), status

    def _refused(self, e: Exception) -> tuple:
        return "", gr.skip(), gr.skip(), status_html(user_message(e), "error")

    def show(self, uid) -> tuple:
        try:
            return self._view(uid)
        except Exception as e:
            return self._refused(e)

    def make(self, uid, name: str, request: gr.Request | None = None) -> tuple:
        try:
            who = self.service.rooms.users.user(uid)  # the one check of this event: _view takes the key as it is
            key, row = self.keys.create(who, name)
        except Exception as e:
            return self._refused(e)
        base = str(getattr(request, "base_url", "") or "http://127.0.0.1:7860/").rstrip("/")
        return self._view(who, shown_once_html(key, row.name, base + "/gradio_api/mcp/"))

    def revoke(self, uid, prefix: str | None) -> tuple:
        try:
            who = self.service.rooms.users.user(uid)  # the one check of this event: _view takes the key as it is
            if not prefix:
                return self._view(who, status=status_html("Choose a key to revoke.", "error"))
            n = self.keys.revoke(who, prefix)
            said = "Revoked: agents holding that key are refused from now on." if n else "That key is revoked already."
            return self._view(who, status=status_html(said, "ok" if n else "info"))
        except Exception as e:
            return self._refused(e)


def panel(service: SessionService, uid: gr.BrowserState) -> None:
    """The "Agent keys" fold, placed where it is called (inside Settings), with its events."""
    h = KeyHandlers(service)
    with gr.Accordion("Agent keys (for MCP clients and scripts)", open=False, elem_id="agent-keys") as fold:
        gr.Markdown(INTRO)
        with gr.Row():
            name = gr.Textbox(label="Name (the agent that will hold it)", max_length=60, elem_id="key-name")
            make = gr.Button("Make a key", elem_id="make-key-btn")
        shown = gr.HTML(elem_id="new-key")
        listing = gr.HTML(elem_id="key-list")
        with gr.Row():
            which = gr.Dropdown(label="Key to revoke", choices=[], elem_id="revoke-select")
            revoke = gr.Button("Revoke", variant="stop", elem_id="revoke-btn")
        status = gr.HTML(elem_id="keys-status")
    out = [shown, listing, which, status]
    fold.expand(h.show, [uid], out, **FAST)
    make.click(h.make, [uid, name], out, **FAST)
    revoke.click(h.revoke, [uid, which], out, **FAST)
