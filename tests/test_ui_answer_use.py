"""In a real browser: See why says whether the reply used the memory (issue 47, item 5).

app.py runs its offline memory path (MEMORY_LLM_STEPS=off, as on the bundled model) with replies from the
scripted server: a person says where they live, moves, and asks a week later; the scripted reply names the
old city. See why names the memory the reply's words came from and warns that a later memory replaced it;
an unrelated reply says no memory was used; clicking the first reply again shows its check (stored).
"""

from __future__ import annotations

import pytest

from tests.test_ui_usable import IMG, Page
from tests.ui_fixtures import PAGE_WAIT, chromium_browser, scripted_app

pytestmark = pytest.mark.slow

browser = pytest.fixture(scope="module")(chromium_browser)

server, app = scripted_app("answeruse", LLM_TIMEOUT=60, MEMORY_LLM_STEPS="off")


def answer_block(p: Page) -> dict:
    p.page.wait_for_selector("#why-answer", timeout=PAGE_WAIT)
    return p.page.evaluate(
        """() => { const s = document.getElementById('why-answer');
                   return {used: s.dataset.used, stale: s.dataset.stale, text: s.innerText,
                           marked: [...s.querySelectorAll('mark')].map(m => m.innerText),
                           visible: s.getBoundingClientRect().height > 0}; }"""
    )


def test_see_why_shows_the_memory_the_reply_used_and_a_replaced_value(browser, app, server, screenshots):
    p = Page(browser, app.url)
    server.script("reply", ("ok", "Porto is lovely."), ("ok", "Congratulations on the move!"))
    p.send("I live in Porto with my two roommates.")
    p.page.click("#end-session-btn")
    p.wait_build_done()
    p.send("I live in Lisbon now, the move went smoothly.")
    p.page.click("#end-session-btn")
    p.wait_build_done()

    server.script("reply", ("ok", "You live in Porto with your roommates."))
    p.send("Where do I live now?")
    got = answer_block(p)
    assert got["visible"] and got["used"] == "1" and got["stale"] == "1", got
    assert "Porto" in got["marked"], got
    warning = p.page.inner_text("#why-answer .mc-stale")
    assert "Porto" in warning and "Lisbon" in warning, warning
    if screenshots.wanted:  # --screenshots
        p.page.locator("#why-answer").scroll_into_view_if_needed()
        screenshots(p.page, IMG / "ui_answer_use_1400.png")

    server.script("reply", ("ok", "I'm doing fine, thank you for asking!"))
    p.send("How are you today?")
    p.page.wait_for_function(
        "() => (document.getElementById('why-answer') || {dataset: {}}).dataset.used === '0'", timeout=PAGE_WAIT
    )
    assert "No memory used" in answer_block(p)["text"]

    p.bots().first.click()  # the first reply's trace, as stored: its check comes back with it
    p.page.wait_for_function(
        "() => (document.getElementById('why-answer') || {dataset: {}}).dataset.stale === '1'", timeout=PAGE_WAIT
    )
    p.close()
