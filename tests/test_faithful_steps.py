"""Issue 10: the papers' steps as the app runs them (scripted LLM, hashed embedder, in-memory store).

Each test names the defect it guards; each failed before its fix.
"""

import json
import re

import pytest

from memory.errors import InvalidOptions
from memory.llm import LLMSession
from memory.locks import UserLocks
from memory.records import SessionRecord, Turn
from memory.reply_prompts import memory_of, reply_messages
from memory.secom.compression import force_tokens
from memory.secom.embedding_segmenter import EmbeddingSegmenter
from memory.secom.strategy import SecomMemory
from memory.settings import Options
from memory.theanine import linking, prompts
from memory.theanine.graph import Memory, MemoryGraph
from memory.theanine.strategy import TheanineMemory
from memory.tokens import count_tokens
from memory.trace import Trace
from memory.trace_types import Timeline
from tests.fakes import MemoryStore, ScriptedLLM, UpperCompressor, offline_agent
from tests.test_secom_strategy import S1, S2


class OneSegment(EmbeddingSegmenter):
    """The whole session is one topic (a long segment)."""

    def segment(self, exchanges, llm=None):
        return [(0, len(exchanges) - 1, "everything")]


LONG = SessionRecord(
    "s9",
    "2023-07-01",
    [
        Turn("Alice" if i % 2 == 0 else "Bot", text, f"s9:{i}")
        for i, text in enumerate(
            [f"Filler chat number {i} about the weather, the news and nothing in particular today." for i in range(14)]
            + ["I finally visited the Zeppelin museum in Friedrichshafen.", "The Zeppelin museum is worth it!"]
            + [f"More filler chat number {i} about the weather and nothing else." for i in range(10)]
        )
    ],
)


# --- SeCom ------------------------------------------------------------------------------


def test_secom_best_segment_too_long_is_cut_around_its_best_exchange_not_skipped(fake_embedder):
    mem = SecomMemory(MemoryStore(), fake_embedder, None, "", OneSegment(fake_embedder))
    mem.build("u", LONG, None, Options(), Trace("c"))
    assert count_tokens(mem.export("u")[0]["text"]) > 200
    trace = Trace("secom")
    segs = mem.retrieve("u", "user: Zeppelin museum Friedrichshafen", Options(budget=60, retriever="bm25"), trace)
    assert len(segs) == 1 and segs[0]["cut"]  # before: skipped, nothing given to the reply
    assert "Zeppelin museum in Friedrichshafen" in segs[0]["context"]
    assert "s9:14" in segs[0]["covers"] and "s9:0" not in segs[0]["covers"]
    assert segs[0]["context"].startswith("(2023-07-01)")  # the date line stays with a cut segment
    assert segs[0]["tokens"] <= 60


def test_secom_k_is_the_number_of_segments_retrieved(fake_embedder):
    mem = SecomMemory(MemoryStore(), fake_embedder, None, "", EmbeddingSegmenter(fake_embedder))
    for s in (S1, S2):
        mem.build("u", s, None, Options(), Trace("c"))
    assert mem.count("u") >= 3
    segs = mem.retrieve("u", "puppy hiking tax wedding", Options(k=2, budget=32000), Trace("s"))
    assert len(segs) == 2  # before: 2 * k


def test_secom_trace_says_when_keys_are_not_compressed(fake_embedder):
    raw = SecomMemory(MemoryStore(), fake_embedder, None, "no compressor model here", EmbeddingSegmenter(fake_embedder))
    raw.build("u", S1, None, Options(), Trace("c"))
    t = Trace("secom")
    segs = raw.retrieve("u", "puppy", Options(budget=32000), t)
    assert segs and not any(s["compressed"] for s in segs)
    assert any("not compressed" in n and "no compressor model here" in n for n in t.notices)
    comp = SecomMemory(MemoryStore(), fake_embedder, UpperCompressor(), "", EmbeddingSegmenter(fake_embedder))
    comp.build("u", S1, None, Options(), Trace("c"))
    t = Trace("secom")
    segs = comp.retrieve("u", "puppy", Options(budget=32000), t)
    assert segs and all(s["compressed"] for s in segs) and not t.notices


