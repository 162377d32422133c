"""The designs behind one protocol (issue 45, item 3): both designs are memory.design.MemoryDesign, the
agent picks one by the strategy's name in memory.registry, and a third design is one more entry: built at
every close, read by a reply of its strategy, exported, forgotten and dropped with the others."""

from __future__ import annotations

from memory.agent import MemoryAgent
from memory.design import Forgetting, MemoryClients, MemoryDesign, Recall, Recalled, RecallRequest, SessionOf
from memory.llm import LLMSession
from memory.locks import UserLocks
from memory.records import ReplyEvent, SessionRecord, Turn
from memory.registry import DESIGNS
from memory.secom.embedding_segmenter import EmbeddingSegmenter
from memory.secom.strategy import SecomMemory
from memory.settings import STRATEGIES, Options, Settings
from memory.steps_policy import StepPlan
from memory.theanine.graph import JsonGraphStore
from memory.theanine.strategy import TheanineMemory
from memory.trace import Trace
from tests.fakes import MemoryStore, ScriptedLLM

SESSION = SessionRecord(
    "s1",
    "2023-05-01",
    [
        Turn("user", "My puppy Biscuit learned to sit at puppy class today.", "s1:0"),
        Turn("assistant", "Well done, Biscuit!", "s1:1"),
        Turn("user", "I also started a pottery class on Tuesdays.", "s1:2"),
    ],
)


class Diary:
    """A third design: each session's user turns, one line each."""

    export_key = "diary"

    def __init__(self) -> None:
        self.lines: dict[str, list[tuple[str, str]]] = {}  # user -> (turn id, text)

    def use_clients(self, clients: MemoryClients) -> None:
        pass

    def build_step(self, plan: StepPlan) -> tuple[bool, str]:
        return False, "Diary: writing it down"

    def build(
        self, user_id: str, session: SessionRecord, llm: LLMSession | None, options: Options, trace: Trace, /
    ) -> list[str] | None:
        got = [(t.turn_id or "", t.text) for t in session.turns if t.speaker == "user"]
        self.lines.setdefault(user_id, []).extend(got)
        return [tid for tid, _ in got]

    def retrieve(
        self, user_id: str, query: str, options: Options, trace: Trace, /, *, sessions: set[str] | None = None
    ) -> list[dict]:
        words = set(query.lower().split())
        return [
            {"turn": tid, "text": text}
            for tid, text in self.lines.get(user_id, [])
            if words & set(text.lower().split())
        ]

    def recall(self, user_id: str, options: Options, trace: Trace, ask: RecallRequest) -> Recall:
        yield ReplyEvent("status", "Reading the diary...")
        found = self.retrieve(user_id, ask.query(options), options, trace, sessions=ask.sessions)
        return Recalled([f["text"] for f in found], [(f["turn"],) for f in found])

    def forget(
        self, user_id: str, memory: Forgetting, session_of: SessionOf, options: Options | None = None, /
    ) -> dict:
        before = self.lines.get(user_id, [])
        self.lines[user_id] = [(tid, text) for tid, text in before if tid not in memory.turns]
        return {"removed": [tid for tid, _ in before if tid in memory.turns]}

    def drop_user(self, user_id: str) -> None:
        self.lines.pop(user_id, None)

    def export(self, user_id: str) -> list[dict]:
        return [{"turn": tid, "text": text} for tid, text in self.lines.get(user_id, [])]

    def view(self, user_id: str) -> dict:
        return {"lines": self.export(user_id)}


def test_the_strategies_the_user_sees_are_the_registry_and_none():
    assert STRATEGIES == ("theanine", "secom", "none") and list(DESIGNS) == ["theanine", "secom"]


def test_both_designs_and_a_third_meet_the_protocol(tmp_path, fake_embedder):
    store, locks = MemoryStore(), UserLocks()
    designs: list[MemoryDesign] = [
        TheanineMemory(store, fake_embedder, tmp_path, locks),
        SecomMemory(store, fake_embedder, None, "", EmbeddingSegmenter(fake_embedder)),
        Diary(),
    ]
    assert [d.export_key for d in designs] == ["theanine_graph", "secom_segments", "diary"]


def test_a_third_design_is_one_entry(tmp_path, fake_embedder, monkeypatch):
    # as memory.settings would read it with a "diary" entry in memory.registry.DESIGNS
    monkeypatch.setitem(Options._CHOICES, "strategy", ("theanine", "diary", "none"))
    store, locks = MemoryStore(), UserLocks()
    clients = MemoryClients(store, fake_embedder, JsonGraphStore(tmp_path), locks, lambda cfg: ScriptedLLM("Hi."))
    settings = Settings(data_dir=tmp_path)
    diary = Diary()
    made = {name: make(settings, clients) for name, make in DESIGNS.items() if name != "secom"}
    agent = MemoryAgent(settings, clients, {**made, "diary": diary})
    steps: list[str] = []
    report = agent.close_session("u", SESSION, progress=lambda f, s: steps.append(s), llm_steps=False)
    assert report.new_memories and diary.lines["u"] == [
        ("s1:0", SESSION.turns[0].text),
        ("s1:2", SESSION.turns[2].text),
    ]
    assert "Diary: writing it down" in steps
    ctx = agent.memory_context("u", [], "how is Biscuit at puppy class?", Options(strategy="diary"))
    assert ctx.lines == [SESSION.turns[0].text] and ctx.covers == [("s1:0",)]
    assert agent.memory_context("u", [], "puppy", Options(strategy="none")).lines == []
    assert set(agent.export_user("u")) == {"theanine_graph", "diary"}
    # deleting the THEANINE memory of the puppy takes its turn out of the diary too
    mem = next(n for n in agent.graph_view("u")["nodes"] if "s1:0" in n["turns"])
    gone = agent.forget_memory("u", mem["id"], lambda sid: SESSION)
    assert gone is not None and ("s1:0", SESSION.turns[0].text) not in diary.lines["u"]
    agent.forget_user("u")
    assert "u" not in diary.lines and not agent.graph_view("u")["nodes"]
