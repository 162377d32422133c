"""See why: the HTML of one reply's trace (what was retrieved, whether the reply used it, how it reached the
reply, what it cost).

Every text that a person typed or an LLM wrote goes through `esc` (ui.html_text) before it reaches
the page.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from memory.answer_use import marked
from memory.text import plural
from memory.trace_types import AnswerSource, ChainMemory, RetrievedMemory, Segment, StaleValue, Timeline, TraceDict

from .html_text import (
    ANSWER_STYLE,
    CHAIN_CSS,
    RELATIONS,
    STRATEGY_NAMES,
    date_html,
    esc,
    memory_name,
    notice_html,
    num,
    plain,
    score_text,
    seconds,
    segment_title,
    table_html,
    timeline_pieces,
)


def _key_label(segment: Segment) -> str:
    return "compressed key" if segment.get("compressed", True) else "key (not compressed: the original text)"


def trace_html(
    trace: TraceDict | None, title: str = "Why this reply", main: bool = True, sessions: Mapping[str, str] | None = None
) -> str:
    """The "See why" panel of one reply: what was retrieved and what it cost.

    `main`: the panel beside the chat carries element ids (tests and links use them); the
    copies in the compare view carry the same names as data-part instead, so ids stay unique.
    `sessions`: {session id: its number in the sidebar} (`session_numbers`), to name memories as the
    sidebar numbers sessions; without it a memory shows its stored id.
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
        f"<h4>{esc(title)} · {esc(STRATEGY_NAMES.get(strategy, strategy))} · {plural(len(calls), 'LLM call')} · "
        f"{esc(trace.get('tokens', 0))} tokens{' · ' + seconds(total) if total is not None else ''}</h4>",
    ]
    if trace.get("error"):
        out.append(f'<div class="mc-status mc-error">⚠ {esc(plain(trace["error"]))}</div>')
    out += [notice_html(n) for n in trace.get("notices") or []]
    out += answer_use_parts(trace, at, lambda mid, sid: memory_name(mid, sid, sessions))
    if strategy == "theanine":
        out += _theanine_parts(trace, at, sessions)
    elif strategy == "secom":
        out += _secom_parts(trace, at)
    else:
        out.append('<p class="mc-muted">No memory used: the baseline answers from this session only.</p>')
    out += _cost_parts(trace, at)
    out.append("</div>")
    return "".join(out)


# --- "Did the reply use the memory?" -----------------------------------------------------------------
# The memory line the reply's words came from (or "no memory used"), and a warning when the reply names a
# value a later memory replaced. The trace records it (memory.answer_use, at the end of each reply); this
# draws it, every text escaped.
Name = Callable[[object, object], str]  # (memory id, session id) -> its name as the sidebar numbers sessions


def _line_html(text: str, shared: list[str]) -> str:
    """The memory line with the words it shares with the reply marked."""
    return "".join(f"<mark>{esc(p)}</mark>" if hit else esc(p) for p, hit in marked(text, shared))


def _name(src: AnswerSource, name_of: Name) -> str:
    name = esc(name_of(src.get("id"), src.get("session_id")))
    if src.get("kind") == "segment":
        return f"a turn of the segment from {name}"
    return name


def _source_html(src: AnswerSource, name_of: Name) -> str:
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


def _stale_html(s: StaleValue, name_of: Name) -> str:
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


def answer_use_parts(trace: TraceDict, at: Callable[[str], str], name_of: Name) -> list[str]:
    """See why's "Did the reply use the memory?", or nothing for a trace without the check (no memory, an
    error, an older trace). `at(part)`: the section's id attribute (trace_html's); `name_of`: how
    trace_html names memories."""
    use = trace.get("answer_use") or {}
    if not use:
        return []
    sources = [s for s in use.get("sources") or [] if isinstance(s, dict)]
    stale = [s for s in use.get("stale") or [] if isinstance(s, dict)]
    out = [
        ANSWER_STYLE,
        f'<section{at("why-answer")} class="mc-answer" data-used="{int(bool(sources))}" data-stale="{len(stale)}">'
        "<h5>Did the reply use the memory?</h5>",
    ]
    out += [_stale_html(s, name_of) for s in stale]
    checked = plural(int(use.get("checked") or 0), "memory line")
    if sources:
        out.append(f"<p>Its words came from {_source_html(sources[0], name_of)}</p>")
        if len(sources) > 1:
            also = "".join(f"<li>{_source_html(s, name_of)}</li>" for s in sources[1:])
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


