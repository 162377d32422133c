"""The one entry point used by the app and the benchmarks.

    agent = MemoryAgent.from_settings(Settings.from_env())
    for ev in agent.reply(user_id, history, message, date, options):
        if ev.kind == "delta": print(ev.text, end="")
        elif ev.kind == "done": trace = ev.trace        # ev.text is the full reply
    report = agent.close_session(user_id, SessionRecord(...), options, progress=cb)

Every design of memory.registry (THEANINE's graph, SeCom's segments) is built at every session close,
so switching strategy compares them on the same history; a reply reads the one its strategy names.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from .answer_use import answer_use, changes_behind
from .design import Forgetting, MemoryClients, MemoryDesign, RecallRequest, RefinePlan, SessionOf
from .embeddings import Embedder
from .errors import LLMError, StoreUnavailable
from .llm import LLM, LLMSession, make_llm
from .locks import UserLocks
from .protocols import GraphStore, VectorStore, Versions
from .records import CloseReport, Progress, ReplyEvent, SessionRecord, Turn
from .reply_prompts import RefusalGuard, fit_reply, memory_block, stable_history
from .secom.strategy import SecomMemory
from .settings import LLMConfig, Options, Settings
from .shown_memory import ShownMemory
from .steps_policy import EVERY_STEP, StepPlan, plan_for
from .theanine.strategy import TheanineMemory
from .tokens import count_tokens, truncate
from .trace import Trace

log = logging.getLogger(__name__)
T = TypeVar("T")

OFFLINE_CLOSE = (
    "Memory was built without an LLM (the bundled model is too small for the papers' LLM steps): "
    "THEANINE's memories are the statements made in the session, one per sentence, linked by an offline "
    "rule (Changed where a later statement replaces an earlier one, else SameTopic by topic similarity); "
    "SeCom's segments come from the embedding segmenter."
)

# The bundled model in `auto` refines no timeline: one refinement on 2 cores costs seconds before the
# first token and its answers were unusable (docs/defaults.md, "Refinement").
BUNDLED_REFINE: RefinePlan | None = None
ENDPOINT_WORKERS = 8


def drain(steps: Generator[ReplyEvent, None, T]) -> T:
    """What a generator of status events returns, its events dropped."""
    while True:
        try:
            next(steps)
        except StopIteration as stop:
            return stop.value


@dataclass
class MemoryContext:
    """The memory the reply prompt receives: one line per retrieved item, as `reply_messages` lists them.

    `covers[i]` holds the turn ids line i carries whole (what the benchmarks score).
    """

    strategy: str
    lines: list[str] = field(default_factory=list)
    covers: list[tuple[str, ...]] = field(default_factory=list)
    note: str = ""  # the design's notice for the user (THEANINE: timelines read unrefined)

    @property
    def text(self) -> str:
        return memory_block(self.strategy, self.lines)


MAX_MESSAGE_TOKENS = 2000  # a longer message is stored whole but cut for the LLM
# An earlier turn in the prompt's history is cut shorter: one 50,000-character message would
# otherwise add 2,000 tokens to every later reply of the session (it stays stored whole).
MAX_HISTORY_TURN_TOKENS = 300
MAX_HISTORY_TURNS = 12
MAX_HISTORY_TOKENS = 3000  # the embedded model's context is 8192 tokens; leave room for memory


def recent_history(
    history: list[Turn], max_turns: int = MAX_HISTORY_TURNS, max_tokens: int = MAX_HISTORY_TOKENS
) -> list[Turn]:
    """The latest turns that fit the prompt: each cut to MAX_HISTORY_TURN_TOKENS, all within `max_tokens`."""
    out: list[Turn] = []
    used = 0
    for t in reversed(history[-max_turns:]):
        text = truncate(t.text, MAX_HISTORY_TURN_TOKENS)
        n = count_tokens(text)
        if used + n > max_tokens:
            break
        out.append(t if text == t.text else Turn(t.speaker, text, t.turn_id))
        used += n
    return out[::-1]


class MemoryAgent:
    """Every user's memories, in each design of `designs` (by strategy name), and the reply loop.
    Thread-safe; one per process. `designs` None: memory.registry's, built from `clients`."""

    def __init__(self, settings: Settings, clients: MemoryClients, designs: Mapping[str, MemoryDesign] | None = None):
        from .registry import DESIGNS

        self.settings, self.clients = settings, clients
        self.designs: dict[str, MemoryDesign] = (
            dict(designs) if designs is not None else {name: make(settings, clients) for name, make in DESIGNS.items()}
        )
        # Per-user exclusion (memory.locks.UserLocks, the clients' one owner): a build or deletion holds the
        # user's writer lock (level 3; the app takes the user's lanes and the close claim first).
        self.locks: UserLocks = clients.locks
        self.shown = ShownMemory()  # the memory each reply of a session read, kept in its prompt (shown_memory)

    @classmethod
    def from_settings(
        cls, settings: Settings, llm_factory: Callable[[LLMConfig], LLM] | None = None, locks: UserLocks | None = None
    ) -> MemoryAgent:
        """The embedded defaults, or the providers the settings name; chosen here and nowhere else. `locks`:
        the process's one owner of per-user exclusion (app.py's, shared with the session service); None
        when this agent is the first part to need one (benchmarks, tests): everything below takes it."""
        from .embeddings import make_embedder
        from .store import ChromaStore
        from .theanine.graph import JsonGraphStore

        s = settings
        clients = MemoryClients(
            store=ChromaStore(path=Path(s.data_dir) / "chroma", host=s.chroma_host, port=s.chroma_port),
            embedder=make_embedder(s.embedder, api_key=s.llm.api_key, base_url=s.llm.base_url, model=s.embed_model),
            graphs=JsonGraphStore(s.data_dir),
            locks=UserLocks() if locks is None else locks,
            llm_factory=llm_factory or make_llm,
        )
        return cls(s, clients)

    @classmethod
    def from_parts(
        cls,
        settings: Settings,
        store: VectorStore,
        embedder: Embedder,
        llm_factory: Callable[[LLMConfig], LLM] | None = None,
        **designs: MemoryDesign,
    ) -> MemoryAgent:
        """An agent on given parts (benchmarks, tests): graph files under settings.data_dir, a lock owner
        of its own, and the designs given by name (e.g. secom=SecomMemory(...)); the others from the registry."""
        from .registry import DESIGNS
        from .theanine.graph import JsonGraphStore

        graphs = JsonGraphStore(settings.data_dir)
        clients = MemoryClients(store, embedder, graphs, UserLocks(), llm_factory or make_llm)
        made = {name: designs.get(name) or make(settings, clients) for name, make in DESIGNS.items()}
        return cls(settings, clients, made)

    @property
    def store(self) -> VectorStore:
        return self.clients.store

    @property
    def embedder(self) -> Embedder:
        return self.clients.embedder

    @property
    def llm_factory(self) -> Callable[[LLMConfig], LLM]:
        return self.clients.llm_factory

    @property
    def theanine(self) -> TheanineMemory:
        """THEANINE's graph: it also dates sessions for time travel, finds the changes behind a SeCom
        reply (See why) and holds the memories a user deletes by id."""
        design = self.designs["theanine"]
        assert isinstance(design, TheanineMemory)
        return design

    @property
    def secom(self) -> SecomMemory:
        """SeCom's segments (benchmarks and tests reach into them)."""
        design = self.designs["secom"]
        assert isinstance(design, SecomMemory)
        return design

    def _llm_session(self, trace: Trace, options: Options, cfg: LLMConfig | None) -> LLMSession:
        cfg = cfg or self.settings.llm
        return LLMSession(self.llm_factory(cfg), trace, options.temperature, cfg.max_retries)

    # --- reply ------------------------------------------------------------------
    def reply(
        self,
        user_id: str,
        history: list[Turn],
        message: str,
        date: str = "",
        options: Options | None = None,
        llm: LLMConfig | None = None,
        hint: str = "",
    ) -> Iterator[ReplyEvent]:
        """Stream a reply. `date`: the session's date (the system prompt's today); `hint`: an extra system
        instruction (TeaFarm's optional false-premise one)."""
        opts = options or self.settings.options
        trace = Trace(strategy=opts.strategy)
        text = ""
        try:
            with trace.timed("total"):
                t0 = time.perf_counter()
                if count_tokens(message) > MAX_MESSAGE_TOKENS:
                    message = truncate(message, MAX_MESSAGE_TOKENS)
                    trace.notice(
                        f"Your message was long: the model read its first {MAX_MESSAGE_TOKENS} tokens "
                        "(the whole message is saved)."
                    )
                whole = history
                history, earlier = self._dialogue(user_id, opts.strategy, history)
                opts = opts.for_backend(llm or self.settings.llm)  # the bundled model reads a smaller memory
                session = self._llm_session(trace, opts, llm)
                steps = self.settings.llm_steps_for(llm)
                trace.memory_path = "llm" if steps else "offline"
                refine = self._refine_plan(llm, steps, opts)
                ctx = yield from self._memory_steps(
                    user_id, history, message, opts, trace, session if refine else None, refine=refine
                )
                if ctx.note:
                    trace.notice(ctx.note)
                # System prompt and dialogue first, then the memory and the message: what the model read for
                # the previous turn is not read again (reply_prompts). Cut to the context window if need be.
                max_tokens = opts.max_reply_tokens
                msgs, cut, block = self._prompt(session, opts, ctx.lines, history, earlier, message, date, hint)
                trace.count("memory_lines_new", len(block))
                self.shown.remember(user_id, opts.strategy, whole, message, block)
                if cut:
                    left_out = "; ".join(cut)
                    trace.notice(f"To fit the model's {session.window}-token context window, left out: {left_out}.")
                reading = session.reading(msgs, max_tokens)
                trace.count("prompt_tokens", reading.tokens)
                trace.count("prompt_tokens_cached", reading.cached)
                what = " and ".join(w for w, has in (("memory", ctx.lines), ("dialogue", history)) if has)
                yield ReplyEvent("status", reading.describe(what or "your message"))
                # A small embedded model's stock refusal of ordinary chat is asked again (reply_prompts.RefusalGuard).
                guard = RefusalGuard() if (llm or self.settings.llm).backend == "embedded" else None
                with trace.timed("reply"):
                    for piece in session.stream("reply", msgs, max_tokens=max_tokens, guard=guard):
                        if not text:
                            trace.timings["first_token"] = time.perf_counter() - t0
                        text += piece
                        yield ReplyEvent("delta", piece)
        except StoreUnavailable as e:
            trace.error = str(e)
        except LLMError as e:
            trace.error = f"The language model failed: {e}. Your message is saved; press Retry."
        except Exception:
            log.exception("reply failed")
            trace.error = "Something went wrong while replying. Your message is saved; press Retry."
        if text and trace.error is None:
            try:  # for See why: did the reply use its memory (memory.answer_use; no model call)
                said = [message, *(t.text for t in history if t.speaker != "assistant")]
                changes = []
                if trace.segments:  # a segment knows no change; the graph of the same turns does
                    with self.theanine.lock(user_id):
                        changes = changes_behind(self.theanine.graph(user_id), trace.segments)
                trace.answer_use = answer_use(text, trace, said, changes)
            except Exception:
                log.exception("answer-use check failed")  # the reply stands without it
        yield ReplyEvent("done", text, trace)

    def _dialogue(self, user_id: str, strategy: str, history: list[Turn]) -> tuple[list[Turn], list[list[str]]]:
        """The session's turns a reply's prompt holds, and the memory lines shown before each of them
        (memory.shown_memory). Earlier long messages are cut as the message is, or one of them would
        overflow every later prompt; the dialogue's start moves only every few turns, so the model
        keeps what it read (reply_prompts)."""
        recent = recent_history(stable_history(history))
        return recent, self.shown.blocks(user_id, strategy, history)[len(history) - len(recent) :]

    @staticmethod
    def _prompt(
        session: LLMSession,
        opts: Options,
        lines: list[str],
        history: list[Turn],
        earlier: list[list[str]],
        message: str,
        date: str,
        hint: str = "",
    ) -> tuple[list[dict], list[str], list[str]]:
        """The reply's prompt cut to the model's window (reply_prompts.fit_reply): (messages, what was
        left out, the memory lines new in it)."""
        room = session.stream_room(opts.max_reply_tokens)

        def fits(m: list[dict]) -> bool:
            return session.prompt_tokens(m) <= room

        return fit_reply(opts.strategy, lines, history, message, date, hint, fits, earlier=earlier)

    def prepare(
        self,
        user_id: str,
        history: list[Turn],
        draft: str,
        date: str = "",
        options: Options | None = None,
        llm: LLMConfig | None = None,
    ) -> int:
        """Read ahead while the person types `draft`: the memory retrieved for it and the prompt a reply
        to it would have are read into the embedded model's cache, so that on Send the model reads
        only what changed since (the whole prompt when the draft was the message; the message alone
        when the same memory comes back). Nothing is stored or shown. Returns the tokens read ahead
        (0 on an endpoint, with LLM_READ_AHEAD off, or while the model is busy)."""
        cfg = llm or self.settings.llm
        if cfg.backend != "embedded" or not cfg.read_ahead or not draft.strip():
            return 0
        opts = (options or self.settings.options).for_backend(cfg)
        trace = Trace(strategy=opts.strategy)
        draft = truncate(draft, MAX_MESSAGE_TOKENS) if count_tokens(draft) > MAX_MESSAGE_TOKENS else draft
        history, earlier = self._dialogue(user_id, opts.strategy, history)
        # The bundled model refines no timeline (BUNDLED_REFINE): the memory is retrieval's alone.
        ctx = drain(self._memory_steps(user_id, history, draft, opts, trace, None))
        session = self._llm_session(trace, opts, llm)
        msgs, _, _ = self._prompt(session, opts, ctx.lines, history, earlier, draft, date)
        return session.prefill(msgs, opts.max_reply_tokens)

    def _refine_plan(self, cfg: LLMConfig | None, steps: bool, opts: Options) -> RefinePlan | None:
        """Whether and how a reply refines its timelines: with the papers' LLM steps, or in the
        paper's setting unless MEMORY_LLM_STEPS=off, every timeline (calls in parallel on an
        endpoint); otherwise, on the bundled model in `auto`, BUNDLED_REFINE."""
        cfg = cfg or self.settings.llm
        workers = ENDPOINT_WORKERS if cfg.backend == "openai" else 1
        if steps or (opts.theanine_mode == "paper" and self.settings.llm_steps != "off"):
            return RefinePlan(workers=workers)
        if cfg.is_bundled and self.settings.llm_steps == "auto":
            return BUNDLED_REFINE
        return None

    def _memory_steps(
        self,
        user_id: str,
        history: list[Turn],
        message: str,
        opts: Options,
        trace: Trace,
        session: LLMSession | None,
        timelines: bool = True,
        as_of: str | set[str] | None = None,
        refine: RefinePlan | None = None,
    ):
        """Retrieve (and for THEANINE refine) the memory for a reply; yields status events and
        returns the MemoryContext. `session` None skips refinement (raw timelines are used), else
        `refine` says how (default: every timeline); `timelines` False gives THEANINE's top-k
        memories without timelines (a benchmark ablation); `as_of` (a date or a session id)
        retrieves over the memory as it stood then."""
        sessions = set(as_of) if isinstance(as_of, (set, frozenset)) else None
        if isinstance(as_of, str) and as_of:
            sessions = self.theanine.sessions_as_of(user_id, as_of)
        design = self.designs.get(opts.strategy)
        if design is None:  # "none": a reply without memory
            return MemoryContext(opts.strategy)
        ask = RecallRequest(history, message, sessions, session, refine or RefinePlan(), timelines)
        found = yield from design.recall(user_id, opts, trace, ask)
        return MemoryContext(opts.strategy, found.lines, found.covers, found.note)

    def memory_context(
        self,
        user_id: str,
        history: list[Turn],
        message: str,
        options: Options | None = None,
        trace: Trace | None = None,
        session: LLMSession | None = None,
        timelines: bool = True,
        as_of: str | set[str] | None = None,
    ) -> MemoryContext:
        """Exactly the memory `reply` would put in its prompt for `message` with these options (the
        benchmarks call this; `reply` first applies `Options.for_backend`, the bundled model's budget).

        `as_of`: a date ("2023-05-02": the sessions dated on or before it) or a session id (that
        session and those before it), or the set of sessions built by then: the memory as it stood then,
        as time travel steps through it."""
        opts = options or self.settings.options
        message = truncate(message, MAX_MESSAGE_TOKENS) if count_tokens(message) > MAX_MESSAGE_TOKENS else message
        trace = trace or Trace(opts.strategy)
        steps = self._memory_steps(user_id, recent_history(history), message, opts, trace, session, timelines, as_of)
        return drain(steps)

    # --- session close ----------------------------------------------------------------
    def _close_lock(self, user_id: str) -> threading.Lock:
        return self.locks.writer(user_id)

    def close_session(
        self,
        user_id: str,
        session: SessionRecord,
        options: Options | None = None,
        progress: Progress | None = None,
        llm: LLMConfig | None = None,
        llm_steps: bool | None = None,
        steps: StepPlan | None = None,
    ) -> CloseReport:
        """Build every design's memory from one session. Idempotent: a session already built is skipped,
        and concurrent closes of the same user's sessions run one at a time. `llm_steps` True runs
        every LLM step, False none (summary, relations and segmentation take their offline paths);
        None leaves it to the settings: MEMORY_LLM_STEPS on/off, and `auto` every step with an
        endpoint and, on a bundled model, the steps measured to fit a session of this size
        (memory.steps_policy; the trace says which ran and why). `steps` runs exactly the steps it
        names (the benchmarks)."""
        opts = options or self.settings.options
        report = CloseReport(session.session_id)
        trace = report.trace
        step = progress or (lambda f, s: None)
        with self._close_lock(user_id), trace.timed("total"):
            plan = steps or plan_for(self.settings, llm, len(session.turns), llm_steps)
            # the bundled model's `auto` (memory.steps_policy) or a caller's own plan: the trace says which and why
            chosen = steps is not None or (
                llm_steps is None and self.settings.llm_steps == "auto" and (llm or self.settings.llm).is_bundled
            )
            session_llm: LLMSession | None = None
            if plan.any:
                trace.memory_path = "llm"
                session_llm = self._llm_session(trace, opts, llm)
                if not plan.same_steps(EVERY_STEP):
                    session_llm.plan = plan  # memory.theanine.linking runs only the steps it names
                if chosen:
                    trace.notice(f"LLM steps at this close: {plan.describe()}. Why: {plan.reason}.")
            else:
                trace.memory_path = "offline"
                trace.notice(OFFLINE_CLOSE)
                if chosen:
                    trace.notice(f"No LLM step at this close: {plan.reason}.")
            built: dict[str, list[str] | None] = {}
            for i, (name, design) in enumerate(self.designs.items()):
                gets_llm, doing = design.build_step(plan)
                step(0.05 + i / len(self.designs), doing)
                built[name] = design.build(user_id, session, session_llm if gets_llm else None, opts, trace)
            report.already_built = all(ids is None for ids in built.values())
            report.new_memories, report.new_segments = built.get("theanine") or [], built.get("secom") or []
            step(1.0, "Memory built")
        return report

    def use_graph_store(self, graphs: GraphStore, versions: Versions | None = None) -> None:
        """Persist THEANINE graphs in `graphs` (memory.protocols.GraphStore), e.g. the app's database;
        `versions` tells SeCom when another process changed a user's segments (its BM25 is then rebuilt)."""
        kept = self.clients.versions if versions is None else versions
        self.clients = replace(self.clients, graphs=graphs, versions=kept)
        for design in self.designs.values():
            design.use_clients(self.clients)

    # --- views and management ---------------------------------------------------------
    def graph_view(self, user_id: str) -> dict:
        return self.theanine.view(user_id)  # its nodes carry their turns: "open the source turns"

    def export_user(self, user_id: str) -> dict:
        return {design.export_key: design.export(user_id) for design in self.designs.values()}

    def forget_memory(self, user_id: str, memory_id: str, session_of: SessionOf) -> dict | None:
        """Delete a memory from every design: the THEANINE node (graph and Chroma) and, in SeCom, the
        turns it was summarised from (their segments rebuilt without them).

        `session_of(session_id)` -> SessionRecord | None gives a session's transcript. Returns what
        was removed, or None when the memory does not exist.
        """
        with self._close_lock(user_id):  # not while a build of this user runs
            graph = self.theanine.graph(user_id)
            if memory_id not in graph:
                return None
            m = graph.memory(memory_id)
            gone = {"memory": memory_id, "event": m.event, "session_id": m.session_id, "turns": list(m.turns)}
            memory = Forgetting(memory_id, tuple(m.turns))
            self.shown.forget_user(user_id)  # no later prompt of a session shows the forgotten line again
            done = {
                name: design.forget(user_id, memory, session_of, self.settings.options)
                for name, design in self.designs.items()
            }
        segments = done.get("secom", {})
        return {
            **gone,
            "segments_rebuilt": segments.get("rebuilt", []),
            "segments_removed": segments.get("removed", []),
        }

    def forget_user(self, user_id: str) -> None:
        with self._close_lock(user_id):
            self.shown.forget_user(user_id)
            for design in self.designs.values():
                design.drop_user(user_id)
