"""The app in a real browser, on the real embedded defaults (slow: a few minutes on 2 cores).

One person's journey: chat (the reply streams in), end the session (the graph
shows the new memories), start a session a week later and ask about the first
(timelines), switch to SeCom (segments), reload (history is back), restart the
app (history is still back). Each step runs once (`Journey`); a test run alone
first runs the steps before the one it checks. Along the way, text typed as HTML
shows as text and never runs (no dialog ever opens), and a second browser
(another user) sees none of it.

The first tests check the HTML builders directly (fast); the browser ones are marked slow.
Run alone: python -m pytest tests/test_ui_browser.py -v [--screenshots]   (writes docs/screenshot.png)
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.flat_service import FlatService
from tests.ui_fixtures import PAGE_WAIT, chromium_browser

T = TypeVar("T")
XSS = "<img src=x onerror=alert(1)>"
FIRST = f"My dog is called Rex and we love hiking in the Alps together. {XSS}"
REPLY_TIMEOUT = 240_000  # ms: retrieval + refinement + reply on the tiny CPU model
CLOSE_TIMEOUT = 900_000  # ms: summarise, link, segment, compress
SCREENSHOT = Path(__file__).resolve().parent.parent / "docs" / "screenshot.png"

# Records every text the last assistant bubble shows, to see the reply arrive in pieces.
WATCH_REPLY = """() => {
  window.__replyStates = [];
  const chat = document.querySelector('#chat');
  const obs = new MutationObserver(() => {
    const bots = chat.querySelectorAll('[data-testid="bot"]');
    if (!bots.length) return;
    const t = bots[bots.length - 1].innerText;
    const s = window.__replyStates;
    if (!s.length || s[s.length - 1] !== t) s.push(t);
  });
  obs.observe(chat, {subtree: true, childList: true, characterData: true});
}"""
REPLY_DONE = """(n) => {
  const bots = document.querySelectorAll('#chat [data-testid="bot"]');
  const busy = document.querySelector('#status .mc-busy');
  return bots.length >= n && bots[bots.length - 1].innerText.trim() !== '…' && !busy;
}"""


# --- the HTML builders, without a browser (fast) ------------------------------------------------


def test_panels_escape_every_text():
    from ui import compare_view, panels, see_why

    # hostile text in every field, numbers' too (a stored trace is read as it is)
    trace: Any = {
        "strategy": "theanine",
        "memories": [{"id": XSS, "event": XSS, "time": XSS, "score": 1}],
        "timelines_raw": [{"anchor": "a", "nodes": ["a"], "text": XSS}],
        "timelines_refined": [XSS],
        "llm_calls": [{"purpose": XSS, "detail": XSS}],
        "timings": {XSS: 1.0},
        "notices": [XSS],
        "error": XSS,
        "tokens": 3,
    }
    secom: Any = dict(
        trace,
        strategy="secom",
        segments=[{"id": XSS, "date": XSS, "text": XSS, "key": XSS, "summary": XSS, "score": XSS}],
    )
    html = see_why.trace_html(trace) + see_why.trace_html(secom)
    html += panels.status_html(XSS, "error") + panels.banner_html(XSS, True)
    html += compare_view.compare_html(
        XSS,
        {"none": {"text": XSS, "error": XSS, "done": True, "trace": trace}},
        ["none"],
        0,
        XSS,
        why=see_why.trace_html,
    )
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_chat_messages_show_html_and_markdown_images_as_text():
    from types import SimpleNamespace as Row

    from ui.chat_view import chat_messages

    rows = [
        Row(id=1, role="user", text=XSS, status="ok", error=None),
        Row(id=2, role="assistant", text="![t](http://evil.example/leak.png)", status="ok", error=None),
        Row(id=3, role="assistant", text="", status="error", error=XSS),
    ]
    msgs, ids = chat_messages(rows)
    assert ids == [1, 2, 3] and [m["role"] for m in msgs] == ["user", "assistant", "assistant"]
    assert "<img" not in json.dumps(msgs) and "![" not in msgs[1]["content"]


def test_graph_data_escapes_labels_caps_size_and_makes_no_request():
    from urllib.parse import unquote

    from ui.graph_view import STATIC_SRC, graph_data, graph_html

    nodes = [
        {
            "id": f"s{i}:m0",
            "event": f"{XSS} event {i}",
            "time": "2023-05-08",
            "session_id": f"s{i}",
            "turns": [f"s{i}:1"],
        }
        for i in range(400)
    ]
    edges = [{"source": f"s{i}:m0", "target": f"s{i + 1}:m0", "relation": "Cause"} for i in range(399)]
    sessions = [(f"s{i}", f"Session {i}", i / 399) for i in range(400)]
    data = graph_data(
        {"nodes": nodes, "edges": edges},
        retrieved={"s0:m0"},
        new={"s399:m0"},
        sessions=sessions,
        turns=lambda ids: {t: ("user", f"{XSS} said") for t in ids},
        limit=300,
    )
    assert len(data["n"]) == 301  # 300 most recent + the retrieved old one
    assert {n["id"] for n in data["n"]} >= {"s0:m0", "s399:m0"}
    assert [n["fl"] for n in data["n"] if n["id"] in ("s0:m0", "s399:m0")] == [1, 2]  # retrieved, new
    assert data["o"]["layout"] == {"randomSeed": 7} and data["e"][0]["title"] == "Cause"  # pyvis's options, edges
    text = json.dumps(data, ensure_ascii=False)
    assert "<" not in text and ">" not in text  # readable, inert: ‹img src=x onerror=alert(1)›
    assert (
        data["n"][0]["label"].startswith("‹img src=x onerror=alert(1)› event") and data["n"][0]["src"][0][0] == "user"
    )
    wrapped = graph_html({"nodes": nodes[:2], "edges": []}, sessions=sessions[:2])
    assert 'sandbox="allow-scripts"' in wrapped and "allow-same-origin" not in wrapped
    assert "<img" not in unquote(wrapped)  # the data is URL-encoded inside an attribute
    page = (STATIC_SRC / "graph.html").read_text()
    assert (
        "Content-Security-Policy" in page
        and "default-src 'none'" in page
        and "http:" not in page
        and "https:" not in page
    )
    assert "innerHTML" not in (STATIC_SRC / "graph.js").read_text()  # texts are set with textContent


def test_chat_shows_markdown_rules_as_text_and_hides_errors_retry_replaced():
    from types import SimpleNamespace as Row

    from ui.chat_view import chat_messages

    rows = [
        Row(id=1, role="user", text="hi", status="ok", error=None, reply_to=None),
        Row(id=2, role="assistant", text="", status="error", error="outage", reply_to=1),
        Row(id=3, role="assistant", text="____\n---\n***", status="ok", error=None, reply_to=1),
    ]
    msgs, ids = chat_messages(rows)
    assert ids == [1, 3]  # the failed reply that Retry answered is gone
    assert msgs[1]["content"] == "\\_\\_\\_\\_\n\\-\\-\\-\n\\*\\*\\*"  # shown as text, not as rules
    msgs, ids = chat_messages(rows[:2])
    assert ids == [1, 2] and "outage" in msgs[1]["content"]  # the last failure stays, with its Retry


def test_handlers_turn_failures_into_a_message_and_a_retry(tmp_path):
    """Handler level, on the scripted agent: a failed reply shows why and offers Retry; Retry answers."""
    from memory.settings import Settings
    from sessions import open_service
    from tests.fakes import ScriptedAgent
    from tests.reliability_app import components
    from ui.handlers import Handlers

    c = components()  # stand-ins for the Gradio components
    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent(fail_replies=1)))
    h = Handlers(svc, c)
    uid = h.load(None)["uid"]  # a fresh id for a new browser
    assert re.fullmatch(r"[A-Za-z0-9_-]{20,64}", uid)
    assert h.load("not a valid id / ../")["uid"] != uid  # a malformed stored id is replaced
    last = list(h.send(uid, XSS, "theanine"))[-1]
    assert "press Retry" in last["status"] and last["retry"]["visible"] is True
    assert "<img" not in json.dumps(last["chatbot"]) and "<img" not in last["status"]
    last = list(h.retry(uid, "theanine"))[-1]
    assert last["status"] == "" and last["retry"]["visible"] is False
    assert last["chatbot"][-1]["content"].startswith("[theanine] you said: &lt;img")
    out = list(h.send("forged-id", "hi", "theanine"))[-1]  # the id comes from browser state only
    assert "user id" in out["status"] and "Traceback" not in out["status"]
    # temperature, j, k, n, whole timelines first, THEANINE setting, compression rate, retriever, max reply tokens
    bad = h.side.save_settings(uid, "embedded", "", "", 9, 3, 3, 1, 2, "tuned", 0.75, "hybrid", 256)
    # Messages name the field by its label; an emptied field is refused, not silently kept.
    assert "Temperature must be between" in bad["settings_status"] and bad["temperature"] == 0.6
    bad = h.side.save_settings(uid, "embedded", "", "", 0.5, 3, None, 1, 2, "tuned", 0.75, "hybrid", 256)
    assert "k (memories / segments retrieved): the field is empty" in bad["settings_status"]
    bad = h.side.save_settings(uid, "embedded", "", "", 0.5, 3, 3, 1, 2, "tuned", 7, "hybrid", 256)
    assert (
        "SeCom compression rate must be" in bad["settings_status"] and "compression_rate" not in bad["settings_status"]
    )


# --- the app in a browser (slow) -----------------------------------------------------------------

browser = pytest.fixture(scope="module")(chromium_browser)


class Visit:
    """One browser profile (= one user) on the app; records every dialog that opens."""

    def __init__(self, browser, url: str):
        self.url = url
        self.context = browser.new_context(viewport={"width": 1440, "height": 1100})
        self.dialogs: list[str] = []
        self.page = self.context.new_page()
        self.page.on("dialog", self._dismiss)
        self.open()

    def _dismiss(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def open(self) -> None:
        self.page.goto(self.url)
        self.page.wait_for_selector("#session-header", timeout=PAGE_WAIT)

    def bots(self) -> int:
        return self.page.locator('#chat [data-testid="bot"]').count()

    def send(self, text: str) -> str:
        n = self.bots()
        self.page.evaluate(WATCH_REPLY)
        box = self.page.locator("#msg textarea")
        box.fill(text)
        box.press("Enter")
        self.page.wait_for_function(REPLY_DONE, arg=n + 1, timeout=REPLY_TIMEOUT)
        return self.page.locator('#chat [data-testid="bot"]').last.inner_text()

    def reply_states(self) -> list[str]:
        return self.page.evaluate("() => window.__replyStates")

    def set_date_and_start(self, date: str) -> str:
        self.page.locator("#session-date textarea, #session-date input").first.fill(date)
        self.page.click("#new-session-btn")
        self.page.wait_for_function(
            "(d) => document.querySelector('#session-header').innerText.includes(d)", arg=date, timeout=CLOSE_TIMEOUT
        )
        return self.page.inner_text("#session-header")

    def end_session(self) -> str:
        """End the session (the next one takes the proposed date); the memory builds in the background."""
        self.page.click("#end-session-btn")
        self.page.wait_for_function(
            "() => /Session ended|failed/.test(document.querySelector('#status').innerText)", timeout=CLOSE_TIMEOUT
        )
        ended = self.page.inner_text("#status")
        self.page.wait_for_function(
            "() => !document.querySelector('#job-progress') && "
            "/Memory built|failed/.test(document.querySelector('#status').innerText)",
            timeout=CLOSE_TIMEOUT,
        )
        return ended + " " + self.page.inner_text("#status")

    def session_list(self) -> str:
        return self.page.inner_text("#session-list")

    def open_session(self, label: str, shows: str = "") -> str:
        """Click a session in the sidebar and wait until its header (and the text `shows`, if given) is on the
        page; returns the chat's text (its transcript)."""
        self.page.locator("#session-list label").filter(has_text=label).click()
        self.page.wait_for_function(
            "([l, t]) => document.querySelector('#session-header').innerText.includes(l) && "
            "document.querySelector('#chat').textContent.includes(t)",
            arg=[label.split(" ·")[0], shows],
            timeout=PAGE_WAIT,
        )
        return self.page.locator("#chat").text_content()

    def graph_frame(self):
        self.page.wait_for_selector("#memory-graph iframe", timeout=PAGE_WAIT)
        frame = self.page.locator("#memory-graph iframe").element_handle().content_frame()
        frame.wait_for_function(
            "() => typeof nodes !== 'undefined' && typeof network !== 'undefined'", timeout=PAGE_WAIT
        )
        return frame

    def no_injected_image(self) -> bool:
        main = self.page.locator('img[src="x"]').count() == 0
        frames = all(
            f.evaluate("() => document.querySelectorAll('img[src=\"x\"]').length") == 0 for f in self.page.frames[1:]
        )
        return main and frames


