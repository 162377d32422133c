"""Time travel: a session slider under the memory graph (issue 14).

The memory graph of every ended session is sent once, into the same sandboxed graph page as the
main graph (ui/static/graph.js), each memory tagged with the step (ended session) that added it.
Moving the slider posts only the step number into the frame (postMessage, in the browser: no
server call), where the page shows what that session added with its links (the rest summarised by
session, as the memory graph does) and hides the memories added later. The "what changed" list
beside it is one small HTML per step, all of them sent when the panel is opened: a step shows its
own in the browser, without a server round trip.

`build_panel()` places the components (inside the See-why column); `wire()` connects them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import gradio as gr

from memory.errors import InvalidOptions
from memory.text import plural
from sessions import SessionService, UserError
from sessions.recall import MemoryHistory, Step, memory_history, recall
from sessions.service import user_message
from sessions.work import Work

from . import html_text, panels
from .events import FAST
from .graph_view import fragment, graph_data, page_url, short_text
from .html_text import esc

log = logging.getLogger(__name__)

ACCORDION = "Time travel: how the memory grew, session by session"
MAX_NODES = 3000  # memories sent to the frame (all of them up to this many; then the most recent)
FRAME_HEIGHT = 460
SHOW_MEMORIES, SHOW_LINKS, SHOW_SEGMENTS = 8, 10, 6  # listed at once; the rest behind "n more"
KEY_CHARS = 240
OFFLINE_NOTE = (
    "built without an LLM: each memory is a statement of the session, linked to earlier ones by an offline rule "
    "(Changed where a later statement replaces an earlier one, else topic similarity)"
)

# Posts the step into the frame and shows that step's "what changed" list (all sent at load; the shown one
# carries the id tt-changes-panel); once per page, answers the frame's "ready" with the current step (a step
# chosen while the frame was still loading is not lost).
POST_STEP_JS = """(k) => {
  document.querySelectorAll('#tt-changes .tt-step').forEach((d) => {
    const on = d.dataset.step === String(Number(k));
    d.hidden = !on;
    if (on) d.id = 'tt-changes-panel'; else d.removeAttribute('id');
  });
  window.__ttList = {step: Number(k), at: Date.now()};
  const frame = () => document.querySelector('#tt-graph iframe');
  window.__ttStep = Number(k);
  if (!window.__ttListening) {
    window.__ttListening = true;
    window.addEventListener('message', (e) => {
      const f = frame();
      if (f && e.source === f.contentWindow && e.data && e.data.ttReady === true && window.__ttStep != null) {
        f.contentWindow.postMessage({ttStep: window.__ttStep}, '*');
      }
    });
  }
  const f = frame();
  if (f && f.contentWindow) f.contentWindow.postMessage({ttStep: Number(k)}, '*');
}"""


# --- the frame ------------------------------------------------------------------------------------


def frame_data(history: MemoryHistory, turns=None, at: int | None = None) -> dict:
    """The graph page's data (ui.graph_view.graph_data) plus each memory's step and the step labels."""
    steps = history.steps
    sessions = [(s.session_id, s.label, s.position) for s in steps]
    data = graph_data(history.view, sessions=sessions, turns=turns, limit=MAX_NODES)
    n = len(steps)
    data["t"] = [history.step_of.get(node["id"], n) for node in data["n"]]
    labels = ["before the first session"] + [s.label for s in steps]
    data["T"] = {
        "n": n,
        "at": n if at is None else max(0, min(n, int(at))),
        "labels": [short_text(x, 80) for x in labels],
    }
    return data


def frame_html(history: MemoryHistory, turns=None, at: int | None = None, height: int = FRAME_HEIGHT) -> str:
    data = frame_data(history, turns, at)
    frag = fragment(data)
    return (
        f'<div id="tt-memory-graph" data-steps="{history.n_steps}" data-memories="{len(data["n"])}">'
        f'<iframe class="mc-graph-frame" title="Memory graph, session by session" sandbox="allow-scripts" '
        f'style="width:100%;height:{int(height)}px;border:1px solid #ddd;border-radius:6px" '
        f'src="{esc(page_url() + "#" + frag)}"></iframe></div>'
    )


# --- the "what changed" list ------------------------------------------------------------------------


def _more(items: list[str], shown: int, what: str, whats: str, tag: str = "ol") -> str:
    """The first `shown` items, the rest behind a disclosure."""
    out = f"<{tag}>{''.join(items[:shown])}</{tag}>"
    if len(items) > shown:
        out += (
            f"<details><summary>{esc(plural(len(items) - shown, 'more ' + what, 'more ' + whats))}</summary>"
            f'<{tag} start="{shown + 1}">{"".join(items[shown:])}</{tag}></details>'
        )
    return out


def _memory_cell(m: dict, with_time: bool = False) -> str:
    when = f' <span class="mc-muted">({esc(m["time"])})</span>' if with_time and m["time"] else ""
    return f'<span data-id="{esc(m["id"])}">{esc(short_text(m["event"]))}</span>{when}'


def exchanges_text(start, end) -> str:
    """A segment's exchanges, counted from 1 as a person counts them (stored from 0, end included)."""
    a, b = int(start or 0) + 1, int(end or 0) + 1
    return f"exchange {a}" if b <= a else f"exchanges {a}–{b}"


