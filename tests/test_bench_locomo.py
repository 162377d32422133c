"""`python -m bench locomo`: packing, evidence recall on answers known by construction,
and the command's JSON and plot."""

import json

import pytest

from bench import locomo_recall, recall_units
from memory.evaluation.scoring import evidence_recall
from memory.packing import Piece, Unit
from memory.settings import Options
from memory.tokens import count_tokens
from tests.bench_fixtures import run_recall_bench, write_tiny


def unit(uid, *texts, anchor=0, covers=None):
    return Unit(uid, [Piece(t, (covers or {}).get(t, (f"{uid}:{i}",))) for i, t in enumerate(texts)], anchor=anchor)


def test_evidence_recall_counts_whole_turns():
    assert evidence_recall(["D1:1", "D1:2"], {"D1:2", "D9:9"}) == 0.5
    assert evidence_recall(["D1:1"], set()) == 0.0


def test_recall_on_known_answers(tmp_path, fake_embedder, chroma_store):
    path = write_tiny(tmp_path / "tiny.json")
    convs = locomo_recall.load(path)
    assert [len(c.questions) for c in convs] == [2]  # category 5 and no-evidence questions skipped
    q2 = convs[0].questions[1]
    assert q2.evidence == ["D1:3", "D2:3"]  # malformed "D1:3; D2:3" cleaned
    d12 = "(1:00 pm on 1 May, 2023) Bob: Busy! I adopted a beagle puppy named Biscuit from the Portland shelter."
    d13 = "(1:00 pm on 1 May, 2023) Alice: Lovely. I started pottery lessons at the community studio downtown."
    one = max(count_tokens(d12), count_tokens(d13)) + 1  # room for exactly one turn
    assert one < count_tokens(d12) + count_tokens(d13)
    out = recall_units.evaluate(
        convs,
        ["turn", "session", "theanine-topk", "theanine-timeline"],
        ["bm25"],
        [one, 2000],
        embedder=fake_embedder,
        store=chroma_store,
        data_dir=tmp_path,
        options=Options(),
    )
    res = {(r["method"], r["budget"]): r for r in out["results"]}
    small = res[("turn", one)]
    # BM25 puts D1:2 first for q1 (recall 1) and D1:3 first for q2 (one of two evidence turns: 0.5)
    assert small["recall"] == pytest.approx(0.75)
    assert small["by_category"] == {"1": 0.5, "2": None, "3": None, "4": 1.0}
    assert small["n_questions"] == 2
    # with room for everything, every method carries all the evidence
    for m in ("turn", "session", "theanine-topk", "theanine-timeline"):
        assert res[(m, 2000)]["recall"] == 1.0, m
    # a session does not fit in `one` tokens: it is cut to its first lines (date, then turns 1..)
    assert res[("session", one)]["recall"] < 1.0


def test_command_writes_results_config_and_plot(tmp_path):
    d = run_recall_bench(tmp_path, "--budgets", "40,1000", "--seed", "3", "--path", "units")
    methods = {r["method"] for r in d["results"]}
    assert methods == set(recall_units.METHODS)
    assert {r["retriever"] for r in d["results"]} == {"bm25", "dense", "hybrid"}
    for r in d["results"]:
        assert set(r) >= {"method", "retriever", "budget", "recall", "by_category", "n_questions"}
        assert set(r["by_category"]) == {"1", "2", "3", "4"} and r["n_questions"] == 2
        if r["budget"] == 1000:  # the whole conversation fits
            assert r["recall"] == 1.0, r
    assert d["config"]["seed"] == 3 and d["config"]["budgets"] == [40, 1000]
    assert d["config"]["tokenizer"] == "tiktoken cl100k_base"
    assert (tmp_path / "res" / "locomo_recall.png").stat().st_size > 5000


def test_timeline_units_read_as_the_engine_renders_them(tmp_path, fake_embedder, chroma_store):
    from memory.theanine import timelines

    conv = locomo_recall.load(write_tiny(tmp_path / "tiny.json"))[0]
    tu = recall_units.TheanineUnits(conv, chroma_store, fake_embedder, tmp_path, None, Options(), True, 3, 0)
    assert tu.stats()["memories"] == 4
    if not tu.graph.g.number_of_edges():  # the hashed embedder may link nothing
        tu.graph.link("D1:o0", "D2:o0", "Cause")
    for a, b in tu.graph.g.edges:
        u = tu.timeline_unit([a, b], b)
        assert u.text == timelines.render(tu.graph, [a, b]) and u.anchor == 1
        assert {t for p in u.pieces for t in p.covers} == set(tu.graph.memory(a).turns + tu.graph.memory(b).turns)


