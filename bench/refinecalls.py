"""`python -m bench refinecalls`: THEANINE's refinement per reply on an OpenAI-compatible endpoint: calls,
tokens, seconds and answers, for each count of refined timelines.

    python -m llama_cpp.server --model "$(python -m memory.llm qwen0.5b)" --host 127.0.0.1 \
        --port 18744 --n_ctx 8192 --n_threads 2 &
    python -m bench refinecalls --base-url http://127.0.0.1:18744/v1 --plans 3,1,0 --questions 10

One LoCoMo conversation (`--conversation`, the dev file) has its first `--sessions` sessions closed
into memory offline (no LLM: the app's path on a bundled model, and fast), as a user who chatted
a few times. Then, for each plan, `--questions` of its questions (categories 1, 2 and 4, answered by
those sessions, sampled with `--seed`) are asked one after another in one new session at the app's
options (Options(): k, budget 1,000 tokens), so the dialogue grows as in a chat. A plan is how many
of the timelines that reach the reply are refined, one call each (`RefinePlan.first`): `all` (every
one: what the LLM path did before issue 44), a number (the first N), 0 (none: raw timelines).
`--count-only` runs the plans with a stand-in LLM (bench.cost.StandInLLM) instead: exact counts
of calls and prompt tokens, no seconds.

Per plan: refinement calls per reply (mean, max), their prompt and completion tokens, seconds in
refinement and for the whole reply (p50), and answers right (token F1 >= 0.5 against the gold
answer, or the gold answer inside the reply; bench.replyspeed.is_right).
"""

from __future__ import annotations

import json
import random
import statistics
import tempfile
from pathlib import Path

from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.locomo_format import load_sessions, questions
from memory.records import Turn
from memory.trace import Trace

from .common import parser, progress
from .replyspeed import is_right

DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / "locomo_dev.json"


def _plan(text: str) -> int | None:
    return None if text == "all" else int(text)


def run_plan(agent, user: str, qs: list, first: int | None, date: str) -> list[dict]:
    from memory.agent import ENDPOINT_WORKERS
    from memory.design import RefinePlan

    # The plan under test, whatever the agent's default is (the app's rule: memory.agent._refine_plan).
    plan = None if first == 0 else RefinePlan(first=first, workers=ENDPOINT_WORKERS)
    agent._refine_plan = lambda cfg, steps, opts: plan
    history: list[Turn] = []
    rows = []
    for i, q in enumerate(qs):
        trace, text = Trace("theanine", error="no answer"), ""
        for ev in agent.reply(user, history, q.question, date):
            if ev.kind == "done" and ev.trace is not None:
                trace, text = ev.trace, ev.text
        calls = [c for c in trace.llm_calls if c.purpose == "refine"]
        rows.append(
            {
                "question": q.question,
                "gold": str(q.answer),
                "reply": text,
                "timelines": len(trace.timelines_raw),
                "refine_calls": len(calls),
                "refine_prompt_tokens": sum(c.prompt_tokens for c in calls),
                "refine_completion_tokens": sum(c.completion_tokens for c in calls),
                "refine_seconds": round(trace.timings.get("theanine_refine", 0.0), 2),
                "reply_seconds": round(trace.timings.get("total", 0.0), 2),
                "right": is_right(text, str(q.answer)),
                "error": trace.error,
            }
        )
        history += [Turn("user", q.question, f"q{i}"), Turn("assistant", text, f"a{i}")]
        r = rows[-1]
        progress(
            f"plan {first if first is not None else 'all'}: {i + 1}/{len(qs)}: {r['refine_calls']} calls of "
            f"{r['timelines']} timelines, {r['refine_seconds']} s refining, right={r['right']}"
        )
    return rows