def test_force_tokens_name_the_speakers_the_text_really_has():
    toks = force_tokens("Caroline: I went hiking.\nMelanie: Nice!\nCaroline: Yes.")
    assert "Caroline:" in toks and "Melanie:" in toks and "\n" in toks
    assert "[human]" not in toks and "[bot]" not in toks  # markers this project's lines never contain


# --- THEANINE: summarisation -------------------------------------------------------------


class Recording(ScriptedLLM):
    def __init__(self, *script):
        super().__init__(*script)
        self.max_tokens = []

    def chat(self, messages, *, temperature, max_tokens, **ignored):
        self.max_tokens.append(max_tokens)
        return super().chat(messages, temperature=temperature, max_tokens=max_tokens)


def one_memory_per_turn(messages):
    turns = re.findall(r"^\[(\d+)\] ([^:\n]+): (.*)$", messages[-1]["content"], re.M)
    return {
        "memories": [
            {"speaker": sp, "event": f"{sp} mentioned fact number {i}: {text[:40]}", "turns": [int(i)]}
            for i, sp, text in turns
        ]
    }


def test_summarise_keeps_every_memory_and_sizes_the_answer_to_the_session():
    s = SessionRecord(
        "s1", "2023-01-01", [Turn("Ann", f"Fact {i} about my life and my many hobbies.", f"t{i}") for i in range(20)]
    )
    llm = Recording(one_memory_per_turn)
    mems = linking.summarise(s, LLMSession(llm, Trace("c")))
    assert len(mems) == 20  # before: cut to 12
    assert llm.max_tokens[0] >= 20 * 40  # before: 400 for any session
    assert mems[7].turns == ["t7"] and "fact number 7" in mems[7].event
    assert "Ann said" not in mems[0].event and mems[0].excerpt.startswith("Ann: Fact 0")


def test_a_long_session_is_summarised_in_parts_with_global_turn_numbers():
    long_text = "I talked at length about my garden, my tomatoes, my neighbours and the weather " * 6
    s = SessionRecord(
        "s1", "2023-01-01", [Turn("Ann" if i % 2 else "Bo", f"{i}: {long_text}", f"t{i}") for i in range(60)]
    )
    llm = Recording(one_memory_per_turn)
    trace = Trace("c")
    mems = linking.summarise(s, LLMSession(llm, trace))
    assert len(llm.prompts) >= 2  # in parts
    assert all(count_tokens(p[-1]["content"]) < linking.PART_TOKENS + 600 for p in llm.prompts)
    assert [m.turns[0] for m in mems] == [f"t{i}" for i in range(60)]  # nothing lost, numbers global
    assert "part 1 of" in llm.prompts[0][-1]["content"] and "Ann" in llm.prompts[0][-1]["content"]


def test_a_backend_that_asks_for_smaller_parts_gets_them():
    """The embedded models list few facts from a long part (LLMConfig.summary_part_tokens)."""
    s = SessionRecord(
        "s1",
        "2023-01-01",
        [Turn("Ann", f"{i}: my garden, my tomatoes and the weather this week", f"t{i}") for i in range(40)],
    )
    whole, small = Recording(one_memory_per_turn), Recording(one_memory_per_turn)
    small.summary_part_tokens = 120  # type: ignore[attr-defined]
    assert len(linking.summarise(s, LLMSession(whole, Trace("c")))) == 40 and len(whole.prompts) == 1
    assert len(linking.summarise(s, LLMSession(small, Trace("c")))) == 40 and len(small.prompts) >= 4
    turns_per_call = [len(re.findall(r"^\[\d+\]", p[-1]["content"], re.M)) for p in small.prompts]
    assert sum(turns_per_call) == 40 and max(turns_per_call) <= 12


# --- THEANINE: relations -------------------------------------------------------------------


def mem(mid, event, date, speaker="Ann", excerpt=""):
    return Memory(
        id=mid,
        event=event,
        time=date,
        session_id=mid.split(":")[0],
        ts=date,
        speaker=speaker,
        excerpt=excerpt or f"{speaker}: {event}",
    )