def test_agent_path_closes_sessions_through_the_agent_with_each_summariser(tmp_path, monkeypatch):
    """Issue 10: `--path agent` builds memory with MemoryAgent.close_session (LLM injected) and scores
    the memory text MemoryAgent.memory_context gives the reply; results per summariser and category."""
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND", "LLM_GGUF_PATH", "SECOM_SEGMENTER"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    budgets = ["--budgets", "50,1000", "--retrievers", "bm25"]
    d = run_recall_bench(tmp_path, *budgets, "--summariser", "offline,reference")
    assert d["config"]["path"] == "agent" and d["config"]["summarisers"] == ["offline", "reference"]
    rows = {(r["summariser"], r["method"], r["budget"]): r for r in d["results"]}
    assert {s for s, _, _ in rows} == {"-", "offline", "reference"}
    for m in ("secom", "theanine-topk", "theanine-timeline"):
        assert ("offline", m, 1000) in rows and ("reference", m, 1000) in rows
    # the reference summariser writes LoCoMo's observation facts, which carry every evidence turn
    assert rows[("reference", "theanine-topk", 1000)]["recall"] == 1.0
    assert rows[("reference", "theanine-timeline", 1000)]["recall"] == 1.0
    assert rows[("-", "turn", 1000)]["recall"] == 1.0
    assert set(rows[("reference", "secom", 50)]["by_category"]) == {"1", "2", "3", "4"}
    ref = d["close"]["reference"]["conv-t0"]
    assert ref["memories"] == 4 and ref["llm_calls"] > 0  # went through the engine's summary step
    assert d["close"]["offline"]["conv-t0"]["llm_calls"] == 0  # llm_steps=False: no LLM call at all


def test_questions_are_asked_after_real_turns_of_another_conversation():
    """Issue 44: the turns before a question are consecutive real turns of ANOTHER conversation of the
    file (every session of the question's own conversation is in the memory searched), seeded, the
    user who asks spoke last; with one conversation only, turns of the neutral chat."""
    from bench.locomo_recall import load
    from memory.evaluation.agent_run import chat_before
    from memory.evaluation.neutral_chat import NEUTRAL_CHAT
    from tests.conftest import LOCOMO_SMALL

    convs = load(LOCOMO_SMALL)
    texts = {c.sample_id: {f"{c.sample_id}/{t.turn_id}": t.text for s in c.sessions for t in s.turns} for c in convs}
    for conv in convs:
        for i in range(len(conv.questions)):
            history = chat_before(convs, conv, i, 4, seed=0)
            assert len(history) == 4 and history == chat_before(convs, conv, i, 4, seed=0)  # seeded
            owners = {t.turn_id.split("/")[0] for t in history}
            assert len(owners) == 1 and conv.sample_id not in owners
            other = owners.pop()
            sessions = {t.turn_id.split("/")[1].split(":")[0] for t in history}
            assert len(sessions) == 1  # consecutive turns of one session
            numbers = [int(t.turn_id.split(":")[1]) for t in history]
            assert numbers == list(range(numbers[0], numbers[0] + 4))
            assert history[-1].speaker == "user" and all(t.text == texts[other][t.turn_id] for t in history)
    alone = chat_before(convs[:1], convs[0], 0, 4)
    assert [t.speaker for t in alone] == ["assistant", "user", "assistant", "user"]
    assert {t.text for t in alone} <= {text for _, text in NEUTRAL_CHAT}
    assert chat_before(convs, convs[0], 0, 0) == []


