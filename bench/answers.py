"""Answer quality on LoCoMo through the app's reply path, scored as the peers report it: token F1 per
question category, with the tokens of memory each strategy spends and the reply latency.

    python -m bench answers --data ../shared/data/locomo/locomo_dev.json --questions 34

For each conversation, every session is closed into memory by `MemoryAgent.close_session` at the
app's settings (on a bundled model `MEMORY_LLM_STEPS=auto` keeps the LLM steps off, as a fresh
install does). Then `--questions` of its questions (categories 1-4, sampled with `--seed`) are
asked once per strategy, each as the first message of a new session:

* none: no memory;
* full-context: every turn of the conversation, in order and dated, as the memory block. It runs on
  a second instance of the same model whose window holds the conversation; the conversation is the
  prompt's prefix and the question its end, so llama.cpp evaluates the conversation once and reuses
  it for every question of that conversation;
* turn, session: the raw turns (hybrid ranking) or whole sessions (BM25), each baseline's best
  retriever in docs/defaults.md, packed into the app's memory budget by the app's rule;
* secom, theanine-topk, theanine-timeline: `MemoryAgent.memory_context` at the app's `Options`,
  exactly the memory a reply puts in its prompt (theanine-topk: the top-k memories without timelines).

Every strategy then replies through `reply_messages` and `LLMSession.stream` (the app's prompt and
model; the system prompt says which speaker the agent is), at temperature 0 by default so that runs
repeat. Scores: LoCoMo's token F1 and "every answer word" (bench.answer_score), and an LLM
judge's verdict when `--judge-model` or `--judge-base-url` names one. Per strategy: tokens of memory
per question, and reply latency (retrieval and reply) p50 / p95.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from memory.evaluation.baselines import DialogueUnits, dated, turn_line
from memory.evaluation.conversations import Conversation, load_samples
from memory.evaluation.machine import machine
from memory.evaluation.scoring import CATEGORY_NAMES
from memory.files import atomic_write_json
from memory.packing import pack
from memory.tokens import count_tokens
from memory.trace import Trace

from . import llm_eval
from .answer_score import has_all_words, token_f1
from .common import parser, percentile, plot_path, progress, str_list

STRATEGIES = ("none", "full-context", "turn", "session", "secom", "theanine-topk", "theanine-timeline")
BASELINE_RETRIEVER = {"turn": "hybrid", "session": "bm25"}  # each baseline's best (docs/defaults.md)
FULL_CONTEXT_WINDOW = 32768  # Qwen2.5's trained context; LoCoMo's longest dev conversation is about 22k tokens


def full_context_lines(conv: Conversation) -> list[str]:
    """Every turn of the conversation, in order, dated as the turn baseline's lines are."""
    return [dated(s.date, turn_line(t), True) for s in conv.sessions for t in s.turns]


def baseline_lines(units: DialogueUnits, retriever: str, q, qvec, budget: int) -> list[str]:
    return ["\n".join(p.text for p in kept) for _, kept in pack(units.ranked(retriever, q, qvec), budget).chosen]


def app_lines(agent, user_id: str, strategy: str, question: str, options) -> list[str]:
    opts = options.with_(strategy="secom" if strategy == "secom" else "theanine")
    return agent.memory_context(
        user_id, [], question, opts, Trace(opts.strategy), None, timelines=strategy != "theanine-topk"
    ).lines


def prompt_strategy(strategy: str) -> str:
    """The reply prompt's memory title: THEANINE's timelines, SeCom's excerpts, the rest "Memories"."""
    return "theanine" if strategy.startswith("theanine") else strategy


def summarise(rows: list[dict], strategies: list[str]) -> list[dict]:
    out = []
    for st in strategies:
        mine = [r for r in rows if r["strategy"] == st]
        if not mine:
            continue
        judged = [r["judge"] for r in mine if r.get("judge") is not None]
        out.append(
            {
                "strategy": st,
                "n": len(mine),
                "f1": round(statistics.fmean(r["f1"] for r in mine), 3),
                "all_words": round(statistics.fmean(r["all_words"] for r in mine), 3),
                "judge": round(statistics.fmean(judged), 3) if judged else None,
                "f1_by_category": {
                    c: round(statistics.fmean(r["f1"] for r in mine if r["category"] == c), 3)
                    for c in CATEGORY_NAMES
                    if any(r["category"] == c for r in mine)
                },
                "memory_tokens": round(statistics.fmean(r["memory_tokens"] for r in mine)),
                "latency_p50": round(percentile([r["latency_s"] for r in mine], 50), 2),
                "latency_p95": round(percentile([r["latency_s"] for r in mine], 95), 2),
            }
        )
    return out


