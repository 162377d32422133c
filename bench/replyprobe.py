"""Which bundled model replies best from memory: the app's reply path on two probes.

    python -m bench replyprobe --models smollm2,qwen0.5b,qwen1.5b \
        --probe locomo --data ../shared/data/locomo/locomo_dev.json --n 30 --out bench_out/replyprobe.json
    python -m bench replyprobe --probe facts          # one remembered fact per probe

`locomo` (the one the default model is chosen by): LoCoMo questions (multi-hop, temporal, single-hop, in
turn), each given its evidence turns and `--distractors` other turns of the same conversation as dated
memory lines, in time order; today is the last session's date, so a question like "When did ...?" needs
the date of a memory. Scored as LoCoMo scores QA: token F1 against the gold answer, and the share of
replies that hold every word of the gold answer. `facts`: 30 short conversations, each with one fact to
use. Both go through `reply_messages` (the prompt every reply uses) and `LLMSession.stream` (with its
retry of an empty answer); both also report empty replies, replies that are not prose (continue the
transcript), replies that loop (a sentence three times) and seconds per reply.
"""

from __future__ import annotations

import json
import random
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from memory import locomo_format as lc
from memory.evaluation.figures import matplotlib_pyplot
from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.llm import LLM, LLMSession, make_llm
from memory.records import Turn
from memory.reply_prompts import reply_messages
from memory.settings import BUNDLED_MODELS, LLMConfig
from memory.trace import Trace

from .answer_score import has_all_words, token_f1
from .common import parser, plot_path, progress, str_list
from .plots import save_figure

# (remembered fact, what the user says now, words of which any shows the fact was used)
PROBES: list[tuple[str, str, tuple[str, ...]]] = [
    ("(2023-05-01) user: My cat is called Tom.", "What is my cat's name?", ("tom",)),
    ("(2023-05-02) user: I adopted a puppy named Rex.", "Do you remember my puppy?", ("rex",)),
    ("(2023-05-03) user: I work as a nurse at the city hospital.", "What do I do for a living?", ("nurse",)),
    ("(2023-05-04) user: I live in Lisbon.", "Which city do I live in?", ("lisbon",)),
    ("(2023-05-05) user: My favourite food is sushi.", "Suggest a dinner I would like.", ("sushi",)),
    ("(2023-05-06) user: My sister Anna is getting married in June.", "Whose wedding is coming up?", ("anna",)),
    ("(2023-05-07) user: I am learning to play the violin.", "Which instrument am I learning?", ("violin",)),
    ("(2023-05-08) user: I am allergic to peanuts.", "Can you suggest a snack for me?", ("peanut",)),
    ("(2023-05-09) user: My daughter is called Mia and she is six.", "How old is my daughter?", ("six", "6", "mia")),
    ("(2023-05-10) user: I ran my first marathon in Berlin.", "Where did I run my first marathon?", ("berlin",)),
    ("(2023-05-11) user: I drive a red bicycle to work.", "How do I get to work?", ("bicycle", "bike")),
    ("(2023-05-12) user: I am reading a book about volcanoes.", "What was I reading?", ("volcano",)),
    ("(2023-05-13) user: My birthday is on the 3rd of March.", "When is my birthday?", ("march",)),
    ("(2023-05-14) user: I grow tomatoes on my balcony.", "What do I grow at home?", ("tomato",)),
    ("(2023-05-15) user: I moved here from Canada.", "Where did I move from?", ("canada",)),
    ("(2023-05-16) user: My dog Bruno hates thunderstorms.", "What scares my dog?", ("thunder", "storm")),
    ("(2023-05-17) user: I am vegetarian.", "What should I order at a steakhouse?", ("vegetarian", "meat")),
    ("(2023-05-18) user: I play chess every Sunday with my grandfather.", "What do I do on Sundays?", ("chess",)),
    ("(2023-05-19) user: I started a job at a bakery.", "Where did I start working?", ("bakery",)),
    ("(2023-05-20) user: My favourite colour is green.", "Which colour should I paint my room?", ("green",)),
    ("(2023-05-21) user: I broke my left arm skiing.", "How did I hurt my arm?", ("ski",)),
    ("(2023-05-22) user: I speak Japanese fluently.", "Which language do I speak besides English?", ("japanese",)),
    ("(2023-05-23) user: My son Leo plays football.", "What sport does my son play?", ("football", "soccer")),
    ("(2023-05-24) user: I am saving money for a trip to Peru.", "Where am I planning to travel?", ("peru",)),
    ("(2023-05-25) user: I painted a sunset over the lake.", "What did I paint?", ("sunset",)),
    ("(2023-05-26) user: I have two goldfish named Salt and Pepper.", "What are my fish called?", ("salt", "pepper")),
    ("(2023-05-27) user: I am training for a swimming competition.", "What am I training for?", ("swim",)),
    ("(2023-05-28) user: My husband bakes bread every morning.", "Who bakes in my house?", ("husband",)),
    ("(2023-05-29) user: I volunteer at an animal shelter.", "Where do I volunteer?", ("shelter", "animal")),
    ("(2023-05-30) user: I collect old stamps from Italy.", "What do I collect?", ("stamp",)),
]


