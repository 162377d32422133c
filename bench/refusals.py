"""Refusals of ordinary companion chat: how often the app's reply turns down a message it should answer.

    python -m bench refusals [--memory empty,small,chat] [--strategies theanine] [--out bench_out/refusals.json]

The messages (`refusal_messages.json` next to this module, written for this benchmark) are what people
tell a companion: news, plans, feelings, moves, new jobs, pets, and questions about earlier sessions.
Each goes through the app's reply path (`MemoryAgent.reply` with the app's model and options, as a
fresh install runs it) as the first message of a new session, once with an empty memory and once
with a small memory (two short sessions from the same file, closed into memory first). In `chat`, the
small memory is there and the messages come as a typed chat does: sessions of `--chat-turns`
consecutive messages, each answered with the session's earlier turns and replies before it (where a
typed chat saw the bundled model refuse every message of a session). A reply is a
refusal when it matches `REFUSAL` (an assistant's stock phrases: "I'm sorry, but I can't", "as an
AI", "I don't have personal experiences", ...: `memory.reply_prompts.REFUSAL`). Refusals open a reply, so
replies are cut at `--max-reply-tokens` (default 48) to keep the run short. On the embedded model the
reply path asks a reply again when it opens with a stock refusal (`reply_prompts.RefusalGuard`); the
"1st try" column counts the replies whose first answer was a refusal (caught or not).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path

from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.records import SessionRecord, Turn
from memory.reply_prompts import is_refusal

from .common import parser, progress, str_list
from .reply_scores import parrots

DATA = Path(__file__).with_name("refusal_messages.json")
MEMORY_CONDITIONS = ("empty", "small", "chat")


def load(path: Path) -> tuple[list[SessionRecord], list[str]]:
    """The small memory (sessions of [speaker, text] turns) and the messages of a data file."""
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions = [
        SessionRecord(
            s["session_id"],
            s["date"],
            [Turn(sp, text, f"{s['session_id']}:{i}") for i, (sp, text) in enumerate(s["turns"])],
        )
        for s in data.get("memory", [])
    ]
    return sessions, [str(m) for m in data["messages"]]


def summarise(rows: list[dict]) -> list[dict]:
    out = []
    for key in sorted({(r["memory"], r["strategy"]) for r in rows}):
        mine = [r for r in rows if (r["memory"], r["strategy"]) == key]
        out.append(
            {
                "memory": key[0],
                "strategy": key[1],
                "n": len(mine),
                "refusals": sum(r["refusal"] for r in mine),
                "rate": round(sum(r["refusal"] for r in mine) / len(mine), 3),
                # what the model answered first: a refusal the guard caught, or one it let through
                "first_try_refusals": sum(bool(r["retried"]) or r["refusal"] for r in mine),
                "empty": sum(not r["reply"].strip() for r in mine),
                # the message said back (bench.reply_scores.parrots, the answers benchmark's rule)
                "parroting": sum(parrots(r["reply"], r["message"]) for r in mine),
                "seconds_p50": round(statistics.median(r["seconds"] for r in mine), 2),
            }
        )
    return out


def table(summary: list[dict]) -> str:
    head = (
        f"{'memory':8} {'strategy':10} {'n':>4} {'refusals':>9} {'rate':>6} {'1st try':>8} {'empty':>6} {'parrot':>6}"
    )
    lines = [head + f" {'p50 s':>6}"]
    for s in summary:
        lines.append(
            f"{s['memory']:8} {s['strategy']:10} {s['n']:4} {s['refusals']:9} {s['rate']:6.1%}"
            f" {s['first_try_refusals']:8} {s['empty']:6} {s.get('parroting', 0):6} {s['seconds_p50']:6.1f}"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from memory.agent import MemoryAgent
    from memory.settings import STRATEGIES, Settings

    p = parser("refusals", __doc__.split("\n")[0], "bench_out/refusals.json")
    p.add_argument("--data", default=str(DATA), help="messages and a small memory (default: the bundled file)")
    p.add_argument("--memory", type=str_list, default=list(MEMORY_CONDITIONS), help="empty, small, chat (default all)")
    p.add_argument("--strategies", type=str_list, default=None, help="default: the app's strategy")
    p.add_argument("--limit", type=int, default=0, help="only the first N messages (default all)")
    p.add_argument("--max-reply-tokens", type=int, default=48)
    p.add_argument("--chat-turns", type=int, default=5, help="messages per session in `chat` (default 5)")
    p.add_argument("--date", default="2024-05-02", help="the sessions' date (after the small memory's)")
    a = p.parse_args(argv)
    base = Settings.from_env()
    strategies = a.strategies or [base.options.strategy]
    if bad := [s for s in strategies if s not in STRATEGIES] + [m for m in a.memory if m not in MEMORY_CONDITIONS]:
        p.error(f"unknown: {', '.join(bad)}")
    sessions, messages = load(Path(a.data))
    messages = messages[: a.limit] if a.limit > 0 else messages
    rows: list[dict] = []
    t_all = time.perf_counter()
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="bench-refusals-") as tmp:
        settings = dataclasses.replace(base, data_dir=Path(tmp), chroma_host="")
        agent = MemoryAgent.from_settings(settings)
        for cond in a.memory:
            user = f"refusals-{cond}"
            if cond in ("small", "chat"):
                for s in sessions:
                    agent.close_session(user, s, settings.options)
            for st in strategies:
                opts = settings.options.with_(strategy=st, seed=a.seed, max_reply_tokens=a.max_reply_tokens)
                history: list[Turn] = []
                for i, msg in enumerate(messages):
                    if cond != "chat" or i % max(1, a.chat_turns) == 0:
                        history = []  # a new session
                    t0 = time.perf_counter()
                    done = [ev for ev in agent.reply(user, list(history), msg, a.date, opts) if ev.kind == "done"][-1]
                    reply = done.text
                    if cond == "chat":
                        n = len(history)
                        history += [Turn("user", msg, f"chat:{n}"), Turn("assistant", reply, f"chat:{n + 1}")]
                    rows.append(
                        {
                            "memory": cond,
                            "strategy": st,
                            "message": msg,
                            "reply": reply,
                            "refusal": is_refusal(reply),
                            # openings RefusalGuard stopped and asked again (the embedded model only)
                            "retried": done.trace.counts.get("reply_refusals_retried", 0) if done.trace else 0,
                            "error": done.trace.error if done.trace else None,
                            "seconds": round(time.perf_counter() - t0, 2),
                        }
                    )
                    mark = "REFUSAL " if rows[-1]["refusal"] else ""
                    progress(f"{cond} {st} {i + 1}/{len(messages)}: {mark}{reply[:80]!r}")
                out = {
                    "config": vars(a) | {"model": settings.llm.describe(), "strategies": strategies},
                    "machine": machine(),
                    "seconds": round(time.perf_counter() - t_all),
                    "summary": summarise(rows),
                    "rows": rows,
                }
                atomic_write_json(a.out, out)
    print(f"Refusals: {len(messages)} messages, {base.llm.describe()}, replies cut at {a.max_reply_tokens} tokens")
    print(table(out.get("summary", [])))
    for r in rows:
        if r["refusal"]:
            print(f"  refused ({r['memory']}, {r['strategy']}): {r['message']!r} -> {r['reply'][:100]!r}")
    return 0
