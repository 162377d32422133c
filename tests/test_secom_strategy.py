"""SecomMemory end to end: real MiniLM, the real Chroma store (and an in-memory one)."""

import itertools
import threading

import pytest

from memory.dates import timestamp as date_key
from memory.llm import LLMSession
from memory.records import SessionRecord, Turn
from memory.secom.embedding_segmenter import EmbeddingSegmenter
from memory.secom.llm_segmenter import LLMSegmenter
from memory.secom.segmentation import make_segmenter
from memory.secom.strategy import KIND, SecomMemory
from memory.settings import Options
from memory.tokens import count_tokens
from memory.trace import Trace
from tests.fakes import MemoryStore, ScriptedLLM, UpperCompressor


def session(sid, date, pairs):
    turns = []
    for i, (u, b) in enumerate(pairs):
        turns.append(Turn("Alice", u, f"{sid}:{2 * i}"))
        turns.append(Turn("Bot", b, f"{sid}:{2 * i + 1}"))
    return SessionRecord(sid, date, turns)


S1 = session(
    "s1",
    "2023-05-01",
    [
        ("I adopted a golden retriever puppy and named him Biscuit.", "Biscuit is a lovely name for a puppy!"),
        ("Biscuit chews every shoe in the house.", "Puppies chew a lot; chew toys for the dog help."),
        ("I signed Biscuit up for dog obedience training.", "Training classes are great for young dogs."),
        (
            "Separately, my income tax return is due on Monday.",
            "Do you have your salary statements for the tax return?",
        ),
        ("My accountant handles the tax deductions.", "An accountant makes the tax paperwork easier."),
        ("The tax office sent me a letter about last year's return.", "Call the tax office if the letter is unclear."),
    ],
)
S2 = session(
    "s2",
    "2023-06-10",
    [
        ("We went hiking in Norway near the fjords.", "Norway's fjords are beautiful for hiking!"),
        ("The hike to Preikestolen took four hours.", "That is a classic Norwegian hiking trail."),
        ("We camped by the lake after the mountain hike.", "Camping after hiking sounds relaxing."),
        ("My sister Clara is getting married in September.", "Congratulations to Clara on the wedding!"),
        ("I am giving a speech at Clara's wedding.", "A wedding speech for your sister is an honour."),
        ("The wedding reception will be at a vineyard.", "A vineyard is a lovely wedding venue."),
    ],
)


@pytest.fixture(params=["chroma", "memory"])
def store(request, tmp_path):
    if request.param == "chroma":
        from memory.store import ChromaStore

        return ChromaStore(path=tmp_path / "chroma")
    return MemoryStore()


@pytest.fixture
def built(store, minilm):
    comp = UpperCompressor()
    mem = SecomMemory(store, minilm, comp, "", EmbeddingSegmenter(minilm))
    trace = Trace("close")
    opts = Options(strategy="secom")
    ids1 = mem.build("alice", S1, None, opts, trace)
    ids2 = mem.build("alice", S2, None, opts, trace)
    return mem, ids1, ids2, comp, trace


def opts(**kw):
    return Options(strategy="secom", **kw)


def test_build_stores_segments_with_provenance(built):
    mem, ids1, ids2, comp, trace = built
    assert ids1[0] == "s1:seg0" and ids2[0] == "s2:seg0" and len(ids1) >= 2 and len(ids2) >= 2
    hits = {h.id: h for h in mem.store.get("alice", KIND)}
    assert set(hits) == set(ids1 + ids2)
    starts = sorted((h.metadata["start"], h.metadata["end"]) for h in hits.values() if h.metadata["session_id"] == "s1")
    assert starts[0][0] == 0 and starts[-1][1] == 5  # the segments cover the session
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(starts))
    h = hits["s1:seg0"]
    assert h.metadata["text"].startswith("Alice: I adopted a golden retriever")  # original, with speakers
    assert h.document != h.metadata["text"] and "Biscuit" in h.document  # compressed key
    assert h.metadata["turn_ids"].split(",")[0] == "s1:0" and h.metadata["date"] == "2023-05-01"
    assert comp.calls == 2 and trace.timings["secom_build"] > 0 and not trace.notices


@pytest.mark.parametrize("retriever", ["bm25", "dense", "hybrid"])
def test_retrieve_finds_the_right_segment(built, retriever):
    mem, *_ = built
    for question, session_id, word in [
        ("What is the name of my puppy?", "s1", "Biscuit"),
        ("Where did I go hiking?", "s2", "Norway"),
        ("When is my tax return due?", "s1", "tax"),
        ("Who is getting married?", "s2", "Clara"),
    ]:
        trace = Trace("secom")
        segs = mem.retrieve("alice", question, opts(retriever=retriever, k=1), trace)
        assert 1 <= len(segs) <= 2
        best = max(segs, key=lambda s: s["score"])
        assert best["session_id"] == session_id and word in best["text"], (retriever, question, segs)
        assert set(best) >= {"id", "session_id", "date", "text", "key", "summary", "score"}
        assert "secom_retrieve" in trace.timings and trace.segments == segs


def test_budget_respected_and_chronological(built):
    mem, *_ = built
    segs = mem.retrieve("alice", "puppy hiking tax wedding", opts(budget=32000, k=20), Trace("secom"))
    assert len(segs) >= 4
    order = [(s["session_id"], s["start"]) for s in segs]
    assert order == sorted(order)  # s1 before s2, by start
    sizes = sorted(count_tokens(s["text"]) for s in segs)
    budget = sizes[0] + sizes[1]
    small = mem.retrieve("alice", "puppy hiking tax wedding", opts(budget=max(budget, 50), k=20), Trace("s"))
    assert sum(count_tokens(s["text"]) for s in small) <= max(budget, 50)
    assert mem.retrieve("alice", "puppy", opts(budget=50), Trace("s")) == [] or all(
        count_tokens(s["text"]) <= 50 for s in mem.retrieve("alice", "puppy", opts(budget=50), Trace("s"))
    )


