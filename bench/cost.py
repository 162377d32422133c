"""Cost: LLM calls and tokens per reply and per session close, for each strategy, next to the
call pattern of the official implementations.

    python -m bench cost --out bench_out/cost.json [--data locomo.json] [--llm fake|configured]

Runs `MemoryAgent.close_session` over a user's sessions and `MemoryAgent.reply`
for each strategy, and reads the calls from the agent's own traces. By default
the LLM is a stand-in that answers each step (by its purpose) with a valid answer
of the expected shape (token counts with tiktoken), so the counts are exact and
the run takes seconds; `--llm configured` uses the configured endpoint.

Official call patterns, counted on the same run:
* THEANINE (kimnamssya/Theanine): per session close, one summarisation call and
  one relation call per candidate pair; per reply, one refinement call per
  retrieved timeline and one reply call.
* SeCom (microsoft/SeCom): per session close, one segmentation call (LLMLingua-2
  compression is a small token classifier, not an LLM call); per reply, one
  reply call.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np

from memory import locomo_format as lf
from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.llm import Completion
from memory.records import SessionRecord, Turn
from memory.settings import Options, Settings
from memory.tokens import count_tokens
from memory.trace import Trace

from . import common
from .common import progress

STRATEGIES = ("theanine", "secom", "none")


class StandInLLM:
    """A deterministic stand-in for an LLM (`--llm fake`): a valid answer of the expected shape for each
    step, chosen by the call's `purpose` (the numbers it needs, such as how many pairs or timelines, are
    read from the prompt's numbered lines). Prompt and completion tokens are counted by tiktoken
    (cl100k), so the counts the agent's traces record are exact."""

    def _answer(self, purpose: str, messages: list[dict]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in messages)
        if purpose == "relation":  # one pair per call
            return json.dumps({"relation": "SameTopic"})
        if purpose == "refine":
            n = len(re.findall(r"^Timeline \d+:", text, re.M))
            return json.dumps({"timelines": [f"Refined timeline {i}: what matters for the reply." for i in range(n)]})
        if purpose == "segment":
            n = len(re.findall(r"^\[Exchange \d+\]:", text, re.M))
            segs: list[dict] = []
            s = 0
            while s < n:
                e = min(n - 1, s + 2)
                segs.append(
                    {
                        "segment_id": len(segs),
                        "start_exchange_number": s,
                        "end_exchange_number": e,
                        "num_exchanges": e - s + 1,
                        "summary": f"topic {len(segs)}",
                    }
                )
                s = e + 1
            return json.dumps({"segments": segs})
        if purpose == "summarise":
            turns = re.findall(r"^\[(\d+)\] ([^:\n]+): (.*)$", text, re.M)
            mems = [
                {"speaker": sp, "event": f"{sp} said {' '.join(body.split()[:12])}", "turns": [int(i)]}
                for i, sp, body in turns
                if len(body.split()) >= 4
            ][:12]
            return json.dumps({"memories": mems or [{"speaker": "user", "event": "The user chatted.", "turns": [0]}]})
        return "Thanks for telling me; I remember what you said last time."

    @staticmethod
    def _tokens(messages: list[dict], answer: str) -> tuple[int, int]:
        return sum(count_tokens(str(m.get("content", ""))) for m in messages), count_tokens(answer)

    def chat(self, messages, *, temperature, max_tokens, json_schema=None, purpose="") -> Completion:
        a = self._answer(purpose, messages)
        return Completion(a, *self._tokens(messages, a))

    def stream(self, messages, *, temperature, max_tokens, seed=None, purpose="") -> Iterator[str]:
        a = self._answer(purpose, messages)
        for i in range(0, len(a), 8):
            yield a[i : i + 8]


def make_agent(
    settings: Settings,
    data_dir: Path,
    embedder,
    llm_instance=None,
    llm_segmenter: bool = True,
    compressor=None,
    compressor_note: str = "",
):
    """The engine's MemoryAgent over embedded Chroma in `data_dir`, with the given LLM and embedder."""
    from memory.secom.segmentation import make_segmenter
    from memory.secom.strategy import SecomMemory
    from memory.store import ChromaStore

    store = ChromaStore(path=Path(data_dir) / "chroma")
    segmenter = make_segmenter("llm" if llm_segmenter else "embedding", embedder)
    secom = SecomMemory(store, embedder, compressor, compressor_note or "compression off in this benchmark", segmenter)
    from memory.agent import MemoryAgent

    factory = (lambda cfg: llm_instance) if llm_instance is not None else None  # one LLM given, injected
    settings = replace(settings, llm_steps="on")  # the cost of the papers' LLM steps is what is measured
    return MemoryAgent.from_parts(settings, store, embedder, llm_factory=factory, secom=secom)


