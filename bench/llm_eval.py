"""What `qa` and `teafarm` share: a MemoryAgent on the configured providers in a scratch folder,
a LoCoMo user's sessions closed into memory, replies with their cost, and an LLM judge."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memory import locomo_format as lf
from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.llm import LLMSession, make_llm
from memory.records import SessionRecord
from memory.settings import LLMConfig, Options, Settings
from memory.trace import Trace

from . import common
from .common import progress

STRATEGIES = ("theanine", "secom", "none")


def add_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="a file in LoCoMo's format")
    p.add_argument("--limit", type=int, default=20, help="questions to ask (default 20; 2 for a plumbing check)")
    p.add_argument(
        "--conversations", type=common.str_list, default=None, help="sample ids to use (default: the first in the file)"
    )
    p.add_argument(
        "--max-sessions", type=int, default=0, help="close only the first M sessions of each conversation (0 = all)"
    )
    p.add_argument(
        "--strategies", type=common.str_list, default=list(STRATEGIES), help=f"subset of {','.join(STRATEGIES)}"
    )
    p.add_argument("--max-reply-tokens", type=int, default=128, help="reply length cap (default 128)")
    p.add_argument(
        "--judge-model",
        default=os.environ.get("JUDGE_MODEL", ""),
        help="generator and judge model (default: JUDGE_MODEL when set, else the agent's configured model)",
    )
    p.add_argument(
        "--judge-base-url",
        default=os.environ.get("JUDGE_BASE_URL", ""),
        help="generator and judge OpenAI-compatible endpoint (default: JUDGE_BASE_URL when set, else the "
        "agent's); its key is JUDGE_API_KEY, else OPENAI_API_KEY",
    )


def judge_config(settings: Settings, args) -> LLMConfig:
    """The generator / judge LLM: the agent's, with the model and endpoint the arguments name."""
    cfg = settings.llm
    model, url = getattr(args, "judge_model", ""), getattr(args, "judge_base_url", "")
    if not (model or url):
        return cfg
    return dataclasses.replace(
        cfg,
        backend="openai",
        model=model or cfg.model,
        base_url=url or cfg.base_url,
        api_key=os.environ.get("JUDGE_API_KEY") or cfg.api_key,
    )


def settings_for(data_dir: Path) -> Settings:
    """The configured settings (environment / .env), with memory kept in a scratch folder."""
    return dataclasses.replace(Settings.from_env(), data_dir=Path(data_dir))


def make_agent(settings: Settings):
    from memory.agent import MemoryAgent

    return MemoryAgent.from_settings(settings)


@dataclasses.dataclass
class User:
    user_id: str
    sample: dict
    sessions: list[SessionRecord]
    next_date: str
    persona: str = ""  # who the agent is and who it talks with (`persona`), told in every reply


def roles(sessions: list[SessionRecord]) -> tuple[str, str] | None:
    """(user, agent) as the app's import reads a LoCoMo history: the first speaker is the user, the
    other the agent; None with fewer than two speakers."""
    names = list(dict.fromkeys(t.speaker for s in sessions for t in s.turns))
    return (names[0], names[1]) if len(names) >= 2 else None


def persona(sessions: list[SessionRecord]) -> str:
    """Who is who (`roles`): without it the agent does not know which of the two names in its memory
    is its own."""
    who = roles(sessions)
    if who is None:
        return ""
    return f"In these conversations you are {who[1]} and the person you talk with is {who[0]}."


def load_users(path: str, only: list[str] | None, max_sessions: int) -> list[User]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    samples = data if isinstance(data, list) else [data]
    if only:
        samples = [s for s in samples if str(s.get("sample_id")) in only]
        if not samples:
            raise SystemExit(f"no conversation {', '.join(only)} in {path}")
    else:
        samples = samples[:1]
    out = []
    for s in samples:
        sid, sessions = lf.load_sessions(s)[0]
        if max_sessions:
            sessions = sessions[:max_sessions]
        out.append(User(f"bench-{sid}", s, sessions, _after(sessions[-1].date) if sessions else "", persona(sessions)))
    return out


def _after(date: str) -> str:
    """A date string for "the next conversation": the day after the last session, when it parses."""
    from datetime import datetime, timedelta

    from memory.dates import iso_key

    iso = iso_key(date)
    if not iso:
        return date
    return (datetime.fromisoformat(iso) + timedelta(days=1)).strftime("%d %B, %Y")


