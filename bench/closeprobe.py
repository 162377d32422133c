"""Long sessions closed with every LLM step on a bundled model: seconds per close, first-try valid
answers per step, and whether any prompt met the context window.

    MEMORY_LLM_STEPS=on python -m bench closeprobe --model qwen1.5b \\
        --data ../shared/data/locomo/locomo_dev.json --sessions 3 --min-turns 35 --out bench_out/closeprobe.json

Takes the first `--sessions` LoCoMo sessions of at least `--min-turns` turns (after `--skip` of
them, so a list can be run in parts). For each, a fresh user first gets the `--before` sessions
preceding it closed on the offline path (so the relation step has earlier memories to pair with),
then the session is closed through `MemoryAgent.close_session` with the LLM steps `--steps` (default:
summary, relations and SeCom segmentation; the others take their offline paths), on the embedded
model with its n_ctx (LLM_CONTEXT_WINDOW, default 8192). `--relations score` labels the pairs by the
model's log-probabilities instead of generating them; `--policy` closes as `MEMORY_LLM_STEPS=auto`
does (memory.steps_policy) instead of `--steps`. With `--cut 5,10,15` each session is closed once per
size, cut to its first N turns (a chat-sized session), each time for a fresh user. Then
`--questions` LoCoMo questions whose evidence lies in that session are asked through
`MemoryAgent.reply` (THEANINE, the app's options): the refinement step (II-2) runs on the retrieved
timelines, and the seconds it adds to a reply are recorded. Besides wall-clock seconds each close
records the process's CPU seconds, the seconds of each step and the load average (the machine may be
shared). A call is first-try valid when its first
answer passed the step's validation (mended JSON counts, a second try or the fallback does not).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from collections import defaultdict
from typing import Any

from memory import locomo_format as lc
from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.trace import LLMCall

from .common import parser, progress


class SizingLLM:
    """`--dry-run`: the model's own tokenizer and window, no generation. Every answer is unusable
    ("{}"), so each step takes its fallback (and asks again), but every prompt is built and sized as in
    a real close: what it records is how many calls each step makes and their prompt + answer tokens."""

    json_attempts = 2

    def __init__(self, gguf: str, window: int, summary_part_tokens: int):
        from llama_cpp import Llama

        self.vocab = Llama(model_path=gguf, vocab_only=True, verbose=False)
        self.context_window = window
        self.summary_part_tokens = summary_part_tokens  # as the embedded backend asks
        self.requests: list[tuple[str, int, int]] = []  # (purpose, prompt tokens, max_tokens)

    def count_tokens(self, text: str) -> int:
        return len(self.vocab.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _record(self, messages: list[dict], max_tokens: int, purpose: str) -> int:
        n = sum(self.count_tokens(str(m.get("content", ""))) + 8 for m in messages)
        self.requests.append((purpose, n, max_tokens))
        return n

    def chat(self, messages, *, temperature, max_tokens, json_schema=None, purpose=""):
        from memory.llm import Completion

        return Completion("{}", self._record(messages, max_tokens, purpose), 1)

    def stream(self, messages, *, temperature, max_tokens, seed=None, purpose=""):
        self._record(messages, max_tokens, purpose)
        yield "ok"


def cut(session, turns: int):
    """The session's first `turns` turns (0: all of them): a chat-sized session cut from a long one."""
    from memory.records import SessionRecord

    return SessionRecord(session.session_id, session.date, list(session.turns[:turns])) if turns else session


def step_plan(steps: str, relations: str):
    """`--steps` / `--relations` as a StepPlan (memory.steps_policy)."""
    from memory.steps_policy import StepPlan

    names = {x for x in steps.split(",") if x}
    if names - STEPS:
        raise ValueError(f"unknown steps {sorted(names - STEPS)}; choose from {', '.join(sorted(STEPS))}")
    return StepPlan(
        summary="summary" in names,
        relations=relations if "relations" in names else "",
        segmentation="segmentation" in names,
        reason=f"closeprobe --steps {steps} --relations {relations}",
    )


