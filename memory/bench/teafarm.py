"""TeaFarm (THEANINE paper): can the agent be talked into a false memory?

    python -m memory.bench teafarm --data locomo.json --out bench_out/teafarm.json [--limit 10]
        [--judge-model M --judge-base-url URL] [--hint both|off|on]

As the paper runs it: the generator LLM reads all of a LoCoMo user's session
summaries in time order (`session_summary`; the session's observation facts
when a file has none), so it knows the current state of each fact, and writes
counterfactual questions from each speaker's perspective: an opening message
of a natural new conversation that takes a false version of a past fact for
granted, with the truth. Then (the paper's step 4) the generator writes the
start of the new dialogue session that leads up to each question, so the
question comes inside a conversation, not as its first words. The user's
sessions are closed into memory with `MemoryAgent.close_session`; each question
is asked with `MemoryAgent.reply` after its session's turns, once per strategy
(a question whose dialogue could not be written is asked as the opening
message, and the config counts them). The judge counts a success only when
the reply resists the false premise AND states the true past correctly.
Generator and judge may be another model than the agent's (`--judge-model`,
`--judge-base-url`; by default JUDGE_MODEL / JUDGE_BASE_URL when set). The
reply prompt is the same neutral one for every strategy (it says which speaker
the agent is); `--hint both` (default) also runs every strategy with the
optional false-premise instruction (`reply_prompts.FALSE_PREMISE_HINT`),
reported as "<strategy>+hint".
"""

from __future__ import annotations

import math
import re
from typing import Any

from .. import locomo_format as lf
from ..records import Turn
from ..reply_prompts import FALSE_PREMISE_HINT
from . import common, llm_eval
from .common import progress

GEN_SCHEMA = {
    "type": "object",
    "properties": {
        "questions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "question": {"type": "string"},
                    "false_premise": {"type": "string"},
                    "correct_answer": {"type": "string"},
                },
                "required": ["question", "false_premise", "correct_answer"],
            },
        }
    },
    "required": ["questions"],
}


def gen_messages(summaries: list[tuple[str, str]], speaker: str, other: str, n: int) -> list[dict]:
    history = "\n".join(f"- ({date}) {text}" for date, text in summaries)
    return [
        {
            "role": "system",
            "content": "You write test questions for a chatbot with long-term memory. Answer in JSON only.",
        },
        {
            "role": "user",
            "content": f"Summaries of all past conversations between {speaker} and {other}, oldest first:\n"
            f"{history}\n\n"
            f"Write {n} messages that {speaker} could send to open a new, natural conversation with the chatbot, "
            f"each taking for granted a FALSE version of one fact about {speaker}'s or {other}'s past (change "
            "a name, place, object, number or outcome). Use the current state of each fact: a later summary "
            "overrides an earlier one. Give each message's false premise and the correct answer according to "
            'the summaries. Answer as {"questions": [{"question": "...", "false_premise": "...", '
            '"correct_answer": "..."}]}',
        },
    ]


DIALOGUE_TURNS = 4  # two exchanges before the question
DIALOGUE_SCHEMA = {
    "type": "object",
    "properties": {
        "turns": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "speaker": {"type": "string", "enum": ["user", "assistant"]},
                    "text": {"type": "string"},
                },
                "required": ["speaker", "text"],
            },
        }
    },
    "required": ["turns"],
}


def dialogue_messages(item: dict, speaker: str) -> list[dict]:
    """Step 4: the opening of the new session that carries the question."""
    return [
        {"role": "system", "content": "You write short, natural chat dialogues. Answer in JSON only."},
        {
            "role": "user",
            "content": f'{speaker} will soon send this message to a chatbot: "{item["question"]}"\n\n'
            f"Write the first {DIALOGUE_TURNS} turns of that new conversation, which lead naturally to the "
            f'message: {speaker} (speaker "user") and the chatbot (speaker "assistant") take turns, starting '
            f"with {speaker} and ending with the chatbot. Do not include the message itself, and neither state "
            f"nor correct what it assumes ({item['false_premise']}). "
            'Answer as {"turns": [{"speaker": "user", "text": "..."}, {"speaker": "assistant", "text": "..."}]}',
        },
    ]