@pytest.fixture(scope="module")
def alice(browser, live_app):
    v = Visit(browser, live_app.url)
    yield v
    v.context.close()


class Journey:
    """Alice's steps, each run once, in order: a test asks for the step it checks and every earlier step
    runs first if it has not yet. So each test also runs alone (`-k`), with the history it needs."""

    def __init__(self, alice: Visit):
        self.alice = alice
        self.done: dict[str, Any] = {}

    def _once(self, name: str, step: Callable[[], T]) -> T:
        if name not in self.done:
            self.done[name] = step()
        return self.done[name]

    def first_session(self) -> tuple[str, str, list[str]]:
        """The first session, on 8 May 2023 (an empty session only changes its date), and one message."""

        def step():
            header = self.alice.set_date_and_start("2023-05-08")
            reply = self.alice.send(FIRST)
            return header, reply, self.alice.reply_states()

        return self._once("first session", step)

    def first_session_ended(self) -> str:
        self.first_session()
        return self._once("ended", self.alice.end_session)

    def a_week_later(self) -> str:
        """A session on 15 May asking about the first, with THEANINE."""
        self.first_session_ended()

        def step():
            header = self.alice.set_date_and_start("2023-05-15")
            self.alice.page.get_by_label("THEANINE").check()
            self.alice.send("Do you remember what my dog is called?")
            return header

        return self._once("a week later", step)

    def asked_with_secom(self) -> None:
        self.a_week_later()

        def step():
            self.alice.page.get_by_label("SeCom").check()
            self.alice.send("Where do we like to go hiking?")

        self._once("secom", step)