def close_all(agent, user: User, options: Options) -> dict:
    calls, tokens, seconds = 0, 0, 0.0
    for i, s in enumerate(user.sessions):
        t0 = time.perf_counter()
        rep = agent.close_session(user.user_id, s, options)
        seconds += time.perf_counter() - t0
        calls += len(rep.trace.llm_calls)
        tokens += rep.trace.tokens
        progress(
            f"{user.user_id}: closed {s.session_id} ({i + 1}/{len(user.sessions)}): "
            f"{len(rep.new_memories)} memories, {len(rep.new_segments)} segments, "
            f"{len(rep.trace.llm_calls)} LLM calls, {time.perf_counter() - t0:.1f}s"
        )
    n = max(1, len(user.sessions))
    return {
        "sessions": len(user.sessions),
        "llm_calls_per_close": round(calls / n, 2),
        "tokens_per_close": round(tokens / n, 1),
        "seconds_per_close": round(seconds / n, 2),
    }


def ask(agent, user: User, question: str, options: Options, hint: str = "", history: list | None = None) -> dict:
    """One reply in a new session (after `history`, its earlier turns); its text, cost and latency from
    the agent's trace. The system prompt says which speaker the agent is (`User.persona`)."""
    t0 = time.perf_counter()
    first = None
    text, trace = "", Trace("none")
    hint = " ".join(x for x in (user.persona, hint) if x)
    for ev in agent.reply(user.user_id, history or [], question, user.next_date, options, hint=hint):
        if ev.kind == "delta" and first is None:
            first = time.perf_counter() - t0
        if ev.kind == "done":
            text, trace = ev.text, ev.trace
    latency = time.perf_counter() - t0
    return {
        "reply": text,
        "latency_s": round(latency, 3),
        "first_token_s": round(first, 3) if first is not None else None,
        "llm_calls": len(trace.llm_calls),
        "tokens": trace.tokens,
        "prompt_tokens": sum(c.prompt_tokens for c in trace.llm_calls),
        "completion_tokens": sum(c.completion_tokens for c in trace.llm_calls),
        "retrieved": len(trace.timelines_raw) or len(trace.segments),
        "error": trace.error,
    }


class Judge:
    """An LLM asked for one JSON verdict; a bad or missing answer gives None (counted as unjudged)."""

    def __init__(self, settings: Settings, llm=None, cfg: LLMConfig | None = None):
        self.cfg = cfg or settings.llm
        self.llm = llm if llm is not None else make_llm(self.cfg)
        self.trace = Trace("judge")
        self.session = LLMSession(self.llm, self.trace, temperature=0.0, max_retries=settings.llm.max_retries)

    def verdict(self, purpose: str, messages: list[dict], key: str) -> bool | None:
        schema = {
            "type": "object",
            "properties": {key: {"type": "boolean"}, "reason": {"type": "string"}},
            "required": [key],
        }

        def validate(raw: Any) -> bool:
            v = raw.get(key) if isinstance(raw, dict) else None
            if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no"):
                return v.strip().lower() in ("true", "yes")
            if not isinstance(v, bool):
                raise ValueError(f"expected a boolean {key!r}")
            return v

        return self.session.json(purpose, messages, schema, validate, lambda: None, max_tokens=96)

    def verdicts(self, purpose: str, messages: list[dict], keys: tuple[str, ...]) -> dict | None:
        """Several boolean verdicts in one answer ({key: bool}); None when the answer is unusable."""
        schema = {
            "type": "object",
            "properties": {**{k: {"type": "boolean"} for k in keys}, "reason": {"type": "string"}},
            "required": list(keys),
        }

        def validate(raw: Any) -> dict:
            out = {}
            for key in keys:
                v = raw.get(key) if isinstance(raw, dict) else None
                if isinstance(v, str) and v.strip().lower() in ("true", "false", "yes", "no"):
                    v = v.strip().lower() in ("true", "yes")
                if not isinstance(v, bool):
                    raise ValueError(f"expected a boolean {key!r}")
                out[key] = v
            return out

        return self.session.json(purpose, messages, schema, validate, lambda: None, max_tokens=128)

    def describe(self) -> str:
        return self.cfg.describe()

    def generate(
        self, purpose: str, messages: list[dict], schema: dict, validate: Callable[[Any], Any], max_tokens: int = 256
    ):
        return self.session.json(purpose, messages, schema, validate, lambda: None, max_tokens=max_tokens)

    @property
    def tokens(self) -> int:
        return self.trace.tokens


