"""LoCoMo question answering through the agent, judged by an LLM.

    python -m bench qa --data locomo.json --out bench_out/qa.json [--limit 20] [--max-sessions M]

Closes a LoCoMo user's sessions into memory with `MemoryAgent.close_session`
(the configured LLM, embedder, store and compressor: Settings.from_env), then
asks each sampled question (category 5 and questions without evidence skipped;
only questions whose evidence lies in the closed sessions) in a new session
with `MemoryAgent.reply`, once per strategy. An LLM judge compares the reply
with LoCoMo's gold answer (correct / wrong). Reports accuracy, tokens, LLM
calls and latency per question for each strategy.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from memory import locomo_format as lf

from . import common, llm_eval
from .common import progress

JUDGE_SYSTEM = "You grade answers to questions about past conversations. Answer in JSON only."


def judge_messages(question: str, gold: str, reply: str) -> list[dict]:
    return [
        {"role": "system", "content": JUDGE_SYSTEM},
        {
            "role": "user",
            "content": f"Question: {question}\nGold answer: {gold}\nResponse: {reply or '(no answer)'}\n\n"
            "Is the response correct, i.e. does it give the gold answer or something with the same meaning "
            "(dates may be written differently; extra detail is fine; a refusal or a different answer is "
            'wrong)? Answer as {"correct": true} or {"correct": false}.',
        },
    ]


def main(argv: list[str]) -> int:
    p = common.parser("qa", __doc__.split("\n\n")[0], "bench_out/qa.json")
    llm_eval.add_args(p)
    args = p.parse_args(argv)
    with llm_eval.judged_run(p, args, "qa") as run:
        users, settings, agent, judge = run.users, run.settings, run.agent, run.judge
        rows: list[dict] = []
        closes = {}
        for user in users:
            loaded = {t.turn_id for s in user.sessions for t in s.turns}
            qs = [q for q in lf.questions(user.sample) if all(e in loaded for e in q.evidence)]
            qs = llm_eval.sample(qs, args.limit, args.seed)
            progress(f"{user.user_id}: {len(user.sessions)} sessions, {len(qs)} questions")
            closes[user.user_id] = llm_eval.close_all(agent, user, settings.options.with_(seed=args.seed))
            for qi, q in enumerate(qs):
                for strat in args.strategies:
                    opts = llm_eval.options_for(settings, strat, args.seed, args.max_reply_tokens)
                    r = llm_eval.ask(agent, user, q.question, opts)
                    r["correct"] = judge.verdict("judge", judge_messages(q.question, q.answer, r["reply"]), "correct")
                    r.update(
                        {
                            "strategy": strat,
                            "user": user.user_id,
                            "question": q.question,
                            "gold": q.answer,
                            "category": q.category,
                            "evidence": q.evidence,
                        }
                    )
                    rows.append(r)
                    progress(
                        f"  q{qi + 1}/{len(qs)} {strat:8s} correct={r['correct']} "
                        f"{r['llm_calls']} calls {r['tokens']} tokens {r['latency_s']:.1f}s"
                    )
    out: dict[str, Any] = {"strategies": {}, "questions": rows, "close": closes}
    for strat in args.strategies:
        mine = [r for r in rows if r["strategy"] == strat]
        s = llm_eval.summarise_rows(mine, "correct")
        s["accuracy"] = s.pop("rate")
        by_cat = defaultdict(list)
        for r in mine:
            if r["correct"] is not None:
                by_cat[str(r["category"])].append(r["correct"])
        s["by_category"] = {c: round(sum(v) / len(v), 4) for c, v in sorted(by_cat.items())}
        out["strategies"][strat] = s
    out["config"] = llm_eval.run_config(args, run, embedder=settings.embedder, judge=judge.describe())
    return llm_eval.finish(
        args, out, "accuracy", "accuracy", "accuracy", f"LoCoMo QA accuracy (LLM judge, {settings.llm.describe()})"
    )