@pytest.fixture(scope="module")
def journey(alice):
    return Journey(alice)


@pytest.mark.slow
def test_first_session_reply_streams_in(alice, journey):
    header, reply, states = journey.first_session()
    assert "2023-05-08" in header
    # The bubble first shows the placeholder, then the reply text as it grows.
    assert states[0] == "…" or len(states) >= 2, states
    assert len(states) >= 2, states
    assert reply.strip() and reply.strip() != "…"
    chat = alice.page.inner_text("#chat")
    assert XSS in chat  # shown literally, as text
    assert alice.no_injected_image() and alice.dialogs == []


@pytest.mark.slow
def test_end_session_turns_the_session_into_graph_nodes(alice, journey):
    status = journey.first_session_ended()
    assert "Session ended" in status, status
    frame = alice.graph_frame()
    n_nodes = frame.evaluate("() => nodes.length")
    assert n_nodes >= 1
    # Nodes carry the event as inert text and their session (shown in the hover title).
    sessions = frame.evaluate("() => data.n.map(n => data.s[n.si][1])")
    assert all(t == "Session 1 · Mon 8 May 2023" for t in sessions), sessions
    assert "Session 1 · Mon 8 May 2023" in alice.session_list()
    assert XSS in alice.open_session("Session 1 ·", shows=XSS)  # the earlier transcript, as text
    alice.open_session("Session 2 ·")
    assert alice.no_injected_image() and alice.dialogs == []