def test_relation_prompt_has_the_official_definitions_conversations_and_speakers():
    g = MemoryGraph()
    old = mem("s1:m0", "Ann quit her job at the bank", "2023-01-01", excerpt="Ann: I quit the bank, so stressful.")
    g.add_memory(old)
    new = mem("s2:m0", "Ann feels relieved and rested", "2023-02-01")
    llm = ScriptedLLM({"relation": "React"})
    labels = linking.classify(
        g, [linking.Candidate("s2:m0", "s1:m0", 0.4)], {"s2:m0": new}, LLMSession(llm, Trace("c"))
    )
    assert labels == {("s1:m0", "s2:m0"): "React"}
    p = llm.prompts[0][-1]["content"]
    assert "Reason: A is due to B" in p  # before: "A is the reason for B" (reversed)
    assert "where A comes from:\nAnn: I quit the bank, so stressful." in p  # the source conversation
    assert "[about Ann]" in p and "clear evidence" in p and "otherwise answer None" in p


def test_the_optional_explanation_comes_before_each_label():
    """Options.explain_relations: the official prompt's "- Explanation: ... - Relation: ..."."""
    g = MemoryGraph()
    g.add_memory(mem("s1:m0", "Ann lives in Porto", "2023-01-01"))
    new = {"s2:m0": mem("s2:m0", "Ann moved to Lyon for a new job", "2023-03-01")}
    cands = [linking.Candidate("s2:m0", "s1:m0", 0.6)]
    plain, explained = (
        Recording({"relation": "Changed"}),
        Recording({"explanation": "Ann's home changed from Porto to Lyon.", "relation": "Changed"}),
    )
    assert linking.classify(g, cands, new, LLMSession(plain, Trace("c"))) == {("s1:m0", "s2:m0"): "Changed"}
    got = linking.classify(g, cands, new, LLMSession(explained, Trace("c")), explain=True)
    assert got == {("s1:m0", "s2:m0"): "Changed"}
    assert (
        "first explain" in explained.prompts[0][-1]["content"]
        and '"explanation"' in explained.prompts[0][-1]["content"]
    )
    assert "explain" not in plain.prompts[0][-1]["content"]
    assert explained.max_tokens[0] > plain.max_tokens[0]  # room for the explanation
    keys = list(prompts.relation_schema(True)["properties"])
    assert keys.index("explanation") < keys.index("relation")
    assert Options().explain_relations and not Options(explain_relations=False).explain_relations
    with pytest.raises(InvalidOptions):
        Options(explain_relations="yes")  # type: ignore[arg-type]


def test_a_pair_without_a_valid_label_is_labelled_offline_and_the_trace_says_which():
    g = MemoryGraph()
    for i in range(3):
        g.add_memory(mem(f"s1:m{i}", f"Ann event number {i} happened", "2023-01-01"))
    new = {"s2:m0": mem("s2:m0", "Ann later event", "2023-02-01")}
    cands = [linking.Candidate("s2:m0", f"s1:m{i}", sim) for i, sim in enumerate((0.9, 0.9, 0.1))]
    # one call per pair; the third pair's answers (asked twice) are outside the label set
    llm = ScriptedLLM(
        {"relation": "Cause"}, {"relations": [{"pair": 0, "relation": "Changed"}]}, {"relation": "Teleport"}
    )
    trace = Trace("c")
    labels = linking.classify(g, cands, new, LLMSession(llm, trace))
    assert labels[("s1:m0", "s2:m0")] == "Cause" and labels[("s1:m1", "s2:m0")] == "Changed"
    assert labels[("s1:m2", "s2:m0")] == "None"  # offline rule (similarity 0.1)
    assert len(llm.prompts) == 4 and "event number 2" in llm.prompts[3][-1]["content"]
    assert any("1 of 3 pairs" in n and "s1:m2->s2:m0" in n for n in trace.notices)


def test_a_new_memory_dated_before_its_candidate_is_asked_in_true_time_order():
    g = MemoryGraph()
    g.add_memory(mem("s5:m0", "Ann adopted a second cat", "2023-06-01"))
    early = mem("s1:m0", "Ann adopted her first cat", "2023-01-01")  # an import of an older session
    llm = ScriptedLLM({"relation": "Cause"})
    linking.classify(g, [linking.Candidate("s1:m0", "s5:m0", 0.8)], {"s1:m0": early}, LLMSession(llm, Trace("c")))
    p = llm.prompts[0][-1]["content"]
    found = re.search(r"^A \(.*$", p, re.M)
    assert found is not None
    a_line = found.group(0)
    assert "2023-01-01" in a_line and "first cat" in a_line  # before: the later memory was A


