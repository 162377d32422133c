"""Dense SeCom reads whole segments (issue 35), and finds the current value of a changed fact (issue 33).

MiniLM reads at most 256 word pieces: a segment embedded as one text is embedded from its start. A
segment is embedded in parts of one exchange (memory/secom/vectors.py); a dense search scores it by
its best part and its mean vector. Real MiniLM, the in-memory store and the real Chroma store."""

import numpy as np
import pytest

from memory.design import Forgetting
from memory.records import SessionRecord, Turn
from memory.secom.embedding_segmenter import SegParams
from memory.secom.present import asks_present
from memory.secom.strategy import KIND, PARTS, SecomMemory
from memory.secom.vectors import PART_TOKENS, SCHEME, key_parts, segment_vectors
from memory.settings import Options
from memory.tokens import count_tokens
from memory.trace import Trace
from tests.fakes import MemoryStore


class WholeSession:
    """A segmenter that keeps each session as one segment (a long segment, as an LLM may make)."""

    name = "whole"
    params = SegParams()

    def segment(self, exchanges, llm=None):
        return [(0, len(exchanges) - 1, "")] if exchanges else []

    def fingerprint(self, llm=None):
        return ["whole"]


def session(sid, date, pairs, who=("Alice", "Bot")):
    turns = []
    for i, (u, b) in enumerate(pairs):
        turns.append(Turn(who[0], u, f"{sid}:{2 * i}"))
        turns.append(Turn(who[1], b, f"{sid}:{2 * i + 1}"))
    return SessionRecord(sid, date, turns)


COOKING = [
    (
        f"For dinner number {i} I cooked {dish} with garlic, onions and fresh herbs from the garden.",
        f"{dish} sounds tasty! Did you serve it with bread and a glass of red wine?",
    )
    for i, dish in enumerate(
        ["risotto", "lasagne", "a curry", "paella", "goulash", "a stew", "ramen", "tacos", "a pie", "gnocchi"]
    )
]
# A long session: ten exchanges of cooking, then the fact asked about, far past MiniLM's 256 word pieces.
LONG = session(
    "s1",
    "2023-05-01",
    [*COOKING, ("My sister Clara's wedding will be in Paris next spring.", "A wedding in Paris, how lovely!")],
)
SHORT = session("s2", "2023-05-08", [("My sister visited last weekend.", "How nice to see her!")])
QUESTION = "Where will my sister's wedding be held?"


def opts(**kw):
    return Options(strategy="secom", **kw)


@pytest.fixture(params=["chroma", "memory"])
def store(request, tmp_path):
    if request.param == "chroma":
        from memory.store import ChromaStore

        return ChromaStore(path=tmp_path / "chroma")
    return MemoryStore()


def test_key_parts_are_exchanges_within_the_window():
    key = "Alice: hi there\nBob: hello\nAlice: how are you?\nBob: fine\nthanks for asking\nAlice: bye"
    assert key_parts(key) == [
        "Alice: hi there\nBob: hello",
        "Alice: how are you?\nBob: fine\nthanks for asking",
        "Alice: bye",
    ]
    long_turn = "Alice: " + " ".join(f"word{i}" for i in range(600))
    parts = key_parts(long_turn + "\nBob: ok")
    assert len(parts) >= 3 and all(count_tokens(p) <= PART_TOKENS for p in parts)
    assert " ".join(" ".join(parts).split()) == " ".join((long_turn + " Bob: ok").split())  # nothing lost
    assert key_parts("first utterance\nsecond utterance") == ["first utterance", "second utterance"]  # no speakers
    assert key_parts("") == [""]


def test_a_long_segment_is_found_by_its_last_exchange(store, minilm):
    key = "\n".join(f"{t.speaker}: {t.text}" for t in LONG.turns)
    assert len(minilm.model.tokenizer(key)["input_ids"]) > 400  # MiniLM reads only its first 256 word pieces
    q = minilm.embed([QUESTION])[0]
    short_key = "\n".join(f"{t.speaker}: {t.text}" for t in SHORT.turns)
    start_only = minilm.embed([key, short_key]) @ q
    assert start_only[0] < start_only[1]  # as before: the long segment, read from its start, lost
    whole = segment_vectors(minilm, [key])[0]
    assert abs(float(np.linalg.norm(whole)) - 1.0) < 1e-5

    mem = SecomMemory(store, minilm, None, "off", WholeSession())
    mem.build("alice", LONG, None, opts(), Trace("c"))
    mem.build("alice", SHORT, None, opts(), Trace("c"))
    assert store.count("alice", PARTS) == len(COOKING) + 2  # one part per exchange
    seg = store.get("alice", KIND, ids=["s1:seg0"])[0]
    assert seg.metadata["vector"] == SCHEME
    for retriever in ("dense", "hybrid"):
        ranked = mem.rank("alice", QUESTION, retriever)
        assert ranked[0][0].id == "s1:seg0", (retriever, [(h.id, s) for h, s in ranked])


