"""Issue 20 in real Chromium on app.py (scripted OpenAI-compatible LLM, everything else real):
Compare that reads (cards, reply first, memory folded, full width, one column on a phone, kept across a
reload); long messages folded in the chat and capped in later prompts; sessions numbered by date after
an import; time travel named by session; graph search over every memory; no raw error text.

One user goes through it in order: a typed session (dated today), then a LoCoMo-format import of ten
2023 sessions (tests/locomo_synth.py), then Compare, a 50,000-character message, the graph.
Screenshots (docs/img/ui_*.png) are written only with --screenshots.

Run alone: python -m pytest -q -p no:cacheprovider tests/test_ui_readable.py -s
"""

from __future__ import annotations

import re

import pytest

from memory.agent import MAX_HISTORY_TURN_TOKENS
from memory.tokens import count_tokens
from tests import locomo_synth
from tests.ui_fixtures import IMG_DIR, PAGE_WAIT, chromium_browser, scripted_app, upload

pytestmark = pytest.mark.slow
GRAPH_LIMIT = 20  # memories drawn (GRAPH_MAX_NODES): the import makes more, so old ones are not drawn
LONG_CHARS = 50_000


# k = 10: the memories a reply retrieves are drawn beside the newest GRAPH_LIMIT, and graph search must
# still have old memories that are not drawn to find (at the default k = 40 every old one is drawn)
server, app = scripted_app("readable", LLM_TIMEOUT=120, GRAPH_MAX_NODES=GRAPH_LIMIT, MEMORY_K=10)


browser = pytest.fixture(scope="module")(chromium_browser)


class Page:
    def __init__(self, browser, url):
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.page = self.context.new_page()
        self.url = url
        self.import_status = ""
        self.open()

    def open(self):
        self.page.goto(self.url)
        self.page.wait_for_selector("#session-header", timeout=PAGE_WAIT)

    def send(self, text, timeout=PAGE_WAIT):
        n = self.page.locator('#chat [data-testid="bot"]').count()
        box = self.page.locator("#msg textarea")
        box.fill(text)
        box.press("Enter")
        self.page.wait_for_function(
            """(n) => { const b = document.querySelectorAll('#chat [data-testid="bot"]');
                        return b.length >= n && b[b.length - 1].innerText.trim() !== '…'
                               && !document.querySelector('#status .mc-busy'); }""",
            arg=n + 1,
            timeout=timeout,
        )

    def wait_status(self, where, pattern, timeout=PAGE_WAIT):
        self.page.wait_for_function(
            "([w, p]) => new RegExp(p).test(document.querySelector(w).innerText)", arg=[where, pattern], timeout=timeout
        )
        return self.page.inner_text(where)

    def sessions(self):
        return [t.strip() for t in self.page.locator("#session-list label").all_inner_texts()]

    def width(self, w, sidebar=None):
        """Resize; the sidebar open (True), closed (False, as a phone starts it), or left as it is."""
        self.page.set_viewport_size({"width": w, "height": 1000 if w > 700 else 900})
        if sidebar is None:
            sidebar = w > 700
        if (self.page.locator(".sidebar.open").count() > 0) != sidebar:
            self.page.locator('button[aria-label="Toggle Sidebar"]').first.click()
        self.page.wait_for_timeout(600)  # the sidebar slides

    def overflow(self):
        return self.page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")

    def boxes(self, selector):
        return self.page.evaluate(
            "(s) => Array.from(document.querySelectorAll(s)).map(e => { const r = e.getBoundingClientRect();"
            " return {x: r.x, y: r.y, w: r.width, h: r.height}; })",
            selector,
        )


@pytest.fixture(scope="module")
def user(browser, app, tmp_path_factory, server):
    """A typed session, then the import of ten 2023 sessions, built."""
    p = Page(browser, app.url)
    p.send("Hello, I typed this first, before importing anything.")
    p.page.locator("#session-date input, #session-date textarea").first.fill("2026-12-20")
    p.page.click("#new-session-btn")
    p.wait_status("#status", "Memory built|failed")
    p.page.click("text=Your data: import, export, delete a memory, forget me")
    path = locomo_synth.write(tmp_path_factory.mktemp("synth"))
    upload(p.page, "import-file", path)
    p.page.click("#import-btn")
    p.wait_status("#data-status", "Imported|failed|Memory built")
    p.page.wait_for_function("() => !document.querySelector('#job-progress')", timeout=600_000)
    p.import_status = p.wait_status("#data-status", "Import finished|failed")  # when the build ended
    yield p
    p.context.close()


