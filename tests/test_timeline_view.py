"""Issue 32 item 5: See why shows each THEANINE timeline as a timeline, and the graph labels its arrows.

A timeline is drawn as a chain: each memory once, joined by arrows that carry their relation, the part
that reached the reply solid and the rest dimmed (with why), the retrieved memory starred, the refined
text beside the chain. Memories are named and dated as the sidebar names sessions and writes dates.
The HTML builders are checked directly (fast); one browser test renders them in Gradio and Chromium.
"""

from __future__ import annotations

import re
from html import unescape
from typing import Unpack, cast

import pytest

from memory.locks import UserLocks
from memory.trace_types import ChainMemory, RetrievedMemory, Timeline, TraceDict
from tests.ui_fixtures import PAGE_WAIT, chromium_browser
from ui import compare_view, see_why
from ui.graph_view import graph_data, graph_html, static_dir

XSS = "<img src=x onerror=alert(1)>"
PORTO = "Ann lived in Porto"
LISBON = "Ann moved to Lisbon"
DOG = "Ann adopted a dog named Rex"
WALKS = "Ann walks Rex every morning"
CLUB = f"Ann joined a dog club {XSS}"
SESSIONS = {"s3": "1", "s7": "2", "s18": "15", "s20": "16"}  # internal id -> the sidebar's number


def memory(mid: str, event: str, time: str, relation: str = "", used: bool = True, **flags) -> ChainMemory:
    m: ChainMemory = {
        "id": mid,
        "event": event,
        "time": time,
        "session_id": mid.split(":")[0],
        "relation": relation,
        "used": used,
        "anchor": flags.get("anchor", False),
    }
    if flags.get("history"):
        m["history"] = True
    return m


# Root to leaf: the dog (cut by the budget), walking it (retrieved; it replaced an earlier memory given as
# history), the club. The text is what the reply read: the retrieved memory marked "now:" in its place.
CHAIN = [
    memory("s3:m0", DOG, "2023-05-08", used=False),
    memory("s18:m46", WALKS, "2023-06-01", "Cause", anchor=True),
    memory("s7:m2", PORTO, "2023-05-20", "Changed", history=True),
    memory("s20:m1", CLUB, "2023-07-01 13:56", "Want"),
]
TEXT = f"now: [2023-06-01: {WALKS}] before: [2023-05-20: {PORTO}] -(Want)- [2023-07-01 13:56: {CLUB}]"
REFINED = "Rex shapes Ann's mornings; she met other owners at a club."


def trace(timelines: list[Timeline], refined: list[str] | None = None, **extra: Unpack[TraceDict]) -> TraceDict:
    t: TraceDict = {
        "strategy": "theanine",
        "memories": [
            {"id": "s18:m46", "event": WALKS, "time": "2023-06-01", "session_id": "s18", "score": 0.61},
            {"id": "s7:m9", "event": LISBON, "time": "2023-05-21", "session_id": "s7", "score": 0.4},
        ],
        "timelines_raw": timelines,
        "timelines_refined": refined if refined is not None else [],
        "memory_path": "llm",
    }
    t.update(extra)
    return t


def chained(**over: Unpack[Timeline]) -> Timeline:
    t: Timeline = {
        "anchor": "s18:m46",
        "nodes": ["s18:m46", "s7:m2", "s20:m1"],
        "text": TEXT,
        "covers": [],
        "chain": CHAIN,
        "whole": False,
    }
    t.update(over)
    return t


def timelines_part(html: str) -> str:
    """The timelines section alone (the memory table above it lists the retrieved memories again)."""
    return html.split('id="why-timelines"', 1)[1].split("</section>", 1)[0]


def items(html: str, cls: str) -> list[str]:
    """The opening tags and text of every element of class `cls` (a flat view: enough for these checks)."""
    return re.findall(rf'<div class="{cls}[^"]*"[^>]*>.*?</div>', html)


