"""Knowledge update: when a fact changes, does the memory give the current value, still know the old
one, and say when it changed?

    python -m bench knowledge_update                  # retrieval level (offline, about a minute)
    python -m bench knowledge_update --reply          # also through the reply path (bundled model)
    python -m bench knowledge_update --reply --model qwen05   # another bundled model (a flag)

36 synthetic histories (bench.ku_histories): one fact changes (home, job, partner, pet,
plan, preference), among dated distractor sessions. Every history is closed into memory by the
app's own `MemoryAgent.close_session` (offline: no LLM step), then three questions are asked:
the current value, the old value ("where did I live before?") and when it changed.

Retrieval level: each strategy's memory text, exactly as `MemoryAgent.memory_context` gives it to
the reply prompt (turn-level: the history's turns ranked by the app's embedder, packed by the same
rule), is read by a fixed reader:
* current: the first of the two values (old, new) the memory names, leaving out history it marks
  as superseded ("[... until 2023-04-03: ...]"), is the new one;
* old: the memory names the old value; when: it names the change session's date.
Also `current (as of)`: the current-value question over the memory as of the session before the
change (`as_of`), where the right answer is the old value.

Reply level (--reply): the same memory text goes through `reply_messages` and the model's
`LLMSession.stream` (the app's reply path); a reply is right when its first value is the new one
(current), when it names the old value (old), and when it names the date (when).

The offline Changed rule (memory.theanine.changes) is scored on the probe's changes: precision
over the Changed edges it made, recall over the histories (a change linked to a memory that
stated the old value).
"""

from __future__ import annotations

import dataclasses
import re
import tempfile
import time
from datetime import date as _date
from pathlib import Path

from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.packing import Piece, Unit, pack
from memory.trace import Trace

from .common import parser, progress, str_list
from .ku_histories import History, histories

STRATEGIES = ("none", "turn", "secom", "theanine-topk", "theanine-timeline")
HISTORY = re.compile(r"\[[^\[\]]*\buntil\b[^\[\]]*\]")  # a memory the context marks as superseded
MONTHS = [_date(2000, m, 1).strftime("%B").lower() for m in range(1, 13)]


def _mentions(text: str, value: str) -> int:
    """Position of the first mention of `value` as a word (-1: none)."""
    m = re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", text, re.I)
    return m.start() if m else -1


def first_value(text: str, old: str, new: str, skip_history: bool = True) -> str:
    """ "new" | "old" | "" : which value the text names first (superseded history left out)."""
    if skip_history:
        text = HISTORY.sub(" ", text)
    po, pn = _mentions(text, old), _mentions(text, new)
    if pn < 0 and po < 0:
        return ""
    if po < 0 or (0 <= pn < po):
        return "new"
    return "old"


def names_date(text: str, iso: str, spoken: bool = False) -> bool:
    """The text names the date: ISO, or (`spoken`, for replies) the month's name with the day."""
    if iso in text:
        return True
    if not spoken:
        return False
    d = _date.fromisoformat(iso)
    month, low = MONTHS[d.month - 1], text.lower()
    return month in low and re.search(rf"(?<!\d){d.day}(st|nd|rd|th)?(?!\d)", low) is not None


# --- the memory each strategy gives the reply ----------------------------------------------------


def turn_lines(agent, h: History, question: str, budget: int) -> list[str]:
    """Turn-level retrieval: every turn of the history ranked by the app's embedder, packed into the budget."""
    import numpy as np

    turns = [(s.date, t) for s in h.sessions for t in s.turns]
    vecs = agent.embedder.embed([f"{t.speaker}: {t.text}" for _, t in turns] + [question])
    scores = vecs[:-1] @ vecs[-1]
    order = [int(i) for i in np.lexsort((np.arange(len(scores)), -scores))]
    units = (
        Unit(turns[i][1].turn_id, [Piece(f"({turns[i][0]}) {turns[i][1].speaker}: {turns[i][1].text}")]) for i in order
    )
    return [p.text for _, kept in pack(units, budget).chosen for p in kept]


