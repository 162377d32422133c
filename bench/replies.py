"""The answers benchmark that decides every reply default: right answers through the app's own path.

    python -m bench replies                                   # every set, the app as installed
    python -m bench replies --against bench_out/replies-before.json   # paired differences to a run
    MEMORY_BUDGET_BUNDLED=500 python -m bench replies --out bench_out/replies-500.json   # a candidate

A `SessionService` is built as app.py builds it (a scratch data dir, the installed settings: the
environment and .env, so a candidate is an environment variable as a user would set it). Each person's
history is imported through `import_history` (memory built as the app builds it; on the bundled model
no LLM step runs), then the questions are typed into a new chat session through `send`, `--group` per
session: the first is a session's first message, the others later messages with the dialogue before
them. An ended chat session is not built into memory (the next question must not read the chat).

Sets (`--sets`):
* locomo: `--per-conversation` questions of each LoCoMo conversation (single-hop, multi-hop and
  temporal, sampled with `--seed`); the first speaker is the user, as the app's import reads it.
* ku: the knowledge-update histories (bench.ku_histories): "which city do I live in?" after a move;
  right when the reply names the new value before (or without) the old one.
* personal: bench/data/personal_chats.json, four people over three sessions each, asked a week later
  about stated facts, changed facts (the new value, not the old) and the reasons they gave.
* chat: ordinary companion chat, not questions: `bench refusals`' small memory imported, then its
  60 messages typed `--group` to a session. Scored on refusals and parroting only (the chat columns):
  a prompt that answers questions better must not make the model say the person's message back.

Scores per reply: strict (every content word of a gold answer in the reply), LoCoMo's token F1,
refusal (memory.reply_prompts.is_refusal) and parroting (the reply repeats the message). Timings from
the reply's trace: first token (seconds from the message to the reply's first word, retrieval
included) and complete, each for a session's first message and for later ones.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.trace_types import TraceDict

from .common import parser, percentile, progress, str_list
from .reply_scores import Question, paired, parrots, score

if TYPE_CHECKING:
    from sessions.users import UserKey

ROOT = Path(__file__).resolve().parents[1]
PERSONAL = Path(__file__).resolve().parent / "data" / "personal_chats.json"
SETS = ("locomo", "ku", "personal", "chat")
LOCOMO_CATEGORIES = ("1", "2", "4")  # multi-hop, temporal, single-hop


@dataclasses.dataclass
class Person:
    """One user of the benchmark: a history to import and the questions asked after it."""

    name: str
    history: dict  # what import_history reads (the app's format or a LoCoMo sample)
    ask_date: str
    questions: list[Question]


def locomo_people(path: Path, per_conv: int, seed: int) -> list[Person]:
    from memory.evaluation.conversations import load_samples

    from .llm_eval import _after, sample

    raw = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for sample_json, conv in zip(raw, load_samples(raw, None), strict=True):
        qs = [q for q in conv.questions if str(q.category) in LOCOMO_CATEGORIES]
        picked = sample(qs, per_conv, seed)
        questions = [
            Question(
                f"locomo:{conv.sample_id}:{conv.questions.index(q)}", q.question, [str(q.answer)], "", str(q.category)
            )
            for q in picked
        ]
        out.append(Person(conv.sample_id, sample_json, _after(conv.sessions[-1].date), questions))
    return out


def _app_format(sessions) -> dict:
    return {
        "sessions": [
            {"date": s.date, "turns": [{"speaker": t.speaker, "text": t.text} for t in s.turns]} for s in sessions
        ]
    }


def ku_people(n: int) -> list[Person]:
    from .ku_histories import histories

    return [
        Person(
            h.hid,
            _app_format(h.sessions),
            h.ask_date,
            [Question(f"ku:{h.hid}", h.questions["current"], [h.new], h.old, f"ku-{h.kind}")],
        )
        for h in histories(n)
    ]


def personal_people(path: Path = PERSONAL) -> list[Person]:
    data = json.loads(path.read_text(encoding="utf-8"))
    out = []
    for p in data["people"]:
        history = {
            "sessions": [
                {"date": s["date"], "turns": [{"speaker": r, "text": t} for r, t in s["turns"]]} for s in p["sessions"]
            ]
        }
        qs = [
            Question(f"personal:{p['person']}:{i}", q["q"], q["answer"], q.get("old", ""), q["type"])
            for i, q in enumerate(p["questions"])
        ]
        out.append(Person(p["person"], history, p["ask_date"], qs))
    return out


def chat_person(date: str = "2024-05-02") -> Person:
    """`bench refusals`' chat condition as a person of this benchmark: its small memory as the history,
    its messages as the things typed (no gold answer: only refusals and parroting are scored)."""
    from .refusals import DATA, load

    sessions, messages = load(DATA)
    qs = [Question(f"chat:{i}", m, [], "", "chat") for i, m in enumerate(messages)]
    return Person("chat", _app_format(sessions), date, qs)


def make_service(data_dir: Path, llm_factory=None):
    """The app's agent and session service, as app.build makes them, over a scratch data dir
    (`llm_factory`: the tests' scripted model)."""
    from memory.agent import MemoryAgent
    from memory.locks import UserLocks
    from sessions import open_service
    from sessions.settings import AppSettings

    app = AppSettings.from_env()
    memory = dataclasses.replace(app.memory, data_dir=Path(data_dir), chroma_host="")
    locks = UserLocks()
    agent = MemoryAgent.from_settings(memory, llm_factory=llm_factory, locks=locks)
    svc = open_service(
        memory, agent, locks=locks, limits=dataclasses.replace(app.limits, imports_per_hour=0), identity=app.identity
    )
    return svc, memory


def read_ahead(svc, key: UserKey, text: str, how: str) -> int:
    """What the page does while the person types (ChatRoom.prepare): "whole", the message typed and a
    pause before Send; "half", its first half only (the memory found for it may differ); "" nothing."""
    if not how:
        return 0
    words = text.split()
    draft = " ".join(words[: max(1, len(words) // 2)]) if how == "half" else text
    return svc.rooms.chat.prepare(key, draft)


def ask(svc, key: UserKey, q: Question, first: bool, strategy: str, ahead: str = "") -> dict:
    read_ahead_tokens = read_ahead(svc, key, q.text, ahead)
    t0 = time.perf_counter()
    done = None
    for upd in svc.rooms.chat.send(key, q.text, strategy):
        if upd.kind == "done":
            done = upd
    complete = time.perf_counter() - t0
    trace: TraceDict = {}
    if done and done.trace:
        trace = done.trace
    reply = done.text if done else ""
    timings = trace.get("timings") or {}
    counters = trace.get("counts") or {}
    read = [t.get("text", "") for t in trace.get("timelines_raw") or []] or [
        s.get("text", "") for s in trace.get("segments") or []
    ]
    return {
        "id": f"{strategy}|{q.qid}",
        "set": q.qid.split(":")[0],
        "strategy": strategy,
        "kind": q.kind,
        "question": q.text,
        "gold": q.answers,
        "old": q.old,
        "reply": reply,
        "error": (done.error if done else "no reply") or "",
        "first": first,
        "first_token_s": round(float(timings.get("first_token", complete)), 2),
        "complete_s": round(complete, 2),
        "prompt_tokens": counters.get("prompt_tokens"),
        "prompt_tokens_cached": counters.get("prompt_tokens_cached"),
        "read_ahead_tokens": read_ahead_tokens,
        "memory": read,
        # See why's check (memory.answer_use): whether the reply's words came from a memory line, and
        # whether it named a value a Changed memory replaced: a memory failure told from a model failure
        "used_memory": bool((trace.get("answer_use") or {}).get("sources")),
        "stale_value": bool((trace.get("answer_use") or {}).get("stale")),
        **score(reply, q),
        "parrot": parrots(reply, q.text),
    }


def run_person(svc, p: Person, group: int, strategy: str, uid: str = "", ahead: str = "") -> list[dict]:
    rooms = svc.rooms
    key = svc.user(uid or rooms.users.new_user("127.0.0.1"))
    t0 = time.perf_counter()
    res = rooms.data.import_history(key, json.dumps(p.history), p.name if "conversation" in p.history else "")
    progress(f"{p.name}: {res.message} ({time.perf_counter() - t0:.0f} s)")
    rooms.sessions.new(key, p.ask_date, build=False)
    rows = []
    for i, q in enumerate(p.questions):
        if i and i % group == 0:  # a new chat session; the ended one is not built into memory
            rooms.sessions.end(key, p.ask_date, build=False)
        rows.append(ask(svc, key, q, i % group == 0, strategy, ahead))
    return rows


def _share(rows: list[dict], key: str) -> float | None:
    return round(statistics.fmean(float(r.get(key) or 0) for r in rows), 3) if rows else None


def summarise(rows: list[dict]) -> dict:
    chat = [r for r in rows if r["set"] == "chat"]
    rows = [r for r in rows if r["set"] != "chat"]  # the questions: every other figure is theirs
    loc = [r for r in rows if r["set"] == "locomo"]
    firsts, laters = [r for r in rows if r["first"]], [r for r in rows if not r["first"]]

    def p(xs: list[dict], key: str, q: float) -> float | None:
        return round(percentile([r[key] for r in xs], q), 2) if xs else None

    return {
        "n": len(rows),
        "locomo_strict": _share(loc, "strict"),
        "locomo_f1": _share(loc, "f1"),
        "locomo_by_category": {c: _share([r for r in loc if r["kind"] == c], "strict") for c in LOCOMO_CATEGORIES},
        "ku_current": _share([r for r in rows if r["set"] == "ku"], "strict"),
        "personal": _share([r for r in rows if r["set"] == "personal"], "strict"),
        "personal_by_type": {
            t: _share([r for r in rows if r["set"] == "personal" and r["kind"] == t], "strict")
            for t in ("fact", "changed", "reason")
        },
        "refusals": _share(rows, "refusal"),
        "parroting": _share(rows, "parrot"),
        "chat_n": len(chat),
        "chat_refusals": _share(chat, "refusal"),
        "chat_parroting": _share(chat, "parrot"),
        "used_memory": _share(rows, "used_memory"),
        "stale_value": _share(rows, "stale_value"),
        "errors": sum(1 for r in rows if r["error"]),
        "first_token_first_p50": p(firsts, "first_token_s", 50),
        "first_token_first_max": p(firsts, "first_token_s", 100),
        "first_token_later_p50": p(laters, "first_token_s", 50),
        "first_token_later_max": p(laters, "first_token_s", 100),
        "complete_p50": p(rows, "complete_s", 50),
        "prompt_tokens_p50": p([r for r in rows if r["prompt_tokens"] is not None], "prompt_tokens", 50),
        # what the model read before its first token (the prompt but what its cache kept): the wait's
        # share that does not depend on the machine's load
        "read_first_p50": p(_read(firsts), "read", 50),
        "read_later_p50": p(_read(laters), "read", 50),
    }


def _read(rows: list[dict]) -> list[dict]:
    return [
        {"read": r["prompt_tokens"] - (r.get("prompt_tokens_cached") or 0)}
        for r in rows
        if r.get("prompt_tokens") is not None
    ]


def table(s: dict, label: str) -> str:
    def f(x) -> str:
        return "-" if x is None else (f"{x:.3f}" if isinstance(x, float) and x <= 1 else str(x))

    cols = [
        ("LoCoMo strict", s["locomo_strict"]),
        ("LoCoMo F1", s["locomo_f1"]),
        ("current value", s["ku_current"]),
        ("personal", s["personal"]),
        ("refusals", s["refusals"]),
        ("parroting", s["parroting"]),
        ("chat: refusals / parroting", f"{f(s.get('chat_refusals'))} / {f(s.get('chat_parroting'))}"),
        ("reply used a memory (See why)", s.get("used_memory")),
        ("named a replaced value", s.get("stale_value")),
        ("1st token, first msg p50/max", f"{f(s['first_token_first_p50'])} / {f(s['first_token_first_max'])} s"),
        ("1st token, later p50/max", f"{f(s['first_token_later_p50'])} / {f(s['first_token_later_max'])} s"),
        ("complete p50", f"{f(s['complete_p50'])} s"),
        ("tokens read, first / later p50", f"{f(s.get('read_first_p50'))} / {f(s.get('read_later_p50'))}"),
    ]
    out = [f"{label}: {s['n']} questions (and {s.get('chat_n', 0)} chat messages), {s['errors']} errors"]
    out += [f"  {k:30} {v if isinstance(v, str) else f(v)}" for k, v in cols]
    out.append(f"  LoCoMo strict by category (1 multi-hop, 2 temporal, 4 single-hop): {s['locomo_by_category']}")
    out.append(f"  personal by type: {s['personal_by_type']}")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    p = parser("replies", __doc__.split("\n")[0], "bench_out/replies.json")
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"))
    p.add_argument("--sets", type=str_list, default=list(SETS), help=f"some of {', '.join(SETS)}")
    p.add_argument("--per-conversation", type=int, default=50, help="LoCoMo questions per conversation (50)")
    p.add_argument("--ku-histories", type=int, default=36)
    p.add_argument("--group", type=int, default=5, help="questions per chat session (5)")
    p.add_argument("--only", type=str_list, default=None, help="people (conversation ids, ku00, maya) to run")
    p.add_argument(
        "--strategies", type=str_list, default=None, help="theanine, secom, none (default: the installed one)"
    )
    ahead = "read ahead before each Send as the page does while one types: half the message or all of it"
    p.add_argument("--read-ahead", choices=("", "half", "whole"), default="", help=ahead + " (default: none)")
    p.add_argument("--label", default="", help="the run's name in the table (default: the output file's stem)")
    p.add_argument("--against", default="", help="an earlier run's JSON: paired per-question differences")
    a = p.parse_args(argv)
    people: list[Person] = []
    if "locomo" in a.sets:
        if Path(a.data).exists():
            people += locomo_people(Path(a.data), a.per_conversation, a.seed)
        else:
            progress(f"no LoCoMo file at {a.data}: the locomo set is skipped")
    if "ku" in a.sets:
        people += ku_people(a.ku_histories)
    if "personal" in a.sets:
        people += personal_people()
    if "chat" in a.sets:
        people.append(chat_person())
    if a.only:
        people = [x for x in people if x.name in a.only]
    label = a.label or Path(a.out).stem
    rows: list[dict] = []
    out: dict = {"summary": summarise(rows)}
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-replies-") as tmp:
        svc, settings = make_service(Path(tmp))
        runs = [(st, person) for st in (a.strategies or [settings.options.strategy]) for person in people]
        for i, (st, person) in enumerate(runs):
            rows += run_person(svc, person, a.group, st, ahead=a.read_ahead)
            mine = rows[-len(person.questions) :]
            progress(
                f"[{i + 1}/{len(runs)}] {st} {person.name}: {sum(r['strict'] for r in mine)}/{len(mine)} right, "
                f"{time.perf_counter() - t_all:.0f} s so far"
            )
            out = {
                "config": vars(a) | {"label": label, "model": settings.llm.describe()},
                "options": dataclasses.asdict(settings.options.for_backend(settings.llm)),
                "machine": machine(),
                "seconds": round(time.perf_counter() - t_all),
                "summary": summarise(rows),
                "rows": rows,
            }
            atomic_write_json(a.out, out)  # after each person: a long run keeps what it measured
    print(table(out["summary"], label))
    if a.against:
        other = json.loads(Path(a.against).read_text(encoding="utf-8"))
        print(paired(rows, other["rows"], label, other["config"].get("label", Path(a.against).stem)))
    return 0
