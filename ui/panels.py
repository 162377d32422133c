"""The page's small panels: the status line, the LLM banner and intro, session headers and sidebar
labels, and the progress bars. See why is ui.see_why, Compare ui.compare_view.

Every text goes through `esc` (ui.html_text) before it reaches the page.
"""

from __future__ import annotations

from memory.dates import human_date
from sessions.db import SessionRow

from .html_text import STRATEGY_NAMES, esc, plain


def status_html(text: str = "", kind: str = "info") -> str:
    """A one-line status (kind: info | ok | error | busy); empty text hides it."""
    if not text:
        return ""
    icon = {"ok": "✓", "error": "⚠", "busy": "…"}.get(kind, "ℹ")
    # A word about the message box ("Type a message first.") goes away as soon as typing starts (layout.py).
    clears = ' data-clear-on-type="1"' if text.startswith("Type a message") else ""
    return f'<div class="mc-status mc-{esc(kind)}" role="status"{clears}>{icon} {esc(plain(text))}</div>'


def model_in_use(description: str, options) -> str:
    """The Settings line naming the model replies come from and the memory each reply reads."""
    return (
        f"In use: {description}. Memory per reply: {options.bundled_budget:,} tokens on a bundled model, "
        f"{options.budget:,} on an endpoint (`MEMORY_BUDGET_BUNDLED`, `MEMORY_BUDGET`: docs/speed.md)."
    )


def banner_html(llm_description: str, tiny_default: bool, locked: bool = False) -> str:
    """One short line (fits a phone); how to connect a real model is behind a disclosure."""
    parts = [f'<div class="mc-banner" id="llm-banner"><b>LLM:</b> {esc(llm_description)}']
    if tiny_default:
        parts.append(
            ' · <span class="mc-warn">tiny offline model: replies will be poor; '
            "memory is built without LLM steps.</span> "
            '<details class="mc-more"><summary>Connect a real model</summary><div>'
            "Set an OpenAI-compatible model in <code>.env</code> (or the environment) and restart: "
            "<code>OPENAI_API_KEY=...</code> for OpenAI; Ollama with "
            "<code>OPENAI_BASE_URL=http://localhost:11434/v1</code> and <code>LLM_MODEL=llama3.1</code>; "
            "vLLM with <code>OPENAI_BASE_URL=http://host:8000/v1</code>; the Hugging Face router with "
            "<code>OPENAI_BASE_URL=https://router.huggingface.co/v1</code> and <code>HF_TOKEN=...</code>."
            + ("" if locked else " A model without a key (e.g. Ollama) can also be chosen under Settings.")
            + " The embedded model (Gemma 3 270M, a base model) proves the memory pipeline offline.</div></details>"
        )
    parts.append("</div>")
    return "".join(parts)


INTRO = (
    '<div class="mc-intro" id="intro">Chat across sessions days apart; the agent remembers with '
    "<b>THEANINE</b> (memories linked in a graph by time and cause, recalled as timelines) or "
    "<b>SeCom</b> (each session cut into topic segments, recalled by search). <b>See why</b> shows what "
    "it recalled.</div>"
)


def session_header_html(seq: int | str, date: str, n_messages: int, strategy: str) -> str:
    return (
        f'<div class="mc-session" id="session-header"><b>Session {seq}</b> · dated {esc(human_date(date))} '
        f'<span class="mc-muted">({esc(date)})</span> · {n_messages} messages · memory: '
        f"{esc(STRATEGY_NAMES.get(strategy, strategy))}</div>"
    )


def past_session_header_html(s: SessionRow) -> str:
    state = _state(s)
    return (
        f'<div class="mc-session mc-past-head" id="session-header" data-session="{esc(s.session_id)}">'
        f'<b>Session {s.label}</b> · dated {esc(human_date(s.date))} <span class="mc-muted">({esc(s.date)})'
        f"</span> · {s.n_messages} messages · {esc(state)} · <i>an earlier session, read only: click a reply "
        "for its trace; pick the open session in the list to go back.</i></div>"
    )


def _state(s: SessionRow, building: bool = False) -> str:
    if s.status == "open":
        return "open now"
    if s.status == "closing":
        if s.close_error and not building:
            return "memory build failed; retried at the next End session"
        return "memory being built ⏳"
    if ((s.report or {}).get("trace") or {}).get("memory_path") == "offline":
        return "memory built ✓ (without an LLM)"
    return "memory built ✓"


def session_choice_label(s, building: bool = False) -> str:
    """A sidebar entry (shown as text by Gradio): number, date, message count, memory status."""
    src = " · imported" if s.source == "import" else ""
    mark = "▶ " if s.status == "open" else ""
    return f"{mark}Session {s.label} · {human_date(s.date)} · {s.n_messages} msgs · {_state(s, building)}{src}"


def progress_html(elem_id: str, title: str, fraction: float, eta: float | None, text: str, note: str) -> str:
    """A progress bar with its percentage, an estimate of the time left, what is happening and a note."""
    pct = round(fraction * 100)
    left = ""
    if eta is not None:
        # In steps of 5 s (a minute above 90 s), so a poll every second does not flicker the line.
        left = f" · about {max(5, 5 * round(eta / 5))} s left" if eta < 90 else f" · about {round(eta / 60)} min left"
    eta_attr = "" if eta is None else f' data-eta="{round(eta)}"'
    return (
        f'<div class="mc-job" id="{elem_id}"{eta_attr} role="progressbar" aria-valuenow="{pct}" aria-valuemin="0" '
        f'aria-valuemax="100"><div class="mc-bar"><span style="width:{pct}%"></span></div>'
        f"<div><b>{esc(title)}: {pct}%</b>{esc(left)} · {esc(text)}</div>"
        f'<div class="mc-muted">{esc(note)}</div></div>'
    )


def job_html(job) -> str:
    """The one progress bar of the page, with an estimate; empty when nothing runs."""
    if job is None:
        return ""
    note = "You can keep chatting meanwhile; the graph and the sessions update when it is done."
    return progress_html("job-progress", job.title, job.fraction, job.eta(), job.text, note)
