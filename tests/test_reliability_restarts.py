"""A real PostgreSQL server (tests/pg_server.py) stopped and started again while app.py runs on it.

The app keeps running through the outage. While the database is down, every request gets a clear
message (never "Something went wrong", never a stack trace), and what was stored before stays. A
message sent while it is down is refused with "not saved: send it again", so the client keeps it; a
message whose reply was being written when it went down is kept (it was stored first) and Retry
answers it. A session close cut by the outage stays "closing" and is completed, once, by the next
End session: no memory is built twice (graph ids unique, Chroma ids == graph ids).

The LLM is the scripted server (tests/llm_server.py), which holds a request open, so the database
is stopped at an exact step (mid-reply, mid-summary, mid-segmentation); the vectors are in a real
`chroma run`, so a second client can count them while the app runs.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tests.llm_server import LLMServer, app_llm_env
from tests.pg_server import pg_server, unavailable_reason
from tests.reliability_app import TRACEBACK
from tests.servers import chroma_cmd, free_port, running
from tests.ui_fixtures import RunningApp

pytestmark = pytest.mark.slow

DOWN = "database cannot be reached"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("pg-restart")
    port = free_port()
    chroma = chroma_cmd(root / "chroma", port), f"http://127.0.0.1:{port}/api/v2/heartbeat"
    with pg_server(fsync=False) as pg, LLMServer() as llm, running(*chroma, log=root / "chroma.log"):
        env = app_llm_env(llm, DATABASE_URL=pg.url, CHROMA_HOST="127.0.0.1", CHROMA_PORT=port, LLM_TIMEOUT=120)
        app = RunningApp(root / "data", root / "app.log", **env)
        try:
            yield {"pg": pg, "llm": llm, "app": app, "chroma_port": port}
        finally:
            llm.release()
            if not pg.running():
                pg.start()
            app.stop()
        log = app.log()
    assert not TRACEBACK.search(log), log


def client(app):
    from gradio_client import Client

    return Client(app.url, verbose=False)


def history(c, uid):
    return c.predict(uid, api_name="/history")["sessions"]


def user_texts(session: dict) -> list[str]:
    return [t["text"] for t in session["turns"] if t["speaker"] == "user"]


def chat(c, uid, *texts):
    for text in texts:
        reply, trace = c.predict(uid, text, "theanine", api_name="/send_message")
        assert reply and not trace.get("error"), trace


def refused(fn, *args, **kwargs) -> str:
    """The message of a request refused while the database is down."""
    with pytest.raises(Exception) as e:
        fn(*args, **kwargs)
    text = str(e.value)
    assert DOWN in text and "Something went wrong" not in text and not TRACEBACK.search(text), text
    return text


def stored_memories(url: str, uid: str) -> list[str]:
    from memory.userspace import user_key

    eng = sa.create_engine(url)
    try:
        with eng.connect() as conn:
            q = sa.text("SELECT memory_id FROM graph_memories WHERE user_key = :k ORDER BY memory_id")
            return list(conn.execute(q, {"k": user_key(uid)}).scalars())
    finally:
        eng.dispose()


def chroma_ids(port: int, uid: str, kind: str) -> list[str]:
    from memory.store import ChromaStore

    return sorted(h.id for h in ChromaStore(host="127.0.0.1", port=port).get(uid, kind))


def a_user_with_a_built_session(c) -> str:
    uid = c.predict(api_name="/new_user")
    c.predict(uid, "2023-04-30", api_name="/new_session")
    chat(c, uid, "My cat Miso hates thunderstorms.", "Miso hides under the bed when it rains.")
    ended = c.predict(uid, "2023-05-01", api_name="/end_session")
    assert ended["errors"] == [] and ended["closed"][0]["new_memories"], ended
    return uid


def test_postgres_restarted_mid_chat_keeps_every_message_and_chat_continues(stack):
    pg, llm, app = stack["pg"], stack["llm"], stack["app"]
    c = client(app)
    uid = a_user_with_a_built_session(c)
    llm.reset()

    # 1. Down before a message is sent: refused clearly, "not saved", so the sender keeps it.
    pg.stop()
    text = refused(c.predict, uid, "Is Miso still scared of storms?", "theanine", api_name="/send_message")
    assert "not saved" in text
    refused(c.predict, uid, api_name="/history")
    pg.start()
    chat(c, uid, "Is Miso still scared of storms?")  # sent again: stored once, answered

    # 2. Down while the reply is being written: the message was stored before the model was asked.
    llm.script("reply", ("hold", None))
    job = c.submit(uid, "Miso also hates the vacuum cleaner.", "theanine", api_name="/send_message")
    assert llm.arrived["reply"].wait(60)
    pg.stop()
    llm.release()
    with pytest.raises(Exception) as e:
        job.result(timeout=120)
    assert DOWN in str(e.value) and "Retry" in str(e.value), e.value
    pg.start()
    llm.reset()
    s = history(c, uid)[-1]
    assert user_texts(s) == ["Is Miso still scared of storms?", "Miso also hates the vacuum cleaner."]
    assert s["turns"][-1]["speaker"] == "user"  # its reply was not stored: Retry answers it
    reply, trace = c.predict(uid, "theanine", api_name="/reply_again")
    assert reply and not trace.get("error"), trace
    assert any("Miso" in m["event"] for m in trace["memories"])  # memory from before the outage
    chat(c, uid, "Tell me what you know about Miso.")
    s = history(c, uid)[-1]
    assert len(user_texts(s)) == 3 and [t["speaker"] for t in s["turns"]] == ["user", "assistant"] * 3


@pytest.mark.parametrize("step", ["summarise", "segment"])
def test_postgres_restarted_mid_close_completes_the_close_once(stack, step):
    """summarise: the database goes down while the LLM summarises (nothing of the close stored yet);
    segment: while SeCom segments (THEANINE's part is stored)."""
    pg, llm, app = stack["pg"], stack["llm"], stack["app"]
    c = client(app)
    uid = a_user_with_a_built_session(c)
    chat(c, uid, "Rex got sick after eating chocolate.", "The vet said Rex must rest for a week.")
    before = stored_memories(pg.url, uid)
    llm.reset()
    llm.script(step, ("hold", None))
    job = c.submit(uid, "2023-05-02", api_name="/end_session")
    assert llm.arrived[step].wait(90)
    after_theanine = stored_memories(pg.url, uid)
    pg.stop()
    llm.release()
    try:
        ended = job.result(timeout=120)
        errors = ended["errors"]
    except Exception as e:  # the close's own bookkeeping needs the database too
        errors = [str(e)]
    assert errors and DOWN in errors[0] and "Something went wrong" not in errors[0], errors
    refused(c.predict, uid, "", api_name="/end_session")  # while down: refused, nothing half-done
    pg.start()
    assert [s["status"] for s in history(c, uid)] == ["closed", "closing", "open"]
    ended = c.predict(uid, "", api_name="/end_session")
    assert ended["errors"] == [] and [x["session_id"] for x in ended["closed"]] == ["s2"], ended
    done = ended["closed"][0]
    if step == "segment":
        # Both memories were written (Chroma was up) before the outage hit the close's bookkeeping:
        # the retry finds them built and builds nothing again.
        assert after_theanine != before and not done["new_memories"] and not done["new_segments"]
        assert llm.count("summarise") == 1 and llm.count("segment") == 1
    else:  # cut before anything was stored: built once, now
        assert after_theanine == before and done["new_memories"] and done["new_segments"]
        assert llm.count("summarise") == 2 and llm.count("segment") == 1
    assert [s["status"] for s in history(c, uid)] == ["closed", "closed", "open"]
    again = c.predict(uid, "", api_name="/end_session")
    assert again["closed"] == [] and again["errors"] == []
    ids = stored_memories(pg.url, uid)
    assert ids and len(ids) == len(set(ids)) and {i.split(":")[0] for i in ids} == {"s1", "s2"}
    assert chroma_ids(stack["chroma_port"], uid, "theanine_memories") == ids  # each memory indexed once
    segs = chroma_ids(stack["chroma_port"], uid, "secom_segments")
    assert {i.split(":")[0] for i in segs} == {"s1", "s2"}
    chat(c, uid, "How is Rex doing?")
    llm.reset()


def test_the_page_keeps_the_typed_message_when_the_database_is_down(llm_server, tmp_path):
    """The page's send (ui/handlers.py) with the database failing as a stopped server fails: the text
    stays in the box, the status says it was not saved, the log has no stack trace."""
    from sessions import new_user_id
    from sessions.db import NOT_STORED
    from tests.reliability_app import handlers, make_service

    svc = make_service(tmp_path / "data", llm_server)
    h = handlers(svc)
    uid = new_user_id()
    svc.new_session(uid, "2023-04-30")

    def down(*a, **k):
        raise sa.exc.OperationalError("SELECT 1", {}, ConnectionRefusedError("connection refused"))

    real = svc.store.messages
    svc.store.messages = down  # type: ignore[method-assign]
    outs = list(h.send(uid, "My cat Miso hates thunderstorms.", "theanine"))
    assert all(h.c.msg not in o for o in outs)  # the box is never cleared
    assert NOT_STORED in outs[-1][h.c.status] and not TRACEBACK.search(str(outs))
    svc.store.messages = real  # type: ignore[method-assign]
    assert svc.messages(uid) == []  # nothing half-stored