def table(summary: list[dict]) -> str:
    head = f"{'strategy':18} {'n':>4} {'F1':>6} {'words':>6} {'judge':>6}"
    head += "".join(f" {name:>11}" for name in CATEGORY_NAMES.values()) + f" {'mem tok':>8} {'p50 s':>6} {'p95 s':>6}"
    lines = [head]
    for s in summary:
        judge = f"{s['judge']:6.2f}" if s["judge"] is not None else f"{'-':>6}"
        cats = "".join(
            f" {s['f1_by_category'][c]:11.3f}" if c in s["f1_by_category"] else f" {'-':>11}" for c in CATEGORY_NAMES
        )
        lines.append(
            f"{s['strategy']:18} {s['n']:4} {s['f1']:6.3f} {s['all_words']:6.2f} {judge}{cats}"
            f" {s['memory_tokens']:8} {s['latency_p50']:6.1f} {s['latency_p95']:6.1f}"
        )
    return "\n".join(lines)


def goal_line(summary: list[dict]) -> str:
    """The issue's goal: a memory strategy at or above full-context F1 with at most 10% of its tokens."""
    full = next((s for s in summary if s["strategy"] == "full-context"), None)
    if full is None:
        return "goal: not measured (no full-context row)"
    met = [
        s["strategy"]
        for s in summary
        if s["strategy"] not in ("none", "full-context")
        and s["f1"] >= full["f1"]
        and s["memory_tokens"] <= 0.1 * full["memory_tokens"]
    ]
    return f"goal (F1 >= full-context's {full['f1']:.3f} with <= 10% of its {full['memory_tokens']} tokens): " + (
        f"met by {', '.join(met)}" if met else "not met"
    )


def plot(summary: list[dict], path: Path, title: str) -> Path:
    from memory.evaluation.figures import answers_figure, matplotlib_pyplot

    from .plots import save_figure

    return save_figure(matplotlib_pyplot(), answers_figure(summary), title, path)