def text_of(fragment: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", fragment))


# --- See why: the chain ---------------------------------------------------------------------------------


def test_a_chain_shows_each_memory_once_joined_by_labelled_arrows():
    part = timelines_part(see_why.trace_html(trace([chained()], [REFINED]), sessions=SESSIONS))
    shown = text_of(part)
    for event in (DOG, WALKS, PORTO, CLUB):
        assert shown.count(event) == 1, (event, shown)
    assert "now:" not in shown and "before:" not in shown  # the reply's markers: the drawing says it instead
    # Every arrow carries its relation, in the chain's order; the earlier version's arrow is Changed.
    arrows = items(part, "mc-link")
    relations = [m.group(1) for a in arrows if (m := re.search(r'data-relation="([^"]*)"', a))]
    assert relations == ["Cause", "Changed", "Want"], relations
    assert all(r in text_of(a) for r, a in zip(relations, arrows, strict=True))
    # Memories come in the chain's order; the earlier version the retrieved memory replaced, inside its box.
    order = [shown.index(e) for e in (DOG, WALKS, PORTO, CLUB)]
    assert order == sorted(order), order
    assert "<img" not in part and "&lt;img src=x onerror=alert(1)&gt;" in part


def test_the_part_that_reached_the_reply_is_marked_and_the_retrieved_memory_starred():
    part = timelines_part(see_why.trace_html(trace([chained()], [REFINED]), sessions=SESSIONS))
    boxes = re.findall(r'<div class="mc-node ([^"]*)" data-id="([^"]*)" data-used="(\d)" data-anchor="(\d)">', part)
    by_id = {mid: (cls, used, anchor) for cls, mid, used, anchor in boxes}
    assert set(by_id) == {"s3:m0", "s18:m46", "s7:m2", "s20:m1"}
    assert by_id["s3:m0"][:2] == ("mc-unused", "0")  # cut by the budget: dimmed
    assert all(by_id[m][1] == "1" and "mc-used" in by_id[m][0] for m in ("s18:m46", "s7:m2", "s20:m1"))
    assert [m for m, v in by_id.items() if v[2] == "1"] == ["s18:m46"]
    dog = part.split('data-id="s3:m0"', 1)[1].split('<div class="mc-link', 1)[0]
    assert "not in the reply: budget" in dog
    walks = part.split('data-id="s18:m46"', 1)[1].split('<div class="mc-link', 1)[0]
    assert "★" in walks and "★" not in dog
    # The arrow from the cut memory did not reach the reply either: drawn off.
    assert 'mc-link mc-off" data-relation="Cause"' in part and 'mc-link" data-relation="Want"' in part
    assert "3 of 4 memories reached the reply" in text_of(part)
    whole = timelines_part(
        see_why.trace_html(
            trace([chained(chain=[{**c, "used": True} for c in CHAIN], whole=True)], [REFINED]), sessions=SESSIONS
        )
    )
    assert "mc-node mc-unused" not in whole and "the whole timeline reached the reply" in whole


def test_a_memory_another_timeline_gave_says_so():
    other: Timeline = {"anchor": "s3:m0", "nodes": ["s3:m0"], "text": f"[2023-05-08: {DOG}]", "chain": [CHAIN[0]]}
    part = timelines_part(see_why.trace_html(trace([chained(), other], [REFINED, ""]), sessions=SESSIONS))
    first = part.split('<li class="timeline"')[1]
    assert "in the reply with timeline 2" in first and "not in the reply: budget" not in first


def test_the_refined_text_sits_beside_its_chain_and_unrefined_says_why():
    second = chained(anchor="s20:m1", chain=[{**c, "anchor": c["id"] == "s20:m1"} for c in CHAIN])
    notice = "Timelines are shown as retrieved, not refined: the model is busy"
    part = timelines_part(see_why.trace_html(trace([chained(), second], [REFINED, ""], notices=[notice])))
    first, other = part.split('<li class="timeline"')[1:]
    # One row per timeline: the chain, then (beside it, or under it on a narrow panel) its refined text.
    assert first.index('class="mc-chain"') < first.index('class="mc-refined"')
    assert REFINED in text_of(first.split('class="mc-refined"')[1]) and REFINED not in text_of(other)
    assert "(not refined: Timelines are shown as retrieved, not refined: the model is busy)" in other
    # Offline: the existing words.
    offline = timelines_part(see_why.trace_html(trace([chained()], [], memory_path="offline")))
    assert "(not refined: no LLM step with the bundled model" in offline
    # A refinement that gave the raw text back is not called refined.
    failed = trace([chained()], [TEXT], llm_calls=[{"purpose": "refine", "status": "fallback", "detail": "bad JSON"}])
    assert "(not refined: the refine step failed: bad JSON)" in timelines_part(see_why.trace_html(failed))


def test_memories_are_named_and_dated_as_the_sidebar_does():
    html = see_why.trace_html(trace([chained()], [REFINED]), sessions=SESSIONS)
    part = timelines_part(html)
    assert "Session 15 · memory 46" in part and "Session 1 · memory 0" in part and "s18:m46" not in text_of(part)
    # One date style (the sidebar's), the stored text kept in the title.
    assert '<span class="mc-date" title="2023-06-01">Thu 1 Jun 2023</span>' in part
    assert '<span class="mc-date" title="2023-07-01 13:56">Sat 1 Jul 2023 13:56</span>' in part
    table = html.split('id="why-memories"', 1)[1].split("</section>", 1)[0]
    assert '<td data-label="memory" title="s18:m46">Session 15 · memory 46</td>' in table and "Thu 1 Jun 2023" in table
    # Without the numbers (a caller that has none), the stored id: never a made-up session number.
    assert "s18:m46" in timelines_part(see_why.trace_html(trace([chained()], [REFINED])))


def test_a_trace_stored_before_chains_is_drawn_from_its_text_each_memory_once():
    # Stored by the previous version: the current fact said first ("now:") and again in its place.
    old: Timeline = {
        "anchor": "s7:m9",
        "nodes": ["s7:m9", "s3:m0", "s7:m2"],
        "text": f"now: [2023-05-21: {LISBON}] [2023-05-08: {DOG}] -(SameTopic)- [2023-05-20: {PORTO}] "
        f"-(Changed)- [2023-05-21: {LISBON}]",
        "covers": [],
    }
    part = timelines_part(see_why.trace_html(trace([old], ["Ann lives in Lisbon now."]), sessions=SESSIONS))
    shown = text_of(part)
    assert all(shown.count(e) == 1 for e in (LISBON, DOG, PORTO)), shown
    assert "now:" not in shown and "[" not in shown
    relations = re.findall(r'class="mc-link[^"]*" data-relation="([^"]*)"', part)
    assert relations == ["SameTopic", "Changed"]
    assert re.search(r'data-id="s7:m9" data-used="1" data-anchor="1"', part) and "Session 2 · memory 9" in part
    assert "Ann lives in Lisbon now." in part and "mc-node mc-unused" not in part
    # A text that does not read as a timeline is shown as it is.
    odd = timelines_part(see_why.trace_html(trace([{"anchor": "x", "nodes": ["x"], "text": XSS}], [""])))
    assert "&lt;img src=x onerror=alert(1)&gt;" in odd and "<img" not in odd


def test_the_compare_view_names_memories_the_same_way():
    html = compare_view.compare_html(
        "Where does Ann live?",
        {"theanine": {"text": "Lisbon", "done": True, "trace": trace([chained()], [REFINED])}},
        ["theanine"],
        sessions=SESSIONS,
        why=see_why.trace_html,
    )
    assert "Session 15 · memory 46" in html and 'id="why-timelines"' not in html


# --- the graph ------------------------------------------------------------------------------------------


def graph_view() -> dict:
    nodes = [
        {"id": c["id"], "event": c["event"], "time": c["time"], "session_id": c["session_id"], "turns": []}
        for c in CHAIN
    ]
    edges = [
        {"source": "s3:m0", "target": "s18:m46", "relation": "Cause"},
        {"source": "s7:m2", "target": "s18:m46", "relation": "Changed"},
        {"source": "s18:m46", "target": "s20:m1", "relation": "Want"},
    ]
    return {"nodes": nodes, "edges": edges}


GRAPH_SESSIONS = [
    ("s3", "Session 1 · Mon 8 May 2023", 0.0),
    ("s7", "Session 2 · Sat 20 May 2023", 0.3),
    ("s18", "Session 15 · Thu 1 Jun 2023", 0.6),
    ("s20", "Session 16 · Sat 1 Jul 2023", 1.0),
]


def test_graph_edges_carry_their_relation_and_nodes_the_sidebar_names():
    data = graph_data(graph_view(), retrieved={"s18:m46"}, sessions=GRAPH_SESSIONS)
    assert sorted((e["from"], e["to"], e["label"]) for e in data["e"]) == [
        ("s18:m46", "s20:m1", "Want"),
        ("s3:m0", "s18:m46", "Cause"),
        ("s7:m2", "s18:m46", "Changed"),
    ]
    assert all(e["label"] == e["title"] for e in data["e"])
    assert data["o"]["edges"]["font"]["size"] <= 10  # small: the label sits on the arrow
    # Dated as the sidebar writes dates (the stored date kept); named in the page from the session's label.
    by = {n["id"]: n for n in data["n"]}
    assert (by["s20:m1"]["tm"], by["s20:m1"]["tr"]) == ("Sat 1 Jul 2023 13:56", "2023-07-01 13:56")
    assert data["s"][by["s18:m46"]["si"]][1] == "Session 15 · Thu 1 Jun 2023"
    assert "<" not in str(data)


# --- in a browser: Gradio's gr.HTML, the app's CSS, Chromium ----------------------------------------------


browser = pytest.fixture(scope="module")(chromium_browser)


@pytest.fixture(scope="module")
def shown_app():
    """A Blocks with See why (one chained timeline, refined) and the graph, on the app's CSS."""
    import gradio as gr

    from tests.servers import free_port
    from ui.layout import CSS

    gr.set_static_paths([static_dir()])
    with gr.Blocks() as demo:
        gr.HTML(see_why.trace_html(trace([chained()], [REFINED]), sessions=SESSIONS), elem_id="why-wrap")
        gr.HTML(graph_html(graph_view(), retrieved={"s18:m46"}, sessions=GRAPH_SESSIONS))
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, css=CSS, quiet=True)
    yield f"http://127.0.0.1:{port}/"
    demo.close()