def test_segments_stored_before_are_reembedded_on_the_first_dense_search(minilm):
    store = MemoryStore()
    mem = SecomMemory(store, minilm, None, "off", WholeSession())
    mem.build("alice", LONG, None, opts(), Trace("c"))
    mem.build("alice", SHORT, None, opts(), Trace("c"))
    # Make the store look as an older version left it: one vector of each whole key, no parts, no scheme.
    old = store.get("alice", KIND)
    metas = [{k: v for k, v in h.metadata.items() if k != "vector"} for h in old]
    store.drop_user("alice", (KIND, PARTS))
    store.add(
        "alice", KIND, [h.id for h in old], [h.document for h in old], minilm.embed([h.document for h in old]), metas
    )
    # and a record some other code wrote (no fingerprint): left as it is
    store.add("alice", KIND, ["x:seg0"], ["Bot: unrelated"], minilm.embed(["Bot: unrelated"]), [{"session_id": "x"}])
    mem = SecomMemory(store, minilm, None, "off", WholeSession())  # a new process
    assert mem.rank("alice", QUESTION, "bm25")  # BM25 reads the keys: no upgrade needed, none made
    assert store.count("alice", PARTS) == 0
    assert mem.rank("alice", QUESTION, "dense")[0][0].id == "s1:seg0"
    after = {h.id: h for h in store.get("alice", KIND)}
    assert after["s1:seg0"].metadata["vector"] == SCHEME and after["s2:seg0"].metadata["vector"] == SCHEME
    assert "vector" not in after["x:seg0"].metadata
    for h in old:  # same text, same metadata otherwise
        assert after[h.id].document == h.document and after[h.id].metadata["text"] == h.metadata["text"]
    assert store.count("alice", PARTS) == len(COOKING) + 2


def test_parts_follow_forgetting_and_deleting(store, minilm):
    mem = SecomMemory(store, minilm, None, "off", WholeSession())
    mem.build("alice", LONG, None, opts(), Trace("c"))
    mem.build("alice", SHORT, None, opts(), Trace("c"))
    by_id = {"s1": LONG, "s2": SHORT}
    gone = mem.forget("alice", Forgetting(turns=("s1:20", "s1:21")), by_id.get)  # the wedding exchange
    assert gone["rebuilt"] == ["s1:seg0"]
    texts = [h.document for h in store.get("alice", PARTS)]
    assert len(texts) == len(COOKING) + 1 and not any("Paris" in t for t in texts)
    mem.delete_session("alice", "s2")
    assert {h.metadata["session_id"] for h in store.get("alice", PARTS)} == {"s1"}
    mem.drop_user("alice")
    assert store.count("alice", PARTS) == 0 and store.count("alice", KIND) == 0


def test_rebuilding_a_session_replaces_its_parts(minilm):
    store = MemoryStore()
    mem = SecomMemory(store, minilm, None, "off", WholeSession())
    mem.build("alice", LONG, None, opts(), Trace("c"))
    short = SessionRecord("s1", LONG.date, LONG.turns[:4])
    mem.build("alice", short, None, opts(), Trace("c"))
    assert store.count("alice", PARTS) == 2 and store.count("alice", KIND) == 1


@pytest.mark.parametrize(
    ("message", "present"),
    [
        ("Where do I live now?", True),
        ("What is my job these days?", True),
        ("Which city do I live in?", True),
        ("What is my dog's name?", True),
        ("Where did I live before I moved?", False),
        ("Where did I work before my current job?", False),
        ("What was my previous dog called?", False),
        ("When did I move?", False),
        ("When did Caroline go to the support group?", False),
        ("I am tired today", False),
        ("earlier turn about Porto\nWhere do I live now?", True),  # a query with earlier turns: its last line
    ],
)
def test_asks_present(message, present):
    assert asks_present(message) is present


def test_a_question_about_the_present_finds_the_later_statement_and_reads_it_first(store, minilm):
    """Issue 33: "Which city do I live in?" shares the word "live" with the old statement only; the
    later one ("I moved to Lisbon") must be retrieved too, and come first."""
    mem = SecomMemory(store, minilm, None, "off", WholeSession())
    old = session("h1", "2023-01-05", [("I live in Porto with my two roommates.", "Porto is a lovely city.")])
    other = session("h2", "2023-02-10", [("My cousin lives in Madrid and keeps inviting me.", "Go visit!")])
    noise = [
        session(f"n{i}", f"2023-03-0{i + 1}", [(f"The {w} was great at the weekend market.", "Nice!")])
        for i, w in enumerate(["cheese", "bread", "honey"])
    ]
    new = session("h3", "2023-04-03", [("I moved to Lisbon last week, boxes everywhere.", "Welcome to Lisbon!")])
    for s in (old, other, *noise, new):
        mem.build("alice", s, None, opts(), Trace("c"))
    bm25 = mem.rank("alice", "Which city do I live in?", "bm25")
    assert "h3:seg0" not in [h.id for h, _ in bm25]  # BM25 alone never reaches it (no shared word)
    trace = Trace("secom")
    segs = mem.retrieve("alice", "Which city do I live in?", opts(retriever="bm25", k=3, budget=1000), trace)
    ids = [s["id"] for s in segs]
    assert "h3:seg0" in ids and "h1:seg0" in ids
    dates = [s["date"] for s in segs]
    assert dates == sorted(dates, reverse=True) and ids[0] == "h3:seg0"  # newest first
    assert trace.counts.get("secom_present") == 1
    # a question about the past keeps BM25 alone and the chronological order
    trace = Trace("secom")
    segs = mem.retrieve("alice", "Where did I live before I moved?", opts(retriever="bm25", k=3), trace)
    dates = [s["date"] for s in segs]
    assert dates == sorted(dates) and "secom_present" not in trace.counts