def test_components_are_those_of_the_graph_before_the_session():
    g = MemoryGraph()
    a, b = mem("s1:m0", "Ann likes tea", "2023-01-01"), mem("s2:m0", "Ann likes coffee", "2023-02-01")
    for m in (a, b):
        g.add_memory(m)
    m1, m2 = mem("s3:m0", "Ann drinks both", "2023-03-01"), mem("s3:m1", "Ann buys mugs", "2023-03-01")
    g_t = {x: g.component_of(x) for x in ("s1:m0", "s2:m0")}
    for m in (m1, m2):
        g.add_memory(m)
    rel = [("s1:m0", "SameTopic"), ("s2:m0", "SameTopic")]
    linking.link(g, m1, rel, g_t)  # joins the two components
    edges = linking.link(g, m2, rel, g_t)
    assert len(edges) == 2  # before: 1 (the merged component's newest)


# --- THEANINE: refinement --------------------------------------------------------------------


def test_refine_prompt_has_relation_definitions_and_the_dialogue_one_text_per_timeline(tmp_path, fake_embedder):
    tm = TheanineMemory(MemoryStore(), fake_embedder, tmp_path, UserLocks())
    raw: list[Timeline] = [
        {"text": "[2023: Ann quit] -(Cause)- [2023: Ann rested]", "nodes": ["a", "b"]},
        {"text": "[2023: Ann hiked] -(SameTopic)- [2023: Ann climbed]", "nodes": ["c", "d"]},
    ]
    llm = ScriptedLLM({"timelines": ["only one"]}, {"timelines": ["still one"]})
    out = tm.refine(LLMSession(llm, Trace("r")), "user: how was the hike?", raw, Trace("r"), each=False)
    assert out == [t["text"] for t in raw]  # a wrong count is not mapped onto timelines
    p = llm.prompts[0][-1]["content"]
    assert "Reason: A is due to B" in p and "user: how was the hike?" in p and "exactly 2 entries" in p


def test_every_timeline_is_refined_a_lone_memory_too_one_call_each(tmp_path, fake_embedder):
    """As the official code does: one refinement call per timeline that reached the reply, a single
    memory included; `first` refines only the first timelines (the bundled model), the rest go raw."""
    tm = TheanineMemory(MemoryStore(), fake_embedder, tmp_path, UserLocks())
    raw: list[Timeline] = [
        {"text": "[2023: Ann hiked]", "nodes": ["c"]},
        {"text": "[2023: Ann quit] -(Cause)- [2023: Ann rested]", "nodes": ["a", "b"]},
    ]
    llm = ScriptedLLM({"timelines": ["Ann went hiking in 2023."]}, {"timelines": ["Ann quit her job, so she rested."]})
    trace = Trace("r")
    out = tm.refine(LLMSession(llm, trace), "user: how is Ann?", raw, trace)
    assert out == ["Ann went hiking in 2023.", "Ann quit her job, so she rested."]
    assert trace.timelines_refined == out
    assert len(llm.prompts) == 2 and "Ann hiked" in llm.prompts[0][-1]["content"]
    assert "Ann hiked" not in llm.prompts[1][-1]["content"]
    assert "connect them in the way that reads naturally" in llm.prompts[0][-1]["content"]
    llm = ScriptedLLM({"timelines": ["Ann went hiking."]})
    trace = Trace("r")
    out = tm.refine(LLMSession(llm, trace), "user: how is Ann?", raw, trace, first=1)
    assert out == ["Ann went hiking.", raw[1]["text"]] and trace.timelines_refined == ["Ann went hiking.", ""]
    assert len(llm.prompts) == 1