@pytest.mark.slow
def test_a_week_later_the_reply_uses_timelines(alice, journey, screenshots):
    assert "2023-05-15" in journey.a_week_later()
    alice.page.wait_for_selector("#why-timelines li.timeline", timeout=PAGE_WAIT)
    timelines = alice.page.locator("#why-timelines li.timeline")
    assert timelines.count() >= 1
    assert "raw:" in timelines.first.inner_text() and "refined:" in timelines.first.inner_text()
    assert alice.page.locator("#why-memories tbody tr").count() >= 1
    assert alice.page.locator("#why-cost tbody tr").count() >= 1  # LLM calls, tokens and time
    frame = alice.graph_frame()
    # Retrieved memories are drawn as stars.
    assert frame.evaluate("() => nodes.get().filter(n => n.shape === 'star').length") >= 1
    if screenshots.wanted:
        alice.page.set_viewport_size({"width": 1440, "height": 1500})
        alice.page.evaluate("() => window.scrollTo(0, 0)")
        frame.wait_for_function("() => window.graphReady === true", timeout=PAGE_WAIT)  # the layout has settled
        screenshots(alice.page, SCREENSHOT)
        alice.page.set_viewport_size({"width": 1440, "height": 1100})
    assert alice.no_injected_image() and alice.dialogs == []


