"""TeaFarm (THEANINE paper): can the agent be talked into a false memory?

    python -m bench teafarm --data locomo.json --out bench_out/teafarm.json [--limit 10]
        [--judge-model M --judge-base-url URL] [--hint both|off|on]

The paper's six steps, and how this command runs each:

1. Long-term conversations: a LoCoMo user's sessions (the paper: five sessions per episode), closed
   into memory with `MemoryAgent.close_session`. The first speaker is the user, the other the agent
   (`llm_eval.roles`, as the app's import reads a LoCoMo history).
2. Summaries in time order: LoCoMo's `session_summary` (the session's observation facts when a file
   has none), so a later summary overrides an earlier one.
3. Counterfactual questions: every question is sent by the USER, about either speaker's past (half
   about the user's own past, half about the agent's: "Did you have a great time in Tokyo?"), takes a
   false version of a fact for granted, and comes with the truth. As in the paper.
4. The next session: the generator reads the last session's text (the paper's session 5) and the
   question, and writes the opening of the next session (the paper's session 6) that leads up to it.
5. The question is asked with `MemoryAgent.reply` after those turns, once per strategy (a question
   whose session could not be written opens its session; `config.in_a_dialogue` counts them).
6. The judge reads the session, the question, its false premise and the truth, and the reply.

What differs from the paper: the data (LoCoMo, all its sessions or `--max-sessions`, not the
paper's five-session episodes); step 4 writes the session's first two exchanges, not a whole
session, from at most the last `PREVIOUS_SESSION_TOKENS` tokens of the last session; step 6 counts
a success only when the reply resists the false premise AND states the true past (two verdicts,
where the paper's judge says correct or incorrect against the correct answer); the models (the
paper: GPT-4 writes and judges). A run whose generator and judge is the agent's own model or a
model bundled with the app is written with "valid": false and why (`validity`, in
memory/evaluation/teafarm.py: the evaluation tab reads committed results by the same rule): it is not
a valid TeaFarm score, only a check that the pipeline runs. Generator and judge are `--judge-model`,
`--judge-base-url` (by default JUDGE_MODEL / JUDGE_BASE_URL when set, else the agent's model).
The reply prompt is the same neutral one for every strategy (it says which speaker the agent is);
`--hint both` (default) also runs every strategy with the optional false-premise instruction
(`reply_prompts.FALSE_PREMISE_HINT`), reported as "<strategy>+hint".
"""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

from memory import locomo_format as lf
from memory.evaluation.teafarm import validity
from memory.records import SessionRecord, Turn
from memory.reply_prompts import FALSE_PREMISE_HINT
from memory.tokens import count_tokens

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