@dataclass
class Item:
    question: str
    memory: list[str]
    date: str
    answer: str = ""  # gold answer (locomo probe)
    category: int = 0
    keywords: tuple[str, ...] = field(default=())  # any of which shows the fact was used (facts probe)


def fact_items() -> list[Item]:
    return [Item(q, [fact], "2023-06-01", keywords=kw) for fact, q, kw in PROBES]


CATEGORIES = {4: "single-hop", 2: "temporal", 1: "multi-hop"}


def locomo_items(data, n: int = 30, distractors: int = 8, seed: int = 0) -> list[Item]:
    """`n` questions taken in turn from the categories above (a random order per category, seeded)."""
    rng = random.Random(seed)
    pools: dict[int, list[Item]] = {c: [] for c in CATEGORIES}
    samples = data if isinstance(data, list) else [data]
    for sample, (_sid, sessions) in zip(samples, lc.load_sessions(samples), strict=True):
        lines = {t.turn_id: f"({s.date}) {t.speaker}: {' '.join(t.text.split())}" for s in sessions for t in s.turns}
        order = {tid: k for k, tid in enumerate(lines)}
        today = sessions[-1].date if sessions else ""
        for q in lc.questions(sample):
            if q.category not in pools or not q.evidence or any(e not in lines for e in q.evidence):
                continue
            others = [tid for tid in lines if tid not in q.evidence]
            picked = sorted([*q.evidence, *rng.sample(others, min(distractors, len(others)))], key=order.__getitem__)
            pools[q.category].append(Item(q.question, [lines[t] for t in picked], today, q.answer, q.category))
    for pool in pools.values():
        rng.shuffle(pool)
    out: list[Item] = []
    while len(out) < n and any(pools.values()):
        for c in CATEGORIES:
            if pools[c] and len(out) < n:
                out.append(pools[c].pop())
    return out


_ROLE_LINE = re.compile(r"(?im)^\s*(user|assistant|instructions|system)\s*:")
_DATED = re.compile(r"\(\d{4}-\d{2}-\d{2}\)")


def classify(text: str, keywords: tuple[str, ...] = ()) -> dict:
    """empty / not prose (continues the transcript, symbol lines) / loops / mentions the fact."""
    t = (text or "").strip()
    visible = re.sub(r"\s", "", t)
    letters = sum(ch.isalpha() for ch in visible)
    empty = not visible
    not_prose = (not empty) and (
        bool(_ROLE_LINE.search(t)) or bool(_DATED.search(t)) or letters < 0.6 * len(visible) or len(t.split()) < 2
    )
    sentences = [x.strip().lower() for x in re.split(r"[.!?\n]+", t) if len(x.split()) >= 2]
    loops = any(n >= 3 for n in Counter(sentences).values())
    low = t.lower()
    return {"empty": empty, "not_prose": not_prose, "loops": loops, "mentions_fact": any(k in low for k in keywords)}


def _share(rows: list[dict], key: str) -> float:
    return sum(bool(r[key]) for r in rows) / len(rows) if rows else 0.0


def summarise(rows: list[dict]) -> dict:
    out: dict = {k: _share(rows, k) for k in ("empty", "empty_first_try", "not_prose", "loops", "mentions_fact")}
    out |= {"n": len(rows), "seconds_median": statistics.median(r["seconds"] for r in rows) if rows else 0.0}
    if rows and "f1" in rows[0]:
        out["f1"] = statistics.fmean(r["f1"] for r in rows)
        out["all_words"] = _share(rows, "all_words")
        out["per_category"] = {
            CATEGORIES[c]: {
                "n": len(rs),
                "f1": statistics.fmean(r["f1"] for r in rs),
                "all_words": _share(rs, "all_words"),
            }
            for c in CATEGORIES
            if (rs := [r for r in rows if r["category"] == c])
        }
    return out


