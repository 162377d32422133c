"""In a real browser: after a chat, the memory is what the user said (issue: whose memory it is), and a
question retrieves by its own words, not the turns before it (the question leads retrieval).

The app runs its offline memory path (MEMORY_LLM_STEPS=off: THEANINE's memories are the session's
statements) with replies from the scripted server, so the assistant says what chat models say:
small talk, claims about itself, echoes of the user, and one promise.
"""

from __future__ import annotations

import sqlite3

import pytest

from tests.test_theanine_extract import CHAT
from tests.test_ui_usable import IMG, Page
from tests.ui_fixtures import PAGE_WAIT, chromium_browser, scripted_app

pytestmark = pytest.mark.slow

browser = pytest.fixture(scope="module")(chromium_browser)


server, app = scripted_app("whose", LLM_TIMEOUT=60, MEMORY_LLM_STEPS="off")


def retrieved(p: Page) -> list[str]:
    p.page.wait_for_selector("#why-memories tbody tr", timeout=PAGE_WAIT)
    return [r.split("\t")[1] for r in p.page.locator("#why-memories tbody tr").all_inner_texts()]


def test_the_memories_of_a_chat_are_the_users_and_the_question_leads(browser, app, server, screenshots):
    p = Page(browser, app.url)
    user_lines = [text for sp, text in CHAT if sp == "user"]
    replies = [text for sp, text in CHAT if sp == "assistant"]
    server.script("reply", *[("ok", r) for r in replies])
    for line in user_lines:
        p.send(line)
    p.page.click("#end-session-btn")  # its memory is built (offline), the next session opens
    p.wait_build_done()
    db = sqlite3.connect(f"file:{app.data_dir / 'sessions.sqlite3'}?mode=ro", uri=True)
    try:
        speakers = [r[0] for r in db.execute("SELECT speaker FROM graph_memories ORDER BY seq")]
        events = [r[0] for r in db.execute("SELECT event FROM graph_memories ORDER BY seq")]
    finally:
        db.close()
    # Before this change 6 of the 11 memories of this chat were the assistant's; now only its promise is.
    assert speakers.count("assistant") == 1 and "remind you" in events[speakers.index("assistant")], events
    assert speakers.count("user") >= 5, events
    # A question after two turns about the cat: the surfing memory leads, the cat does not crowd it out.
    server.script("reply", ("ok", "Pixel sounds sweet."), ("ok", "He is napping, then."), ("ok", "Noted."))
    p.send("Pixel is asleep on my keyboard again.")
    p.send("He loves the warm laptop.")
    p.send("How are my surfing lessons going?")
    got = retrieved(p)
    assert "surfing lessons" in got[0], got
    assert not any(e.startswith("assistant:") and "remind" not in e for e in got), got
    if screenshots.wanted:  # --screenshots
        screenshots(p.page, IMG / "chat_users_memories_1400.png")
        p.narrow()
        screenshots(p.page, IMG / "chat_users_memories_400.png")
    p.close()