STEPS = {"summary", "relations", "segmentation"}
# The seconds of each step, by the purposes of its calls (memory.theanine.linking, memory.secom).
STEP_PURPOSES = {"summary": ("summarise",), "relations": ("relation", "relation_score"), "segmentation": ("segment",)}


def step_seconds(calls: list[LLMCall]) -> dict[str, float]:
    return {s: round(sum(c.seconds for c in calls if c.purpose in ps), 1) for s, ps in STEP_PURPOSES.items()}


def evidence_covered(agent, user: str, sample: dict, session) -> dict:
    """The LoCoMo questions' evidence turns in the closed session, and how many of them a memory of
    that session cites (THEANINE's provenance): what the summary kept of what questions later ask."""
    turn_ids = {t.turn_id for t in session.turns}
    evidence = {e for q in lc.questions(sample) for e in q.evidence if e in turn_ids}
    cited = {t for m in agent.theanine.graph(user).memories() if m.session_id == session.session_id for t in m.turns}
    return {"evidence_turns": len(evidence), "cited": len(evidence & cited)}


class CpuTimed:
    """The model, with the CPU seconds of this process spent in each step's calls (by purpose). llama.cpp
    computes in this process's threads, so on a machine shared with other jobs these seconds are what
    the step costs, while its wall-clock seconds grow with the load."""

    def __init__(self, llm):
        self.llm = llm
        self.cpu: dict[str, float] = defaultdict(float)

    def __getattr__(self, name: str):
        return getattr(self.llm, name)  # context_window, count_tokens, summary_part_tokens, json_attempts

    def _timed(self, purpose: str, fn):
        t0 = time.process_time()
        try:
            return fn()
        finally:
            self.cpu[purpose] += time.process_time() - t0

    def chat(self, messages, **kw):
        return self._timed(kw.get("purpose", ""), lambda: self.llm.chat(messages, **kw))

    def stream(self, messages, **kw):
        yield from self._timed(kw.get("purpose", ""), lambda: list(self.llm.stream(messages, **kw)))

    def label_probabilities(self, messages, labels):
        return self._timed("relation_score", lambda: self.llm.label_probabilities(messages, labels))


def step_cpu(cpu: dict[str, float]) -> dict[str, float]:
    return {s: round(sum(v for p, v in cpu.items() if p in ps), 1) for s, ps in STEP_PURPOSES.items()}


def first_try_valid(c: LLMCall) -> bool:
    return c.status in ("ok", "repaired") and not c.detail.startswith("attempt 1")


def over_window(c: LLMCall) -> bool:
    return "context window" in c.detail or "exceed context window" in c.detail


def long_sessions(data, n: int, min_turns: int, skip: int = 0) -> list[tuple[str, int, list]]:
    """(sample id, index of the long session, the sample's sessions) for `n` long sessions, after the
    first `skip` (so the closes of one list can be run a few at a time)."""
    out: list[tuple[str, int, list]] = []
    for sid, sessions in lc.load_sessions(data):
        for i, s in enumerate(sessions):
            if len(s.turns) >= min_turns:
                out.append((sid, i, sessions))
    return out[skip : skip + n]


def step_table(calls: list[LLMCall]) -> dict[str, dict]:
    by: dict[str, list[LLMCall]] = defaultdict(list)
    for c in calls:
        by[c.purpose].append(c)
    return {
        p: {
            "calls": len(cs),
            "first_try_valid": sum(map(first_try_valid, cs)) / len(cs),
            "fallback": sum(c.status == "fallback" for c in cs),
            "over_window": sum(map(over_window, cs)),
            "max_prompt_tokens": max(c.prompt_tokens for c in cs),
            "seconds": round(sum(c.seconds for c in cs), 1),
        }
        for p, cs in sorted(by.items())
    }


