"""memory.dates: one reader of session dates, and both memories ordering sessions the same way by it."""

from datetime import datetime

from memory import dates
from memory.records import SessionRecord, Turn
from memory.secom.embedding_segmenter import EmbeddingSegmenter
from memory.secom.strategy import SecomMemory
from memory.settings import Options
from memory.theanine.graph import MemoryGraph
from memory.theanine.linking import summarise
from memory.trace import Trace
from tests.fakes import MemoryStore

# Session id -> date, listed out of order: ISO, LoCoMo, typed forms, an offset, a date before 1970,
# and two that cannot be read.
MIXED = {
    "s1": "1:56 pm on 8 May, 2023",
    "s2": "someday",
    "s3": "2023-05-08",
    "s4": "10:00 am on 9 June, 2023",
    "s5": "",
    "s6": "May 1, 2023",
    "s7": "2023-05-08T20:00:00+02:00",
    "s8": "1st April 2023",
    "s9": "1965-03-02",
    "s10": "2023-05-08 13:57",
}
EXPECTED = ["s9", "s8", "s6", "s3", "s1", "s10", "s7", "s4", "s2", "s5"]


def test_parse_reads_locomo_iso_and_typed_dates():
    assert dates.parse("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56)
    assert dates.parse("10:00 am on 9 June,2023") == datetime(2023, 6, 9, 10, 0)
    assert dates.parse("2023-05-08") == datetime(2023, 5, 8)
    assert dates.parse("2023-05-08T13:56:00Z") == datetime(2023, 5, 8, 13, 56)
    assert dates.parse("2023-05-08T15:56:00+02:00") == datetime(2023, 5, 8, 13, 56)
    assert dates.parse(" 8  May 2023 ") == dates.parse("May 8, 2023") == dates.parse("8th May 2023")
    for bad in ("", None, "someday", "2023-02-30", "May 2023", "2023-05-08 junk"):
        assert dates.parse(bad) is None


def test_keys_agree_and_put_undated_last_in_a_stable_order():
    assert dates.iso_key("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00"
    assert dates.iso_key("someday") == "" and dates.timestamp("someday") == dates.UNDATED_TS
    assert dates.timestamp("1970-01-01") == 0.0 and dates.timestamp("1969-12-31") < 0
    ids = list(MIXED)
    by_key = sorted(ids, key=lambda s: dates.sort_key(MIXED[s]))
    by_ts = sorted(ids, key=lambda s: dates.ts_order_key(dates.timestamp(MIXED[s])))
    assert by_key == by_ts == EXPECTED  # s2 before s5: undated keep the order they came in


def _sessions() -> list[SessionRecord]:
    return [
        SessionRecord(sid, date, [Turn("Alice", f"I planted {sid} tomatoes in the garden today.", f"{sid}:0")])
        for sid, date in MIXED.items()
    ]


def test_theanine_and_secom_order_a_mixed_list_the_same_way(fake_embedder):
    graph = MemoryGraph()
    for s in _sessions():
        for m in summarise(s, None):
            graph.add_memory(m)
    theanine = list(dict.fromkeys(m.session_id for m in sorted(graph.memories(), key=lambda m: m.order)))

    secom_mem = SecomMemory(MemoryStore(), fake_embedder, None, "off", EmbeddingSegmenter(fake_embedder))
    for s in _sessions():
        secom_mem.build("u", s, None, Options(strategy="secom"), Trace("close"))
    secom = list(dict.fromkeys(d["session_id"] for d in secom_mem.export("u")))

    assert theanine == EXPECTED
    # SeCom breaks ties between undated sessions by session id (natural order), THEANINE by insertion:
    # with undated sessions inserted in id order the two agree everywhere.
    assert secom == EXPECTED