@pytest.mark.slow
def test_selecting_an_earlier_reply_shows_its_trace(alice, journey):
    journey.asked_with_secom()
    alice.page.wait_for_selector("#why-segments li.segment", timeout=PAGE_WAIT)
    seg = alice.page.locator("#why-segments li.segment").first.inner_text()
    assert "key (not compressed: the original text):" in seg and "score" in seg  # offline: no LLMLingua-2 model
    # Clicking the THEANINE reply before it brings its stored trace back.
    alice.page.locator('#chat [data-testid="bot"]').first.click()
    alice.page.wait_for_selector("#why-timelines li.timeline", timeout=PAGE_WAIT)
    assert alice.page.locator("#why-panel").get_attribute("data-strategy") == "theanine"


@pytest.mark.slow
def test_typing_reads_the_memory_ahead_so_send_reads_only_what_changed(alice, journey, live_app):
    journey.asked_with_secom()
    page = alice.page

    def logged() -> int:
        return live_app.log_path.read_text(errors="replace").count("read ahead:")

    before = logged()
    box = page.locator("#msg textarea")
    deadline = time.monotonic() + REPLY_TIMEOUT / 1000
    # The last key typed is one input event (Gradio's input event follows keys, not a filled value): one
    # read-ahead of the draft, skipped while the reply before is still being stored, so typed again
    # until the app logs that it read the draft's prompt.
    text = "Which trail did we hike together last time?"
    while logged() == before:
        assert time.monotonic() < deadline, "no read-ahead in the app's log"
        box.fill(text[:-1])
        box.press_sequentially(text[-1])
        for _ in range(20):
            time.sleep(0.5)
            if logged() > before:
                break
    n = alice.bots()
    page.evaluate(WATCH_REPLY)
    box.press("Enter")
    page.wait_for_function(REPLY_DONE, arg=n + 1, timeout=REPLY_TIMEOUT)
    reading = page.locator("#why-reading")
    tokens, cached = int(reading.get_attribute("data-tokens") or 0), int(reading.get_attribute("data-cached") or 0)
    assert tokens > 50 and tokens - cached <= 2, (tokens, cached)  # Send read only the last token again
    assert "already read" in reading.inner_text()


@pytest.mark.slow
def test_typed_html_stays_text_in_every_field(alice):
    page = alice.page
    page.locator("#session-date textarea, #session-date input").first.fill(XSS)
    page.click("#new-session-btn")
    page.wait_for_function(
        "() => document.querySelector('#status').innerText.includes('Cannot read the date')", timeout=PAGE_WAIT
    )
    assert XSS in page.inner_text("#status")
    assert alice.no_injected_image() and alice.dialogs == []


@pytest.mark.slow
def test_history_survives_a_reload(alice, journey):
    journey.asked_with_secom()
    alice.open()
    alice.page.wait_for_function(
        "() => document.querySelector('#chat').innerText.includes('hiking')", timeout=PAGE_WAIT
    )
    assert "Session 1" in alice.session_list()
    assert "2023-05-15" in alice.page.inner_text("#session-header")
    assert alice.graph_frame().evaluate("() => nodes.length") >= 1
    assert alice.no_injected_image() and alice.dialogs == []


@pytest.mark.slow
def test_another_browser_sees_none_of_it(browser, live_app, journey):
    journey.asked_with_secom()  # alice's history exists: Rex, hiking, the typed HTML
    bob = Visit(browser, live_app.url)
    try:
        # The page's load event fills the header, the session list and the chat in one update: once bob's
        # own session is listed, everything the server sent him is on the page.
        bob.page.wait_for_selector("#session-list label", timeout=PAGE_WAIT)
        text = bob.page.inner_text("body")
        assert "Rex" not in text and "hiking" not in text and XSS not in text
        assert bob.page.locator("#session-list label").count() == 1  # only bob's own open session
        assert bob.page.locator('#chat [data-testid="bot"]').count() == 0
        assert bob.page.locator("#memory-graph iframe").count() == 0
        assert bob.dialogs == []
    finally:
        bob.context.close()


@pytest.mark.slow
def test_history_survives_an_app_restart(alice, journey, live_app):
    journey.asked_with_secom()
    live_app.restart()
    alice.open()
    alice.page.wait_for_function(
        "() => document.querySelector('#chat').innerText.includes('hiking')", timeout=PAGE_WAIT
    )
    assert XSS in alice.open_session("Session 1 ·", shows=XSS)
    assert alice.no_injected_image() and alice.dialogs == []
    alice.open_session("Session 2 ·")
    assert re.search(r"Session \d+", alice.page.inner_text("#session-header"))