def _theanine_parts(trace: TraceDict, at: Callable[[str], str], sessions: Mapping[str, str] | None = None) -> list[str]:
    """Retrieved memories, then each timeline drawn as a chain beside its refined text."""
    mems = trace.get("memories") or []
    out = [f"<section{at('why-memories')}><h5>Retrieved memories</h5>"]
    out.append(
        _memory_table(mems, sessions) if mems else '<p class="mc-muted">No memory retrieved (nothing stored yet?).</p>'
    )
    changed = [m for m in mems if m.get("superseded_by")]
    if changed:  # a later memory replaced these: the reply was given the current one first
        out.append('<p class="mc-superseded"><b>Superseded:</b></p><ul class="mc-superseded">')
        for m in changed:
            by = m["superseded_by"]
            out.append(
                f"<li>{esc(m.get('event'))} <i>({date_html(m.get('time'))})</i> was replaced on "
                f"{date_html(by.get('time'))} by <b>{esc(str(by.get('event') or '').rstrip('.'))}</b>. The reply "
                "reads the current memory first, this one as history.</li>"
            )
        out.append("</ul>")
    out.append("</section>")
    raw = [t if isinstance(t, dict) else {"text": t} for t in trace.get("timelines_raw") or []]
    offline = trace.get("memory_path") == "offline"
    out.append(
        f"<section{at('why-timelines')}><h5>Timelines ({len(raw)} retrieved, "
        f"{'shown unrefined' if offline else 'raw → refined'})</h5>"
    )
    if raw:
        known = _known_memories(mems)
        out.append(CHAIN_CSS + '<ol class="mc-timelines">')
        out += [_timeline_html(trace, raw, i, known, sessions) for i in range(len(raw))]
        out.append("</ol>")
    else:
        out.append('<p class="mc-muted">No timeline for this reply.</p>')
    out.append("</section>")
    return out


def _known_memories(mems: list[RetrievedMemory]) -> dict[str, RetrievedMemory]:
    """The memories a trace names, by id: the retrieved ones and those that superseded them."""
    known: dict[str, RetrievedMemory] = {}
    for m in mems:
        by = m.get("superseded_by")
        if isinstance(by, dict) and by.get("id"):
            known.setdefault(str(by["id"]), RetrievedMemory(**by))
        if m.get("id"):
            known[str(m["id"])] = m
    return known


def _memory_table(mems: list[RetrievedMemory], sessions: Mapping[str, str] | None) -> str:
    """The retrieved memories, named and dated as the sidebar does (the stored id in the name's title),
    scores rounded; how they were made is said once above the table when it is the same for all."""
    made = {str(m.get("built_by") or "") for m in mems}
    once = len(made) == 1
    cols = ("memory", "event", "date", "score") + (() if once else ("made",))

    def cells(m: RetrievedMemory) -> list[str]:
        out = [
            f'<td data-label="memory" title="{esc(m.get("id"))}">'
            f"{esc(memory_name(m.get('id'), m.get('session_id'), sessions))}</td>",
            f'<td data-label="event">{esc(m.get("event"))}</td>',
            f'<td data-label="date">{date_html(m.get("time"))}</td>',
            f'<td data-label="score">{esc(score_text(m.get("score")))}</td>',
        ]
        return out if once else [*out, f'<td data-label="made">{esc(m.get("built_by", ""))}</td>']

    rows = "".join("<tr>" + "".join(cells(m)) + "</tr>" for m in mems)
    head = "".join(f"<th>{h}</th>" for h in cols)
    note = f'<p class="mc-muted mc-made">Made: {esc(next(iter(made)))}</p>' if once and mems and made != {""} else ""
    return f'{note}<table class="mc-table mc-mem"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'