def test_the_chat_turns_session_is_never_in_the_memory_searched(tmp_path, monkeypatch):
    """Issue 44: the benchmark leaked its chat into the memory: the turns before a question came from a
    session already closed into the memory searched, so a query that read the dialogue found those very
    turns. Through the real path (`bench locomo`, memory closed by the agent, read by memory_context),
    no turn of the chat turns' own session is in the searched user's segments or THEANINE memories."""
    from memory.evaluation import agent_run
    from tests.conftest import LOCOMO_SMALL

    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND", "LLM_GGUF_PATH", "SECOM_SEGMENTER"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    convs = {c.sample_id: c for c in locomo_recall.load(LOCOMO_SMALL)}
    session_texts = {(cid, s.session_id): {t.text for t in s.turns} for cid, c in convs.items() for s in c.sessions}
    checked = []
    real = agent_run.MemoryAgent.memory_context

    def spy(self, user_id, history, message, opts, *a, **kw):
        searched = user_id.split("-offline")[0].removeprefix("locomo-")
        said = {t.text for t in history if len(t.text.split()) >= 5}  # not "Bye!", said everywhere
        segments = self.secom.export(user_id)
        assert said and segments and not any(x in s["text"] for x in said for s in segments)
        chat = {(t.turn_id.split("/")[0], t.turn_id.split("/")[1].split(":")[0]) for t in history}
        assert len(chat) == 1 and searched not in {cid for cid, _ in chat}
        own = {x for x in session_texts[chat.pop()] if len(x.split()) >= 5}
        assert not any(x in s["text"] for x in own for s in segments)
        graph = self.theanine.graph(user_id)
        by_id = {t.turn_id: t.text for s in convs[searched].sessions for t in s.turns}
        sources = {by_id[t] for mid in graph.g for t in graph.memory(mid).turns if t in by_id}
        assert sources and not own & sources
        ctx = real(self, user_id, history, message, opts, *a, **kw)
        assert not any(x in line for x in own for line in ctx.lines)
        checked.append(searched)
        return ctx

    monkeypatch.setattr(agent_run.MemoryAgent, "memory_context", spy)
    args = ["--data", str(LOCOMO_SMALL), "--out", str(tmp_path / "agent.json"), "--budgets", "1000"]
    assert locomo_recall.main([*args, "--methods", "app-defaults", "--retrievers", "bm25"]) == 0
    assert set(checked) == set(convs)


def test_app_defaults_rows_use_the_installed_options(tmp_path, monkeypatch):
    """The "app defaults" rows retrieve with the options a fresh install replies with (k, retrievers),
    the per-method rows with BENCH_K items and each requested retriever."""
    from memory.evaluation import agent_run
    from memory.settings import Options
    from tests.conftest import LOCOMO_SMALL

    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND", "LLM_GGUF_PATH", "SECOM_SEGMENTER"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    seen = []
    real = agent_run.MemoryAgent.memory_context

    def spy(self, user_id, history, message, opts, *a, **kw):
        seen.append((opts.strategy, opts.k, opts.retriever, opts.theanine_retriever, len(history)))
        return real(self, user_id, history, message, opts, *a, **kw)

    monkeypatch.setattr(agent_run.MemoryAgent, "memory_context", spy)
    out = tmp_path / "agent.json"
    args = ["--data", str(LOCOMO_SMALL), "--conversations", "conv-26", "--out", str(out), "--budgets", "1000"]
    assert locomo_recall.main([*args, "--methods", "secom,app-defaults", "--retrievers", "dense"]) == 0
    d = json.loads(out.read_text())
    installed = Options()
    assert {(r["method"], r["retriever"]) for r in d["results"]} == {
        ("secom", "dense"),
        ("app-defaults:secom", installed.retriever),
        ("app-defaults:theanine", installed.theanine_retriever),
    }
    assert d["config"]["after_turns"] == 4 and d["config"]["app_defaults"]["k"] == installed.k
    assert ("secom", agent_run.BENCH_K, "dense", "dense", 4) in seen
    assert ("secom", installed.k, installed.retriever, installed.theanine_retriever, 4) in seen
    assert ("theanine", installed.k, installed.retriever, installed.theanine_retriever, 4) in seen


def test_llm_linking_counts_the_calls_it_made(tmp_path, fake_embedder, chroma_store):
    """The graph's LLM calls are recorded by the linking session's own trace (they read 0 before)."""
    from memory.llm import LLMSession
    from memory.trace import Trace
    from tests.fakes import ScriptedLLM

    conv = locomo_recall.load(write_tiny(tmp_path / "tiny.json"))[0]
    session = LLMSession(ScriptedLLM(*[{"relations": [{"pair": 0, "relation": "Cause"}]}] * 8), Trace("close"))
    tu = recall_units.TheanineUnits(conv, chroma_store, fake_embedder, tmp_path, session, Options(), True, 3, 0)
    assert tu.stats()["link_llm_calls"] == len(session.trace.llm_calls) > 0