def steps_html(history: MemoryHistory, at: int | None = None) -> str:
    """Every step's "what changed" list, step `at` (default the last) shown, the rest hidden until the
    slider picks them (POST_STEP_JS)."""
    n = history.n_steps
    at = n if at is None else max(0, min(n, int(at)))
    return "".join(step_html(history, k, shown=k == at) for k in range(n + 1))


def step_html(history: MemoryHistory, k: int, shown: bool = True) -> str:
    """What session k added (k = 0: before the first session); the shown one carries the panel's id."""
    n = history.n_steps
    total = history.memories_after(k)
    attrs = 'id="tt-changes-panel" ' if shown else "hidden "
    if k == 0:
        return (
            f'<div {attrs}class="mc-why tt-step" data-step="0" data-memories="0">'
            f'<h4>Before the first session</h4><p class="mc-muted">No memory yet. Move the slider to see what each '
            f"of the {plural(n, 'ended session')} added.</p></div>"
        )
    s: Step = history.steps[k - 1]
    out = [
        f'<div {attrs}class="mc-why tt-step" data-step="{k}" data-memories="{total}" data-added="{len(s.memories)}">',
        f'<h4>After {esc(s.label)} <span class="mc-muted">({k} of {plural(n, "ended session")})</span></h4>',
        f"<p><b>+{plural(len(s.memories), 'memory', 'memories')}</b> ({total} in all) · "
        f"+{plural(len(s.links), 'link')} · +{plural(len(s.segments), 'SeCom segment')}</p>",
    ]
    if s.status != "closed":
        out.append('<p class="mc-warn">This session\'s memory is not built yet (see the session list).</p>')
    elif s.memory_path == "offline":
        out.append(f'<p class="mc-muted">ℹ Memory {esc(OFFLINE_NOTE)}.</p>')
    out.append(f"<h5>THEANINE: new memories ({len(s.memories)})</h5>")
    if s.memories:
        out.append(_more([f"<li>{_memory_cell(m)}</li>" for m in s.memories], SHOW_MEMORIES, "memory", "memories"))
    else:
        out.append('<p class="mc-muted">None.</p>')
    out.append(f"<h5>THEANINE: links made at this close ({len(s.links)})</h5>")
    if s.links:
        rows = [
            f'<tr class="tt-link" data-relation="{esc(x.relation)}"><td>{_memory_cell(x.earlier, True)}</td>'
            f"<td><b>{esc(x.relation)}</b></td><td>{_memory_cell(x.new)}</td></tr>"
            for x in s.links
        ]
        head = "<thead><tr><th>earlier memory</th><th>relation</th><th>new memory</th></tr></thead>"
        table = f'<table class="mc-table tt-links">{head}<tbody>{"".join(rows[:SHOW_LINKS])}</tbody></table>'
        if len(rows) > SHOW_LINKS:
            table += (
                f"<details><summary>{esc(plural(len(rows) - SHOW_LINKS, 'more link'))}</summary>"
                f'<table class="mc-table tt-links">{head}<tbody>{"".join(rows[SHOW_LINKS:])}</tbody></table></details>'
            )
        out.append(table)
    else:
        out.append('<p class="mc-muted">None: no earlier memory was related to this session\'s.</p>')
    compressed = any(seg["compressed"] for seg in s.segments)
    key = "compressed key" if compressed else "key (not compressed: the original text)"
    out.append(f"<h5>SeCom: segments of this session ({len(s.segments)}) with their {key}</h5>")
    if s.segments:
        items = []
        for seg in s.segments:
            summary = f"<b>{esc(short_text(html_text.segment_title(seg), 120))}</b> · "
            items.append(
                f'<li class="segment" data-id="{esc(seg["id"])}">{summary}<span class="mc-muted">'
                f"{exchanges_text(seg['start'], seg['end'])}</span>"
                f'<div class="mc-key">{esc(short_text(seg["key"], KEY_CHARS))}</div></li>'
            )
        out.append(_more(items, SHOW_SEGMENTS, "segment", "segments"))
    else:
        out.append('<p class="mc-muted">None.</p>')
    out.append("</div>")
    return "".join(out)


# --- the panel ------------------------------------------------------------------------------------------


@dataclass(init=False, eq=False)
class TimePanel:
    """The time-travel components (filled in by build_panel)."""

    box: gr.Accordion
    slider: gr.Slider
    refresh: gr.Button
    status: gr.HTML
    frame: gr.HTML
    changes: gr.HTML
    ask_box: gr.Textbox
    ask_btn: gr.Button
    recalled: gr.HTML