def ask(agent, user: str, question: str, date: str) -> tuple[list[LLMCall], dict]:
    """One reply through the app's path (THEANINE, refinement on): its LLM calls and timings."""
    from memory.settings import Options

    done = [e for e in agent.reply(user, [], question, date, Options(strategy="theanine")) if e.kind == "done"]
    trace = done[-1].trace
    return trace.llm_calls, dict(trace.timings)


def main(argv: list[str]) -> int:
    p = parser("closeprobe", __doc__.split("\n")[0], "bench_out/closeprobe.json")
    p.add_argument("--model", default="qwen1.5b", help="bundled model (LLM_EMBEDDED_MODEL)")
    p.add_argument("--data", default="../shared/data/locomo/locomo_dev.json")
    p.add_argument("--sessions", type=int, default=3)
    p.add_argument("--min-turns", type=int, default=35)
    p.add_argument("--skip", type=int, default=0, help="long sessions to pass over first (run a list in parts)")
    p.add_argument("--before", type=int, default=3, help="earlier sessions closed offline first")
    p.add_argument("--questions", type=int, default=2, help="questions on the session asked after its close")
    p.add_argument("--dry-run", action="store_true", help="size every prompt with the model's tokenizer, no generation")
    p.add_argument(
        "--cut", default="0", help="close each session cut to its first N turns, for each N of a list (0: whole)"
    )
    p.add_argument("--steps", default="summary,relations,segmentation", help="the LLM steps the close runs")
    p.add_argument(
        "--relations", default="llm", choices=("llm", "score"), help="relation labels generated (llm) or scored"
    )
    p.add_argument(
        "--policy",
        action="store_true",
        help="close as MEMORY_LLM_STEPS=auto does (memory.steps_policy) instead of --steps",
    )
    a = p.parse_args(argv)
    try:
        plan = None if a.policy else step_plan(a.steps, a.relations)
    except ValueError as e:
        p.error(str(e))
    cuts = [int(x) for x in a.cut.split(",") if x.strip()] or [0]
    import tempfile
    from pathlib import Path

    from memory.agent import MemoryAgent
    from memory.settings import Settings

    with open(a.data, encoding="utf-8") as f:
        data = json.load(f)
    picked = long_sessions(data, a.sessions, max(a.min_turns, *cuts), a.skip)
    samples = {str(x.get("sample_id", "")): x for x in (data if isinstance(data, list) else [data])}
    env = {**os.environ, "MEMORY_LLM_STEPS": "on", "LLM_EMBEDDED_MODEL": a.model, "SECOM_SEGMENTER": "llm"}
    if a.policy:
        env["MEMORY_LLM_STEPS"] = "auto"
        env.pop("SECOM_SEGMENTER")
    env.pop("OPENAI_API_KEY", None)
    env.pop("OPENAI_BASE_URL", None)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.from_env({**env, "MEMORY_DATA_DIR": str(Path(tmp) / "data")})
        sizing = None
        if a.dry_run:
            from memory.llm import bundled_gguf_path
            from memory.llm.llamacpp_chat import summary_part_tokens

            sizing = SizingLLM(bundled_gguf_path(a.model), settings.llm.n_ctx, summary_part_tokens(settings.llm))
        timed: dict = {}

        def factory(cfg):
            from memory.llm import make_llm

            if cfg not in timed:
                timed[cfg] = CpuTimed(make_llm(cfg))
            return timed[cfg]

        agent = MemoryAgent.from_settings(settings, llm_factory=(lambda cfg: sizing) if sizing else factory)
        for k, (sid, i, sessions, n) in enumerate((*x, n) for x in picked for n in cuts):
            user = f"u{k}"
            for s in sessions[max(0, i - a.before) : i]:
                agent.close_session(user, s, llm_steps=False)
            closed = cut(sessions[i], n)
            for t in timed.values():
                t.cpu.clear()
            load, t0, cpu0 = os.getloadavg()[0], time.perf_counter(), time.process_time()
            report = agent.close_session(user, closed, steps=plan)
            secs, cpu = time.perf_counter() - t0, time.process_time() - cpu0
            calls = list(report.trace.llm_calls)
            close_calls = list(calls)
            turn_ids = {t.turn_id for t in closed.turns}
            covered = evidence_covered(agent, user, samples.get(sid, {}), closed)
            on_it = [q for q in lc.questions(samples.get(sid, {})) if set(q.evidence) <= turn_ids][: a.questions]
            replies: list[dict[str, Any]] = []
            for q in on_it:
                in_reply, timings = ask(agent, user, q.question, sessions[i].date)
                calls += [c for c in in_reply if c.purpose == "refine"]
                replies.append({"question": q.question, "gold": q.answer, "timings": timings})
            row = {
                "sample": sid,
                "session": sessions[i].session_id,
                "turns": len(closed.turns),
                "seconds": round(secs, 1),
                # CPU seconds of this process: on a machine shared with other jobs the wall-clock seconds
                # grow with the load; CPU seconds / threads is what the close costs on idle cores
                "cpu_seconds": round(cpu, 1),
                "threads": settings.llm.threads,
                "load_before": round(load, 1),
                "load_after": round(os.getloadavg()[0], 1),
                "step_seconds": step_seconds(close_calls),
                "step_cpu_seconds": step_cpu({p: v for t in timed.values() for p, v in t.cpu.items()}),
                "plan": next((x for x in report.trace.notices if x.startswith(("LLM steps", "No LLM step"))), ""),
                "memories": len(report.new_memories),
                "evidence_covered": covered,
                "segments": len(report.new_segments),
                "relation_pairs": report.trace.counts.get("relation_pairs", 0),
                "window": settings.llm.n_ctx,
                "steps": step_table(calls),
                "calls": [dataclasses.asdict(c) for c in calls],
                "replies": replies,
                "refine_seconds_per_reply": round(
                    statistics.median([r["timings"].get("theanine_refine", 0.0) for r in replies]), 1
                )
                if replies
                else None,
                "notices": report.trace.notices,
            }
            if sizing is not None:
                asked = sizing.requests
                row["dry_run"] = {
                    "calls": len(asked),
                    "max_prompt_plus_answer": max((n + m for _p, n, m in asked), default=0),
                    "over_window": sum(n + m > settings.llm.n_ctx for _p, n, m in asked),
                    "per_step": {q: sum(p == q for p, _n, _m in asked) for q in sorted({p for p, _n, _m in asked})},
                }
                sizing.requests = []
            rows.append(row)
            progress(f"{sid} {row['session']} ({row['turns']} turns): {secs:.0f} s, {len(calls)} calls")
            atomic_write_json(a.out, {"config": vars(a), "machine": machine(), "closes": rows})
    print(
        f"{'session':16} {'turns':>5} {'s/close':>8} {'cpu s':>7} {'load':>5} {'memories':>8} {'pairs':>5}  "
        "seconds (CPU): summary / relations / segmentation;  step: calls, first-try valid, over window"
    )
    for r in rows:
        steps = "; ".join(
            f"{p} {s['calls']}, {s['first_try_valid']:.2f}, {s['over_window']}" for p, s in r["steps"].items()
        )
        per_step = " / ".join(
            f"{v:.1f} ({r['step_cpu_seconds'].get(k, 0.0):.1f})" for k, v in r["step_seconds"].items()
        )
        print(
            f"{r['sample'] + ' ' + r['session']:16} {r['turns']:5} {r['seconds']:8.1f} {r['cpu_seconds']:7.1f} "
            f"{r['load_before']:5.1f} {r['memories']:8} {r['relation_pairs']:5}  {per_step};  {steps}"
        )
        if "dry_run" in r:
            d = r["dry_run"]
            print(
                f"  dry run: {d['per_step']}, largest prompt + answer {d['max_prompt_plus_answer']} "
                f"of {r['window']}, over the window: {d['over_window']}"
            )
    if rows:
        print(f"median seconds per close: {statistics.median(r['seconds'] for r in rows):.1f}")
    return 0