def summary(rows: list[dict]) -> dict:
    def mean(key: str) -> float:
        return round(statistics.mean(r[key] for r in rows), 2)

    return {
        "replies": len(rows),
        "timelines_per_reply": mean("timelines"),
        "refine_calls_per_reply": mean("refine_calls"),
        "max_refine_calls": max(r["refine_calls"] for r in rows),
        "refine_prompt_tokens_per_reply": mean("refine_prompt_tokens"),
        "refine_completion_tokens_per_reply": mean("refine_completion_tokens"),
        "refine_seconds_p50": round(statistics.median(r["refine_seconds"] for r in rows), 2),
        "reply_seconds_p50": round(statistics.median(r["reply_seconds"] for r in rows), 2),
        "right": sum(r["right"] for r in rows),
        "errors": sum(1 for r in rows if r["error"]),
    }


def main(argv: list[str]) -> int:
    p = parser("refinecalls", __doc__.split("\n")[0], "bench_out/refinecalls.json")
    p.add_argument("--base-url", default="", help="the OpenAI-compatible endpoint (default: OPENAI_BASE_URL)")
    p.add_argument("--model", default="local", help="the endpoint's model name")
    p.add_argument("--data", default=str(DEV))
    p.add_argument("--conversation", default="conv-26")
    p.add_argument("--sessions", type=int, default=6, help="sessions closed into memory before the questions")
    p.add_argument("--questions", type=int, default=10)
    p.add_argument("--plans", default="all,3,1,0", help="refined timelines per reply: all, or a number")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per LLM request (queued ones wait)")
    p.add_argument("--count-only", action="store_true", help="a stand-in LLM: counts only, no seconds")
    a = p.parse_args(argv)
    from dataclasses import replace

    from memory.agent import MemoryAgent
    from memory.settings import LLMConfig, Settings

    sample = next(
        s for s in json.loads(Path(a.data).read_text(encoding="utf-8")) if s.get("sample_id") == a.conversation
    )
    sessions = load_sessions(sample)[0][1][: a.sessions]
    closed = {t.turn_id for s in sessions for t in s.turns}
    pool = [q for q in questions(sample) if q.category in (1, 2, 4) and q.evidence and set(q.evidence) <= closed]
    qs = random.Random(a.seed).sample(pool, min(a.questions, len(pool)))
    result: dict = {"config": vars(a), "machine": machine(), "plans": {}}
    with tempfile.TemporaryDirectory(prefix="bench-refine-") as tmp:
        base_url = a.base_url or Settings.from_env().llm.base_url
        # A long timeout: llama.cpp's server answers one request at a time, the others wait their turn.
        cfg = LLMConfig(backend="openai", base_url=base_url, model=a.model, timeout=a.timeout)
        settings = replace(Settings.from_env(), data_dir=Path(tmp), llm=cfg, llm_steps="auto")
        stand_in = None
        if a.count_only:
            from .cost import StandInLLM

            stand_in = StandInLLM()
        agent = MemoryAgent.from_settings(settings, llm_factory=(lambda c: stand_in) if stand_in else None)
        for s in sessions:
            agent.close_session("u", s, llm_steps=False)
        progress(f"closed {len(sessions)} sessions of {a.conversation} offline; {len(qs)} questions")
        date = sessions[-1].date
        for plan in [x for x in a.plans.split(",") if x]:
            rows = run_plan(agent, "u", qs, _plan(plan), date)
            result["plans"][plan] = {**summary(rows), "rows": rows}
            atomic_write_json(a.out, result)
    print(
        f"{'plan':5} {'calls/reply':>11} {'max':>4} {'prompt tok':>10} {'compl tok':>9} {'refine s':>8} "
        f"{'reply s':>7} {'right':>5}"
    )
    for plan, r in result["plans"].items():
        print(
            f"{plan:5} {r['refine_calls_per_reply']:11.2f} {r['max_refine_calls']:4d} "
            f"{r['refine_prompt_tokens_per_reply']:10.0f} {r['refine_completion_tokens_per_reply']:9.0f} "
            f"{r['refine_seconds_p50']:8.1f} {r['reply_seconds_p50']:7.1f} {r['right']:>2}/{r['replies']}"
        )
    return 0
