"""See why's "Did the reply use the memory?": the memory line the reply's words came from (or "no
memory used"), and a warning when the reply names a value a later memory replaced.

The trace records it (memory.answer_use, at the end of each reply); this draws it, every text escaped.
ui.see_why calls it with its own way of naming memories and writing dates (passed in: this module does
not import ui.see_why, which imports it).
"""

from __future__ import annotations

from collections.abc import Callable

from memory.answer_use import marked
from memory.text import plural
from memory.trace_types import AnswerSource, StaleValue, TraceDict

from .html_text import esc

Name = Callable[[object, object], str]  # (memory id, session id) -> its name as the sidebar numbers sessions
DateHtml = Callable[[object], str]  # a stored date -> HTML in the page's date style


STYLE = (
    "<style>"
    ".mc-answer q{quotes:'“' '”'}"
    ".mc-answer mark{background:#fff1a8;padding:0 1px}"
    ".mc-answer .mc-also{font-size:.9em}"
    "</style>"
)


def _line_html(text: str, shared: list[str]) -> str:
    """The memory line with the words it shares with the reply marked."""
    return "".join(f"<mark>{esc(p)}</mark>" if hit else esc(p) for p, hit in marked(text, shared))


def _name(src: AnswerSource, name_of: Name) -> str:
    name = esc(name_of(src.get("id"), src.get("session_id")))
    if src.get("kind") == "segment":
        return f"a turn of the segment from {name}"
    return name


def _source_html(src: AnswerSource, name_of: Name, date_html: DateHtml) -> str:
    """One source: where it is from, the line with the shared words marked, which words, the longest run."""
    words = ", ".join(f"<b>{esc(w)}</b>" for w in src.get("shared") or [])
    span = src.get("span") or ""
    run = f"; the phrase they share: “{esc(span)}”" if span else ""
    old = src.get("superseded_by")
    stale = ' <span class="mc-warn">(a memory that a later one replaced)</span>' if old else ""
    when = f" ({date_html(src.get('time'))})" if src.get("time") else ""
    return (
        f'<span class="mc-src" data-id="{esc(src.get("id"))}">{_name(src, name_of)}{when}{stale}: '
        f"<q>{_line_html(str(src.get('text') or ''), list(src.get('shared') or []))}</q> — shares {words}{run}.</span>"
    )


def _stale_html(s: StaleValue, name_of: Name, date_html: DateHtml) -> str:
    old, cur = s.get("old") or {}, s.get("current") or {}
    named = ", ".join(f"“{esc(w)}”" for w in s.get("named") or [])
    current = ", ".join(f"“{esc(w)}”" for w in s.get("current_values") or [])
    return (
        f'<div class="mc-status mc-error mc-stale" role="note" data-old="{esc(old.get("id"))}">⚠ The reply names '
        f"{named} from a replaced memory: <q>{esc(_sentence(old.get('event')))}</q> "
        f"({esc(name_of(old.get('id'), None))}, {date_html(old.get('time'))}) was replaced on "
        f"{date_html(cur.get('time'))} by <q>{esc(_sentence(cur.get('event')))}</q>. The reply does not name "
        f"{current}: if that memory reached it (below), the model chose the old value.</div>"
    )


def _sentence(event) -> str:
    return str(event or "").strip().rstrip(".")


def answer_use_parts(trace: TraceDict, at: Callable[[str], str], name_of: Name, date_html: DateHtml) -> list[str]:
    """The section, or nothing for a trace without the check (no memory, an error, an older trace).
    `at(part)`: the section's id attribute (ui.see_why.trace_html's)."""
    use = trace.get("answer_use") or {}
    if not use:
        return []
    sources = [s for s in use.get("sources") or [] if isinstance(s, dict)]
    stale = [s for s in use.get("stale") or [] if isinstance(s, dict)]
    out = [
        STYLE,
        f'<section{at("why-answer")} class="mc-answer" data-used="{int(bool(sources))}" data-stale="{len(stale)}">'
        "<h5>Did the reply use the memory?</h5>",
    ]
    out += [_stale_html(s, name_of, date_html) for s in stale]
    checked = plural(int(use.get("checked") or 0), "memory line")
    if sources:
        out.append(f"<p>Its words came from {_source_html(sources[0], name_of, date_html)}</p>")
        if len(sources) > 1:
            also = "".join(f"<li>{_source_html(s, name_of, date_html)}</li>" for s in sources[1:])
            out.append(f'<div class="mc-also">Also sharing words with it:<ul>{also}</ul></div>')
    else:
        out.append(
            f'<p class="mc-unused"><b>No memory used:</b> none of the {checked} that reached the reply shares a '
            "name, figure or date with it, a phrase of two content words, or three content words. If the answer "
            "was among them (below), the model did not use it; if not, the memory did not find it.</p>"
        )
    out.append(
        f'<p class="mc-muted">Compared by plain word overlap over the {checked} the reply read; words of your '
        "message and earlier turns do not count.</p></section>"
    )
    return out