@pytest.mark.slow
def test_in_a_browser_the_chain_reads_at_400_px_and_the_graph_labels_its_arrows(browser, shown_app):
    page = browser.new_page(viewport={"width": 400, "height": 900})
    page.goto(shown_app)
    page.wait_for_selector("#why-timelines .mc-node", timeout=PAGE_WAIT)
    box = """(s) => Array.from(document.querySelectorAll(s)).map((e) => {
        const r = e.getBoundingClientRect(); return {x: r.x, y: r.y, w: r.width, h: r.height, r: r.right}; })"""
    # Nothing sideways; memories stacked, the refined text under the chain on a phone.
    assert page.evaluate("() => document.documentElement.scrollWidth <= window.innerWidth")
    nodes = page.evaluate(box, "#why-timelines .mc-node")
    assert len(nodes) == 4 and all(n["r"] <= 400 for n in nodes), nodes
    assert all(nodes[i + 1]["y"] > nodes[i]["y"] for i in range(3)), nodes
    chain, refined = page.evaluate(box, "#why-timelines .mc-chain")[0], page.evaluate(box, ".mc-tl .mc-refined")[0]
    assert refined["y"] >= chain["y"] + chain["h"] - 1, (chain, refined)
    # The style arrived with gr.HTML: the cut memory is dimmed and dashed, the retrieved one outlined.
    cut = page.evaluate(
        """() => { const s = getComputedStyle(document.querySelector('.mc-node.mc-unused'));
                   return [Number(s.opacity), s.borderTopStyle]; }"""
    )
    assert cut[0] < 1 and cut[1] == "dashed", cut
    assert "Cause" in page.inner_text("#why-timelines .mc-link >> nth=0")
    # Wide: the refined text beside its chain.
    page.set_viewport_size({"width": 1400, "height": 900})
    chain, refined = page.evaluate(box, "#why-timelines .mc-chain")[0], page.evaluate(box, ".mc-tl .mc-refined")[0]
    assert refined["x"] >= chain["x"] + chain["w"] - 1 and refined["y"] < chain["y"] + chain["h"], (chain, refined)
    # The graph: every edge carries its relation as its label; the hover names memories as the sidebar does.
    frame = page.locator("#memory-graph iframe").element_handle().content_frame()
    frame.wait_for_function("() => window.graphReady === true", timeout=PAGE_WAIT)
    labels = frame.evaluate("() => edges.get().map((e) => [e.title, e.label])")
    assert sorted(labels) == [["Cause", "Cause"], ["Changed", "Changed"], ["Want", "Want"]], labels
    # Drawn on the retrieved memory's arrows, at a readable size on screen (elsewhere only when zoomed in).
    px = frame.evaluate("() => edges.get().map((e) => e.font.size * network.getScale())")
    assert len(px) == 3 and all(x >= 9 for x in px), px
    hover = frame.evaluate("() => Array.from(nodes.get('s18:m46').title.children).map((d) => d.textContent)")
    assert hover[:3] == [WALKS, "Session 15 · memory 46", "Thu 1 Jun 2023"], hover
    frame.evaluate("() => openPanel('s20:m1')")  # a click opens the memory: named and dated the same way
    assert "Session 16 · memory 1 · Sat 1 Jul 2023 13:56" in frame.inner_text("#panel")
    assert page.locator('img[src="x"]').count() == 0
    page.close()


