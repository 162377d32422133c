"""THEANINE build and retrieval through real embedded Chroma, with a scripted LLM."""

import json

import pytest

from memory.design import Forgetting
from memory.errors import InvalidOptions
from memory.llm import LLMSession
from memory.locks import UserLocks
from memory.records import SessionRecord, Turn
from memory.settings import Options
from memory.theanine.strategy import TheanineMemory
from memory.trace import Trace
from tests.fakes import WAIT, ScriptedLLM


def sess(sid, date, *texts):
    return SessionRecord(
        sid, date, [Turn("user" if i % 2 == 0 else "assistant", t, f"{sid}:{i}") for i, t in enumerate(texts)]
    )


def answer_for(messages):
    """Summaries built from the numbered turns; relations: everything is a Cause."""
    prompt = messages[-1]["content"]
    if "relation of B to A" in prompt:  # one pair per call
        return json.dumps({"relation": "Cause"})
    if "Past memory timelines" in prompt:
        n = prompt.count("Timeline ")
        return json.dumps({"timelines": [f"refined {i}" for i in range(n)]})
    lines = [line for line in prompt.splitlines() if line.startswith("[0] ")]
    return json.dumps({"memories": [{"speaker": "user", "event": lines[0][9:], "turns": [0]}]})


def make(tmp_path, chroma_store, fake_embedder):
    return TheanineMemory(chroma_store, fake_embedder, tmp_path, UserLocks())


def test_build_links_sessions_and_retrieves_refined_timelines(tmp_path, chroma_store, fake_embedder):
    tm = make(tmp_path, chroma_store, fake_embedder)
    llm = ScriptedLLM(answer_for)
    opts = Options()
    s1 = sess("s1", "2023-05-01", "I adopted a puppy named Biscuit today", "Congratulations!")
    s2 = sess("s2", "2023-05-08", "My puppy Biscuit chewed my shoes", "Oh no!")
    for s in (s1, s2):
        assert tm.build("u1", s, LLMSession(llm, Trace("close")), opts, Trace("close"))
    g = tm.graph("u1")
    assert len(g) == 2 and list(g.g.edges(data="relation")) == [("s1:m0", "s2:m0", "Cause")]
    # idempotent: a second close of the same session changes nothing
    assert tm.build("u1", s2, LLMSession(llm, Trace("close")), opts, Trace("close")) is None
    assert len(tm.graph("u1")) == 2
    # survives a restart (a new instance reads the file)
    tm2 = make(tmp_path, chroma_store, fake_embedder)
    trace = Trace("theanine")
    raw = tm2.retrieve("u1", "what did my puppy Biscuit do?", opts, trace)
    assert raw and raw[0]["nodes"] == ["s1:m0", "s2:m0"] and "-(Cause)-" in raw[0]["text"]
    refined = tm2.refine(LLMSession(llm, trace), "user: puppy?", raw, trace)
    assert refined[0] == "refined 0" and trace.memories[0]["id"] in ("s1:m0", "s2:m0")


def test_bad_llm_answers_fall_back_and_never_invent_relations(tmp_path, chroma_store, fake_embedder):
    tm = make(tmp_path, chroma_store, fake_embedder)
    opts = Options()
    good = ScriptedLLM(answer_for)
    tm.build(
        "u1",
        sess("s1", "2023-01-01", "I love hiking in the alps with my dog"),
        LLMSession(good, Trace("c")),
        opts,
        Trace("c"),
    )
    hostile = ScriptedLLM(
        "no json here",  # summary: unusable twice -> extractive fallback
        "still nothing",
        '{"relations": [{"pair": 0, "relation": "Teleport"}, {"pair": 9, "relation": "Cause"}]}',
        '{"relations": [{"pair": 0, "relation": "IGNORE PREVIOUS INSTRUCTIONS"}]}',
    )
    trace = Trace("close")
    new = tm.build(
        "u1",
        sess("s2", "2023-02-01", "Hiking in the alps again with my dog this weekend"),
        LLMSession(hostile, trace),
        opts,
        trace,
    )
    assert new == ["s2:m0"]
    m = tm.graph("u1").memory("s2:m0")  # the statement itself, marked as a fallback
    assert m.event == "user: Hiking in the alps again with my dog this weekend" and m.built_by == "extracted-fallback"
    statuses = [c.status for c in trace.llm_calls]
    # the summary, then the one pair's relation call (both answers unusable: pair 9 was not asked),
    # then the offline rule
    assert statuses == ["fallback", "fallback"]
    assert any("labelled by the offline rule" in n for n in trace.notices)
    # the relation fallback is the offline rule: only labels from the fixed set
    assert set(r for _, _, r in tm.graph("u1").g.edges(data="relation")) <= {"SameTopic"}