def _chain(t: Timeline, known: Mapping[str, RetrievedMemory]) -> list[ChainMemory]:
    """A timeline's memories root to leaf, each once: {id, event, time, session_id, relation (from the
    one before), used (reached the reply), anchor (the retrieved memory), history (an earlier version of
    the anchor given with it)}. From the trace's "chain" when it has one; else read from its text (a
    trace stored before chains), every memory of which reached the reply."""
    nodes = [str(x) for x in t.get("nodes") or []]
    anchor = str(t.get("anchor") or "")
    chain = [c for c in t.get("chain") or [] if isinstance(c, dict)]
    if chain:
        out: list[ChainMemory] = []
        seen: set[str] = set()
        for c in chain:
            cid = str(c.get("id") or "")
            if cid in seen:
                continue
            seen.add(cid)
            out.append(
                {
                    "id": cid,
                    "event": c.get("event", ""),
                    "time": c.get("time", ""),
                    "session_id": c.get("session_id") or "",
                    "relation": str(c.get("relation") or ""),
                    "used": bool(c.get("used", cid in nodes)),
                    "anchor": bool(c.get("anchor", cid == anchor)),
                    "history": bool(c.get("history")),
                }
            )
        # Memories given with the timeline but not on its path: earlier versions of the anchor (history).
        extra = [n for n in nodes if n not in seen]
        told = [p for p in timeline_pieces(str(t.get("text") or "")) if p["tag"] in ("history", "before")]
        for j, nid in enumerate(extra):
            m = known.get(nid) or (told[j] if j < len(told) else {"event": nid})
            out.append(
                {
                    "id": nid,
                    "event": m.get("event") or "",
                    "time": m.get("time") or "",
                    "session_id": m.get("session_id") or "",
                    "relation": "",
                    "used": True,
                    "anchor": False,
                    "history": True,
                }
            )
        return out
    pieces = timeline_pieces(str(t.get("text") or ""))
    head = pieces[0] if pieces and pieces[0]["tag"] == "now" else None
    run = pieces[1:] if head else pieces
    keys = list(nodes)
    if head is not None:  # "now: [X] ... [X]": the current fact said first, then its timeline; X shown once
        at = next((i for i, p in enumerate(run) if p["body"] == head["body"]), None)
        keys = nodes[1:]
        if at is None:
            run = [dict(head, tag=""), *run]
            at = 0
        keys.insert(at, nodes[0] if nodes else anchor)
    ids = keys if len(keys) == len(run) else [""] * len(run)
    star = (known.get(anchor) or {}).get("event")
    return [
        {
            "id": mid,
            "event": p["event"],
            "time": p["time"],
            "session_id": (known.get(mid) or {}).get("session_id") or "",
            "relation": p["rel"],
            "used": True,
            "anchor": mid == anchor if mid else (head is not None and p["body"] == head["body"]) or p["event"] == star,
            "history": p["tag"] in ("history", "before"),
        }
        for p, mid in zip(run, ids, strict=True)
    ]


def _memory_box(c: ChainMemory, sessions: Mapping[str, str] | None, elsewhere: dict[str, int], inner: str = "") -> str:
    """One memory of a chain: its name and date, its event; starred when retrieved, dimmed when it did
    not reach the reply (with why); `inner` inside it (the earlier versions a retrieved memory replaced)."""
    cls = "mc-node " + ("mc-used" if c["used"] else "mc-unused")
    cls += " mc-anchor" if c["anchor"] else ""
    cls += " mc-history" if c["history"] else ""
    star = '<span class="mc-star" title="retrieved for this reply">★</span> ' if c["anchor"] else ""
    meta = [esc(memory_name(c["id"], c["session_id"], sessions))] if c["id"] else []
    if c["time"]:
        meta.append(date_html(c["time"]))
    if c["history"]:
        meta.append("an earlier version, given as history")
    note = ""
    if not c["used"]:
        j = elsewhere.get(c["id"])
        why = f"in the reply with timeline {j + 1}" if j is not None else "not in the reply: budget"
        note = f'<div class="mc-cut">{why}</div>'
    return (
        f'<div class="{cls}" data-id="{esc(c["id"])}" data-used="{int(c["used"])}" data-anchor="{int(c["anchor"])}">'
        f'<div class="mc-meta">{star}{" · ".join(meta)}</div><div class="mc-ev">{esc(c["event"])}</div>{note}{inner}'
        "</div>"
    )


