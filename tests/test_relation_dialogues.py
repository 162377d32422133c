"""Issue 35, item 1: the relation step as the official code runs it, within the window. Each (candidate,
new memory) pair is one LLM call showing the whole dialogue of both memories' sessions; the dialogues
are cut only when the window forces it, and the trace says so."""

from memory.llm import LLMSession
from memory.records import SessionRecord, Turn
from memory.theanine import linking, pair_dialogues
from memory.theanine.graph import MemoryGraph
from memory.trace import Trace
from tests.fakes import ScriptedLLM


def session(sid, date, *lines):
    return SessionRecord(sid, date, [Turn(sp, text, f"{sid}:{i}") for i, (sp, text) in enumerate(lines)])


S1 = session(
    "s1",
    "2023-01-01",
    ("user", "I live in Porto, right by the river."),
    ("assistant", "Porto is lovely."),
    ("user", "I work as a baker in the old town."),
    ("assistant", "Early mornings then!"),
)
S2 = session(
    "s2",
    "2023-03-01",
    ("user", "Big news: I moved to Lyon last week."),
    ("assistant", "What a change."),
    ("user", "I still bake, now at a café near the station."),
)


def graph_and_pairs(old: SessionRecord, new: SessionRecord):
    g = MemoryGraph()
    olds = linking.summarise(old, None)  # offline memories: one per user statement
    for m in olds:
        g.add_memory(m)
    news = linking.summarise(new, None)
    cands = [linking.Candidate(n.id, o.id, 0.5) for n in news for o in olds]
    return g, cands, {m.id: m for m in news}


def turn_lines(s: SessionRecord) -> list[str]:
    return [f"{t.speaker}: {t.text}" for t in s.turns]


def test_each_pair_is_one_call_showing_both_sessions_whole_dialogue():
    g, cands, new = graph_and_pairs(S1, S2)
    assert len(cands) == 4
    llm = ScriptedLLM({"explanation": "Ann's city changed.", "relation": "Changed"}, {"relation": "None"})
    trace = Trace("c")
    labels = linking.classify(g, cands, new, LLMSession(llm, trace), explain=True)
    assert len(llm.prompts) == len(cands)  # one pair per call (before: every pair in one batched call)
    for prompt, c in zip(llm.prompts, cands, strict=True):
        text = prompt[-1]["content"]
        assert all(line in text for line in turn_lines(S1) + turn_lines(S2))  # both sessions, every turn
        assert f"A (2023-01-01) [about user]: {g.memory(c.old_id).event}" in text
        assert f"B (2023-03-01) [about user]: {new[c.new_id].event}" in text
        assert "Pair 1" not in text and text.count("\nA (") == 1  # one pair only
    assert list(labels.values()) == ["Changed", "None", "None", "None"]
    assert trace.counts["relation_pairs"] == 4 and "relation_pairs_cut" not in trace.counts
    assert not any("cut" in n for n in trace.notices) and all(c.status == "ok" for c in trace.llm_calls)


def test_memories_keep_their_sessions_whole_dialogue():
    """Before: each memory kept its own turns, at most 1,200 characters."""
    long = session(
        "s3", "2023-04-01", *[("user", f"Turn {i} of a long chat about my garden and bees.") for i in range(60)]
    )
    mems = linking.summarise(long, None)
    assert len(mems[0].excerpt) > 1200 and mems[0].excerpt.split("\n") == turn_lines(long)
    assert all(m.excerpt is mems[0].excerpt for m in mems)  # one copy per session


def test_a_window_too_small_for_both_dialogues_cuts_them_and_the_trace_says_so():
    filler = [("user", f"Filler remark {i} about the weather, the buses and the news today.") for i in range(40)]
    old = session("s1", "2023-01-01", *filler[:20], ("user", "I live in Porto, right by the river."), *filler[20:])
    g = MemoryGraph()
    porto = next(m for m in linking.summarise(old, None) if "Porto" in m.event)
    g.add_memory(porto)
    lyon = linking.summarise(S2, None)[0]
    llm = ScriptedLLM({"explanation": "The city changed.", "relation": "Changed"})
    llm.context_window = 900  # type: ignore[attr-defined]
    trace = Trace("c")
    labels = linking.classify(
        g, [linking.Candidate(lyon.id, porto.id, 0.5)], {lyon.id: lyon}, LLMSession(llm, trace), explain=True
    )
    assert labels == {(porto.id, lyon.id): "Changed"}
    [prompt] = llm.prompts
    text = prompt[-1]["content"]
    assert "user: I live in Porto, right by the river." in text  # the memory's own turn is kept
    assert all(line in text for line in turn_lines(S2))  # the short conversation stays whole
    assert "earlier turns left out to fit the window" in text and "later turns left out" in text
    session_ = LLMSession(llm, Trace("x"))
    assert session_.prompt_tokens(prompt) <= session_.room(linking._relation_answer(True))
    [call] = trace.llm_calls
    assert "dialogue cut to fit the 900-token window" in call.detail and "A's conversation" in call.detail
    assert "B's conversation whole" in call.detail
    assert trace.counts["relation_pairs_cut"] == 1
    assert any("1 of 1 pairs were cut to fit the 900-token window" in n for n in trace.notices)


def test_fit_keeps_a_short_dialogue_whole_and_gives_the_other_the_rest():
    def count(text):
        return len(text.split())

    short = "a: one two\nb: three"

    def chat(special: int, words: str) -> str:
        return "\n".join(f"x: {words if i == special else 'filler remark number'} {i}" for i in range(30))

    long = chat(15, "the beekeeper harvested honey")
    got = pair_dialogues.fit([(short, "one"), (long, "beekeeper honey")], 60, count)
    assert got[0].text == short and not got[0].cut
    assert got[1].cut and "x: the beekeeper harvested honey 15" in got[1].text  # kept around the memory's turn
    assert sum(count(f.text) for f in got) <= 60 + 2 * pair_dialogues.MARK_TOKENS
    both = pair_dialogues.fit([(chat(3, "tulips bloomed"), "tulips"), (chat(27, "ferry sailed"), "ferry")], 60, count)
    assert all(f.cut for f in both) and "tulips bloomed 3" in both[0].text and "ferry sailed 27" in both[1].text
    assert pair_dialogues.fit([(short, "x"), (long, "y")], 10_000, count)[1].text == long  # room: nothing cut
