"""Delete means delete: forgetting a memory removes the fact from THEANINE and from SeCom's segments.

Real parts: MemoryAgent with MiniLM and embedded Chroma, the real SQLite store, the `openai` client
against the scripted server (tests/llm_server.py: one memory per user turn, one segment per
session), so the outcome is deterministic. Plus SecomMemory.forget alone on a fake store.
"""

from __future__ import annotations

import pytest

from memory.design import Forgetting
from memory.records import SessionRecord, Turn
from memory.secom.segmentation import make_segmenter
from memory.secom.strategy import KIND, SecomMemory
from memory.settings import Options
from memory.trace import Trace
from sessions import new_user_id
from sessions.memory_room import REDACTED
from tests.fakes import MemoryStore
from tests.reliability_app import make_service

FACT = "My locker code at the gym is 4417."


def _say(svc, uid, text, strategy="secom"):
    return [u for u in svc.send(uid, text, strategy)][-1]


@pytest.mark.parametrize("redact", [False, True])
def test_deleting_a_memory_rebuilds_the_secom_segment_without_its_turns(tmp_path, llm_server, redact):
    svc = make_service(tmp_path, llm_server, SECOM_SEGMENTER="llm", SECOM_RETRIEVER="bm25")
    uid = new_user_id()
    svc.new_session(uid, "2023-05-08")
    _say(svc, uid, FACT)
    _say(svc, uid, "I also like swimming in the morning before work.")
    svc.end_session(uid, "2023-05-09")
    done = _say(svc, uid, "What is my locker code at the gym?")
    assert any("4417" in s["text"] for s in done.trace["segments"])  # SeCom retrieves the fact
    mem = next(n for n in svc.graph(uid)["nodes"] if "4417" in n["event"])

    gone = svc.delete_memory(uid, mem["id"], redact=redact)
    assert gone is not None
    assert gone["segments_rebuilt"] and "4417" in gone["event"]
    assert "SeCom" in gone["message"] and ("redacted" in gone["message"]) == redact
    assert all("4417" not in n["event"] for n in svc.graph(uid)["nodes"])  # THEANINE
    segments = svc.segments(uid)
    assert segments and all("4417" not in s["text"] + s["key"] + s["summary"] for s in segments)
    assert any("swimming" in s["text"] for s in segments)  # the rest of the segment stays
    done = _say(svc, uid, "What is my locker code at the gym?")
    assert all("4417" not in s["text"] + s["key"] for s in done.trace["segments"])
    first = svc.sessions(uid)[0]
    texts = [m.text for m in svc.messages(uid, first.session_id)]
    assert (FACT in texts) != redact and (REDACTED in texts) == redact  # transcript kept unless redacted
    assert svc.delete_memory(uid, mem["id"]) is None  # already gone


def test_forget_turns_removes_a_segment_left_empty_and_keeps_others(fake_embedder):
    store = MemoryStore()
    sec = SecomMemory(store, fake_embedder, None, "", make_segmenter("embedding", fake_embedder))
    rec = SessionRecord(
        "s1",
        "2023-05-08",
        [
            Turn("user", "secret one", "s1:1"),
            Turn("bot", "ok", "s1:2"),
            Turn("user", "other topic", "s1:3"),
            Turn("bot", "fine", "s1:4"),
        ],
    )
    store.add(
        "u",
        KIND,
        ["s1:seg0", "s1:seg1"],
        ["secret one ok", "other topic fine"],
        fake_embedder.embed(["secret one ok", "other topic fine"]),
        [
            {
                "session_id": "s1",
                "text": "user: secret one\nbot: ok",
                "turn_ids": "s1:1,s1:2",
                "summary": "secret",
                "compression_rate": 1.0,
            },
            {
                "session_id": "s1",
                "text": "user: other topic\nbot: fine",
                "turn_ids": "s1:3,s1:4",
                "summary": "other",
                "compression_rate": 1.0,
            },
        ],
    )
    out = sec.forget("u", Forgetting(turns=("s1:1", "s1:2")), lambda sid: rec, Options(), Trace("forget"))
    assert out == {"rebuilt": [], "removed": ["s1:seg0"], "turns": ["s1:1", "s1:2"]}
    assert list(store.rows("u", KIND)) == ["s1:seg1"]
    out = sec.forget("u", Forgetting(turns=("s1:3",)), lambda sid: rec, Options(), Trace("forget"))
    assert out["rebuilt"] == ["s1:seg1"]
    doc, meta = store.rows("u", KIND)["s1:seg1"]
    assert meta["text"] == "bot: fine" and meta["turn_ids"] == "s1:4" and meta["summary"] == ""
    assert meta["forgotten"] == "s1:3" and "other" not in doc
    # A transcript that is gone: the segment cannot be rebuilt, so it is removed rather than kept.
    assert sec.forget("u", Forgetting(turns=("s1:4",)), lambda sid: None)["removed"] == ["s1:seg1"]