def test_refinement_calls_run_in_parallel_on_an_endpoint(tmp_path, fake_embedder):
    """workers > 1: the per-timeline calls overlap (an endpoint serves them at once); answers keep their order."""
    import threading

    tm = TheanineMemory(MemoryStore(), fake_embedder, tmp_path, UserLocks())
    raw: list[Timeline] = [{"text": f"[2023: event {i}]", "nodes": [f"m{i}"]} for i in range(4)]
    barrier = threading.Barrier(4, timeout=10)

    def answer(messages):
        barrier.wait()  # all four calls must be in flight at once, or this times out
        n = next(i for i in range(4) if f"event {i}]" in messages[-1]["content"])
        return {"timelines": [f"refined {n}"]}

    llm = ScriptedLLM(answer)
    trace = Trace("r")
    out = tm.refine(LLMSession(llm, trace), "user: hi", raw, trace, workers=4)
    assert out == [f"refined {i}" for i in range(4)]


# --- both --------------------------------------------------------------------------------------


def test_reply_system_prompt_is_the_same_neutral_prompt_for_every_strategy():
    systems = {s: reply_messages(s, [], [], "hi", "2024-01-01")[0]["content"] for s in ("theanine", "secom", "none")}
    assert len(set(systems.values())) == 1
    assert "false premise" not in systems["none"].lower()  # before: aimed at TeaFarm, for every strategy
    assert "correct a false premise" in reply_messages("none", [], [], "hi", "", hint=prompts_hint())[0]["content"]


def prompts_hint():
    from memory.reply_prompts import FALSE_PREMISE_HINT

    return FALSE_PREMISE_HINT


def test_timelines_are_packed_into_the_budget_and_carry_their_turns(tmp_path, fake_embedder):
    tm = TheanineMemory(MemoryStore(), fake_embedder, tmp_path, UserLocks())
    s1 = [
        mem(f"s1:m{i}", f"Ann went sailing on the lake, trip number {i}, with friends", "2023-01-01") for i in range(6)
    ]
    for m in s1:
        m.turns = [f"D1:{i}" for i in range(int(m.id[-1]) + 1)][-1:]
    tm.add_memories("u", "s1", s1, None, Options(), Trace("c"))
    t = Trace("theanine")
    raw = tm.retrieve("u", "user: sailing on the lake", Options(k=6, budget=60), t)
    assert raw and sum(count_tokens(r["text"]) for r in raw) <= 60 + 5
    assert all(r["covers"] for r in raw)
    assert {c for r in raw for c in r["covers"]} <= {f"D1:{i}" for i in range(6)}
    assert json.dumps(t.timelines_raw)  # the trace stays serialisable


# --- the agent: one memory function for reply and benchmark; the LLM injected -------------------


def make_agent(tmp_path, fake_embedder, llm):
    return offline_agent(tmp_path, fake_embedder, llm, store=MemoryStore())


def test_reply_prompt_holds_exactly_the_memory_context_the_benchmark_scores(tmp_path, fake_embedder):
    def answer(messages):
        text = messages[-1]["content"]
        if '"memories"' in text:
            return one_memory_per_turn(messages)
        if '"timelines"' in text:
            return {"timelines": re.findall(r"^Timeline \d+: (.*)$", text, re.M)}
        if "relation of B to A" in text:
            return {"relation": "not a label"}
        return "A reply."

    llm = ScriptedLLM(answer)
    agent = make_agent(tmp_path, fake_embedder, llm)
    for s in (S1, S2):
        agent.close_session("u", s)
    for strategy in ("theanine", "secom"):
        opts = Options(strategy=strategy, budget=200, bundled_budget=200)  # reply reads the bundled budget
        ctx = agent.memory_context(
            "u", [], "Tell me about the puppy Biscuit", opts, session=LLMSession(llm, Trace("b"))
        )
        assert ctx.lines and ctx.covers and len(ctx.lines) == len(ctx.covers)
        n = len(llm.prompts)
        events = list(agent.reply("u", [], "Tell me about the puppy Biscuit", "2024-01-01", opts))
        assert events[-1].trace.error is None
        memory = memory_of(llm.prompts[-1])  # the reply call is the last prompt; its memory block
        assert len(llm.prompts) > n and memory == ctx.text


def test_close_session_without_llm_steps_makes_no_llm_call(tmp_path, fake_embedder):
    llm = ScriptedLLM(RuntimeError("no LLM call expected"))
    agent = make_agent(tmp_path, fake_embedder, llm)
    rep = agent.close_session("u", S1, llm_steps=False)
    assert rep.new_memories and rep.new_segments and not rep.trace.llm_calls and not llm.prompts