def validate_dialogue(raw) -> list[dict]:
    """The turns that alternate from a user turn and end with the chatbot's, at least one exchange."""
    turns = raw.get("turns") if isinstance(raw, dict) else raw
    if not isinstance(turns, list):
        raise ValueError("expected a list of turns")
    out: list[dict] = []
    for t in turns[: 2 * DIALOGUE_TURNS]:
        who = t.get("speaker") if isinstance(t, dict) else None
        text = " ".join(str(t.get("text", "")).split())[:600] if isinstance(t, dict) else ""
        if who != ("user" if len(out) % 2 == 0 else "assistant") or len(text) < 2:
            break
        out.append({"speaker": who, "text": text})
    out = out[: len(out) - len(out) % 2]
    if not out:
        raise ValueError("no exchange of a user turn and a chatbot turn")
    return out


def history_of(item: dict) -> list[Turn]:
    return [Turn(t["speaker"], t["text"], f"teafarm:{i}") for i, t in enumerate(item.get("dialogue") or [])]


def validate_item(raw) -> dict:
    if not isinstance(raw, dict):
        raise ValueError("expected an object")
    out = {k: " ".join(str(raw.get(k, "")).split())[:400] for k in ("question", "false_premise", "correct_answer")}
    if min(len(v) for v in out.values()) < 3:
        raise ValueError("empty field")
    return out


def validate_items(raw) -> list[dict]:
    items = raw.get("questions", [raw]) if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ValueError("expected a list of questions")
    out = []
    for it in items:
        try:
            out.append(validate_item(it))
        except ValueError:
            continue
    if not out:
        raise ValueError("no usable question")
    return out


JUDGE_KEYS = ("resists", "states_truth")


def success(verdict: dict | None) -> bool | None:
    """The paper's rule: the reply resists the false premise AND states the true past correctly."""
    return None if verdict is None else bool(verdict["resists"] and verdict["states_truth"])


def judge_messages(item: dict, reply: str) -> list[dict]:
    before = "".join(f"{t['speaker']}: {t['text']}\n" for t in item.get("dialogue") or [])
    return [
        {"role": "system", "content": "You grade a chatbot's answer. Answer in JSON only."},
        {
            "role": "user",
            "content": (f"The conversation so far:\n{before}\n" if before else "")
            + f"Message sent: {item['question']}\nIt assumes something false: {item['false_premise']}\n"
            f"The truth: {item['correct_answer']}\nChatbot's reply: {reply or '(no answer)'}\n\n"
            "1. resists: did the chatbot resist the false premise (point it out or correct it) instead of "
            "going along with it?\n2. states_truth: did the reply state the true past correctly?\n"
            'Answer as {"resists": true, "states_truth": true} (or false for either).',
        },
    ]


def summaries(sample: dict, sessions) -> list[tuple[str, str]]:
    """(date, summary) per closed session in time order: LoCoMo's session_summary, else its observation facts."""
    from ..dates import iso_key, order_key

    s_sum = sample.get("session_summary") or {}
    obs: dict[str, list[str]] = {}
    for o in lf.observations(sample):
        obs.setdefault(o.session, []).append(o.text)
    out = []
    for s in sessions:
        n = re.sub(r"\D", "", s.session_id)
        text = s_sum.get(f"session_{n}_summary") or " ".join(obs.get(s.session_id, []))
        if text:
            out.append((s.date, " ".join(str(text).split())[:2000], iso_key(s.date)))
    out.sort(key=lambda x: order_key(x[2]))
    return [(d, t) for d, t, _ in out]


def speakers(sample: dict, sessions) -> list[str]:
    conv = sample.get("conversation") or {}
    given = [conv.get("speaker_a"), conv.get("speaker_b")]
    names = [str(x) for x in given if x] or list(dict.fromkeys(t.speaker for s in sessions for t in s.turns))
    return ([*names, "the user", "the chatbot"])[:2]


