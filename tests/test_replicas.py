"""Two app replicas (two `python app.py` processes) on one real PostgreSQL and one real `chroma run`.

Each replica has its own (empty) data dir: everything they share goes through the database and
the Chroma server, as behind a load balancer. The LLM is the scripted OpenAI-compatible server
(tests/llm_server.py), which can hold a request open to freeze a replica at an exact step.

* a user chats on replica A and sees the history on B (and B's messages on A);
* both replicas end the same session at the same moment: it is built once (one summary call,
  graph ids == Chroma ids, no duplicate memory);
* kill -9 of A in the middle of a close, while B waits for the same close: B completes it, once;
* a LoCoMo conversation (its first 3 sessions, from tests/data/locomo_small.json) imported through the app's import path
  is retrieved by replica B.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
import sqlalchemy as sa

from tests.claim_waits import wait_for_a_claim_waiter
from tests.conftest import LOCOMO_SMALL
from tests.flat_service import FlatService
from tests.llm_server import LLMServer, app_llm_env
from tests.pg_server import postgres, unavailable_reason
from tests.servers import chroma_cmd, free_port, running
from tests.ui_fixtures import RunningApp

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("replicas")
    port = free_port()
    with (
        postgres(fsync=False) as url,
        LLMServer() as llm,
        running(
            chroma_cmd(root / "chroma", port), f"http://127.0.0.1:{port}/api/v2/heartbeat", log=root / "chroma.log"
        ),
    ):
        env = app_llm_env(
            llm,
            DATABASE_URL=url,
            CHROMA_HOST="127.0.0.1",
            CHROMA_PORT=port,
            LLM_TIMEOUT=120,
            MEMORY_BROWSER_SECRET="replicas-share-this-browser-secret",
        )
        apps = {}
        try:
            for name in ("a", "b"):
                apps[name] = RunningApp(root / f"data-{name}", root / f"app-{name}.log", **env)
            yield {"url": url, "llm": llm, "chroma_port": port, "root": root, "env": env, **apps}
        finally:
            for app in apps.values():
                app.stop()
            for name, app in apps.items():
                assert "Traceback" not in app.log(), f"replica {name}:\n{app.log()}"


def client(app):
    from gradio_client import Client

    return Client(app.url, verbose=False)


def sessions_of(c, uid):
    return c.predict(uid, api_name="/history")["sessions"]


def stored_graph(url: str, uid: str) -> tuple[list[str], set[str]]:
    """Memory ids (with repeats, if any) and built sessions of the user, read from PostgreSQL."""
    from memory.userspace import user_key

    eng = sa.create_engine(url)
    try:
        with eng.connect() as c:
            ids = (
                c.execute(
                    sa.text("SELECT memory_id FROM graph_memories WHERE user_key = :k ORDER BY memory_id"),
                    {"k": user_key(uid)},
                )
                .scalars()
                .all()
            )
            built = set(
                c.execute(
                    sa.text("SELECT session_id FROM graph_sessions WHERE user_key = :k"), {"k": user_key(uid)}
                ).scalars()
            )
    finally:
        eng.dispose()
    return list(ids), built


def wait_until_a_close_waits_for_the_claim(url: str, uid: str) -> None:
    """Returns once a replica's session close is blocked on the user's close claim (tests/claim_waits.py)."""
    eng = sa.create_engine(url)
    try:
        wait_for_a_claim_waiter(uid, engine=eng)
    finally:
        eng.dispose()


def chroma_ids(port: int, uid: str, kind: str = "theanine_memories") -> list[str]:
    from memory.store import ChromaStore

    return sorted(h.id for h in ChromaStore(host="127.0.0.1", port=port).get(uid, kind))


def chat(c, uid, *texts):
    for text in texts:
        reply, trace = c.predict(uid, text, "theanine", api_name="/send_message")
        assert reply and not trace.get("error"), trace


def test_history_written_on_one_replica_is_read_on_the_other(cluster):
    a, b = client(cluster["a"]), client(cluster["b"])
    uid = a.predict(api_name="/new_user")
    chat(a, uid, "I adopted a puppy named Rex from the shelter.")
    chat(b, uid, "Rex loves long walks in the park.")  # the next message lands on B
    for c in (a, b):
        turns = sessions_of(c, uid)[0]["turns"]
        assert [t["text"] for t in turns if t["speaker"] == "user"] == [
            "I adopted a puppy named Rex from the shelter.",
            "Rex loves long walks in the park.",
        ]
        assert len(turns) == 4


def test_both_replicas_close_the_same_session_at_once_and_it_is_built_once(cluster):
    llm = cluster["llm"]
    a, b = client(cluster["a"]), client(cluster["b"])
    uid = a.predict(api_name="/new_user")
    chat(a, uid, "My sister Mirela visits on Friday.", "We will bake a plum cake together.")
    llm.reset()
    llm.script("summarise", ("hold", None))  # the first builder stops at its summary call
    with ThreadPoolExecutor(2) as pool:
        jobs = [pool.submit(c.predict, uid, "", api_name="/end_session") for c in (a, b)]
        assert llm.arrived["summarise"].wait(60)
        wait_until_a_close_waits_for_the_claim(cluster["url"], uid)  # the other replica is blocked on it
        assert llm.count("summarise") == 1
        llm.release()
        results = [j.result(timeout=120) for j in jobs]
    assert all(r["errors"] == [] for r in results), results
    closes = [c for r in results for c in r["closed"]]
    assert [c["session_id"] for c in closes] == ["s1"]  # one replica built it, the other found it done
    assert closes[0]["new_memories"]
    assert llm.count("summarise") == 1 and llm.count("segment") == 1
    ids, sessions = stored_graph(cluster["url"], uid)
    assert ids and len(ids) == len(set(ids)) and sessions == {"s1"}
    assert chroma_ids(cluster["chroma_port"], uid) == ids  # graph ids == Chroma ids
    assert [s["status"] for s in sessions_of(b, uid)] == ["closed", "open"]
    llm.reset()


def test_kill9_of_a_replica_mid_close_is_completed_once_by_the_other(cluster):
    llm, app_a = cluster["llm"], cluster["a"]
    a, b = client(app_a), client(cluster["b"])
    uid = a.predict(api_name="/new_user")
    chat(a, uid, "Rex got sick after eating chocolate.", "The vet said Rex must rest for a week.")
    llm.reset()
    llm.script("segment", ("hold", None))  # A has committed THEANINE's part, SeCom not yet
    a.submit(uid, "", api_name="/end_session")
    assert llm.arrived["segment"].wait(90)
    waiting = b.submit(uid, "", api_name="/end_session")  # B waits for A's claim
    wait_until_a_close_waits_for_the_claim(cluster["url"], uid)
    assert not waiting.done()
    app_a.proc.kill()  # SIGKILL: PostgreSQL drops A's connection and its lock
    app_a.proc.wait(10)
    app_a._log.close()
    result = waiting.result(timeout=120)
    assert result["errors"] == [] and [c["session_id"] for c in result["closed"]] == ["s1"], result
    assert result["closed"][0]["new_segments"] and not result["closed"][0]["new_memories"]  # THEANINE was A's
    assert llm.count("summarise") == 1 and llm.count("segment") == 2  # B built only what was missing
    ids, sessions = stored_graph(cluster["url"], uid)
    assert ids and len(ids) == len(set(ids)) and sessions == {"s1"}
    assert chroma_ids(cluster["chroma_port"], uid) == ids
    assert {h.split(":")[0] for h in chroma_ids(cluster["chroma_port"], uid, "secom_segments")} == {"s1"}
    assert [s["status"] for s in sessions_of(b, uid)] == ["closed", "open"]
    llm.reset()
    app_a.start()  # A restarted: nothing left to do, nothing rebuilt
    assert [s["status"] for s in sessions_of(client(app_a), uid)] == ["closed", "open"]
    assert llm.count("summarise") == 0


def locomo_slice(n_sessions: int = 3) -> dict:
    conv = json.loads(LOCOMO_SMALL.read_text())[0]
    c = conv["conversation"]
    keep = {"speaker_a": c["speaker_a"], "speaker_b": c["speaker_b"]}
    for i in range(1, n_sessions + 1):
        keep[f"session_{i}"] = c[f"session_{i}"]
        keep[f"session_{i}_date_time"] = c[f"session_{i}_date_time"]
    return {"sample_id": conv["sample_id"], "conversation": keep}


def test_locomo_conversation_imported_through_one_replica_is_retrieved_on_the_other(cluster):
    """The import runs the app's own import path (the data room's import_history, what the Import button
    calls; the UI event is not part of the public API) in a third replica in this process."""
    from memory.agent import MemoryAgent
    from memory.settings import Settings
    from sessions import open_service
    from sessions.store import open_store

    sample = locomo_slice()
    data = cluster["root"] / "data-importer"
    settings = Settings.from_env({**cluster["env"], "MEMORY_DATA_DIR": str(data)})
    store = open_store(data, cluster["url"])
    try:
        importer = FlatService(open_service(settings, MemoryAgent.from_settings(settings), store))
        uid = client(cluster["b"]).predict(api_name="/new_user")
        result = importer.import_history(uid, json.dumps(sample))
    finally:
        store.engine.dispose()
    assert not result.errors and len([c for c in result.closed if c.report]) == 3
    b = client(cluster["b"])
    sessions = sessions_of(b, uid)
    assert [s["status"] for s in sessions] == ["closed", "closed", "closed", "open"]
    first = sample["conversation"]["session_1"][0]["text"]
    assert sessions[0]["turns"][0]["text"] == first
    _reply, trace = b.predict(
        uid, "What did Caroline say about the LGBTQ support group?", "theanine", api_name="/send_message"
    )
    assert not trace.get("error")
    ids, built = stored_graph(cluster["url"], uid)
    assert built == {"s1", "s2", "s3"} and trace["memories"]
    assert {m["id"] for m in trace["memories"]} <= set(ids)  # B retrieved the imported memories
    assert "support group" in " ".join(m["event"] for m in trace["memories"]).lower()
