"""How often See why's answer-use check (memory/answer_use.py) names a source, on LoCoMo excerpts.

`python -m tests.answer_use_bench [budget]`: the three dev excerpts of tests/data/locomo_small.json built
offline (MiniLM, embedded Chroma), up to 15 questions each whose evidence is in the excerpt, through the
real reply path with a scripted LLM. Two kinds of reply per question and strategy: the gold answer
("It was <answer>.", a reply that used the memory when its evidence reached the prompt) and eight
generic chat replies that answer nothing (a source named for one is a false alarm). Prints, per
strategy, the gold replies given a source, among them those whose source holds an evidence turn,
those whose evidence reached the prompt (and how many of them were given a source), and the generic
replies given a source. `budget`: the bundled model's memory tokens (default 200).

`python -m tests.answer_use_bench stale [budget]`: the warning, on the knowledge-update probe's histories
(bench/ku_histories.py, built offline): its "current value" question answered with the old value, the new
one, and both ("It was <old>, now it is <new>."). Prints, per strategy, the warnings for each reply, over
the histories whose graph holds the change (a Changed edge out of a memory of an old-value turn).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from memory.agent import MemoryAgent
from memory.embeddings import make_embedder
from memory.locomo_format import load_sessions, questions
from memory.settings import Options
from memory.trace_types import AnswerUse
from tests.conftest import LOCOMO_SMALL
from tests.fakes import ScriptedLLM, offline_agent

GENERIC = (
    "That sounds like a wonderful experience! How did it make you feel?",
    "I'm so happy for you. It's great that you have such supportive friends and family.",
    "I don't have that information, but I'd love to hear more about it.",
    "Hi! I'm doing well, thanks. What have you been up to lately?",
    "That's really interesting. Tell me more about your plans for the summer.",
    "Sounds fun!",
    "Nice, enjoy it!",
    "Oh wow, that's amazing! I'm proud of you.",
)
PER_SAMPLE = 15


def checked(agent: MemoryAgent, uid: str, question: str, opts: Options) -> tuple[AnswerUse, set[str]]:
    """The reply's answer-use check, and the turns whose words reached its prompt."""
    trace = list(agent.reply(uid, [], question, "2024-01-01", opts))[-1].trace
    assert trace is not None and trace.error is None, trace
    parts = trace.timelines_raw if opts.strategy == "theanine" else trace.segments
    return trace.answer_use, {str(t) for p in parts for t in p.get("covers") or ()}


def main(budget: int) -> None:
    data = json.loads(LOCOMO_SMALL.read_text())
    emb = make_embedder("minilm")
    llm = ScriptedLLM("ok")
    counts = {
        s: {
            "gold": 0,
            "gold_source": 0,
            "gold_evidence": 0,
            "reached": 0,
            "reached_source": 0,
            "generic": 0,
            "generic_source": 0,
        }
        for s in ("theanine", "secom")
    }
    for sample, (uid, sessions) in zip(data, load_sessions(data), strict=True):
        tmp = Path(tempfile.mkdtemp(prefix="answer-use-bench-"))
        agent = offline_agent(tmp, emb, llm)
        for s in sessions:
            agent.close_session(uid, s, llm_steps=False)
        built = {t.turn_id for s in sessions for t in s.turns}
        graph = agent.theanine.graph(uid)
        for q in [q for q in questions(sample) if set(q.evidence) <= built][:PER_SAMPLE]:
            for strategy, c in counts.items():
                opts = Options(strategy=strategy, bundled_budget=budget)
                llm.script = [f"It was {q.answer}."]
                use, reached = checked(agent, uid, q.question, opts)
                c["gold"] += 1
                if set(q.evidence) & reached:
                    c["reached"] += 1
                    c["reached_source"] += bool(use.get("sources"))
                if use.get("sources"):
                    c["gold_source"] += 1
                    turns = set()
                    for src in use["sources"]:
                        turns |= set(graph.memory(src["id"]).turns) if src["kind"] == "memory" else set(src["covers"])
                    c["gold_evidence"] += bool(turns & set(q.evidence))
                for reply in GENERIC:
                    llm.script = [reply]
                    use, _ = checked(agent, uid, q.question, opts)
                    c["generic"] += 1
                    c["generic_source"] += bool(use.get("sources"))
    print(f"memory budget {budget} tokens")
    for strategy, c in counts.items():
        print(
            f"{strategy:9s} gold replies with a source {c['gold_source']}/{c['gold']} "
            f"(source holds an evidence turn: {c['gold_evidence']}; evidence in the prompt: "
            f"{c['reached_source']}/{c['reached']} with a source); "
            f"generic replies with a source {c['generic_source']}/{c['generic']}"
        )


def stale(budget: int) -> None:
    from bench.ku_histories import histories

    emb = make_embedder("minilm")
    llm = ScriptedLLM("ok")
    tmp = Path(tempfile.mkdtemp(prefix="answer-use-stale-"))
    agent = offline_agent(tmp, emb, llm)
    replies = {"old": "It is {old}.", "new": "It is {new}.", "both": "It was {old}, now it is {new}."}
    warned = {s: dict.fromkeys(replies, 0) for s in ("theanine", "secom")}
    changed = 0
    hs = histories()
    for h in hs:
        for s in h.sessions:
            agent.close_session(h.hid, s, llm_steps=False)
        g = agent.theanine.graph(h.hid)
        if not any(set(m.turns) & set(h.old_turns) and g.current(m.id) != m.id for m in g.memories()):
            continue  # the offline rule missed this change: nothing to warn from
        changed += 1
        for strategy, w in warned.items():
            for kind, reply in replies.items():
                llm.script = [reply.format(old=h.old, new=h.new)]
                opts = Options(strategy=strategy, bundled_budget=budget)
                trace = list(agent.reply(h.hid, [], h.questions["current"], h.ask_date, opts))[-1].trace
                assert trace is not None and trace.error is None, trace
                w[kind] += bool(trace.answer_use.get("stale"))
    print(f"memory budget {budget} tokens; {changed} of {len(hs)} histories hold their change in the graph")
    for strategy, w in warned.items():
        print(
            f"{strategy:9s} warned: old value {w['old']}/{changed}, new value {w['new']}/{changed}, "
            f"both {w['both']}/{changed}"
        )


if __name__ == "__main__":
    if sys.argv[1:2] == ["stale"]:
        stale(int(sys.argv[2]) if len(sys.argv) > 2 else 200)
    else:
        main(int(sys.argv[1]) if len(sys.argv) > 1 else 200)