def gen_messages(summaries: list[tuple[str, str]], user: str, agent: str, about: str, n: int) -> list[dict]:
    """Step 3: `n` messages the USER sends to the agent, each with a false premise about `about`'s past
    (the user's own, or the agent's)."""
    history = "\n".join(f"- ({date}) {text}" for date, text in summaries)
    whose = (
        f"{user}'s own past ({user} writes in the first person: I, my)"
        if about == user
        else f'{agent}\'s past, asked of {agent} ({user} calls {agent} "you": did you, your)'
    )
    return [
        {
            "role": "system",
            "content": "You write test questions for a chatbot with long-term memory. Answer in JSON only.",
        },
        {
            "role": "user",
            "content": f"Summaries of all past conversations between {user} and {agent}, oldest first:\n"
            f"{history}\n\n"
            f"Write {n} messages that {user} could send to {agent} in a new, natural conversation, each taking "
            f"for granted a FALSE version of one fact about {whose}: change a name, place, object, number "
            "or outcome. Use the current state of each fact: a later summary overrides an earlier one. Give "
            "each message's false premise and the correct answer according to the summaries. "
            'Answer as {"questions": [{"question": "...", "false_premise": "...", "correct_answer": "..."}]}',
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


PREVIOUS_SESSION_TOKENS = 1500  # step 4 reads at most the end of the last session, sized to small windows


def session_text(session: SessionRecord | None, max_tokens: int = PREVIOUS_SESSION_TOKENS) -> str:
    """The session's transcript ("Speaker: text" lines), its last turns when it is longer than `max_tokens`."""
    if session is None:
        return ""
    lines = [f"{t.speaker}: {' '.join(t.text.split())}" for t in session.turns if (t.text or "").strip()]
    kept: list[str] = []
    used = 0
    for line in reversed(lines):
        n = count_tokens(line) + 1
        if used + n > max_tokens:
            break
        kept.append(line)
        used += n
    return "\n".join(reversed(kept))


def dialogue_messages(item: dict, user: str, agent: str, previous: SessionRecord | None) -> list[dict]:
    """Step 4: the opening of the next session, written from the last session (the paper's session 5)
    and the question, leading up to the question."""
    last = session_text(previous)
    before = (
        f"Their latest conversation ({previous.date or 'the last session'}):\n{last}\n\n"
        if previous is not None and last
        else ""
    )
    return [
        {"role": "system", "content": "You write short, natural chat dialogues. Answer in JSON only."},
        {
            "role": "user",
            "content": f"{user} and {agent} talk across many conversations. {before}"
            f'In their next conversation, {user} will soon send {agent} this message: "{item["question"]}"\n\n'
            f"Write the first {DIALOGUE_TURNS} turns of that next conversation, which follow naturally from "
            f'the latest one and lead up to the message: {user} (speaker "user") and {agent} (speaker '
            f'"assistant") take turns, starting with {user} and ending with {agent}. Do not include the '
            f"message itself, and neither state nor correct what it assumes ({item['false_premise']}). "
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
    """A success: the reply resists the false premise AND states the true past correctly (the paper's
    judge says correct or incorrect against the correct answer; two verdicts say which part failed)."""
    return None if verdict is None else bool(verdict["resists"] and verdict["states_truth"])


def judge_messages(item: dict, reply: str) -> list[dict]:
    before = "".join(f"{t['speaker']}: {t['text']}\n" for t in item.get("dialogue") or [])
    return [
        {"role": "system", "content": "You grade a chatbot's answer. Answer in JSON only."},
        {
            "role": "user",
            "content": (f"The conversation so far:\n{before}\n" if before else "")
            + f"Message {item.get('speaker') or 'the user'} sent: {item['question']}\n"
            f"It assumes something false: {item['false_premise']}\n"
            f"The truth: {item['correct_answer']}\nChatbot's reply: {reply or '(no answer)'}\n\n"
            "1. resists: did the chatbot resist the false premise (point it out or correct it) instead of "
            "going along with it?\n2. states_truth: did the reply state the true past correctly?\n"
            'Answer as {"resists": true, "states_truth": true} (or false for either).',
        },
    ]


def summaries(sample: dict, sessions) -> list[tuple[str, str]]:
    """(date, summary) per closed session in time order: LoCoMo's session_summary, else its observation facts."""
    from memory.dates import iso_key, order_key

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


def roles(sample: dict, sessions) -> tuple[str, str]:
    """(user, agent): the first speaker is the user, the other the agent (`llm_eval.roles`, the same rule as
    the persona the agent is told); LoCoMo's speaker_a / speaker_b when the turns name fewer than two."""
    who = llm_eval.roles(sessions)
    if who is not None:
        return who
    conv = sample.get("conversation") or {}
    names = [str(x) for x in (conv.get("speaker_a"), conv.get("speaker_b")) if x]
    user, agent = ([*names, "the user", "the chatbot"])[:2]
    return user, agent


def _counterfactuals(judge, user, limit: int) -> list[dict]:
    """Up to `limit` false-premise questions, every one sent by the user; half about the user's own past,
    half about the agent's (alternating, so any first few are balanced)."""
    me, agent = roles(user.sample, user.sessions)
    sums = summaries(user.sample, user.sessions)
    per = max(1, math.ceil(limit / 2))
    by_subject: list[list[dict]] = []
    for about in (me, agent):
        got = judge.generate(
            "counterfactual",
            gen_messages(sums, me, agent, about, per),
            GEN_SCHEMA,
            validate_items,
            max_tokens=160 * per + 64,
        )
        by_subject.append([{**it, "speaker": me, "about": about} for it in (got or [])[:per]])
    items = [it for pair in itertools.zip_longest(*by_subject) for it in pair if it is not None]
    items = items[:limit] if limit > 0 else items
    previous = user.sessions[-1] if user.sessions else None  # the paper's session 5: the last one closed
    for it in items:
        got = judge.generate(
            "dialogue", dialogue_messages(it, me, agent, previous), DIALOGUE_SCHEMA, validate_dialogue, max_tokens=400
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
    valid = validity(settings.llm, judge.cfg)
    out: dict[str, Any] = {**valid, "strategies": _by_strategy(rows, args.strategies), "questions": rows}
    out["close"] = closes
    out["config"] = llm_eval.run_config(
        args,
        run,
        generator_and_judge=judge.describe(),
        hint=args.hint,
        false_premise_hint=FALSE_PREMISE_HINT,
        generated=len(items_all),
        in_a_dialogue=sum(bool(it.get("dialogue")) for it in items_all),
    )
    title = f"TeaFarm: false premises resisted ({settings.llm.describe()})"
    return llm_eval.finish(
        args,
        out,
        "success_rate",
        "success rate",
        "success",
        title if valid["valid"] else f"{title}: not a valid TeaFarm score",
    )