def _not_refined(trace: TraceDict, t: Timeline, i: int) -> str:
    """Why a timeline went to the reply unrefined, in the trace's words where it has them."""
    if trace.get("memory_path") == "offline" and not trace.get("timelines_refined"):
        return "<i>(not refined: no LLM step with the bundled model; its refinement adds 6 s or more per reply)</i>"
    notes = [n for n in trace.get("notices") or [] if "refin" in str(n).lower()]
    calls = [c for c in trace.get("llm_calls") or [] if c.get("purpose") == "refine"]
    failed = [c for c in calls if c.get("status") not in (None, "ok", "repaired", "retried")]
    refined = [str(r or "").strip() for r in trace.get("timelines_refined") or []]
    first = next((k for k, r in enumerate(refined) if not r), len(refined))
    if notes:
        why = plain(notes[0])
    elif failed:
        detail = plain(failed[0].get("detail"))
        why = "the refine step failed" + (f": {detail}" if detail else "")
    elif 0 < first <= i and not any(refined[first:]):
        why = f"this reply refined only its first {plural(first, 'timeline')}"
    elif not calls and len(t.get("nodes") or []) == 1:
        why = "a lone memory, no course of events to rewrite"
    elif calls and refined[i : i + 1] == [str(t.get("text") or "").strip()]:
        why = "the model gave it back unchanged"
    else:
        why = ""
    return f"<i>(not refined{': ' + esc(why) if why else ''})</i>"


def _timeline_html(
    trace: TraceDict,
    raw: list[Timeline],
    i: int,
    known: Mapping[str, RetrievedMemory],
    sessions: Mapping[str, str] | None,
) -> str:
    """One timeline: its chain (memories joined by arrows carrying their relation) and its refined text."""
    t = raw[i]
    refined = trace.get("timelines_refined") or []
    ref = str(refined[i] or "") if i < len(refined) else ""
    text = str(t.get("text") or "")
    refined_html = esc(ref) if ref.strip() and ref.strip() != text.strip() else _not_refined(trace, t, i)
    items = _chain(t, known)
    parts = []
    if items:
        path = [c for c in items if not c["history"]]
        used = sum(c["used"] for c in items)
        if t.get("chain"):
            whole = t.get("whole", used == len(items))
            parts.append(
                '<div class="mc-tl-note">'
                + (
                    "the whole timeline reached the reply"
                    if whole
                    else f"{used} of {len(items)} memories reached the reply; the dimmed ones did not"
                )
                + "</div>"
            )
        elsewhere: dict[str, int] = {}
        for j, other in enumerate(raw):
            if j != i:
                for nid in other.get("nodes") or []:
                    elsewhere.setdefault(str(nid), j)
        history = [c for c in items if c["history"]]
        replaced = ""
        if history:  # earlier versions of the retrieved memory, drawn inside its box: a Changed arrow to it
            on = "" if any(c["used"] for c in history) else " mc-off"
            replaced = (
                f'<div class="mc-link mc-hist{on}" data-relation="Changed" style="border-left-color:'
                f'{RELATIONS["Changed"]}"><span aria-hidden="true">↑</span> Changed: it replaced '
                f"{'this earlier memory' if len(history) == 1 else 'these earlier memories'}</div>"
                + "".join(_memory_box(c, sessions, elsewhere) for c in history)
            )
        chain = ['<div class="mc-chain">']
        for k, c in enumerate(path):
            if k:
                rel = c["relation"] or "linked"
                off = "" if c["used"] and path[k - 1]["used"] else " mc-off"
                colour = RELATIONS.get(rel, "#9d9d9d")
                chain.append(
                    f'<div class="mc-link{off}" data-relation="{esc(rel)}" style="border-left-color:{colour}">'
                    f'<span aria-hidden="true">↓</span> {esc(rel)}</div>'
                )
            chain.append(_memory_box(c, sessions, elsewhere, replaced if c["anchor"] else ""))
            replaced = "" if c["anchor"] else replaced
        chain.append(replaced + "</div>")  # (a chain without its anchor: the earlier versions after it)
        parts.append("".join(chain))
    else:  # a text that does not read as a timeline: shown as it is
        parts.append(f'<div class="mc-raw">{esc(text)}</div>')
    return (
        f'<li class="timeline" data-anchor="{esc(t.get("anchor"))}" data-whole="{int(bool(t.get("whole", True)))}">'
        f'<div class="mc-tl"><div class="mc-tl-raw"><b>raw:</b> {"".join(parts)}</div>'
        f'<div class="mc-refined"><b>refined:</b> {refined_html}</div></div></li>'
    )


