"""HTML of the side panels, built from plain dicts (traces, session rows).

Every text that a person typed or an LLM wrote goes through `esc` (html.escape)
before it reaches the page: gr.HTML inserts its value with innerHTML, where an
unescaped `<img onerror=...>` would run.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Callable
from html import escape

from sessions.lifecycle import human_date

STRATEGY_NAMES = {"theanine": "THEANINE", "secom": "SeCom", "none": "no memory"}


def esc(value) -> str:
    return escape("" if value is None else str(value), quote=True)


# An exception's class name inside a message ("OSError: ...", "(APIConnectionError: ...)"): people
# read what happened, not Python's name for it. A few names say something and become words.
_EXC_NAME = re.compile(
    r"\b(?:[a-z_][a-z0-9_]*\.)*([A-Z][A-Za-z0-9]*(?:Error|Exception|Exit|Interrupt|Timeout|Warning))\b:?[ \t]*"
)
_EXC_WORDS = {
    "APIConnectionError": "could not connect: ",
    "APITimeoutError": "timed out: ",
    "TimeoutError": "timed out: ",
    "RateLimitError": "rate limited: ",
    "AuthenticationError": "the key was refused: ",
    "PermissionDeniedError": "permission denied: ",
    "NotFoundError": "not found: ",
    "InternalServerError": "the server failed: ",
}
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):.*", re.S)


def plain(text) -> str:
    """A message as people read it: no traceback, no exception class names (memory/ and the LLM
    client write them into errors, notices and call details)."""
    t = _TRACEBACK.sub("", "" if text is None else str(text))
    t = _EXC_NAME.sub(lambda m: _EXC_WORDS.get(m.group(1), ""), t)
    t = re.sub(r"\(\s*[:;,]?\s*\)", "", t)
    t = re.sub(r":\s*:", ":", t)
    return " ".join(t.split())


def status_html(text: str = "", kind: str = "info") -> str:
    """A one-line status (kind: info | ok | error | busy); empty text hides it."""
    if not text:
        return ""
    icon = {"ok": "✓", "error": "⚠", "busy": "…"}.get(kind, "ℹ")
    # A word about the message box ("Type a message first.") goes away as soon as typing starts (layout.py).
    clears = ' data-clear-on-type="1"' if text.startswith("Type a message") else ""
    return f'<div class="mc-status mc-{esc(kind)}" role="status"{clears}>{icon} {esc(plain(text))}</div>'


def segment_title(segment: dict, n: int = 80) -> str:
    """A segment's title: its summary, or (a segment rebuilt after a deletion has none) its opening words."""
    title = " ".join(str(segment.get("summary") or "").split())
    if not title:
        words = " ".join(str(segment.get("text") or segment.get("key") or "").split())
        title = words if len(words) <= n else words[: n - 1] + "…"
    return title or "(untitled segment)"


def _key_label(segment: dict) -> str:
    return "compressed key" if segment.get("compressed", True) else "key (not compressed: the original text)"


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


def past_session_header_html(s) -> str:
    state = _state(s)
    return (
        f'<div class="mc-session mc-past-head" id="session-header" data-session="{esc(s.session_id)}">'
        f'<b>Session {s.label}</b> · dated {esc(human_date(s.date))} <span class="mc-muted">({esc(s.date)})'
        f"</span> · {s.n_messages} messages · {esc(state)} · <i>an earlier session, read only: click a reply "
        "for its trace; pick the open session in the list to go back.</i></div>"
    )