# --- item 3: Compare -------------------------------------------------------------------------------------


def test_compare_is_cards_reply_first_full_width_one_column_and_kept(user, server, screenshots):
    p = user
    server.script(
        "reply",
        ("ok", "THEANINE says: on 3 May 2023."),
        ("ok", "SeCom says: 3 May."),
        ("ok", "No idea."),
        ("ok", "The paper's setting says: May."),
    )
    p.page.locator("#msg textarea").fill(locomo_synth.QUESTION)
    p.page.click("#compare-btn")
    p.wait_status("#status", "Compared")
    cards = p.page.locator("#compare-panel section.mc-compare")
    columns = [cards.nth(i).get_attribute("data-strategy") for i in range(cards.count())]
    assert columns == ["theanine", "secom", "none", "theanine-paper"]
    assert "paper settings" in cards.nth(3).locator("h4").first.inner_text()
    # The reply comes first; what the strategy recalled is folded under it (closed).
    for i in range(4):
        card = cards.nth(i)
        order = card.evaluate("c => Array.from(c.children).map(e => e.className || e.tagName)")
        assert order.index("mc-reply") < order.index("mc-recalled"), order
        assert card.locator("details.mc-recalled").get_attribute("open") is None
    # On an endpoint the columns run at once, so which scripted reply each gets is not fixed: every one is shown.
    replies = {c: p.page.inner_text(f"#compare-{c} .mc-reply") for c in columns}
    assert sorted(replies.values()) == sorted(
        ["THEANINE says: on 3 May 2023.", "SeCom says: 3 May.", "No idea.", "The paper's setting says: May."]
    )
    # Next to the chat (in its column, not under See why): one card under the other, each as wide as the column.
    row = p.boxes("#compare-wrap")[0]
    chat = p.boxes("#chat")[0]
    b = p.boxes("#compare-panel section.mc-compare")
    assert abs(row["x"] - chat["x"]) < 20 and row["y"] > chat["y"], (row, chat)
    assert all(x["w"] >= 0.9 * row["w"] for x in b) and row["w"] > 350, (row, b)
    assert all(b[i + 1]["y"] >= b[i]["y"] + b[i]["h"] for i in range(2)), b
    screenshots(p.page, IMG_DIR / "ui_compare_locomo_1400.png", clip=_clip(p, "#compare-wrap", 1400))
    # Opened, the memory table spans the card (not a third of the page).
    cards.nth(0).locator("details.mc-recalled summary").click()
    table = p.boxes("#compare-theanine table.mc-mem")[0]
    assert table["w"] >= 0.8 * b[0]["w"], (table, b[0])
    cards.nth(0).locator("details.mc-recalled summary").click()
    # A phone: one column, nothing sideways, the folded SeCom card a few lines tall.
    p.width(400)
    b = p.boxes("#compare-panel section.mc-compare")
    assert len({round(x["x"]) for x in b}) == 1 and all(x["w"] <= 400 for x in b), b
    assert p.overflow() <= 0
    assert b[1]["h"] < 400, b  # was 19,335 px in three 100 px columns
    screenshots(p.page, IMG_DIR / "ui_compare_locomo_400.png", clip=_clip(p, "#compare-wrap", 400))
    p.width(1400)
    # Kept across a reload (stored per user, server-side).
    p.open()
    p.page.wait_for_selector("#compare-panel section.mc-compare", timeout=PAGE_WAIT)
    assert locomo_synth.QUESTION in p.page.inner_text("#compare-panel")
    assert p.page.inner_text("#compare-secom .mc-reply") == replies["secom"]


def _clip(p, selector, width, max_h=1100, height=None):
    """For a screenshot: from the element's top, the viewport's width, the element's height (at most
    `max_h`) or a fixed `height`."""
    p.page.evaluate("(s) => document.querySelector(s).scrollIntoView({block: 'start'})", selector)
    p.page.wait_for_timeout(300)
    box = p.boxes(selector)[0]
    h = min(height or min(max_h, box["h"] + 20), p.page.viewport_size["height"] - max(0, box["y"] - 10))
    return {"x": 0, "y": max(0, box["y"] - 10), "width": width, "height": h}


# --- item 4: long messages ---------------------------------------------------------------------------------