def _secom_parts(trace: TraceDict, at: Callable[[str], str]) -> list[str]:
    """Retrieved segments: date, score, summary, the key retrieval read, the original text."""
    segs = sorted(trace.get("segments") or [], key=lambda s: -num(s.get("score")))  # best first
    out = [f"<section{at('why-segments')}><h5>Retrieved segments ({len(segs)}, best score first)</h5>"]
    if not segs:
        out.append('<p class="mc-muted">No segment retrieved (nothing stored yet?).</p>')
    else:
        out.append('<ol class="mc-segments">')
        for s in segs:
            out.append(
                f'<li class="segment" data-id="{esc(s.get("id"))}"><div><b>{date_html(s.get("date"))}</b> · '
                f"score {esc(score_text(s.get('score')))} · {esc(segment_title(s))}</div>"
                f'<div class="mc-key"><b>{_key_label(s)}:</b> {esc(s.get("key"))}</div>'
                f'<details><summary>original text</summary><div class="mc-text">{esc(s.get("text"))}</div>'
                "</details></li>"
            )
        out.append("</ol>")
    out.append("</section>")
    return out


def _cost_parts(trace: TraceDict, at: Callable[[str], str]) -> list[str]:
    """Every LLM call (purpose, tokens, time, status) and the step timings."""
    calls = trace.get("llm_calls") or []
    rows = [
        [
            c.get("purpose"),
            c.get("prompt_tokens"),
            c.get("completion_tokens"),
            seconds(c.get("seconds")),
            c.get("status"),
            plain(c.get("detail")),
        ]
        for c in calls
    ]
    headers = ["purpose", "prompt tok", "completion tok", "time", "status", "detail"]
    out = [f"<section{at('why-cost')}><h5>LLM calls</h5>"]
    out.append(table_html(headers, rows, "mc-calls") if calls else '<p class="mc-muted">No LLM call.</p>')
    out += [  # a reasoning model's thinking: never in the reply, here folded
        f'<details class="mc-reasoning"><summary>the model\'s reasoning ({esc(c.get("purpose"))})</summary>'
        f'<div class="mc-text">{esc(c["reasoning"])}</div></details>'
        for c in calls
        if c.get("reasoning")
    ]
    counts = trace.get("counts") or {}
    if tokens := int(counts.get("prompt_tokens") or 0):
        cached = int(counts.get("prompt_tokens_cached") or 0)
        out.append(
            f'<p{at("why-reading")} data-tokens="{tokens}" data-cached="{cached}">The reply\'s prompt held '
            f"{tokens:,} tokens; the model read {tokens - cached:,} of them for this reply"
            + (f" ({cached:,} already read: the earlier turns, or read ahead while you typed)" if cached else "")
            + ".</p>"
        )
    timings = trace.get("timings") or {}
    if timings:
        parts = " · ".join(f"{esc(k)} {seconds(v)}" for k, v in timings.items())
        out.append(f'<div class="mc-timings">{parts}</div>')
    out.append("</section>")
    return out