def test_rebuild_is_idempotent(built):
    mem, ids1, ids2, _comp, _ = built
    before = sorted((h.id, h.document, h.metadata["text"]) for h in mem.store.get("alice", KIND))
    assert mem.build("alice", S1, None, opts(), Trace("close")) is None  # unchanged: skipped
    assert mem.build("alice", S1, None, opts(), Trace("close"), force=True) == ids1
    after = sorted((h.id, h.document, h.metadata["text"]) for h in mem.store.get("alice", KIND))
    assert before == after and mem.count("alice") == len(ids1) + len(ids2)
    # a changed session replaces its old segments (no stale ids left behind)
    short = SessionRecord("s1", "2023-05-01", S1.turns[:2])
    assert mem.build("alice", short, None, opts(), Trace("close")) == ["s1:seg0"]
    assert mem.count("alice") == 1 + len(ids2)
    segs = mem.retrieve("alice", "tax return accountant", opts(retriever="bm25"), Trace("s"))
    assert all("accountant" not in s["text"] for s in segs)  # BM25 cache was refreshed


def test_users_are_isolated(built):
    mem, *_ = built
    assert mem.retrieve("bob", "puppy Biscuit", opts(), Trace("s")) == []
    mem.build(
        "bob", session("b1", "2023-07-01", [("My cat Tom likes fish.", "Cats love fish.")]), None, opts(), Trace("c")
    )
    segs = mem.retrieve(
        "bob", "What is my puppy called? Biscuit", opts(budget=32000, k=20, retriever="dense"), Trace("s")
    )
    assert segs and all(s["session_id"] == "b1" for s in segs)
    mem.drop_user("bob")
    assert mem.count("bob") == 0 and mem.retrieve("bob", "cat", opts(), Trace("s")) == []
    assert mem.count("alice") > 0


def test_without_compressor_keys_are_text_and_trace_says_so(store, fake_embedder):
    mem = SecomMemory(store, fake_embedder, None, "compression unavailable: offline", EmbeddingSegmenter(fake_embedder))
    trace = Trace("close")
    mem.build("u", S1, None, opts(), trace)
    assert trace.notices == ["compression unavailable: offline"]
    assert all(h.document == h.metadata["text"] for h in store.get("u", KIND))


def test_llm_segmenter_used_when_llm_session_given(fake_embedder):
    store = MemoryStore()
    answer = (
        '<segmentation>\n{"segment_id": 0, "start_exchange_number": 0, "end_exchange_number": 2, '
        '"num_exchanges": 3, "summary": "Biscuit the puppy"}\n{"segment_id": 1, "start_exchange_number": 3, '
        '"end_exchange_number": 5, "num_exchanges": 3, "summary": "Tax return"}\n</segmentation>'
    )
    llm = ScriptedLLM(answer)
    mem = SecomMemory(store, fake_embedder, None, "off", make_segmenter("llm", fake_embedder))
    assert isinstance(mem.segmenter, LLMSegmenter)
    trace = Trace("close")
    ids = mem.build("u", S1, LLMSession(llm, trace), opts(), trace)
    assert ids == ["s1:seg0", "s1:seg1"]
    assert "[Exchange 0]: Alice: I adopted" in llm.prompts[0][-1]["content"]
    summaries = {h.id: h.metadata["summary"] for h in store.get("u", KIND)}
    assert summaries == {"s1:seg0": "Biscuit the puppy", "s1:seg1": "Tax return"}
    # no LLM session: the embedding segmenter, no LLM call
    trace2 = Trace("close")
    mem.build("u", S2, None, opts(), trace2)
    assert not trace2.llm_calls and len(llm.prompts) == 1


def test_export_and_empty_session(fake_embedder):
    store = MemoryStore()
    mem = SecomMemory(store, fake_embedder, None, "off", EmbeddingSegmenter(fake_embedder))
    assert mem.build("u", SessionRecord("s0", "", []), None, opts(), Trace("c")) == []
    mem.build("u", S2, None, opts(), Trace("c"))
    mem.build("u", S1, None, opts(), Trace("c"))
    ex = mem.export("u")
    assert ex[0]["session_id"] == "s1" and ex[-1]["session_id"] == "s2" and "fingerprint" not in ex[0]
    assert mem.retrieve("u", "   ", opts(), Trace("s")) == []


def test_concurrent_retrieve_and_build(fake_embedder):
    store = MemoryStore()
    mem = SecomMemory(store, fake_embedder, None, "off", EmbeddingSegmenter(fake_embedder))
    mem.build("u", S1, None, opts(), Trace("c"))
    errors = []

    def reader():
        try:
            for _ in range(30):
                mem.retrieve("u", "tax return", opts(retriever="hybrid"), Trace("s"))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=reader) for _ in range(3)]
    for t in ts:
        t.start()
    for i in range(5):
        mem.build(
            "u", session(f"x{i}", f"2023-08-0{i + 1}", [("tax refund arrived", "great")]), None, opts(), Trace("c")
        )
    for t in ts:
        t.join()
    assert not errors
    segs = mem.retrieve("u", "tax refund arrived", opts(retriever="bm25", k=10, budget=32000), Trace("s"))
    assert {s["session_id"] for s in segs} >= {"x0", "x4"}


def test_date_key_orders_free_text_dates():
    assert date_key("2023-05-01") < date_key("2023-06-10")
    assert date_key("1:56 pm on 8 May, 2023") < date_key("10:00 am on 9 June, 2023")
    assert date_key("") == -1.0 and date_key("someday") == -1.0