def synthetic_sessions(n_sessions: int = 4, turns: int = 12, seed: int = 0) -> list[SessionRecord]:
    import random

    rng = random.Random(seed)
    topics = [
        (
            "puppy",
            [
                "walked my puppy Biscuit in the park",
                "Biscuit chewed my running shoes",
                "took Biscuit to the vet for shots",
                "Biscuit learned to sit",
            ],
        ),
        (
            "pottery",
            [
                "started pottery classes on Tuesdays",
                "my first bowl was lopsided",
                "glazed a blue vase at the studio",
                "the kiln cracked my mug",
            ],
        ),
        (
            "job",
            [
                "had an interview at the bakery",
                "got the bakery job",
                "my manager praised my bread",
                "asked for a raise at the bakery",
            ],
        ),
        (
            "trip",
            [
                "planned a hiking trip to the coast",
                "booked a cabin for the trip",
                "the hike was rained out",
                "saw seals on the coast hike",
            ],
        ),
    ]
    out = []
    for s in range(n_sessions):
        ts = []
        for i in range(turns // 2):
            name, events = topics[(s + i // 2) % len(topics)]
            ts.append(Turn("user", f"Today I {rng.choice(events)}, it was quite something.", f"s{s}:{2 * i}"))
            ts.append(
                Turn("assistant", f"That sounds like a lot about your {name}. Tell me more.", f"s{s}:{2 * i + 1}")
            )
        out.append(SessionRecord(f"s{s}", f"2023-0{1 + s % 9}-1{s % 10}", ts))
    return out


def run(
    agent,
    sessions: list[SessionRecord],
    questions: list[str],
    strategies=STRATEGIES,
    user: str = "cost-user",
    options: Options | None = None,
) -> dict:
    opts = options or Options()
    closes = []
    for s in sessions:
        rep = agent.close_session(user, s, opts)
        closes.append(_calls(rep.trace))
        progress(f"closed {s.session_id}: {closes[-1]['calls']} LLM calls, {closes[-1]['tokens']} tokens")
    out: dict = {"close": _summary(closes), "close_each": closes, "replies": {}}
    for strat in strategies:
        rows = []
        for q in questions:
            trace = Trace(strat, error="no answer")
            for ev in agent.reply(user, [], q, "2024-01-01", opts.with_(strategy=strat)):
                if ev.kind == "done" and ev.trace is not None:
                    trace = ev.trace
            row = _calls(trace)
            row["timelines"] = len(trace.timelines_raw)
            row["segments"] = len(trace.segments)
            row["error"] = trace.error
            rows.append(row)
        out["replies"][strat] = {
            **_summary(rows),
            "timelines_per_reply": _avg(r["timelines"] for r in rows),
            "errors": sum(1 for r in rows if r["error"]),
        }
        progress(f"{strat}: {out['replies'][strat]['calls_per_op']} LLM calls per reply")
    return out


def _calls(trace: Trace) -> dict:
    by = Counter(c.purpose for c in trace.llm_calls)
    return {
        "calls": len(trace.llm_calls),
        "tokens": trace.tokens,
        "prompt_tokens": sum(c.prompt_tokens for c in trace.llm_calls),
        "completion_tokens": sum(c.completion_tokens for c in trace.llm_calls),
        "by_purpose": dict(by),
        "relation_pairs": trace.counts.get("relation_pairs", 0),
        "seconds": round(trace.timings.get("total", 0.0), 3),
    }


def _avg(xs) -> float:
    xs = list(xs)
    return round(float(np.mean(xs)), 2) if xs else 0.0


def _summary(rows: list[dict]) -> dict:
    purposes = sorted({p for r in rows for p in r["by_purpose"]})
    return {
        "n": len(rows),
        "calls_per_op": _avg(r["calls"] for r in rows),
        "max_calls": max((r["calls"] for r in rows), default=0),
        "tokens_per_op": _avg(r["tokens"] for r in rows),
        "prompt_tokens_per_op": _avg(r["prompt_tokens"] for r in rows),
        "completion_tokens_per_op": _avg(r["completion_tokens"] for r in rows),
        "by_purpose": {p: _avg(r["by_purpose"].get(p, 0) for r in rows) for p in purposes},
        "seconds_per_op": _avg(r["seconds"] for r in rows),
    }


def official(result: dict, options: Options) -> dict:
    """The official implementations' calls for the same sessions and replies (THEANINE's official code
    makes one relation call per candidate pair: the pairs each close's trace counted)."""
    n_close = len(result["close_each"])
    pairs_per_close = [c["relation_pairs"] for c in result["close_each"]]
    th = result["replies"].get("theanine", {})
    return {
        "theanine": {
            "close_calls_per_op": _avg(1 + p for p in pairs_per_close),
            "reply_calls_per_op": round(th.get("timelines_per_reply", options.k * options.n) + 1, 2),
            "pattern": "1 summarise + 1 relation call per candidate pair per close; "
            "1 refine call per timeline + 1 reply per reply",
        },
        "secom": {
            "close_calls_per_op": 1.0 if n_close else 0.0,
            "reply_calls_per_op": 1.0,
            "pattern": "1 segmentation call per close (LLMLingua-2 is not an LLM call); 1 reply per reply",
        },
    }


CLOSE_PURPOSES = {"theanine": ("summarise", "relation"), "secom": ("segment",)}


def close_calls(out: dict, strategy: str) -> float:
    """LLM calls per session close that build this strategy's memory (a close builds both)."""
    by = out["ours"]["close"]["by_purpose"]
    return round(sum(by.get(p, 0.0) for p in CLOSE_PURPOSES.get(strategy, ())), 2)


def cost_bars(out: dict) -> tuple[list[str], dict[str, list[float]]]:
    labels, ours, official = [], [], []
    for s in ("theanine", "secom"):
        if s in out["ours"]["replies"]:
            labels.append(f"{s} reply")
            ours.append(out["ours"]["replies"][s]["calls_per_op"])
            official.append(out["official"][s]["reply_calls_per_op"])
    for s in ("theanine", "secom"):
        labels.append(f"{s} close")
        ours.append(close_calls(out, s))
        official.append(out["official"][s]["close_calls_per_op"])
    return labels, {"this engine": ours, "official code": official}


def cost_table(out: dict) -> str:
    lines = [
        "| strategy | calls / reply | tokens / reply | official calls / reply | calls / close "
        "| official calls / close |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s, r in out["ours"]["replies"].items():
        off = out["official"].get(s, {})
        lines.append(
            f"| {s} | {r['calls_per_op']} | {r['tokens_per_op']} | {off.get('reply_calls_per_op', '-')} | "
            f"{close_calls(out, s) if s in CLOSE_PURPOSES else '-'} | {off.get('close_calls_per_op', '-')} |"
        )
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = common.parser("cost", __doc__.split("\n\n")[0], "bench_out/cost.json")
    p.add_argument(
        "--data",
        default=None,
        help="a LoCoMo-format file: its first conversation's sessions and questions (default: a small synthetic user)",
    )
    p.add_argument("--sessions", type=int, default=4, help="sessions to close (default 4)")
    p.add_argument("--questions", type=int, default=10, help="replies per strategy (default 10)")
    p.add_argument(
        "--llm",
        choices=("fake", "configured"),
        default="fake",
        help="fake: a stand-in answering each step (exact counts, seconds); configured: the configured endpoint",
    )
    p.add_argument("--embedder", choices=("minilm", "openai"), default="minilm")
    args = p.parse_args(argv)

    from memory.embeddings import make_embedder

    settings = Settings.from_env()
    options = settings.options.with_(seed=args.seed)
    embedder = make_embedder(
        args.embedder, api_key=settings.llm.api_key, base_url=settings.llm.base_url, model=settings.embed_model
    )
    if args.data:
        data = json.loads(Path(args.data).read_text(encoding="utf-8"))
        sample = data[0] if isinstance(data, list) else data
        sessions = lf.load_sessions(sample)[0][1][: args.sessions]
        questions = [q.question for q in lf.questions(sample)][: args.questions]
    else:
        sessions = synthetic_sessions(args.sessions, seed=args.seed)
        questions = [
            "What did my puppy chew?",
            "How are the pottery classes going?",
            "Did I get the bakery job?",
            "Where did I go hiking?",
        ] * ((args.questions + 3) // 4)
        questions = questions[: args.questions]
    from memory.llm import LLM, make_llm

    llm: LLM = StandInLLM() if args.llm == "fake" else make_llm(settings.llm)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-cost-") as tmp:
        agent = make_agent(settings, Path(tmp), embedder, llm_instance=llm)
        ours = run(agent, sessions, questions, options=options)
    out = {
        "ours": ours,
        "official": official(ours, options),
        "config": {
            "llm": "stand-in (valid answers by purpose, tiktoken counts)"
            if args.llm == "fake"
            else settings.llm.describe(),
            "sessions": len(sessions),
            "questions": len(questions),
            "seed": args.seed,
            "j": options.j,
            "k": options.k,
            "n": options.n,
            "segmenter": "llm",
            "data": args.data or "synthetic",
            "seconds": round(time.perf_counter() - t0, 1),
            "machine": machine(),
        },
    }
    atomic_write_json(args.out, out)
    from .plots import plot_bars

    png = plot_bars(
        *cost_bars(out), common.plot_path(args.out, "calls"), "LLM calls per reply and per session close", "LLM calls"
    )
    print(cost_table(out))
    progress(f"wrote {args.out} and {png}")
    return 0
