"""The memory graph at 1,000 memories in real Chromium: what the default view draws, the session summaries
that open on a click, "Show everything", labels that never cover each other, and a search for an old memory.

The graph is synthetic (tests/ui_graph_synth.py: 40 sessions of 25 memories, a trace's retrieved
memories with their timelines) and goes through the app's code path (ui.graph_view.graph_html) into a
host page, in a box of the graph panel's width at 1400 px. Structure only: no timing is asserted (the
figures are tests/ui_graph_bench.py's).
"""

from __future__ import annotations

import re

import pytest

from tests.ui_fixtures import chromium_browser
from tests.ui_graph_synth import OLD_FACT, OLD_WORD, PER_SESSION, GraphHost, render, synthetic

pytestmark = pytest.mark.slow

N = 1000
browser = pytest.fixture(scope="module")(chromium_browser)


@pytest.fixture(scope="module")
def host():
    from ui.graph_view import static_dir

    h = GraphHost(static_dir())
    yield h
    h.close()


@pytest.fixture(scope="module")
def graph():
    return synthetic(N)


def open_frame(browser, host, html, width=600):
    host.show(html, width)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(host.url)
    frame = page.locator("#memory-graph iframe").element_handle().content_frame()
    frame.wait_for_function("() => window.graphReady === true", timeout=300_000)
    return page, frame


def next_view(frame, seq: int) -> dict:
    """Wait until the page has drawn a view after view `seq`; its summary."""
    frame.wait_for_function("(k) => window.viewShown && window.viewShown.seq > k", arg=seq, timeout=300_000)
    return frame.evaluate("() => window.viewShown")


def click_node(frame, node_id: str) -> None:
    pos = frame.evaluate("(id) => network.canvasToDOM(network.getPositions([id])[id])", node_id)
    frame.locator("#mynetwork canvas").click(position={"x": pos["x"], "y": pos["y"]})


def test_the_default_view_draws_this_reply_and_summarises_the_rest_by_session(browser, host, graph):
    page, frame = open_frame(browser, host, render(graph))
    try:
        shown = frame.evaluate("() => window.viewShown")
        assert frame.evaluate("() => scope.value") == "focus"
        # Bounded: the retrieved memories, their neighbours (at most 80) and one summary per session.
        n_sessions = N // PER_SESSION
        assert shown["memories"] <= len(graph.retrieved) + 80 and shown["groups"] <= n_sessions, shown
        assert frame.evaluate("() => nodes.length") == shown["memories"] + shown["groups"] < 200
        retrieved = frame.evaluate("() => window.labelCheck(1)")
        assert {r["id"] for r in retrieved} == graph.retrieved and all(not r["hidden"] for r in retrieved)
        # Every memory is either drawn or counted in its session's summary, named as the sidebar names it.
        summaries = frame.evaluate(
            "() => nodes.get().filter((n) => n.id.startsWith('g:')).map((n) => [n.id, groupText[n.id]])"
        )
        counts = [re.fullmatch(r"Session \d+ · (\d+) memor(?:y|ies)", t) for _, t in summaries]
        assert all(counts), summaries
        counted = sum(int(m.group(1)) for m in counts if m)
        assert counted + shown["memories"] == N, (counted, shown)
        assert "more in" in frame.inner_text("#count")
        # No two drawn labels cover each other; at least one of this reply's memories is labelled.
        assert frame.evaluate("() => window.labelOverlaps()") == 0
        assert any(r["label"] and r["labelIn"] for r in retrieved), retrieved
        # A click on a summary draws that session's memories one by one; "Fold" summarises it again.
        gid, text = summaries[0]
        count = int(text.split(" · ")[1].split()[0])
        session = int(gid[2:])
        seq = shown["seq"]
        click_node(frame, gid)
        opened = next_view(frame, seq)
        drawn = frame.evaluate("(si) => nodes.get().filter((n) => byId[n.id] && byId[n.id].si === si).length", session)
        assert drawn == frame.evaluate("(si) => raw.filter((n) => n.si === si).length", session)
        assert opened["memories"] == shown["memories"] + count and opened["groups"] == shown["groups"] - 1
        assert frame.evaluate(f"() => nodes.get('{gid}')") is None
        assert frame.evaluate("() => window.labelOverlaps()") == 0
        frame.click("#fold")
        assert next_view(frame, opened["seq"])["memories"] == shown["memories"]
        # "Show everything" is one choice away: every memory drawn, still no label over another.
        seq = frame.evaluate("() => window.viewShown.seq")
        frame.select_option("#scope", "all")
        everything = next_view(frame, seq)
        assert everything["memories"] == N and everything["groups"] == 0
        assert frame.evaluate("() => window.labelOverlaps()") == 0
    finally:
        page.close()


def test_a_search_finds_an_old_memory_and_the_default_view_draws_it_opened(browser, host, graph):
    from ui.graph_view import find_memories

    hits = find_memories(graph.view, OLD_WORD)
    assert [h["id"] for h in hits] == ["s1:m3"]  # the oldest session's only snake
    page, frame = open_frame(browser, host, render(graph, found=["s1:m3"], open_id="s1:m3"), width=380)
    try:
        shown = frame.evaluate("() => window.viewShown")
        assert shown["memories"] < 100, shown  # the match and its neighbours, not the 1,000
        found = frame.evaluate("() => window.labelCheck(4)")
        assert [f["id"] for f in found] == ["s1:m3"] and found[0]["inView"], found
        assert "adopted" in found[0]["label"] and found[0]["labelIn"], found
        panel = frame.inner_text("#panel")
        assert OLD_FACT[:30] in panel and "Session 1 · memory 3" in panel and "Source turns" in panel, panel
        # The box inside the frame searches every memory sent to it, drawn or summarised.
        seq = shown["seq"]
        frame.fill("#search", "Noodle")
        assert next_view(frame, seq)["memories"] == 1
        assert frame.inner_text("#count").startswith("1 shown")
        assert frame.evaluate("() => window.labelOverlaps()") == 0
    finally:
        page.close()