def main(argv: list[str]) -> int:
    from memory.agent import MemoryAgent
    from memory.llm import LLMSession, make_llm
    from memory.reply_prompts import reply_messages
    from memory.settings import BUNDLED_MODELS, LLMConfig, Settings

    p = parser("answers", __doc__.split("\n")[0], "bench_out/answers.json")
    p.add_argument("--data", required=True, help="a file in LoCoMo's format")
    p.add_argument("--conversations", type=str_list, default=None, help="sample ids (default: every one in the file)")
    p.add_argument("--questions", type=int, default=34, help="questions per conversation (default 34)")
    p.add_argument(
        "--strategies", type=str_list, default=list(STRATEGIES), help=f"some of {', '.join(STRATEGIES)} (default all)"
    )
    p.add_argument(
        "--model", default="", help=f"a bundled model: {', '.join(BUNDLED_MODELS)} (default: the app's model)"
    )
    p.add_argument("--temperature", type=float, default=0.0, help="reply temperature (default 0: repeatable)")
    p.add_argument("--max-reply-tokens", type=int, default=64)
    p.add_argument("--judge-model", default="", help="an LLM judge's model (default: no judge)")
    p.add_argument("--judge-base-url", default="", help="the judge's OpenAI-compatible endpoint")
    a = p.parse_args(argv)
    unknown = [s for s in a.strategies if s not in STRATEGIES]
    if unknown:
        p.error(f"unknown strategies {', '.join(unknown)}; choose from {', '.join(STRATEGIES)}")
    convs = load_samples(json.loads(Path(a.data).read_text(encoding="utf-8")), a.conversations)

    base = Settings.from_env()
    cfg = LLMConfig(backend="embedded", bundled_model=a.model) if a.model else base.llm  # the app's model
    llm = make_llm(cfg)
    # full-context: llama.cpp's window widened to hold a whole conversation; an endpoint's model keeps its own
    full_llm = llm
    if cfg.backend == "embedded" and "full-context" in a.strategies:
        full_llm = make_llm(dataclasses.replace(cfg, n_ctx=FULL_CONTEXT_WINDOW))
    judge = None
    if a.judge_model or a.judge_base_url:
        judge = llm_eval.Judge(base, cfg=llm_eval.judge_config(base, a))
    # the memory a reply on this backend reads (Options.for_backend: the bundled model's smaller budget)
    options = base.options.for_backend(cfg).with_(seed=a.seed, temperature=a.temperature)
    rows: list[dict] = []
    out: dict = {}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-answers-") as tmp:
        settings = dataclasses.replace(base, data_dir=Path(tmp), chroma_host="")
        agent = MemoryAgent.from_settings(settings)
        for conv in convs:
            user = llm_eval.User(
                f"answers-{conv.sample_id}",
                {},
                conv.sessions,
                llm_eval._after(conv.sessions[-1].date),
                llm_eval.persona(conv.sessions),
            )
            t0 = time.perf_counter()
            for s in conv.sessions:
                agent.close_session(user.user_id, s, settings.options)
            progress(f"{conv.sample_id}: {len(conv.sessions)} sessions closed in {time.perf_counter() - t0:.0f} s")
            qs = llm_eval.sample([q for q in conv.questions if str(q.category) in CATEGORY_NAMES], a.questions, a.seed)
            qvecs = agent.embedder.embed([q.question for q in qs])
            units = {lvl: DialogueUnits(conv, agent.embedder, lvl, dates=True) for lvl in BASELINE_RETRIEVER}
            full = full_context_lines(conv)
            for st in a.strategies:  # strategy by strategy: full-context's prefix stays in llama.cpp's cache
                for q, qvec in zip(qs, qvecs, strict=True):
                    t1 = time.perf_counter()
                    if st == "none":
                        lines: list[str] = []
                    elif st == "full-context":
                        lines = full
                    elif st in BASELINE_RETRIEVER:
                        lines = baseline_lines(units[st], BASELINE_RETRIEVER[st], q, qvec, options.budget)
                    else:
                        lines = app_lines(agent, user.user_id, st, q.question, options)
                    msgs = reply_messages(prompt_strategy(st), lines, [], q.question, user.next_date, user.persona)
                    trace = Trace(st)
                    session = LLMSession(full_llm if st == "full-context" else llm, trace, temperature=a.temperature)
                    reply = "".join(session.stream("reply", msgs, max_tokens=a.max_reply_tokens))
                    row = {
                        "conversation": conv.sample_id,
                        "question": q.question,
                        "category": str(q.category),
                        "gold": q.answer,
                        "strategy": st,
                        "reply": reply,
                        "f1": round(token_f1(reply, q.answer), 4),
                        "all_words": has_all_words(reply, q.answer),
                        "memory_tokens": count_tokens("\n".join(lines)),
                        "latency_s": round(time.perf_counter() - t1, 2),
                        "notices": list(trace.notices),
                    }
                    if judge is not None:
                        from .qa import judge_messages

                        row["judge"] = judge.verdict("judge", judge_messages(q.question, q.answer, reply), "correct")
                    rows.append(row)
                mine = [r for r in rows if r["strategy"] == st and r["conversation"] == conv.sample_id]
                progress(
                    f"{conv.sample_id} {st}: F1 {statistics.fmean(r['f1'] for r in mine):.3f} over {len(mine)} "
                    f"questions, {sum(r['latency_s'] for r in mine):.0f} s"
                )
            summary = summarise(rows, a.strategies)
            out = {
                "config": vars(a)
                | {
                    "conversations": [c.sample_id for c in convs],
                    "model": cfg.describe(),
                    "budget": options.budget,
                    "k": options.k,
                },
                "machine": machine(),
                "seconds": round(time.perf_counter() - t_all),
                "summary": summary,
                "rows": rows,
            }
            atomic_write_json(a.out, out)  # after each conversation: a long run keeps what it measured
    summary = out.get("summary", [])
    n_q = len({(r["conversation"], r["question"]) for r in rows})
    print(f"Answers: {len(convs)} conversations, {n_q} questions, {cfg.describe()}, temperature {a.temperature}")
    print(table(summary))
    print(goal_line(summary))
    if summary:
        print(f"plot: {plot(summary, plot_path(a.out, 'f1'), f'LoCoMo answers, token F1 ({n_q} questions)')}")
    return 0