# --- the real THEANINE trace -----------------------------------------------------------------------------


def test_a_real_theanine_trace_draws_its_chain_each_memory_once(tmp_path, chroma_store, fake_embedder):
    """Memory built and retrieved by memory.theanine (scripted LLM: every link a Cause), the budget too
    small for the whole timeline: the chain shows every memory once, the cut ones dimmed."""
    from memory.llm import LLMSession
    from memory.settings import Options
    from memory.theanine.strategy import TheanineMemory
    from memory.trace import Trace
    from tests.fakes import ScriptedLLM
    from tests.test_theanine_memory import answer_for, sess

    tm = TheanineMemory(chroma_store, fake_embedder, tmp_path, UserLocks())
    llm = ScriptedLLM(answer_for)
    days = [
        ("s1", "2023-05-01", "I adopted a puppy named Biscuit today after months of looking at shelters"),
        ("s2", "2023-05-08", "My puppy Biscuit chewed my favourite running shoes into pieces"),
        ("s3", "2023-05-15", "Biscuit and I started puppy classes so he learns to leave shoes alone"),
        ("s4", "2023-05-22", "At puppy class Biscuit finally learned to sit and wait for his treat"),
    ]
    for sid, date, text in days:
        tm.build("u1", sess(sid, date, text, "Nice!"), LLMSession(llm, Trace("close")), Options(), Trace("close"))
    trace = Trace("theanine")
    opts = Options(k=1, budget=50, timeline_packing="whole")
    raw = tm.retrieve("u1", "Biscuit learned to sit at puppy class", opts, trace)
    tm.refine(LLMSession(llm, trace), "user: how is Biscuit?", raw, trace)
    t = trace.to_dict()
    assert t["timelines_raw"] and all("chain" in x for x in t["timelines_raw"])
    numbers = {"s1": "1", "s2": "2", "s3": "3", "s4": "4"}
    part = timelines_part(see_why.trace_html(t, sessions=numbers))
    shown = text_of(part)
    first = t["timelines_raw"][0]
    events = [c["event"] for c in first["chain"]]
    assert len(events) >= 3 and all(shown.count(e) == 1 for e in events), shown
    assert re.findall(r'class="mc-link[^"]*" data-relation="([^"]*)"', part)[: len(events) - 1] == ["Cause"] * (
        len(events) - 1
    )
    used = re.findall(r'data-id="([^"]*)" data-used="1"', part)
    assert used and set(used) <= set(first["nodes"]) | {n for x in t["timelines_raw"] for n in x["nodes"]}
    assert not first["whole"] and "not in the reply: budget" in part and "mc-node mc-unused" in part
    assert "Session 4 · memory 0" in part and "refined 0" in part


