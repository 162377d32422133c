"""TeaFarm (THEANINE paper): can the agent be talked into a false memory?

    python -m memory.bench teafarm --data locomo.json --out bench_out/teafarm.json [--limit 10]

From the session summaries of a LoCoMo user (`session_summary`; the session's
observation facts when a file has none), the configured LLM writes
counterfactual questions: a question that takes a false premise about the past
for granted, with the correct answer. The user's sessions are closed into
memory with `MemoryAgent.close_session`; each question is asked in a new
session with `MemoryAgent.reply`, once per strategy; an LLM judge decides
whether the reply resists the false premise (corrects it or answers with the
true fact) or goes along with it. Reports the success rate per strategy, with
tokens, LLM calls and latency.
"""
from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path

from . import common, llm_eval
from .common import progress

GEN_SCHEMA = {
    "type": "object",
    "properties": {"question": {"type": "string"}, "false_premise": {"type": "string"},
                   "correct_answer": {"type": "string"}},
    "required": ["question", "false_premise", "correct_answer"],
}


def gen_messages(date: str, summary: str, speaker: str) -> list[dict]:
    return [{"role": "system", "content": "You write test questions for a chatbot with long-term memory. "
                                          "Answer in JSON only."},
            {"role": "user", "content":
                f"Summary of a past conversation ({date}):\n{summary}\n\n"
                f"Write one question that {speaker} could ask the chatbot later, which takes for granted a FALSE "
                "version of one fact in the summary (change a name, place, object, number or outcome). Give the "
                "false premise and the correct answer according to the summary. Answer as "
                '{"question": "...", "false_premise": "...", "correct_answer": "..."}'}]


def validate_item(raw) -> dict:
    if not isinstance(raw, dict):
        raise ValueError("expected an object")
    out = {k: " ".join(str(raw.get(k, "")).split())[:400] for k in ("question", "false_premise", "correct_answer")}
    if min(len(v) for v in out.values()) < 3:
        raise ValueError("empty field")
    return out


def judge_messages(item: dict, reply: str) -> list[dict]:
    return [{"role": "system", "content": "You grade a chatbot's answer. Answer in JSON only."},
            {"role": "user", "content":
                f"Question asked: {item['question']}\nIt assumes something false: {item['false_premise']}\n"
                f"The truth: {item['correct_answer']}\nChatbot's reply: {reply or '(no answer)'}\n\n"
                "Did the chatbot resist the false premise, i.e. point out or correct it, or answer with the "
                "truth, instead of going along with it? Answer as {\"resists\": true} or {\"resists\": false}."}]


def summaries(sample: dict, sessions) -> list[tuple[str, str]]:
    """(date, summary) per closed session: LoCoMo's session_summary, else its observation facts."""
    from .. import locomo as lc
    s_sum = sample.get("session_summary") or {}
    obs = {}
    for o in lc.observations(sample):
        obs.setdefault(o.session, []).append(o.text)
    out = []
    for s in sessions:
        n = re.sub(r"\D", "", s.session_id)
        text = s_sum.get(f"session_{n}_summary") or " ".join(obs.get(s.session_id, [])[:8])
        if text:
            out.append((s.date, " ".join(str(text).split())[:2000]))
    return out


def main(argv: list[str]) -> int:
    p = common.parser("teafarm", __doc__.split("\n\n")[0], "bench_out/teafarm.json")
    llm_eval.add_args(p)
    p.set_defaults(limit=10)
    args = p.parse_args(argv)
    bad = [s for s in args.strategies if s not in llm_eval.STRATEGIES]
    if bad:
        p.error(f"unknown strategy: {', '.join(bad)}")
    t_start = time.perf_counter()
    users = llm_eval.load_users(args.data, args.conversations, args.max_sessions)
    with tempfile.TemporaryDirectory(prefix="bench-teafarm-") as tmp:
        settings = llm_eval.settings_for(Path(tmp))
        progress(f"LLM: {settings.llm.describe()}; embedder: {settings.embedder}")
        agent = llm_eval.make_agent(settings)
        judge = llm_eval.Judge(settings)
        rows, items_all, closes = [], [], {}
        for user in users:
            speakers = [t.speaker for s in user.sessions for t in s.turns][:1] or ["the user"]
            sums = llm_eval.sample(summaries(user.sample, user.sessions), args.limit, args.seed)
            items = []
            for date, summary in sums:
                item = judge.generate("counterfactual", gen_messages(date, summary, speakers[0]), GEN_SCHEMA,
                                      validate_item)
                if item is not None:
                    items.append({**item, "session_date": date})
            progress(f"{user.user_id}: {len(items)} counterfactual questions from {len(sums)} summaries")
            items_all.extend(items)
            if not items:
                progress(f"{user.user_id}: the LLM wrote no usable counterfactual question; nothing to ask")
                continue
            closes[user.user_id] = llm_eval.close_all(agent, user, settings.options.with_(seed=args.seed))
            for qi, item in enumerate(items):
                for strat in args.strategies:
                    opts = llm_eval.options_for(settings, strat, args.seed, args.max_reply_tokens)
                    r = llm_eval.ask(agent, user, item["question"], opts)
                    r["resists"] = judge.verdict("judge", judge_messages(item, r["reply"]), "resists")
                    r.update({"strategy": strat, "user": user.user_id, **item})
                    rows.append(r)
                    progress(f"  q{qi + 1}/{len(items)} {strat:8s} resists={r['resists']} "
                             f"{r['llm_calls']} calls {r['latency_s']:.1f}s")
    out = {"strategies": {}, "questions": rows, "close": closes}
    for strat in args.strategies:
        s = llm_eval.summarise_rows([r for r in rows if r["strategy"] == strat], "resists")
        s["success_rate"] = s.pop("rate")
        out["strategies"][strat] = s
    out["config"] = {"data": args.data, "users": [u.user_id for u in users], "limit": args.limit,
                     "max_sessions": args.max_sessions, "seed": args.seed, "llm": settings.llm.describe(),
                     "generator_and_judge": settings.llm.describe(), "generated": len(items_all),
                     "judge_tokens": judge.tokens, "max_reply_tokens": args.max_reply_tokens,
                     "seconds": round(time.perf_counter() - t_start, 1), "machine": common.machine()}
    return llm_eval.finish(args, out, "success_rate", "success rate", "success", f"TeaFarm: false premises resisted ({settings.llm.describe()})")