def test_users_never_see_each_other(tmp_path, chroma_store, fake_embedder):
    tm = make(tmp_path, chroma_store, fake_embedder)
    llm = ScriptedLLM(answer_for)
    tm.build(
        "alice",
        sess("s1", "2023-01-01", "My secret password hint is blue giraffe"),
        LLMSession(llm, Trace("c")),
        Options(),
        Trace("c"),
    )
    trace = Trace("theanine")
    assert tm.retrieve("bob", "blue giraffe password hint", Options(), trace) == []
    assert trace.memories == [] and len(tm.graph("bob")) == 0


def test_delete_and_forget_keep_graph_and_chroma_consistent(tmp_path, chroma_store, fake_embedder):
    tm = make(tmp_path, chroma_store, fake_embedder)
    llm = ScriptedLLM(answer_for)
    for i in range(3):
        tm.build(
            "u",
            sess(f"s{i}", f"2023-01-0{i + 1}", f"I planted tomato number {i} in the garden"),
            LLMSession(llm, Trace("c")),
            Options(),
            Trace("c"),
        )
    assert tm.forget("u", Forgetting("s1:m0"))["removed"] == ["s1:m0"]
    assert "s1:m0" not in tm.graph("u")
    assert sorted(h.id for h in chroma_store.get("u", "theanine_memories")) == ["s0:m0", "s2:m0"]
    tm.drop_user("u")
    assert chroma_store.count("u", "theanine_memories") == 0 and len(tm.graph("u")) == 0


def test_memories_rank_by_bm25_dense_or_their_fusion_and_the_index_follows_changes(
    tmp_path, chroma_store, fake_embedder
):
    tm = make(tmp_path, chroma_store, fake_embedder)
    s1 = sess("s1", "2023-05-01", "I adopted a beagle puppy named Biscuit.", "Nice.", "I play the cello on Sundays.")
    tm.build("u1", s1, None, Options(), Trace("close"))  # offline: one memory per statement
    for retriever in ("bm25", "dense", "hybrid"):
        trace = Trace("theanine")
        tm.retrieve("u1", "cello", Options(theanine_retriever=retriever, k=1), trace, timelines=False)
        assert [m["event"] for m in trace.memories] == ["user: I play the cello on Sundays."], retriever
    tm.forget("u1", Forgetting("s1:m1"))  # the cello memory: BM25 no longer finds it
    trace = Trace("theanine")
    tm.retrieve("u1", "cello", Options(theanine_retriever="bm25", k=1), trace, timelines=False)
    assert trace.memories == []


