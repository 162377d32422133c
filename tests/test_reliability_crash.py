"""kill -9 of app.py in the middle of a reply and in the middle of a session close, then a restart.

The scripted LLM server holds one request open, so the app is frozen at an exact step when it is
killed: while the model is answering a message; after THEANINE's memory was written but before
SeCom's segments were (the half-built close); while the session is being summarised. After each
restart: no stored message is lost, SQLite passes its integrity check, no graph file is
half-written, the interrupted close completes by itself (app.py re-runs pending closes) and a
second close of the same session changes nothing.
"""

from __future__ import annotations

import time

import pytest

from tests.llm_server import LLMServer, app_llm_env
from tests.reliability_app import graphs_ok, sqlite_ok
from tests.ui_fixtures import RunningApp

pytestmark = pytest.mark.slow


def client_for(app):
    from gradio_client import Client

    return Client(app.url, verbose=False)


def kill9(app: RunningApp) -> None:
    app.proc.kill()  # SIGKILL: no cleanup, no atexit, no flush
    app.proc.wait(10)
    app._log.close()


def history(client, uid):
    return client.predict(uid, api_name="/history")["sessions"]


def wait_until(fn, timeout=90, step=0.5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(step)
    raise AssertionError("timed out waiting")


def test_kill9_during_reply_and_during_close_loses_nothing_and_recovers(tmp_path):
    data = tmp_path / "data"
    with LLMServer() as server:
        app = RunningApp(data, tmp_path / "app.log", **app_llm_env(server, LLM_TIMEOUT=120))
        try:
            c = client_for(app)
            uid = c.predict(api_name="/new_user")
            c.predict(uid, "2023-04-30", api_name="/new_session")  # sessions may not go back in time
            for text in ("I adopted a puppy named Rex from the shelter.", "Rex loves long walks in the park."):
                reply, trace = c.predict(uid, text, "theanine", api_name="/send_message")
                assert not trace.get("error") and reply

            # 1. Killed while the model is answering: the message was stored first.
            server.script("reply", ("hold", None))
            c.submit(uid, "My sister Mirela visits on Friday.", "theanine", api_name="/send_message")
            assert server.arrived["reply"].wait(60)
            kill9(app)
            server.release()
            sqlite_ok(data / "sessions.sqlite3")
            server.reset()
            app.start()
            c = client_for(app)
            turns = history(c, uid)[0]["turns"]
            assert [t["text"] for t in turns if t["speaker"] == "user"] == [
                "I adopted a puppy named Rex from the shelter.",
                "Rex loves long walks in the park.",
                "My sister Mirela visits on Friday.",
            ]
            assert turns[-1]["speaker"] == "user"  # no reply yet: the API can answer it again
            reply, trace = c.predict(uid, "theanine", api_name="/reply_again")
            assert reply and not trace.get("error")
            assert history(c, uid)[0]["turns"][-1]["text"] == reply

            # 2. Killed half-way through the close: THEANINE is written, SeCom is not.
            server.script("segment", ("hold", None))
            c.submit(uid, "", api_name="/end_session")
            assert server.arrived["segment"].wait(90)
            kill9(app)
            server.release()
            sqlite_ok(data / "sessions.sqlite3")
            graphs = graphs_ok(data)
            assert len(graphs) == 1 and "s1" in graphs[0]["built_sessions"]
            s1_ids = sorted(m["id"] for m in graphs[0]["memories"])
            assert s1_ids
            server.reset()
            app.start()
            c = client_for(app)
            # app.py re-runs the pending close in the background: only SeCom is left to build.
            wait_until(lambda: history(c, uid)[0]["status"] == "closed")
            assert server.count("summarise") == 0 and server.count("segment") == 1
            sessions = history(c, uid)
            assert [s["status"] for s in sessions] == ["closed", "open"]
            assert len([t for t in sessions[0]["turns"] if t["speaker"] == "user"]) == 3

            # 3. Killed while summarising the next session: nothing of it was written yet.
            for text in ("Rex got sick after eating chocolate.", "The vet said Rex must rest for a week."):
                reply, trace = c.predict(uid, text, "theanine", api_name="/send_message")
                assert not trace.get("error")
            server.script("summarise", ("hold", None))
            c.submit(uid, "", api_name="/end_session")
            assert server.arrived["summarise"].wait(60)
            kill9(app)
            server.release()
            sqlite_ok(data / "sessions.sqlite3")
            graphs_ok(data)
            server.reset()
            app.start()
            c = client_for(app)
            wait_until(lambda: [s["status"] for s in history(c, uid)] == ["closed", "closed", "open"])
            assert server.count("summarise") == 1

            # A second close of everything changes nothing, even when asked twice at once (one job per
            # user: the second request is answered "Busy with ..." while the first runs, or runs after it).
            jobs = [c.submit(uid, "", api_name="/end_session") for _ in range(2)]
            results, busy = [], []
            for j in jobs:
                try:
                    results.append(j.result(timeout=60))
                except Exception as e:
                    assert "Busy with" in str(e), e
                    busy.append(e)
            assert results and len(results) + len(busy) == 2
            assert all(r["errors"] == [] and r["closed"] == [] for r in results), results
            assert server.count("summarise") == 1
            assert [s["status"] for s in history(c, uid)] == ["closed", "closed", "open"]
        finally:
            app.stop()
            server.release()
        log = app.log()

    # With the app stopped: the memory on disk matches the graph, and closing again builds nothing.
    from memory.agent import MemoryAgent
    from memory.records import SessionRecord, Turn
    from memory.settings import Settings
    from sessions import open_service
    from sessions.store import Store

    graphs = graphs_ok(data)
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(data), **app_llm_env(server)})
    agent = MemoryAgent.from_settings(settings)
    open_service(settings, agent)  # wires the agent to the data dir's database (the graph lives there)
    g = agent.theanine.graph(uid)
    ids = sorted(m.id for m in g.memories())
    assert ids and len(set(ids)) == len(ids)
    assert g.built_sessions >= {"s1", "s2"}
    assert sorted(h.id for h in agent.store.get(uid, "theanine_memories")) == ids  # Chroma == graph, once
    segs = agent.store.get(uid, "secom_segments")
    assert {h.metadata["session_id"] for h in segs} == {"s1", "s2"}
    store = Store(data / "sessions.sqlite3")
    s1 = store.session(uid, "s1")
    assert s1 is not None
    rec = SessionRecord(
        "s1", s1.date, [Turn(m.speaker, m.text, m.turn_id()) for m in store.messages(uid, "s1", include_errors=False)]
    )
    again = agent.close_session(uid, rec, settings.options)
    assert again.already_built and not again.new_memories and not again.new_segments
    assert sorted(h.id for h in agent.store.get(uid, "theanine_memories")) == ids
    assert len(agent.store.get(uid, "secom_segments")) == len(segs)
    assert [i for i in ids if i.startswith("s1:")] == s1_ids  # the recovery did not rebuild THEANINE
    assert "Traceback" not in log, log