def memory_lines(agent, h: History, strategy: str, question: str, options, as_of: str | None = None) -> list[str]:
    if strategy == "none":
        return []
    if strategy == "turn":
        if as_of is not None:
            cut = {s.session_id for s in h.sessions if s.date <= as_of}
            h = dataclasses.replace(h, sessions=[s for s in h.sessions if s.session_id in cut])
        return turn_lines(agent, h, question, options.budget)
    opts = options.with_(strategy="secom" if strategy == "secom" else "theanine")
    ctx = agent.memory_context(
        h.hid, [], question, opts, Trace(opts.strategy), None, timelines=strategy != "theanine-topk", as_of=as_of
    )
    return ctx.lines


# --- building and scoring ------------------------------------------------------------------------


def build(hs: list[History], data_dir: Path, settings=None):
    """One MemoryAgent on the app's providers (a scratch store), every history closed offline."""
    import torch

    from memory.agent import MemoryAgent
    from memory.settings import Settings

    # One torch thread: on this busy 2-core machine MiniLM took 1.06 s per small batch with two and
    # 0.09 s with one (torch's threads spin while they wait, like llama.cpp's: LLMConfig.threads).
    torch.set_num_threads(1)
    s = dataclasses.replace(settings or Settings.from_env(), data_dir=Path(data_dir), chroma_host="")
    agent = MemoryAgent.from_settings(s)
    for i, h in enumerate(hs):
        for sess in h.sessions:
            agent.close_session(h.hid, sess, s.options, llm_steps=False)
        if (i + 1) % 6 == 0:
            progress(f"closed {i + 1}/{len(hs)} histories")
    return agent


def rule_scores(agent, hs: list[History]) -> dict:
    """Precision of the Changed edges the offline rule made, and recall over the histories' changes."""
    made = right = found = 0
    for h in hs:
        g = agent.theanine.graph(h.hid)
        hit = False
        for a, b, r in g.g.edges(data="relation"):
            if r != "Changed":
                continue
            made += 1
            ok = h.change_turn in g.memory(b).turns and bool(set(h.old_turns) & set(g.memory(a).turns))
            right += ok
            hit = hit or ok
        found += hit
    return {
        "changed_edges": made,
        "correct": right,
        "precision": round(right / made, 3) if made else None,
        "recall": round(found / len(hs), 3),
        "histories": len(hs),
    }


def _before_change(h: History) -> str:
    """The date of the last session before the change (the memory as of then holds only the old value)."""
    return max(s.date for s in h.sessions if s.date < h.change_date)


def retrieval_rows(agent, hs: list[History], strategies, options) -> list[dict]:
    rows = []
    for h in hs:
        for st in strategies:
            cur = "\n".join(memory_lines(agent, h, st, h.questions["current"], options))
            old = "\n".join(memory_lines(agent, h, st, h.questions["old"], options))
            when = "\n".join(memory_lines(agent, h, st, h.questions["when"], options))
            then = "\n".join(memory_lines(agent, h, st, h.questions["current"], options, as_of=_before_change(h)))
            rows.append(
                {
                    "history": h.hid,
                    "kind": h.kind,
                    "strategy": st,
                    "current": first_value(cur, h.old, h.new) == "new",
                    "current_in_context": _mentions(cur, h.new) >= 0,
                    "old": _mentions(old, h.old) >= 0,
                    "when": names_date(when, h.change_date),
                    "as_of_old": first_value(then, h.old, h.new) == "old",
                    "context_current": cur,
                }
            )
    return rows


def reply_rows(agent, hs: list[History], strategies, options, llm_cfg, max_tokens: int) -> list[dict]:
    from memory.llm import LLMSession, make_llm
    from memory.reply_prompts import reply_messages

    llm = make_llm(llm_cfg)
    rows = []
    for i, h in enumerate(hs):
        for st in strategies:
            row = {"history": h.hid, "kind": h.kind, "strategy": st}
            for q in ("current", "old", "when"):
                lines = memory_lines(agent, h, st, h.questions[q], options)
                msgs = reply_messages(
                    "theanine" if st.startswith("theanine") else st, lines, [], h.questions[q], h.ask_date
                )
                session = LLMSession(llm, Trace(st), temperature=options.temperature)
                text = "".join(session.stream("reply", msgs, max_tokens=max_tokens))
                row[f"reply_{q}"] = text
                if q == "current":
                    row[q] = first_value(text, h.old, h.new, skip_history=False) == "new"
                elif q == "old":
                    row[q] = _mentions(text, h.old) >= 0
                else:
                    row[q] = names_date(text, h.change_date, spoken=True)
            rows.append(row)
        so_far = {st: sum(r["current"] for r in rows if r["strategy"] == st) for st in strategies}
        progress(f"replies: {i + 1}/{len(hs)} histories; current value right so far: {so_far}")
    return rows


