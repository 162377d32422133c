"""The one entry point used by the app and the benchmarks.

    agent = MemoryAgent.from_settings(Settings.from_env())
    for ev in agent.reply(user_id, history, message, date, options):
        if ev.kind == "delta": print(ev.text, end="")
        elif ev.kind == "done": trace = ev.trace        # ev.text is the full reply
    report = agent.close_session(user_id, SessionRecord(...), options, progress=cb)

Both memories (THEANINE graph and SeCom segments) are built at every session
close, so switching strategy compares them on the same history.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .answer_use import answer_use, changes_behind
from .errors import LLMError, StoreUnavailable
from .llm import LLM, LLMSession, make_llm
from .locks import UserLocks
from .records import CloseReport, Progress, ReplyEvent, SessionRecord, Turn
from .reply_prompts import RefusalGuard, dialogue_text, fit_reply, memory_block, stable_history
from .settings import LLMConfig, Options, Settings
from .steps_policy import EVERY_STEP, StepPlan, plan_for
from .tokens import count_tokens, truncate
from .trace import Trace

log = logging.getLogger(__name__)

OFFLINE_CLOSE = (
    "Memory was built without an LLM (the bundled model is too small for the papers' LLM steps): "
    "THEANINE's memories are the statements made in the session, one per sentence, linked by an offline "
    "rule (Changed where a later statement replaces an earlier one, else SameTopic by topic similarity); "
    "SeCom's segments come from the embedding segmenter."
)
OFFLINE_REPLY = (
    "Timelines are shown as retrieved, not refined: on the bundled model one refinement call reads about "
    "700 prompt tokens, which adds 6 s or more before the reply's first word on 2 cores, and its answers "
    "were unusable (docs/defaults.md). Connect an LLM (or set MEMORY_LLM_STEPS=on) to refine every "
    "timeline, or choose the paper's THEANINE setting in Settings."
)


# At most three timelines are refined per reply, as the official code does (one per top-3 retrieved
# memory): refining every timeline that reached the reply made 26.5 calls per reply (max 32) at the
# app's options, 3 make 3 (`python -m bench refinecalls`, docs/memory.md "Refinement").
REFINE_TIMELINES = 3


@dataclass(frozen=True)
class RefinePlan:
    """How a reply refines its THEANINE timelines (Phase II-2): the `first` timelines that reached the
    reply (None = every one), one call each, `workers` calls at once (an endpoint serves them in
    parallel), `per_timeline` answer tokens each, reading the open session's last `turns` turns (None =
    every turn the reply holds: memory.agent.recent_history)."""

    first: int | None = REFINE_TIMELINES
    workers: int = 1
    per_timeline: int = 120
    turns: int | None = None


# The bundled model in `auto` refines no timeline: one refinement on 2 cores costs seconds before the
# first token and its answers were unusable (docs/defaults.md, "Refinement").
BUNDLED_REFINE: RefinePlan | None = None
ENDPOINT_WORKERS = 8


@dataclass
class MemoryContext:
    """The memory the reply prompt receives: one line per retrieved item, as `reply_messages` lists them.

    `covers[i]` holds the turn ids line i carries whole (what the benchmarks score).
    """

    strategy: str
    lines: list[str] = field(default_factory=list)
    covers: list[tuple[str, ...]] = field(default_factory=list)

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


# MiniLM reads a text's first 256 word pieces and drops the rest; a retrieval query is kept within
# this many tokens (cl100k; English text takes a few more word pieces than cl100k tokens) so that
# the message is always read, whatever the order of the turns beside it.
QUERY_WINDOW_TOKENS = 180


def retrieval_query(history: list[Turn], message: str, opts: Options) -> str:
    """What both memories are searched with: the new message alone (`opts.query_turns` 0, the default),
    or with the last `query_turns` turns, in time order (the message last, as the paper's dialogue) or
    the message first and the turns newest first (`query_order`). The oldest turns are dropped until
    the query fits QUERY_WINDOW_TOKENS, so the embedder never loses the message (docs/defaults.md)."""
    turns = history[-opts.query_turns :] if opts.query_turns else []
    lines = [f"{t.speaker}: {t.text}" for t in turns]
    mine = f"user: {message}" if lines else message
    budget = QUERY_WINDOW_TOKENS - count_tokens(mine)
    kept: list[str] = []
    for line in reversed(lines):  # newest first, while they fit
        n = count_tokens(line) + 1
        if n > budget:
            break
        kept.append(line)
        budget -= n
    if not kept:
        return message
    return "\n".join([mine, *kept] if opts.query_order == "message-first" else [*kept[::-1], mine])


class MemoryAgent:
    """Both memories of every user, and the reply loop. Thread-safe; one per process."""

    def __init__(
        self,
        settings: Settings,
        store,
        embedder,
        theanine,
        secom,
        llm_factory: Callable[[LLMConfig], LLM] | None = None,
        locks: UserLocks | None = None,
    ):
        self.settings, self.store, self.embedder = settings, store, embedder
        self.theanine, self.secom = theanine, secom
        self.llm_factory = llm_factory or make_llm  # injected by benchmarks and tests (a scripted LLM)
        # Per-user exclusion (memory.locks.UserLocks): a build or deletion holds the user's writer lock
        # (level 3; the app takes the user's lanes and the close claim first).
        self.locks = locks or UserLocks()

    @classmethod
    def from_settings(
        cls, settings: Settings, llm_factory: Callable[[LLMConfig], LLM] | None = None, locks: UserLocks | None = None
    ) -> MemoryAgent:
        """The embedded defaults, or the providers the settings name; chosen here and nowhere else."""
        from .embeddings import make_embedder
        from .secom.compression import load_compressor
        from .secom.segmentation import segmenter_for
        from .secom.strategy import SecomMemory
        from .store import ChromaStore
        from .theanine.strategy import TheanineMemory

        s = settings
        store = ChromaStore(path=Path(s.data_dir) / "chroma", host=s.chroma_host, port=s.chroma_port)
        embedder = make_embedder(s.embedder, api_key=s.llm.api_key, base_url=s.llm.base_url, model=s.embed_model)
        compressor, note = load_compressor(s.compressor_model)
        segmenter = segmenter_for(s, embedder)
        secom = SecomMemory(store, embedder, compressor, note, segmenter)
        locks = locks or UserLocks()
        theanine = TheanineMemory(store, embedder, s.data_dir, locks=locks)
        return cls(s, store, embedder, theanine, secom, llm_factory, locks)

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
                # Earlier long messages are cut the same way, or one of them would overflow every later prompt.
                # The dialogue's start moves only every few turns: the model keeps what it read (reply_prompts).
                history = recent_history(stable_history(history))
                opts = opts.for_backend(llm or self.settings.llm)  # the bundled model reads a smaller memory
                session = self._llm_session(trace, opts, llm)
                steps = self.settings.llm_steps_for(llm)
                trace.memory_path = "llm" if steps else "offline"
                refine = self._refine_plan(llm, steps, opts)
                ctx = yield from self._memory_steps(
                    user_id, history, message, opts, trace, session if refine else None, refine=refine
                )
                if opts.strategy == "theanine" and ctx.lines and not trace.timelines_refined:
                    trace.notice(OFFLINE_REPLY)
                # System prompt and dialogue first, then the memory and the message: what the model read for
                # the previous turn is not read again (reply_prompts). Cut to the context window if need be.
                max_tokens = opts.max_reply_tokens
                msgs, cut = fit_reply(
                    opts.strategy,
                    ctx.lines,
                    history,
                    message,
                    date,
                    hint,
                    lambda m: session.prompt_tokens(m) <= session.stream_room(max_tokens),
                )
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
                if trace.strategy == "secom":  # a segment knows no change; the graph of the same turns does
                    with self.theanine.lock(user_id):
                        changes = changes_behind(self.theanine.graph(user_id), trace.segments)
                trace.answer_use = answer_use(text, trace, said, changes)
            except Exception:
                log.exception("answer-use check failed")  # the reply stands without it
        yield ReplyEvent("done", text, trace)

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
        ctx = MemoryContext(opts.strategy)
        sessions = set(as_of) if isinstance(as_of, (set, frozenset)) else None
        if isinstance(as_of, str) and as_of:
            sessions = self.theanine.sessions_as_of(user_id, as_of)
        if opts.strategy == "theanine":
            opts = opts.for_theanine()
            yield ReplyEvent("status", "Retrieving memory timelines...")
            raw = self.theanine.retrieve(
                user_id, retrieval_query(history, message, opts), opts, trace, timelines=timelines, as_of=sessions
            )
            texts = [t["text"] for t in raw]
            if raw and session is not None and timelines:
                yield ReplyEvent("status", "Refining timelines for this conversation...")
                plan = refine or RefinePlan()
                texts = self.theanine.refine(
                    session,
                    dialogue_text(history, message, last=len(history) if plan.turns is None else plan.turns),
                    raw,
                    trace,
                    each=opts.refine_each,
                    workers=plan.workers,
                    first=plan.first,
                    per_timeline=plan.per_timeline,
                )
            ctx.lines, ctx.covers = list(texts), [tuple(t.get("covers", ())) for t in raw]
        elif opts.strategy == "secom":
            yield ReplyEvent("status", "Retrieving segments of earlier sessions...")
            segs = self.secom.retrieve(user_id, retrieval_query(history, message, opts), opts, trace, sessions=sessions)
            ctx.lines = [s["context"] for s in segs]
            ctx.covers = [tuple(s["covers"]) for s in segs]
        return ctx

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
        gen = self._memory_steps(
            user_id, recent_history(history), message, opts, trace or Trace(opts.strategy), session, timelines, as_of
        )
        while True:
            try:
                next(gen)
            except StopIteration as stop:
                return stop.value

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
        """Build both memories from one session. Idempotent: a session already built is skipped,
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
                what = "summarising the session into memories" if plan.summary else "taking the session's statements"
                how = {"": "by the offline rule", "llm": "by the LLM", "score": "by the LLM's label scores"}
                step(0.05, f"THEANINE: {what} and linking them {how[plan.relations]}")
            else:
                trace.memory_path = "offline"
                trace.notice(OFFLINE_CLOSE)
                if chosen:
                    trace.notice(f"No LLM step at this close: {plan.reason}.")
                step(0.05, "THEANINE: taking the session's statements as memories and linking them (no LLM)")
            new = self.theanine.build(user_id, session, session_llm if plan.theanine else None, opts, trace)
            step(0.55, "SeCom: segmenting and compressing the session")
            segs = self.secom.build(user_id, session, session_llm if plan.segmentation else None, opts, trace)
            report.already_built = new is None and segs is None
            report.new_memories, report.new_segments = new or [], segs or []
            step(1.0, "Memory built")
        return report

    def use_graph_store(self, graphs, versions=None) -> None:
        """Persist THEANINE graphs in `graphs` (memory.protocols.GraphStore), e.g. the app's database;
        `versions` tells SeCom when another process changed a user's segments (its BM25 is then rebuilt)."""
        self.theanine.use_graph_store(graphs)
        if versions is not None:
            self.secom.use_versions(versions)

    # --- views and management ---------------------------------------------------------
    def graph_view(self, user_id: str) -> dict:
        view = self.theanine.view(user_id)
        graph = self.theanine.graph(user_id)
        for n in view.get("nodes") or []:  # provenance, for "open the source turns" in the graph
            if n["id"] in graph:
                n.setdefault("turns", list(graph.memory(n["id"]).turns))
        return view

    def export_user(self, user_id: str) -> dict:
        return {"theanine_graph": self.theanine.graph(user_id).to_dict(), "secom_segments": self.secom.export(user_id)}

    def forget_memory(self, user_id: str, memory_id: str, session_of) -> dict | None:
        """Delete a memory from every representation: the THEANINE node (graph and Chroma) and, in
        SeCom, the turns it was summarised from (their segments rebuilt without them).

        `session_of(session_id)` -> SessionRecord | None gives a session's transcript. Returns what
        was removed, or None when the memory does not exist.
        """
        with self._close_lock(user_id):  # not while a build of this user runs
            graph = self.theanine.graph(user_id)
            if memory_id not in graph:
                return None
            m = graph.memory(memory_id)
            gone = {"memory": memory_id, "event": m.event, "session_id": m.session_id, "turns": list(m.turns)}
            self.theanine.forget(user_id, memory_id)
            secom = self.secom.forget(user_id, gone["turns"], session_of, self.settings.options)
        return {**gone, "segments_rebuilt": secom["rebuilt"], "segments_removed": secom["removed"]}

    def forget_user(self, user_id: str) -> None:
        with self._close_lock(user_id):
            self.theanine.drop_user(user_id)
            self.secom.drop_user(user_id)