@dataclasses.dataclass
class JudgedRun:
    """What every judged benchmark works with: the users, the settings, the agent under test, the judge."""

    users: list[User]
    settings: Settings
    agent: Any
    judge: Judge
    started: float


@contextlib.contextmanager
def judged_run(p: argparse.ArgumentParser, args, name: str) -> Iterator[JudgedRun]:
    """Check the strategies, load the users and set up the agent (in a scratch folder) and the judge."""
    bad = [s for s in args.strategies if s not in STRATEGIES]
    if bad:
        p.error(f"unknown strategy: {', '.join(bad)}")
    started = time.perf_counter()
    users = load_users(args.data, args.conversations, args.max_sessions)
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        settings = settings_for(Path(tmp))
        progress(f"LLM: {settings.llm.describe()}; embedder: {settings.embedder}")
        judge = Judge(settings, cfg=judge_config(settings, args))
        yield JudgedRun(users, settings, make_agent(settings), judge, started)


def run_config(args, run: JudgedRun, **extra) -> dict:
    """The `config` block every judged benchmark writes: data, sampling, models, tokens, time, machine."""
    return {
        "data": args.data,
        "users": [u.user_id for u in run.users],
        "limit": args.limit,
        "max_sessions": args.max_sessions,
        "seed": args.seed,
        "llm": run.settings.llm.describe(),
        **extra,
        "judge_tokens": run.judge.tokens,
        "max_reply_tokens": args.max_reply_tokens,
        "seconds": round(time.perf_counter() - run.started, 1),
        "machine": machine(),
    }


def summarise_rows(rows: list[dict], flag: str) -> dict:
    judged = [r for r in rows if r.get(flag) is not None]
    lat = [r["latency_s"] for r in rows]
    return {
        "n": len(rows),
        "n_judged": len(judged),
        "rate": round(sum(1 for r in judged if r[flag]) / len(judged), 4) if judged else None,
        "tokens_per_question": round(sum(r["tokens"] for r in rows) / len(rows), 1) if rows else None,
        "llm_calls_per_reply": round(sum(r["llm_calls"] for r in rows) / len(rows), 2) if rows else None,
        "latency_s_p50": round(common.percentile(lat, 50), 2) if lat else None,
        "latency_s_p95": round(common.percentile(lat, 95), 2) if lat else None,
        "errors": sum(1 for r in rows if r.get("error")),
    }


def sample(items: list, limit: int, seed: int) -> list:
    if limit <= 0 or limit >= len(items):
        return list(items)
    rng = random.Random(seed)
    idx = sorted(rng.sample(range(len(items)), limit))
    return [items[i] for i in idx]


def options_for(settings: Settings, strategy: str, seed: int, max_reply_tokens: int) -> Options:
    return settings.options.with_(strategy=strategy, seed=seed, max_reply_tokens=max_reply_tokens)


def finish(args, out: dict, metric: str, label: str, plot_suffix: str, title: str) -> int:
    """Write OUT.json, the per-strategy bar plot and the table (shared by `qa` and `teafarm`)."""
    atomic_write_json(args.out, out)
    from .plots import plot_bars

    strategies = list(out["strategies"])
    png = plot_bars(
        strategies,
        {label: [out["strategies"][s][metric] or 0 for s in strategies]},
        common.plot_path(args.out, plot_suffix),
        title,
        label,
    )
    print(table(out, metric, label))
    if out.get("valid") is False:  # TeaFarm: judged by the agent's own or a bundled model
        print(f"\nNOT A VALID SCORE: {out.get('why', '')}")
    progress(f"wrote {args.out} and {png}")
    return 0


def table(out: dict, metric: str, label: str) -> str:
    lines = [
        f"| strategy | {label} | judged | tokens / question | LLM calls / reply | latency p50 (s) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for s, r in out["strategies"].items():
        lines.append(
            f"| {s} | {r[metric]} | {r['n_judged']}/{r['n']} | {r['tokens_per_question']} | "
            f"{r['llm_calls_per_reply']} | {r['latency_s_p50']} |"
        )
    return "\n".join(lines)