def _state(s, building: bool = False) -> str:
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
        left = f" · about {int(eta)} s left" if eta < 90 else f" · about {round(eta / 60)} min left"
    return (
        f'<div class="mc-job" id="{elem_id}" role="progressbar" aria-valuenow="{pct}" aria-valuemin="0" '
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


def _when(ts: float | None) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else ""


def _table(headers: list[str], rows: list[list], cls: str) -> str:
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{esc(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="mc-table {cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _score(x) -> str:
    try:
        return f"{float(x):.3f}"
    except (TypeError, ValueError):
        return "" if x is None else str(x)


def _seconds(x) -> str:
    try:
        return f"{float(x):.2f} s"
    except (TypeError, ValueError):
        return ""


def trace_html(trace: dict | None, title: str = "Why this reply", main: bool = True) -> str:
    """The "See why" panel of one reply: what was retrieved and what it cost.

    `main`: the panel beside the chat carries element ids (tests and links use them); the
    copies in the compare view carry the same names as data-part instead, so ids stay unique.
    """

    def at(name: str) -> str:
        return f' id="{name}"' if main else f' data-part="{name}"'

    if not trace:
        return (
            f'<div{at("why-panel")} class="mc-why mc-muted">Send a message, or click an earlier reply, '
            "to see what the memory gave the model.</div>"
        )
    strategy = trace.get("strategy", "")
    calls = trace.get("llm_calls") or []
    total = (trace.get("timings") or {}).get("total")
    out = [
        f'<div{at("why-panel")} class="mc-why" data-strategy="{esc(strategy)}">',
        f"<h4>{esc(title)} · {esc(STRATEGY_NAMES.get(strategy, strategy))} · {len(calls)} LLM calls · "
        f"{esc(trace.get('tokens', 0))} tokens{' · ' + _seconds(total) if total is not None else ''}</h4>",
    ]
    if trace.get("error"):
        out.append(f'<div class="mc-status mc-error">⚠ {esc(plain(trace["error"]))}</div>')
    out += [f'<div class="mc-notice">ℹ {esc(plain(n))}</div>' for n in trace.get("notices") or []]
    if strategy == "theanine":
        out += _theanine_parts(trace, at)
    elif strategy == "secom":
        out += _secom_parts(trace, at)
    else:
        out.append('<p class="mc-muted">No memory used: the baseline answers from this session only.</p>')
    out += _cost_parts(trace, at)
    out.append("</div>")
    return "".join(out)


def _theanine_parts(trace: dict, at: Callable[[str], str]) -> list[str]:
    """Retrieved memories, then each timeline raw and refined."""
    mems = trace.get("memories") or []
    out = [f"<section{at('why-memories')}><h5>Retrieved memories</h5>"]
    out.append(
        _table(
            ["memory", "event", "time", "score", "made"],
            [[m.get("id"), m.get("event"), m.get("time"), m.get("score"), m.get("built_by", "")] for m in mems],
            "mc-mem",
        )
        if mems
        else '<p class="mc-muted">No memory retrieved (nothing stored yet?).</p>'
    )
    out.append("</section>")
    raw = trace.get("timelines_raw") or []
    refined = trace.get("timelines_refined") or []
    offline = trace.get("memory_path") == "offline"
    not_refined = "<i>(not refined: no LLM step with the bundled model)</i>" if offline else "<i>(not refined)</i>"
    out.append(
        f"<section{at('why-timelines')}><h5>Timelines ({len(raw)} retrieved, "
        f"{'shown unrefined' if offline else 'raw → refined'})</h5>"
    )
    if raw:
        out.append('<ol class="mc-timelines">')
        for i, t in enumerate(raw):
            ref = refined[i] if i < len(refined) else ""
            out.append(
                f'<li class="timeline" data-anchor="{esc(t.get("anchor"))}">'
                f'<div class="mc-raw"><b>raw:</b> {esc(t.get("text"))}</div>'
                f'<div class="mc-refined"><b>refined:</b> {esc(ref) or not_refined}</div></li>'
            )
        out.append("</ol>")
    else:
        out.append('<p class="mc-muted">No timeline for this reply.</p>')
    out.append("</section>")
    return out


def _secom_parts(trace: dict, at: Callable[[str], str]) -> list[str]:
    """Retrieved segments: date, score, summary, the key retrieval read, the original text."""
    segs = trace.get("segments") or []
    out = [f"<section{at('why-segments')}><h5>Retrieved segments ({len(segs)})</h5>"]
    if not segs:
        out.append('<p class="mc-muted">No segment retrieved (nothing stored yet?).</p>')
    else:
        out.append('<ol class="mc-segments">')
        for s in segs:
            out.append(
                f'<li class="segment" data-id="{esc(s.get("id"))}"><div><b>{esc(s.get("date"))}</b> · '
                f"score {esc(_score(s.get('score')))} · {esc(segment_title(s))}</div>"
                f'<div class="mc-key"><b>{_key_label(s)}:</b> {esc(s.get("key"))}</div>'
                f'<details><summary>original text</summary><div class="mc-text">{esc(s.get("text"))}</div>'
                "</details></li>"
            )
        out.append("</ol>")
    out.append("</section>")
    return out


def _cost_parts(trace: dict, at: Callable[[str], str]) -> list[str]:
    """Every LLM call (purpose, tokens, time, status) and the step timings."""
    calls = trace.get("llm_calls") or []
    rows = [
        [
            c.get("purpose"),
            c.get("prompt_tokens"),
            c.get("completion_tokens"),
            _seconds(c.get("seconds")),
            c.get("status"),
            plain(c.get("detail")),
        ]
        for c in calls
    ]
    headers = ["purpose", "prompt tok", "completion tok", "time", "status", "detail"]
    out = [f"<section{at('why-cost')}><h5>LLM calls</h5>"]
    out.append(_table(headers, rows, "mc-calls") if calls else '<p class="mc-muted">No LLM call.</p>')
    out += [  # a reasoning model's thinking: never in the reply, here folded
        f'<details class="mc-reasoning"><summary>the model\'s reasoning ({esc(c.get("purpose"))})</summary>'
        f'<div class="mc-text">{esc(c["reasoning"])}</div></details>'
        for c in calls
        if c.get("reasoning")
    ]
    timings = trace.get("timings") or {}
    if timings:
        parts = " · ".join(f"{esc(k)} {_seconds(v)}" for k, v in timings.items())
        out.append(f'<div class="mc-timings">{parts}</div>')
    out.append("</section>")
    return out


def _recalled_summary(trace: dict | None) -> str:
    """One line on what a strategy recalled and spent: the fold's title under its reply."""
    if not trace:
        return "What it recalled"
    strategy = trace.get("strategy", "")
    if strategy == "theanine":
        n = len(trace.get("memories") or [])
        what = f"{n} memories, {len(trace.get('timelines_raw') or [])} timelines"
    elif strategy == "secom":
        what = f"{len(trace.get('segments') or [])} segments"
    else:
        what = "no memory"
    calls = trace.get("llm_calls") or []
    total = (trace.get("timings") or {}).get("total")
    cost = f"{len(calls)} LLM calls, {trace.get('tokens', 0)} tokens" + (f", {_seconds(total)}" if total else "")
    return f"What it recalled: {what} · {cost}"


def compare_card_html(strategy: str, result: dict) -> str:
    """One strategy's answer in a full-width card: the reply first, its memory folded under it."""
    name = STRATEGY_NAMES.get(strategy, strategy)
    state = "" if result.get("done") else f' <span class="mc-muted">({esc(result.get("status"))})</span>'
    reply = (
        f'<div class="mc-reply">{esc(result.get("text"))}</div>'
        if result.get("text")
        else f'<div class="mc-muted">{"(no reply)" if result.get("done") else "…"}</div>'
    )
    err = f'<div class="mc-status mc-error">⚠ {esc(plain(result["error"]))}</div>' if result.get("error") else ""
    trace = result.get("trace")
    body = ""
    if trace:
        body = (
            f'<details class="mc-recalled"><summary>{esc(_recalled_summary(trace))}</summary>'
            f"{trace_html(trace, title='Why', main=False)}</details>"
        )
    return (
        f'<section class="mc-compare" id="compare-{esc(strategy)}" data-strategy="{esc(strategy)}" '
        f'data-done="{1 if result.get("done") else 0}"><h4>{esc(name)}{state}</h4>{reply}{err}{body}</section>'
    )


def compare_html(message: str, results: dict, order, when: float | None = None, where: str = "") -> str:
    """The whole comparison, one card per strategy stacked at the page's width (one column on a phone).

    `results` as sessions.chat.Chat.compare yields it; `when`/`where`: when it ran and in which session,
    for a comparison shown again after a reload.
    """
    if not results:
        return ""
    words = " ".join((message or "").split())
    words = words if len(words) <= 160 else words[:159] + "…"
    done = all(r.get("done") for r in results.values())
    meta = " · ".join(x for x in (where, _when(when)) if x)
    head = (
        f'<h3>Compare: “{esc(words)}”</h3><div class="mc-muted">The same message answered by every strategy on '
        f"the same history; it is not added to the chat.{' · ' + esc(meta) if meta else ''}</div>"
    )
    cards = "".join(compare_card_html(s, results[s]) for s in order if s in results)
    return f'<div id="compare-panel" class="mc-compare-all" data-done="{1 if done else 0}">{head}{cards}</div>'
