"""Time travel (issue 14): the memory graph after each ended session, and what each session added.

Fast tests check the history and the HTML on the scripted agent. The browser test imports the
first four sessions of LoCoMo conv-30 through the page's Data panel into app.py on its offline
defaults (memory built without LLM calls: fast and deterministic), opens "Time travel", moves the
slider to 1, 2 and 4, and compares what the sandboxed frame shows (the vis DataSet's visible and
highlighted nodes) with the app's database.

Run alone: python -m pytest tests/test_ui_timetravel.py -v
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from urllib.parse import unquote

import pytest

from memory.settings import Settings
from memory.userspace import user_key
from sessions import UserError, new_user_id, open_service
from sessions.lifecycle import parse_date
from sessions.recall import memory_history
from tests.conftest import LOCOMO_SMALL
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService
from tests.ui_fixtures import PAGE_WAIT, RunningApp, chromium_browser, upload

LOCOMO = LOCOMO_SMALL
XSS = "<img src=x onerror=alert(1)>"
N_SESSIONS = 4  # of conv-30 in the browser test
BUILD_TIMEOUT = 300_000


def _history(svc, uid, sessions):
    doc = {
        "sessions": [
            {"date": date, "turns": [{"speaker": "user", "text": t} for t in texts]} for date, texts in sessions
        ]
    }
    svc.import_history(uid, json.dumps(doc))


def test_history_tags_every_memory_and_link_with_the_session_that_added_it(tmp_path):
    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent()))
    uid, other = new_user_id(), new_user_id()
    _history(
        svc,
        uid,
        [
            ("2023-05-01", ["I adopted a dog.", "He is called Rex."]),
            ("2023-05-08", [f"Rex ate my shoes. {XSS}"]),
            ("2023-05-15", ["We moved to Lyon.", "Rex likes the river.", "I started a new job."]),
        ],
    )
    _history(svc, other, [("2023-01-01", ["Someone else's secret."])])
    h = memory_history(svc.rooms.memory, svc.user(uid))
    assert h.n_steps == 3
    assert [len(s.memories) for s in h.steps] == [2, 1, 3]
    assert [h.memories_after(k) for k in range(4)] == [0, 2, 3, 6]
    # The scripted agent links each memory to the one before: the link between sessions 1 and 2 is session 2's.
    assert [len(s.links) for s in h.steps] == [1, 1, 3]
    link = h.steps[1].links[0]
    assert link.earlier["event"] == "He is called Rex." and link.new["event"].startswith("Rex ate my shoes.")
    assert not any("secret" in m["event"] for s in h.steps for m in s.memories)  # another user's data never
    assert memory_history(svc.rooms.memory, svc.user(other)).n_steps == 1
    with pytest.raises(UserError):
        memory_history(svc.rooms.memory, svc.user("../not-an-id"))


def test_the_frame_data_and_the_lists_are_escaped_and_sized_once(tmp_path):
    from ui.timetravel import frame_data, frame_html, step_html

    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent()))
    uid = new_user_id()
    _history(svc, uid, [(f"2023-05-{d:02d}", [f"{XSS} fact {d}-{i}" for i in range(12)]) for d in range(1, 31)])
    h = memory_history(svc.rooms.memory, svc.user(uid))
    assert h.n_steps == 30 and h.memories_after(30) == 360
    data = frame_data(h, turns=lambda ids: {t: ("user", XSS) for t in ids})
    assert len(data["n"]) == 360 and data["T"]["n"] == 30 and data["T"]["at"] == 30
    assert [data["t"].count(k) for k in range(1, 31)] == [12] * 30  # every memory tagged with its step
    page = frame_html(h)
    assert "<img" not in unquote(page.split("#", 1)[1])  # memory text loses its angle brackets
    lists = [step_html(h, k) for k in range(31)]
    assert all("<img" not in x and "‹img" in x for x in lists[1:])  # as text, never a tag
    assert 'data-memories="24"' in lists[2] and 'data-added="12"' in lists[2]
    assert sum(len(x) for x in lists) < 400_000  # one small list per step


def test_every_step_list_is_sent_once_with_only_the_chosen_one_shown(tmp_path):
    from ui.timetravel import exchanges_text, steps_html

    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent()))
    uid = new_user_id()
    _history(svc, uid, [(f"2023-05-{d:02d}", [f"fact {d}-{i}" for i in range(3)]) for d in range(1, 6)])
    h = memory_history(svc.rooms.memory, svc.user(uid))
    page = steps_html(h, 2)
    assert page.count('class="mc-why tt-step"') == 6  # steps 0..5, switched in the browser (no server call)
    assert page.count('id="tt-changes-panel"') == 1
    assert 'id="tt-changes-panel" class="mc-why tt-step" data-step="2"' in page
    assert page.count("hidden class=") == 5
    # Exchanges as a person counts them (stored from 0, the end included): never "exchanges 0–0".
    assert exchanges_text(0, 0) == "exchange 1" and exchanges_text(0, 3) == "exchanges 1–4"
    assert "exchanges 0–0" not in steps_html(h)


def test_ask_as_of_a_session_prints_rounded_scores():
    from ui.timetravel import _score

    assert _score(0.015873015873015872) == "score 0.016" and _score(None) == "no score"


# --- in a real browser, on app.py's offline defaults --------------------------------------------------


def _sample_file(tmp_path: Path) -> Path:
    """The first N_SESSIONS sessions of conv-30, as a LoCoMo file (the app's own import path)."""
    sample = next(s for s in json.loads(LOCOMO.read_text()) if s["sample_id"] == "conv-30")
    conv = sample["conversation"]
    keep = {k: v for k, v in conv.items() if not k.startswith("session_")}
    for i in range(1, N_SESSIONS + 1):
        keep[f"session_{i}"] = conv[f"session_{i}"]
        keep[f"session_{i}_date_time"] = conv[f"session_{i}_date_time"]
    path = tmp_path / "conv-30-first4.json"
    path.write_text(json.dumps([{"sample_id": "conv-30", "conversation": keep, "qa": []}]))
    return path


def store_steps(data_dir: Path) -> list[dict]:
    """From the app's database, each ended session of the one user in time order: the ids of its memories
    and the edges its close made ([source, target]; the edge table names the session that made each)."""
    db = sqlite3.connect(f"file:{data_dir / 'sessions.sqlite3'}?mode=ro", uri=True)
    try:
        users = [r[0] for r in db.execute("SELECT DISTINCT user_id FROM sessions WHERE status = 'closed'")]
        assert len(users) == 1, users
        rows = db.execute(
            "SELECT session_id, date, seq FROM sessions WHERE user_id = ? AND status = 'closed'", users
        ).fetchall()
        rows = sorted(rows, key=lambda r: (parse_date(r[1]), r[2]))  # LoCoMo dates are kept as written
        k = user_key(users[0])
        mems = "SELECT memory_id FROM graph_memories WHERE user_key = ? AND session_id = ?"
        edges = "SELECT src, dst FROM graph_edges WHERE user_key = ? AND owner = ?"
        return [
            {
                "memories": [m for (m,) in db.execute(mems, (k, s))],
                "edges": [list(e) for e in db.execute(edges, (k, s))],
            }
            for (s, _, _) in rows
        ]
    finally:
        db.close()


browser = pytest.fixture(scope="module")(chromium_browser)


@pytest.fixture(scope="module")
def offline_app(tmp_path_factory):
    data = tmp_path_factory.mktemp("tt-app")
    app = RunningApp(data, data.parent / "tt-app.log")
    yield app
    app.stop()


def import_file(page, path: Path, timeout=BUILD_TIMEOUT) -> None:
    """Import a history through the Data panel and wait until its memory is built."""
    page.click("text=Your data: import, export, delete a memory, forget me")
    upload(page, "import-file", path)
    page.click("#import-btn")
    page.wait_for_function(
        "() => !document.querySelector('#job-progress') && "
        "/Memory built|failed/.test(document.querySelector('#status').innerText)",
        timeout=timeout,
    )


def open_timetravel(page, timeout=PAGE_WAIT, click=True):
    """Open the panel; returns the frame once its graph is drawn."""
    from ui.timetravel import ACCORDION

    if click:
        page.get_by_text(ACCORDION).first.click()
    page.wait_for_selector("#tt-graph iframe", timeout=timeout)
    frame = page.locator("#tt-graph iframe").element_handle().content_frame()
    # Polled by time, not by animation frame: Chromium pauses animation frames in a cross-origin frame
    # scrolled out of view (the page's own work goes on).
    frame.wait_for_function("() => window.graphReady === true && !!window.ttShown", timeout=timeout, polling=100)
    return frame


def set_step(page, frame, k: int, timeout=PAGE_WAIT) -> dict:
    """Move the slider to k as a person does (the range input) and wait until the frame shows step k."""
    page.locator("#tt-slider input[type=range]").fill(str(k))
    frame.wait_for_function("(k) => window.ttShown && window.ttShown.step === k", arg=k, timeout=timeout, polling=50)
    return frame.evaluate(
        """() => ({
          visible: nodes.get({filter: (n) => !n.hidden && !String(n.id).startsWith('g:')}).map((n) => n.id),
          marked: nodes.get({filter: (n) => !n.hidden && n.shape === 'diamond'}).map((n) => n.id),
          edges: edges.get({filter: (e) => !e.hidden}).map((e) => [e.from, e.to]),
          wideEdges: edges.get({filter: (e) => !e.hidden && e.width > 3}).map((e) => [e.from, e.to]),
          edgeTitles: edges.get({filter: (e) => !e.hidden}).map((e) => e.title),
          legendRelations: Array.from(document.querySelectorAll('#legend-now .rel')).map((s) => s.textContent),
          shown: window.ttShown,
        })"""
    )


@pytest.mark.slow
def test_slider_shows_the_memory_after_sessions_1_2_n_and_marks_what_each_added(browser, offline_app, tmp_path):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    dialogs: list[str] = []

    def dismiss(dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.goto(offline_app.url)
    page.wait_for_selector("#session-header", timeout=PAGE_WAIT)
    import_file(page, _sample_file(tmp_path))
    per_session = store_steps(offline_app.data_dir)
    assert len(per_session) == N_SESSIONS and all(s["memories"] for s in per_session), per_session
    assert any(s["edges"] for s in per_session[1:])  # later closes linked new memories to earlier ones
    frame = open_timetravel(page)
    assert page.locator("#tt-memory-graph").get_attribute("data-steps") == str(N_SESSIONS)
    assert frame.evaluate("() => raw.length") == sum(len(s["memories"]) for s in per_session)  # sent once
    n_all = sum(len(s["memories"]) for s in per_session)
    if n_all > 40:  # the default view is the graph's: this session's memories and neighbours, the rest by session
        got = set_step(page, frame, N_SESSIONS)
        added = set(per_session[-1]["memories"])
        assert added <= set(got["visible"]) <= {m for s in per_session for m in s["memories"]}
        assert got["shown"]["upTo"] == n_all and got["shown"]["memories"] == len(got["visible"])
    frame.select_option("#scope", "all")  # "Everything up to this session": every memory that existed
    for k in (1, 2, N_SESSIONS, 0, 2):
        got = set_step(page, frame, k)
        existed = {m for s in per_session[:k] for m in s["memories"]}
        added = set(per_session[k - 1]["memories"]) if k else set()
        links = {tuple(e) for s in per_session[:k] for e in s["edges"]}
        new_links = {tuple(e) for e in per_session[k - 1]["edges"]} if k else set()
        assert set(got["visible"]) == existed, k
        assert set(got["marked"]) == added, k  # what session k added carries the highlight, nothing else
        assert {tuple(e) for e in got["edges"]} == links, k
        assert {tuple(e) for e in got["wideEdges"]} == new_links, k  # and the links its close made
        assert got["shown"]["memories"] == len(existed)
        assert set(got["legendRelations"]) == set(got["edgeTitles"]), k  # the legend names what exists at step k
        # The list beside it (from the server) is that step's.
        page.wait_for_function(
            "(k) => document.querySelector('#tt-changes-panel')?.dataset.step === String(k)", arg=k, timeout=PAGE_WAIT
        )
        panel = page.locator("#tt-changes-panel")
        assert panel.get_attribute("data-memories") == str(len(existed))
        if k:
            assert panel.get_attribute("data-added") == str(len(added))
            assert page.locator("#tt-changes-panel .segment").count() >= 1  # SeCom: the session's segments
    assert not dialogs
    # Another browser is another user: no ended session, nothing of the first user's memory.
    other = browser.new_context(viewport={"width": 1400, "height": 1000})
    p2 = other.new_page()
    from ui.timetravel import ACCORDION

    p2.goto(offline_app.url)
    p2.wait_for_selector("#session-header", timeout=PAGE_WAIT)
    p2.get_by_text(ACCORDION).first.click()
    p2.wait_for_function("() => /No ended session yet/.test(document.querySelector('#tt-status').innerText)")
    assert p2.locator("#tt-graph iframe").count() == 0
    other.close()
    ctx.close()