def build_panel() -> TimePanel:
    """The time-travel components, where the caller places them (under the memory graph)."""
    t = TimePanel()
    with gr.Accordion(ACCORDION, open=False, elem_id="timetravel") as t.box:
        with gr.Row():
            t.slider = gr.Slider(
                minimum=0,
                maximum=1,
                value=0,
                step=1,
                label="Time travel: the memory after each session",
                info="0 = before the first session; N = after session N (sessions numbered by date, as listed)",
                elem_id="tt-slider",
                visible=False,
                scale=5,
            )
            t.refresh = gr.Button("Reload", elem_id="tt-refresh", scale=1, min_width=80, size="sm")
        t.status = gr.HTML(elem_id="tt-status")
        with gr.Row(equal_height=False):
            with gr.Column(scale=2, min_width=360):
                t.frame = gr.HTML(elem_id="tt-graph")
            with gr.Column(scale=1, min_width=200):
                t.changes = gr.HTML(elem_id="tt-changes")
        with gr.Row():  # what the agent would have recalled then (sessions.recall, as /recall gives it)
            t.ask_box = gr.Textbox(label="Ask as of this session", elem_id="tt-ask", scale=5, max_lines=2)
            t.ask_btn = gr.Button("Recall", elem_id="tt-ask-btn", scale=1, min_width=80, size="sm")
        t.recalled = gr.HTML(elem_id="tt-recalled")
    return t


class TimeTravel:
    def __init__(
        self, service: SessionService, t: TimePanel, running: Callable[[str], Work | None] | None = None
    ) -> None:
        self.rooms, self.t = service.rooms, t
        self.running = running or (lambda uid: None)  # uid -> the running memory build, if any

    def loading(self):
        t = self.t
        return {t.status: panels.status_html("Loading the memory of every session…", "busy")}

    def load(self, uid):
        """Assemble the user's memory history once: the frame with every memory, one list per step."""
        t = self.t
        hidden = {t.slider: gr.update(visible=False), t.frame: "", t.changes: ""}
        try:
            key = self.rooms.users.user(uid)  # the one check of this event
            job = self.running(key)
            if job is not None:
                return {
                    **hidden,
                    t.status: panels.status_html(
                        f"Memory is being built ({int(job.fraction * 100)}%): open time travel again "
                        "(or press Reload) when the progress bar is done.",
                        "busy",
                    ),
                }
            history = memory_history(self.rooms.memory, key)
            n = history.n_steps
            if n == 0:
                return {
                    **hidden,
                    t.status: panels.status_html(
                        "No ended session yet: end a session (or import a history) and its memory appears here.", "info"
                    ),
                }

            def turns(ids):
                return self.rooms.memory.turn_texts(key, ids)

            return {
                t.slider: gr.update(minimum=0, maximum=n, value=n, visible=True),
                t.frame: frame_html(history, turns, at=n),
                t.changes: steps_html(history, n),
                t.status: "",
            }
        except Exception as e:
            if not isinstance(e, UserError):
                log.exception("time travel failed")
            return {**hidden, t.status: panels.status_html(user_message(e), "error")}

    def ask(self, uid, k, query) -> str:
        """What the agent would have recalled for `query` after step k's session ended."""
        try:
            key, k = self.rooms.users.user(uid), int(k or 0)
            ended = [s for s in self.rooms.sessions.in_order(key) if s.status != "open"]
            if not (query or "").strip():
                return panels.status_html("Type what to ask, then press Recall.", "info")
            if k <= 0 or k > len(ended):
                return panels.status_html("Before the first session nothing was remembered.", "info")
            got = recall(self.rooms.memory, key, query, "", ended[k - 1].session_id)
        except Exception as e:
            if not isinstance(e, (UserError, InvalidOptions)):
                log.exception("recall as of a session failed")
            return panels.status_html(user_message(e), "error")
        items = "".join(f"<li>{esc(line['text'])} <i>({_score(line['score'])})</i></li>" for line in got["lines"])
        gone = "".join(f"<li>{esc(m['event'])} → {esc(m['superseded_by']['event'])}</li>" for m in got["superseded"])
        head = f"<b>Recalled after session {k} ({esc(got['strategy'])})</b>"
        body = f"<ol>{items}</ol>" if items else '<p class="mc-muted">Nothing recalled.</p>'
        return head + body + (f"<p><b>Superseded by then:</b></p><ul>{gone}</ul>" if gone else "")


def _score(x) -> str:
    """A retrieval score as See why prints it (3 decimals)."""
    try:
        return f"score {float(x):.3f}"
    except (TypeError, ValueError):
        return "no score"


def wire(
    t: TimePanel, service: SessionService, uid: gr.BrowserState, running: Callable[[str], Work | None] | None = None
) -> TimeTravel:
    """Connect the panel: opening it (or Reload) loads the history; the slider moves the frame and shows
    that step's list, in the browser. `uid` is the page's gr.BrowserState; `running(uid)` the
    user's running memory work (`Views.building`)."""
    tt = TimeTravel(service, t, running)
    outs = [t.slider, t.frame, t.changes, t.status]
    for trigger in (t.box.expand, t.refresh.click):
        trigger(tt.loading, None, [t.status], **FAST).then(tt.load, [uid], outs, **FAST)
    t.slider.change(None, [t.slider], None, js=POST_STEP_JS, api_visibility="private")
    for ask in (t.ask_btn.click, t.ask_box.submit):
        ask(tt.ask, [uid, t.slider, t.ask_box], [t.recalled], api_visibility="private")
    return tt