def table(rows: list[dict], strategies, cols: list[tuple[str, str]]) -> tuple[str, list[dict]]:
    out, summary = [], []
    out.append(f"{'strategy':18}" + "".join(f"{label:>14}" for _, label in cols))
    for st in strategies:
        mine = [r for r in rows if r["strategy"] == st]
        shares = {k: round(sum(r[k] for r in mine) / len(mine), 3) for k, _ in cols}
        summary.append({"strategy": st, "n": len(mine), **shares})
        out.append(f"{st:18}" + "".join(f"{shares[k]:14.2f}" for k, _ in cols))
    return "\n".join(out), summary


RETRIEVAL_COLS = [
    ("current", "current"),
    ("current_in_context", "current in"),
    ("old", "old"),
    ("when", "when"),
    ("as_of_old", "as of: old"),
]
REPLY_COLS = [("current", "current"), ("old", "old"), ("when", "when")]


def main(argv: list[str]) -> int:
    from memory.settings import BUNDLED_MODELS, LLMConfig, Settings

    p = parser("knowledge_update", __doc__.split("\n")[0], "bench_out/knowledge_update.json")
    p.add_argument("--histories", type=int, default=36, help="how many histories (default 36: six per kind)")
    p.add_argument("--budget", type=int, default=0, help="memory tokens per reply (default: the app's)")
    p.add_argument("--reply", action="store_true", help="also answer through the reply path with a model")
    p.add_argument(
        "--model", default="", help=f"bundled model for --reply: {', '.join(BUNDLED_MODELS)} (default: the app's)"
    )
    p.add_argument("--gguf", default="", help="a GGUF file for --reply instead of a bundled model")
    p.add_argument("--temperature", type=float, default=0.0, help="reply temperature (default 0: repeatable)")
    p.add_argument("--max-tokens", type=int, default=48)
    p.add_argument(
        "--strategies", type=str_list, default=list(STRATEGIES), help=f"some of {', '.join(STRATEGIES)} (default all)"
    )
    a = p.parse_args(argv)
    settings = Settings.from_env()
    options = settings.options.with_(
        seed=a.seed, temperature=a.temperature, **({"budget": a.budget} if a.budget else {})
    )
    hs = histories(a.histories, a.seed)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-ku-") as tmp:
        agent = build(hs, Path(tmp), settings)
        built = time.perf_counter() - t0
        rule = rule_scores(agent, hs)
        strategies = [st for st in a.strategies if st in STRATEGIES]
        rows = retrieval_rows(agent, hs, strategies, options)
        text, summary = table(rows, strategies, RETRIEVAL_COLS)
        print(f"Retrieval level: {len(hs)} histories, memory budget {options.budget} tokens, k={options.k}")
        print(text)
        print(
            f"\nOffline Changed rule: precision {rule['precision']} ({rule['correct']} of {rule['changed_edges']} "
            f"edges), recall {rule['recall']} of {rule['histories']} changes"
        )
        out = {
            "config": vars(a) | {"budget": options.budget, "k": options.k, "n": options.n},
            "machine": machine(),
            "build_seconds": round(built, 1),
            "rule": rule,
            "retrieval": summary,
            "retrieval_rows": rows,
        }
        if a.reply:
            cfg = settings.llm
            if a.gguf:
                cfg = LLMConfig(backend="embedded", gguf_path=a.gguf)
            elif a.model or cfg.backend != "embedded":
                cfg = LLMConfig(backend="embedded", bundled_model=a.model or cfg.bundled_model)
            t1 = time.perf_counter()
            # the memory a reply on this model reads (Options.for_backend), unless --budget names one
            reply_opts = options if a.budget else options.for_backend(cfg)
            rrows = reply_rows(agent, hs, strategies, reply_opts, cfg, a.max_tokens)
            rtext, rsummary = table(rrows, strategies, REPLY_COLS)
            print(f"\nReply level ({cfg.describe()}, temperature {a.temperature}, {time.perf_counter() - t1:.0f} s)")
            print(rtext)
            out |= {"reply_model": cfg.describe(), "reply": rsummary, "reply_rows": rrows}
    atomic_write_json(a.out, out)
    return 0
