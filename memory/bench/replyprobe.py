"""Which bundled model chats better: a fixed probe of short conversations, each with one remembered fact.

    python -m memory.bench replyprobe --models smollm2,gemma3 --out bench_out/replyprobe.json

Each probe goes through the app's own reply path: the remembered fact is given as
a THEANINE memory line to `reply_messages` (the prompt every reply uses) and the
answer is streamed by `LLMSession.stream` (with its retry of an empty answer).
Per model it reports the share of replies that are empty, that continue the
transcript or are not prose, and that mention the remembered fact.
"""

from __future__ import annotations

import re
import statistics
import time

from ..evaluation.figures import matplotlib_pyplot
from ..evaluation.machine import machine
from ..files import atomic_write_json
from ..llm import LLMSession, make_llm
from ..records import Turn
from ..reply_prompts import reply_messages
from ..settings import BUNDLED_MODELS, LLMConfig
from ..trace import Trace
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

_ROLE_LINE = re.compile(r"(?im)^\s*(user|assistant|instructions|system)\s*:")
_DATED = re.compile(r"\(\d{4}-\d{2}-\d{2}\)")


def classify(text: str, keywords: tuple[str, ...]) -> dict:
    """empty / not prose (continues the transcript, symbol lines) / mentions the fact."""
    t = (text or "").strip()
    visible = re.sub(r"\s", "", t)
    letters = sum(ch.isalpha() for ch in visible)
    empty = not visible
    not_prose = (not empty) and (
        bool(_ROLE_LINE.search(t)) or bool(_DATED.search(t)) or letters < 0.6 * len(visible) or len(t.split()) < 2
    )
    low = t.lower()
    return {"empty": empty, "not_prose": not_prose, "mentions_fact": any(k in low for k in keywords)}


def run_model(model: str, temperature: float, max_tokens: int) -> dict:
    cfg = LLMConfig(backend="embedded", bundled_model=model)
    llm = make_llm(cfg)
    rows, seconds = [], []
    for i, (fact, question, keywords) in enumerate(PROBES):
        trace = Trace("theanine")
        history = [Turn("user", "Hi! How are you today?"), Turn("assistant", "I'm well, thank you. How are you?")]
        msgs = reply_messages("theanine", [fact], history, question, "2023-06-01")
        session = LLMSession(llm, trace, temperature=temperature)
        t0 = time.perf_counter()
        text = "".join(session.stream("reply", msgs, max_tokens=max_tokens))
        seconds.append(time.perf_counter() - t0)
        call = trace.llm_calls[-1]
        row = {
            "probe": i,
            "question": question,
            "reply": text,
            "seconds": round(seconds[-1], 3),
            "empty_first_try": call.detail == "empty answer",
            **classify(text, keywords),
        }
        rows.append(row)
        progress(f"{model} {i + 1}/{len(PROBES)}: {text[:70]!r}")
    n = len(rows)
    return {
        "model": model,
        "name": BUNDLED_MODELS[model],
        "n": n,
        "empty": sum(r["empty"] for r in rows) / n,
        "empty_first_try": sum(r["empty_first_try"] for r in rows) / n,
        "not_prose": sum(r["not_prose"] for r in rows) / n,
        "mentions_fact": sum(r["mentions_fact"] for r in rows) / n,
        "seconds_median": statistics.median(seconds),
        "rows": rows,
    }


def plot(results: list[dict], out) -> None:
    plt = matplotlib_pyplot()
    metrics = [("empty", "empty"), ("not_prose", "not prose / transcript"), ("mentions_fact", "mentions the fact")]
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    width = 0.8 / max(1, len(results))
    for j, r in enumerate(results):
        xs = [i + j * width for i in range(len(metrics))]
        ax.bar(xs, [r[m] for m, _ in metrics], width, label=r["name"])
    ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(metrics))], [lbl for _, lbl in metrics])
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"share of {results[0]['n']} probes")
    ax.legend()
    save_figure(plt, fig, "Bundled reply models through the app's reply prompt", plot_path(out, "rates"), dpi=120)


def main(argv: list[str]) -> int:
    p = parser("replyprobe", __doc__.split("\n")[0], "bench_out/replyprobe.json")
    p.add_argument("--models", type=str_list, default=list(BUNDLED_MODELS), help="bundled models to probe")
    p.add_argument("--temperature", type=float, default=0.6)
    p.add_argument("--max-tokens", type=int, default=96)
    a = p.parse_args(argv)
    results = [run_model(m, a.temperature, a.max_tokens) for m in a.models]
    print(f"{'model':32} {'empty':>6} {'empty 1st':>9} {'not prose':>9} {'mentions':>8} {'s/reply':>7}")
    for r in results:
        print(
            f"{r['name']:32} {r['empty']:6.2f} {r['empty_first_try']:9.2f} {r['not_prose']:9.2f} "
            f"{r['mentions_fact']:8.2f} {r['seconds_median']:7.2f}"
        )
    atomic_write_json(a.out, {"config": vars(a) | {"probes": len(PROBES)}, "machine": machine(), "results": results})
    plot(results, a.out)
    return 0