def test_trace_tables_round_scores_say_a_shared_value_once_and_list_segments_by_score():
    """Issue 36 item 4: no raw floats, no column repeating one sentence on every row, segments best first."""
    mems: list[RetrievedMemory] = [
        {
            "id": "s3:m1",
            "session_id": "s3",
            "event": PORTO,
            "time": "2023-05-08",
            "score": 1.5169215202331543,
            "built_by": "offline: the session's statements",
        },
        {
            "id": "s7:m2",
            "session_id": "s7",
            "event": LISBON,
            "time": "2023-06-01",
            "score": 0.25,
            "built_by": "offline: the session's statements",
        },
    ]
    trace: TraceDict = {"strategy": "theanine", "memories": mems}
    html = see_why.trace_html(trace, sessions=SESSIONS)
    table = html[html.index('<table class="mc-table mc-mem"') :]
    table = table[: table.index("</table>")]
    assert "1.517" in table and "1.5169215" not in html
    assert "<th>made</th>" not in table and html.count("offline: the session&#x27;s statements") == 1
    assert 'data-label="event"' in table  # on a phone each row is a card labelled by column
    mems[1]["built_by"] = "LLM summary"
    table = see_why.trace_html(trace, sessions=SESSIONS)
    assert "<th>made</th>" in table  # different values stay in their column
    segs = [  # a stored segment's score may be null
        {
            "id": f"g{i}",
            "session_id": "s3",
            "date": "2023-05-08",
            "text": f"text {i}",
            "key": f"key {i}",
            "summary": f"topic {i}",
            "score": score,
        }
        for i, score in enumerate((0.2, 0.9, None, 0.5))
    ]
    html = see_why.trace_html(cast(TraceDict, {"strategy": "secom", "segments": segs}), sessions=SESSIONS)
    assert re.findall(r'data-id="(g\d)"', html) == ["g1", "g3", "g0", "g2"]