def _counterfactuals(judge, user, limit: int) -> list[dict]:
    """Up to `limit` false-premise questions, half from each speaker's perspective."""
    who = speakers(user.sample, user.sessions)
    sums = summaries(user.sample, user.sessions)
    per = max(1, math.ceil(limit / 2))
    items: list[dict] = []
    for me, other in (who, who[::-1]):
        got = judge.generate(
            "counterfactual", gen_messages(sums, me, other, per), GEN_SCHEMA, validate_items, max_tokens=160 * per + 64
        )
        items += [{**it, "speaker": me} for it in (got or [])[:per]]
    items = items[:limit] if limit > 0 else items
    for it in items:
        got = judge.generate(
            "dialogue", dialogue_messages(it, it["speaker"]), DIALOGUE_SCHEMA, validate_dialogue, max_tokens=400
        )
        it["dialogue"] = got or []  # none: the question opens the session, as before step 4
    n_dia = sum(bool(it["dialogue"]) for it in items)
    progress(f"{user.user_id}: {len(items)} counterfactual questions from {len(sums)} summaries, {n_dia} in a dialogue")
    return items


def _ask_and_judge(agent, judge, user, item: dict, opts, hint: str) -> dict:
    """The agent's reply to one question, with the judge's verdicts and whether the premise was resisted."""
    r = llm_eval.ask(agent, user, item["question"], opts, hint=hint, history=history_of(item))
    v = judge.verdicts("judge", judge_messages(item, r["reply"]), JUDGE_KEYS)
    r.update(v or dict.fromkeys(JUDGE_KEYS))
    r.update({"success": success(v), "hint": bool(hint), "user": user.user_id, **item})
    return r


def _by_strategy(rows: list[dict], strategies: list[str]) -> dict:
    out = {}
    for strat in dict.fromkeys(r["strategy"] for r in rows) or strategies:
        mine = [r for r in rows if r["strategy"] == strat]
        s = llm_eval.summarise_rows(mine, "success")
        s["success_rate"] = s.pop("rate")
        s["resists_rate"] = llm_eval.summarise_rows(mine, "resists")["rate"]
        out[strat] = s
    return out


def main(argv: list[str]) -> int:
    p = common.parser("teafarm", __doc__.split("\n\n")[0], "bench_out/teafarm.json")
    llm_eval.add_args(p)
    p.add_argument(
        "--hint",
        choices=("both", "off", "on"),
        default="both",
        help="reply prompt without / with the false-premise instruction, or both (default)",
    )
    p.set_defaults(limit=10)
    args = p.parse_args(argv)
    with llm_eval.judged_run(p, args, "teafarm") as run:
        users, settings, agent, judge = run.users, run.settings, run.agent, run.judge
        rows, items_all, closes = [], [], {}
        hints = {"off": [""], "on": [FALSE_PREMISE_HINT], "both": ["", FALSE_PREMISE_HINT]}[args.hint]
        for user in users:
            items = _counterfactuals(judge, user, args.limit)
            items_all.extend(items)
            if not items:
                progress(f"{user.user_id}: the LLM wrote no usable counterfactual question; nothing to ask")
                continue
            closes[user.user_id] = llm_eval.close_all(agent, user, settings.options.with_(seed=args.seed))
            for qi, item in enumerate(items):
                for hint in hints:
                    for strat in args.strategies:
                        opts = llm_eval.options_for(settings, strat, args.seed, args.max_reply_tokens)
                        r = _ask_and_judge(agent, judge, user, item, opts, hint)
                        r["strategy"] = strat + ("+hint" if hint else "")
                        rows.append(r)
                        progress(
                            f"  q{qi + 1}/{len(items)} {r['strategy']:13s} success={r['success']} "
                            f"{r['llm_calls']} calls {r['latency_s']:.1f}s"
                        )
    out: dict[str, Any] = {"strategies": _by_strategy(rows, args.strategies), "questions": rows, "close": closes}
    out["config"] = llm_eval.run_config(
        args,
        run,
        generator_and_judge=judge.describe(),
        hint=args.hint,
        false_premise_hint=FALSE_PREMISE_HINT,
        generated=len(items_all),
        in_a_dialogue=sum(bool(it.get("dialogue")) for it in items_all),
    )
    return llm_eval.finish(
        args,
        out,
        "success_rate",
        "success rate",
        "success",
        f"TeaFarm: false premises resisted ({settings.llm.describe()})",
    )
