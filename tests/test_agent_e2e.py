"""End to end through real parts: embedded llama.cpp (the bundled SmolLM2 135M), MiniLM, embedded
Chroma; and the `openai` client against a real `python -m llama_cpp.server` on 127.0.0.1.

A 135M model writes poor text; these tests check the plumbing, never the prose: sessions are
closed into memory (offline path by default, the papers' LLM steps when forced on or with an
endpoint), and a later reply retrieves from that memory and streams.
"""

import pytest

from memory.agent import MemoryAgent
from memory.llm import bundled_gguf_path
from memory.records import SessionRecord, Turn
from memory.settings import LLMConfig, Options, Settings
from tests.servers import free_port, llama_server_cmd, running

pytestmark = pytest.mark.slow

SESSIONS = [
    SessionRecord(
        "s1",
        "2023-05-01",
        [
            Turn("user", "I adopted a golden retriever puppy named Biscuit this morning.", "s1:0"),
            Turn("assistant", "Congratulations on the new puppy!", "s1:1"),
            Turn("user", "I am also starting pottery classes on Tuesday evenings.", "s1:2"),
            Turn("assistant", "Pottery sounds relaxing.", "s1:3"),
        ],
    ),
    SessionRecord(
        "s2",
        "2023-05-08",
        [
            Turn("user", "Biscuit the puppy chewed through my new running shoes.", "s2:0"),
            Turn("assistant", "Oh no, puppies love shoes.", "s2:1"),
            Turn("user", "My pottery teacher said my first bowl was lopsided.", "s2:2"),
            Turn("assistant", "Everyone's first bowl is!", "s2:3"),
        ],
    ),
]


def run(agent: MemoryAgent, strategy: str, question: str):
    opts = Options(strategy=strategy, max_reply_tokens=24, k=2)
    events = list(agent.reply("u1", [], question, "2023-05-15", opts))
    assert events[-1].kind == "done"
    return events, events[-1].trace


def build(agent: MemoryAgent):
    for s in SESSIONS:
        seen: list[float] = []
        report = agent.close_session("u1", s, Options(max_reply_tokens=24), progress=lambda f, m: seen.append(f))  # noqa: B023  (called during this iteration)
        assert report.new_memories and report.new_segments and not report.already_built
        assert seen[-1] == 1.0 and seen == sorted(seen)
    assert agent.close_session("u1", SESSIONS[0]).already_built  # idempotent
    return agent


def check_memory_used(agent: MemoryAgent, llm_steps: bool = True):
    _events, trace = run(agent, "theanine", "What did my puppy Biscuit chew?")
    assert trace.error is None, trace.error
    assert any("Biscuit" in m["event"] or "puppy" in m["event"] for m in trace.memories)
    assert trace.timelines_raw and trace.memory_path == ("llm" if llm_steps else "offline")
    if llm_steps:
        assert len(trace.timelines_refined) == len(trace.timelines_raw)
        # every timeline that reached the reply is refined, a lone memory too: one call each, then the reply
        purposes = [c.purpose for c in trace.llm_calls]
        assert purposes == ["refine"] * len(trace.timelines_raw) + ["reply"], purposes
    else:  # shown unrefined, and said so
        assert trace.timelines_refined == [] and any("not refined" in n for n in trace.notices)
        assert [c.purpose for c in trace.llm_calls] == ["reply"]
    _, trace = run(agent, "secom", "What did my puppy Biscuit chew?")
    assert trace.error is None, trace.error
    assert trace.segments and any("Biscuit" in s["text"] for s in trace.segments)
    assert all(s.get("key") for s in trace.segments)
    assert [c.purpose for c in trace.llm_calls] == ["reply"]
    _, trace = run(agent, "none", "What did my puppy Biscuit chew?")
    assert not trace.memories and not trace.segments and len(trace.llm_calls) == 1


def test_embedded_default_builds_memory_without_llm_calls(tmp_path):
    """The newcomer's path: the bundled model replies; memory is built by the offline path."""
    agent = MemoryAgent.from_settings(Settings(data_dir=tmp_path))
    report = agent.close_session("u1", SESSIONS[0])
    assert report.trace.llm_calls == [] and report.trace.memory_path == "offline"
    assert any("without an LLM" in n for n in report.trace.notices)
    events = [m["event"] for m in agent.graph_view("u1")["nodes"]]
    assert [e for e in events if e.startswith("user:")] == [
        "user: I adopted a golden retriever puppy named Biscuit this morning.",
        "user: I am also starting pottery classes on Tuesday evenings.",
    ]
    assert "assistant: Congratulations on the new puppy!" not in events  # a cheer is no memory
    assert agent.close_session("u1", SESSIONS[1]).new_segments
    check_memory_used(agent, llm_steps=False)
    events, _trace = run(agent, "theanine", "Tell me about Biscuit.")
    assert any(e.kind == "delta" for e in events) and events[-1].text.strip()  # a reply streams
    assert {n["session_id"] for n in agent.graph_view("u1")["nodes"]} == {"s1", "s2"}


def test_llm_steps_forced_on_run_through_the_embedded_model(tmp_path):
    settings = Settings.from_env({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_LLM_STEPS": "on"})
    agent = build(MemoryAgent.from_settings(settings))
    calls = [
        c.purpose
        for c in agent.close_session(
            "u1", SessionRecord("s3", "2023-05-09", [Turn("user", "I bought a red kayak for the summer.", "s3:0")])
        ).trace.llm_calls
    ]
    assert calls and calls[0] == "summarise"
    check_memory_used(agent)


def test_openai_client_against_real_llama_cpp_server(tmp_path):
    port = free_port()
    with running(
        llama_server_cmd(bundled_gguf_path(), port),
        f"http://127.0.0.1:{port}/v1/models",
        timeout=180,
        log=tmp_path / "llama_server.log",
    ):
        cfg = LLMConfig(backend="openai", model="gemma", base_url=f"http://127.0.0.1:{port}/v1", timeout=120)
        agent = build(MemoryAgent.from_settings(Settings(data_dir=tmp_path, llm=cfg)))
        check_memory_used(agent)
        summarise = [
            c
            for c in agent.close_session(
                "u1", SessionRecord("s3", "2023-05-09", [Turn("user", "I bought a red kayak for the summer.", "s3:0")])
            ).trace.llm_calls
            if c.purpose == "summarise"
        ]
        assert summarise and summarise[0].prompt_tokens > 0  # the server really answered