def test_a_long_message_is_folded_and_later_prompts_stay_small(user, server, screenshots):
    p = user
    words = "the long message keeps going and going "
    long = (words * (LONG_CHARS // len(words) + 1))[:LONG_CHARS]
    p.send(long)
    bubble = p.page.locator('#chat [data-testid="user"]').last
    assert bubble.bounding_box()["height"] < 500  # was 29,754 px
    fold = bubble.locator("details.mc-fold")
    assert re.search(r"Show all \(50,000 characters\)", fold.locator("summary").inner_text())
    screenshots(p.page, IMG_DIR / "ui_long_message_1400.png")
    p.width(400)
    assert bubble.bounding_box()["height"] < 700 and p.overflow() <= 0
    screenshots(p.page, IMG_DIR / "ui_long_message_400.png")
    p.width(1400)
    # The whole text is there: "Show all" opens it.
    fold.locator("summary").click()
    assert len(bubble.inner_text()) >= LONG_CHARS - 100
    # Later replies do not carry the 50,000 characters: the history turn is capped.
    before = server.count("reply")
    p.send("And what about the weekend?")
    body = server.bodies("reply")[before]
    prompt = sum(count_tokens(m["content"]) for m in body["messages"] if isinstance(m.get("content"), str))
    print(f"\nprompt of the reply after a {LONG_CHARS:,}-character message: {prompt} tokens")
    # the prompt is the memory budget (1,000 tokens), the instructions and a capped history
    carried = [m["content"] for m in body["messages"] if words in str(m.get("content", ""))]
    assert carried and all(count_tokens(c) <= MAX_HISTORY_TURN_TOKENS + 20 for c in carried), carried
    assert prompt < 2000, prompt


# --- item 5: order and scope of a long history ---------------------------------------------------------


def _numbers(labels):
    return [int(m.group(1)) for t in labels if (m := re.search(r"Session (\d+)", t))]


def test_sessions_are_numbered_and_listed_by_date_whatever_their_source(user, screenshots):
    labels = user.sessions()
    assert _numbers(labels) == list(range(1, 13)), labels
    assert all("2023" in t and "imported" in t for t in labels[:10]), labels  # the imported 2023 sessions first
    assert "2026" in labels[10] and "imported" not in labels[10] and "open now" in labels[11], labels
    screenshots(user.page, IMG_DIR / "ui_sidebar_import_1400.png", clip={"x": 0, "y": 0, "width": 700, "height": 1000})
    user.width(400, sidebar=True)
    screenshots(user.page, IMG_DIR / "ui_sidebar_import_400.png")
    user.width(1400)


def _frame(p):
    p.page.wait_for_selector("#memory-graph iframe", timeout=PAGE_WAIT)
    frame = p.page.locator("#memory-graph iframe").element_handle().content_frame()
    frame.wait_for_function("() => window.graphReady === true", timeout=PAGE_WAIT)
    return frame


def test_graph_search_runs_over_every_memory_and_opens_an_old_one(user, screenshots):
    p = user
    p.page.locator("#graph-panel").scroll_into_view_if_needed()
    drawn = int(p.page.locator("#memory-graph").get_attribute("data-memories"))
    frame = _frame(p)
    total = frame.evaluate("() => data.total")
    assert drawn < total  # the most recent GRAPH_LIMIT and the retrieved ones: the oldest are not drawn
    # An old session's fact that is not drawn (the last reply's retrieved timelines may have added some).
    drawn_events = " ".join(frame.evaluate("() => data.n.map(n => n.ev)")).lower()
    number, topic = next((i + 1, k) for i, k in enumerate(locomo_synth.KEYS) if k.lower() not in drawn_events)
    fact = locomo_synth.TOPICS[number - 1][1]
    assert number <= 5, drawn_events
    p.page.locator("#graph-search input, #graph-search textarea").first.fill(topic)
    p.page.click("#graph-find-btn")
    found = p.wait_status("#graph-found", f"holding “{topic}”")
    assert "opened the newest" in found and f"Session {number} ·" in found, found
    frame = _frame(p)
    panel = frame.locator("#panel")
    frame.wait_for_selector("#panel:not([hidden])", timeout=PAGE_WAIT)
    assert fact[:25] in panel.inner_text() and "Source turns" in panel.inner_text(), panel.inner_text()
    checks = frame.evaluate("() => window.labelCheck(4)")
    assert checks and all(c["label"] and c["inView"] and c["labelIn"] and c["px"] >= 11 for c in checks), checks
    p.page.locator("#graph-search-row").scroll_into_view_if_needed()
    screenshots(p.page, IMG_DIR / "ui_graph_search_1400.png", clip=_clip(p, "#graph-search-row", 1400, height=640))
    p.width(400)
    assert p.overflow() <= 0
    screenshots(p.page, IMG_DIR / "ui_graph_search_400.png", clip=_clip(p, "#graph-search-row", 400, height=720))
    p.width(1400)
    # A word no memory holds: said plainly, the graph stays.
    p.page.locator("#graph-search input, #graph-search textarea").first.fill("zeppelin")
    p.page.click("#graph-find-btn")
    assert "No memory holds" in p.wait_status("#graph-found", "No memory")


def test_first_view_fits_the_retrieved_memories_with_their_labels_inside(user, server):
    p = user
    p.page.get_by_label("THEANINE").check()
    p.send("Tell me about pottery, the garden and the violin.")
    p.page.wait_for_selector("#why-memories tbody tr", timeout=PAGE_WAIT)
    frame = _frame(p)
    checks = frame.evaluate("() => window.labelCheck(1)")
    assert len(checks) >= 2, checks
    # Every retrieved memory in view; labels drawn where they cover no other (issue 36), whole inside the frame.
    assert all(not c["hidden"] and c["inView"] and c["px"] >= 11 for c in checks), checks
    assert any(c["label"] for c in checks) and all(c["labelIn"] for c in checks if c["label"]), checks
    assert frame.evaluate("() => window.labelOverlaps()") == 0


def test_time_travel_steps_are_named_by_session(user):
    p = user
    p.page.click("text=Time travel: how the memory grew, session by session")
    p.page.wait_for_selector("#tt-changes-panel", timeout=PAGE_WAIT)
    head = p.page.inner_text("#tt-changes-panel h4")
    assert head.startswith("After Session 11 ·") and "11 of 11 ended sessions" in head, head
    slider = p.page.locator("#tt-slider input[type=number]")
    slider.fill("1")
    slider.press("Enter")
    p.page.wait_for_function(
        "() => document.querySelector('#tt-changes-panel').dataset.step === '1'", timeout=PAGE_WAIT
    )
    head = p.page.inner_text("#tt-changes-panel h4")
    assert head.startswith("After Session 1 ·") and "2023" in head, head


# --- item 6: messages people read -------------------------------------------------------------------------

EXCEPTION_NAME = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b|Traceback")


def test_import_status_says_it_finished_and_no_exception_text_on_the_page(user):
    status = user.import_status
    assert status.startswith("✓ Import finished.") and "Memory built for 10 sessions of 10" in status, status
    assert "building their memory" not in status
    for part in ("#compare-wrap", "#why-wrap", "#status", "#data-status", "#session-list"):
        text = user.page.inner_text(part) if user.page.locator(part).count() else ""
        assert not EXCEPTION_NAME.search(text), (part, text[:500])


def test_type_a_message_first_goes_away_when_typing_starts(user):
    p = user
    p.page.locator("#msg textarea").fill("")
    p.page.click("#send-btn")
    p.wait_status("#status", "Type a message first")
    p.page.locator("#msg textarea").press_sequentially("H")
    p.page.wait_for_function("() => !/Type a message first/.test(document.querySelector('#status').innerText)")
    p.page.locator("#msg textarea").fill("")


def test_delete_asks_once_and_keep_it_keeps_it(user):
    p = user
    if not p.page.locator("#memory-select input").is_visible():
        p.page.click("text=Your data: import, export, delete a memory, forget me")
    p.page.locator("#memory-select input").click()
    p.page.locator("#memory-select input").fill("pottery class")
    p.page.get_by_role("option").filter(has_text="pottery class").first.click()
    p.page.click("#delete-btn")
    ask = p.wait_status("#data-status", "cannot be undone")
    assert "pottery class" in ask and p.page.locator("#delete-yes-btn").is_visible()
    p.page.click("#delete-no-btn")
    p.page.wait_for_function(
        "() => !document.querySelector('#delete-yes-btn') || !document.querySelector('#delete-yes-btn').offsetParent"
    )
    p.page.locator("#graph-search input, #graph-search textarea").first.fill("pottery class")
    p.page.click("#graph-find-btn")
    assert "holding “pottery class”" in p.wait_status("#graph-found", "pottery class")  # still there
    p.page.click("#delete-btn")
    p.wait_status("#data-status", "cannot be undone")
    p.page.click("#delete-yes-btn")
    assert "Deleted the memory" in p.wait_status("#data-status", "Deleted the memory")
    p.page.locator("#graph-search input, #graph-search textarea").first.fill("pottery class")
    p.page.click("#graph-find-btn")
    p.wait_status("#graph-found", "No memory holds")
