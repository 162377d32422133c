"""Compare: one message answered by every strategy, a card per strategy with its See why folded under it.

The See why of a card is drawn by ui.see_why.trace_html, which the caller passes (`why`): the handlers hold
both, and this module imports only the page's text (ui.html_text).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable, Mapping

from memory.dates import human_date
from memory.text import plural
from memory.trace_types import TraceDict
from sessions.db import CompareReply

from .html_text import STRATEGY_NAMES, esc, plain, seconds

TraceHtml = Callable[..., str]  # ui.see_why.trace_html: (trace, title=, main=, sessions=) -> See why's HTML


def _when(ts: float | None) -> str:
    """When something ran, in the page's one date style ("Thu 4 Dec 2026 17:33"), as HTML: the machine
    form in its title."""
    if not ts:
        return ""
    stamp = _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")
    return f'<span class="mc-date" title="{esc(stamp)}">ran {esc(human_date(stamp))}</span>'


def _recalled_summary(trace: TraceDict | None) -> str:
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
    cost = f"{plural(len(calls), 'LLM call')}, {trace.get('tokens', 0)} tokens" + (
        f", {seconds(total)}" if total else ""
    )
    return f"What it recalled: {what} · {cost}"


def compare_card_html(
    strategy: str, result: CompareReply, sessions: Mapping[str, str] | None = None, *, why: TraceHtml
) -> str:
    """One strategy's answer in a full-width card: the reply first, its memory (`why`) folded under it."""
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
            f"{why(trace, title='Why', main=False, sessions=sessions)}</details>"
        )
    return (
        f'<section class="mc-compare" id="compare-{esc(strategy)}" data-strategy="{esc(strategy)}" '
        f'data-done="{1 if result.get("done") else 0}"><h4>{esc(name)}{state}</h4>{reply}{err}{body}</section>'
    )


def compare_html(
    message: str,
    results: Mapping[str, CompareReply],
    order,
    when: float | None = None,
    where: str = "",
    sessions: Mapping[str, str] | None = None,
    *,
    why: TraceHtml,
) -> str:
    """The whole comparison, one card per strategy stacked at the page's width (one column on a phone).

    `results` as sessions.lifecycle.Chat.compare yields it; `when`/`where`: when it ran and in which session,
    for a comparison shown again after a reload; `sessions` as `trace_html` takes it; `why`: ui.see_why's
    trace_html.
    """
    if not results:
        return ""
    words = " ".join((message or "").split())
    words = words if len(words) <= 160 else words[:159] + "…"
    done = all(r.get("done") for r in results.values())
    meta = " · ".join(x for x in (esc(where), _when(when)) if x)
    head = (
        f'<h3>Compare: “{esc(words)}”</h3><div class="mc-muted">The same message answered by every strategy on '
        f"the same history; it is not added to the chat.{' · ' + meta if meta else ''}</div>"
    )
    cards = "".join(compare_card_html(s, results[s], sessions, why=why) for s in order if s in results)
    return f'<div id="compare-panel" class="mc-compare-all" data-done="{1 if done else 0}">{head}{cards}</div>'