def run_model(
    model: str,
    items: list[Item],
    temperature: float,
    max_tokens: int,
    llm: LLM | None = None,
    checkpoint: Callable[[dict], None] | None = None,
) -> dict:
    """Every item through the reply path of the bundled `model` (or of `llm`, a test's); `checkpoint`
    gets the result so far after each item (a long run stopped early keeps what it measured)."""
    llm = llm or make_llm(LLMConfig(backend="embedded", bundled_model=model))
    rows = []
    for i, it in enumerate(items):
        trace = Trace("theanine")
        history = [] if it.answer else [Turn("user", "Hi! How are you today?"), Turn("assistant", "I'm well, thanks.")]
        msgs = reply_messages("theanine", it.memory, history, it.question, it.date)
        t0 = time.perf_counter()
        text = "".join(LLMSession(llm, trace, temperature=temperature).stream("reply", msgs, max_tokens=max_tokens))
        row: dict = {
            "item": i,
            "question": it.question,
            "reply": text,
            "seconds": round(time.perf_counter() - t0, 3),
            "empty_first_try": trace.llm_calls[-1].detail == "empty answer",
            **classify(text, it.keywords),
        }
        if it.answer:
            row |= {
                "gold": it.answer,
                "category": it.category,
                "f1": token_f1(text, it.answer),
                "all_words": has_all_words(text, it.answer),
            }
        rows.append(row)
        progress(f"{model} {i + 1}/{len(items)} ({row['seconds']:.1f} s): {text[:70]!r}")
        if checkpoint is not None:
            checkpoint(_result(model, rows))
    return _result(model, rows)


def _result(model: str, rows: list[dict]) -> dict:
    return {"model": model, "name": BUNDLED_MODELS.get(model, model), **summarise(rows), "rows": list(rows)}


def plot(results: list[dict], out) -> None:
    plt = matplotlib_pyplot()
    metrics = [("empty", "empty"), ("not_prose", "not prose"), ("loops", "loops")]
    metrics += (
        [("f1", "token F1"), ("all_words", "all answer words")]
        if "f1" in results[0]
        else [("mentions_fact", "mentions the fact")]
    )
    fig, ax = plt.subplots(figsize=(7.2, 3.6))
    width = 0.8 / max(1, len(results))
    for j, r in enumerate(results):
        xs = [i + j * width for i in range(len(metrics))]
        ax.bar(xs, [r[m] for m, _ in metrics], width, label=f"{r['name']} ({r['seconds_median']:.1f} s/reply)")
    ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(metrics))], [lbl for _, lbl in metrics])
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"share / mean over {results[0]['n']} probes")
    ax.legend(fontsize=8)
    save_figure(plt, fig, "Bundled reply models through the app's reply prompt", plot_path(out, "rates"), dpi=120)


def table(results: list[dict]) -> str:
    scored = "f1" in results[0]
    head = f"{'model':30} {'empty':>6} {'not prose':>9} {'loops':>6} "
    head += f"{'F1':>5} {'all words':>9}" if scored else f"{'mentions':>8}"
    lines = [head + f" {'s/reply':>7}"]
    for r in results:
        line = f"{r['name']:30} {r['empty']:6.2f} {r['not_prose']:9.2f} {r['loops']:6.2f} "
        line += f"{r['f1']:5.2f} {r['all_words']:9.2f}" if scored else f"{r['mentions_fact']:8.2f}"
        lines.append(line + f" {r['seconds_median']:7.2f}")
        for cat, c in r.get("per_category", {}).items():
            lines.append(f"  {cat:28} n={c['n']:<3} F1 {c['f1']:.2f}  all words {c['all_words']:.2f}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    p = parser("replyprobe", __doc__.split("\n")[0], "bench_out/replyprobe.json")
    p.add_argument("--models", type=str_list, default=["smollm2", "qwen0.5b", "qwen1.5b"], help="bundled models")
    p.add_argument("--probe", choices=("locomo", "facts"), default="locomo")
    p.add_argument("--data", default="../shared/data/locomo/locomo_dev.json", help="LoCoMo file (locomo probe)")
    p.add_argument("--n", type=int, default=30, help="questions (locomo probe)")
    p.add_argument("--distractors", type=int, default=8, help="other turns given as memory with each question")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-tokens", type=int, default=64)
    a = p.parse_args(argv)
    if a.probe == "locomo":
        with open(a.data, encoding="utf-8") as f:
            items = locomo_items(json.load(f), a.n, a.distractors, a.seed)
    else:
        items = fact_items()
    results: list[dict] = []

    def save(partial: dict | None = None) -> None:
        done = results + ([partial] if partial else [])
        atomic_write_json(a.out, {"config": vars(a) | {"items": len(items)}, "machine": machine(), "results": done})

    for m in a.models:  # written after each item: a long run stopped early keeps what it measured
        results.append(run_model(m, items, a.temperature, a.max_tokens, checkpoint=save))
        save()
    print(table(results))
    plot(results, a.out)
    return 0