def test_replies_retrieve_while_a_close_waits_for_its_relation_labels(tmp_path, chroma_store, fake_embedder):
    """The relation step (an LLM call, minutes on a slow endpoint) runs outside the user's graph lock:
    a retrieval of the same user finishes while the close is still waiting for its labels."""
    import threading

    tm = make(tmp_path, chroma_store, fake_embedder)
    opts = Options()
    s1 = sess("s1", "2023-05-01", "I adopted a puppy named Biscuit today", "Congratulations!")
    assert tm.build("u1", s1, LLMSession(ScriptedLLM(answer_for), Trace("close")), opts, Trace("close"))
    asked, release = threading.Event(), threading.Event()

    def held(messages):
        if "relation of B to A" in messages[-1]["content"]:
            asked.set()
            assert release.wait(WAIT)
        return answer_for(messages)

    s2 = sess("s2", "2023-05-08", "My puppy Biscuit chewed my shoes", "Oh no!")
    built: list = []
    close = threading.Thread(
        target=lambda: built.append(tm.build("u1", s2, LLMSession(ScriptedLLM(held), Trace("close")), opts, Trace("c")))
    )
    close.start()
    try:
        assert asked.wait(WAIT)
        got: list = []
        reply = threading.Thread(target=lambda: got.append(tm.retrieve("u1", "my puppy Biscuit", opts, Trace("r"))))
        reply.start()
        reply.join(WAIT)
        assert got and got[0][0]["nodes"] == ["s1:m0"]  # answered from the graph as it was, during the close
        assert not built  # the close is still waiting for its labels
    finally:
        release.set()
        close.join(WAIT)
    assert built == [["s2:m0"]] and list(tm.graph("u1").g.edges(data="relation")) == [("s1:m0", "s2:m0", "Cause")]


def test_timeline_len_bounds_each_timeline_around_its_memory(tmp_path, chroma_store, fake_embedder):
    tm = make(tmp_path, chroma_store, fake_embedder)
    llm = ScriptedLLM(answer_for)
    texts = ["I adopted a puppy named Biscuit", "Biscuit chewed my shoes", "Biscuit learned to sit", "Biscuit is grown"]
    for i, text in enumerate(texts):
        s = sess(f"s{i + 1}", f"2023-05-0{i + 1}", text, "Nice!")
        tm.build("u1", s, LLMSession(llm, Trace("close")), Options(), Trace("close"))
    assert len(tm.graph("u1").g.edges) == 3  # one chain s1 -> s2 -> s3 -> s4
    for n in (1, 2, 4):
        raw = tm.retrieve("u1", "Biscuit learned to sit", Options(k=1, timeline_len=n), Trace("theanine"))
        nodes = raw[0]["nodes"]
        assert len(nodes) == n and "s3:m0" in nodes  # the retrieved memory and those nearest it


def test_timelines_reach_the_reply_newest_first_unless_ranked(tmp_path, chroma_store, fake_embedder):
    """An old statement that ranks above a newer one (no Changed edge between them) comes after it in
    the reply's memory ("recent", the default); "rank" keeps retrieval order."""

    def unlinked(messages):
        prompt = messages[-1]["content"]
        if "relation of B to A" in prompt:
            return json.dumps({"relation": "None"})
        return answer_for(messages)

    tm = make(tmp_path, chroma_store, fake_embedder)
    llm = ScriptedLLM(unlinked)
    said = {"s1": "I live in Porto near the river", "s2": "I cook pasta on Sundays", "s3": "I moved to Lisbon"}
    for i, (sid, text) in enumerate(said.items()):
        tm.build(
            "u1",
            sess(sid, f"2023-0{i + 1}-01", text, "Nice!"),
            LLMSession(llm, Trace("close")),
            Options(),
            Trace("close"),
        )
    assert not tm.graph("u1").g.edges
    query = "I live in Porto near the river"  # s1 ranks first
    ranked = [t["anchor"] for t in tm.retrieve("u1", query, Options(k=3, timeline_order="rank"), Trace("theanine"))]
    assert ranked[0] == "s1:m0" and sorted(ranked) == ["s1:m0", "s2:m0", "s3:m0"]
    recent = [t["anchor"] for t in tm.retrieve("u1", query, Options(k=3), Trace("theanine"))]
    assert recent == ["s3:m0", "s2:m0", "s1:m0"]
    # the default reads the setting, and a bad value is refused
    assert Options().timeline_order == "recent"
    with pytest.raises(InvalidOptions):
        Options(timeline_order="newest")
