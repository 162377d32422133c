"""Answers as a user meets them: `python app.py` on its defaults, a LoCoMo conversation imported through
`/import_history`, then single-hop questions each asked in a fresh session through `/send_message`.

    python -m tests.answers_bench --data ../shared/data/locomo/locomo_dev.json --sample conv-30 --questions 20

One user per strategy (theanine, secom, none), each importing the same conversation, so no strategy
sees another's questions. Each question is sent in the open session, which is then ended (its memory
built, as a person's chat would be) before the next. Scores per strategy (bench.answer_score):
the share of replies holding every content word of the gold answer, LoCoMo's token F1, and the reply
latency p50/p95. Extra environment for the app (e.g. LLM_EMBEDDED_MODEL=...) comes from --env.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.answer_score import has_all_words, token_f1
from memory.files import atomic_write_json
from memory.locomo_format import clean_evidence
from memory.settings import Settings
from tests.ui_fixtures import RunningApp

STRATEGIES = ("theanine", "secom", "none")
SINGLE_HOP = 4  # LoCoMo's category numbers: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop


def questions(sample: dict, n: int) -> list[dict]:
    qs = [q for q in sample["qa"] if q.get("category") == SINGLE_HOP and clean_evidence(q.get("evidence", []))]
    return [q for q in qs if str(q.get("answer", "")).strip()][:n]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(p * (len(xs) - 1)))] if xs else 0.0


def run_strategy(client, text: str, sample: dict, qs: list[dict], strategy: str) -> dict:
    uid = client.predict(api_name="/new_user")
    t0 = time.perf_counter()
    built = client.predict(uid, text, sample["sample_id"], api_name="/import_history")
    imported = time.perf_counter() - t0
    rows = []
    for q in qs:
        t = time.perf_counter()
        reply, trace = client.predict(uid, q["question"], strategy, api_name="/send_message")
        seconds = time.perf_counter() - t
        gold = str(q["answer"])
        rows.append(
            {
                "question": q["question"],
                "gold": gold,
                "reply": reply,
                "all_words": has_all_words(reply, gold),
                "f1": round(token_f1(reply, gold), 4),
                "seconds": round(seconds, 2),
                "memory_lines": len(trace.get("memories") or trace.get("segments") or []),
                "error": trace.get("error", ""),
            }
        )
        client.predict(uid, "", api_name="/end_session")
        print(f"  {strategy:8s} {'+' if rows[-1]['all_words'] else '-'} {q['question'][:60]!r} -> {reply[:80]!r}")
    secs = [r["seconds"] for r in rows]
    return {
        "strategy": strategy,
        "import_seconds": round(imported, 1),
        "memories": built.get("memories"),
        "all_words": round(sum(r["all_words"] for r in rows) / max(1, len(rows)), 3),
        "f1": round(statistics.fmean(r["f1"] for r in rows), 3) if rows else 0.0,
        "p50_s": round(pct(secs, 0.5), 2),
        "p95_s": round(pct(secs, 0.95), 2),
        "errors": sum(1 for r in rows if r["error"]),
        "rows": rows,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.answers_bench", description=__doc__.split("\n")[0])
    p.add_argument("--data", default="../shared/data/locomo/locomo_dev.json")
    p.add_argument("--sample", default="conv-30")
    p.add_argument("--questions", type=int, default=20)
    p.add_argument("--strategies", default=",".join(STRATEGIES))
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the app, repeatable")
    p.add_argument("--out", default="bench_out/answers.json")
    a = p.parse_args(argv)
    sample = next(s for s in json.loads(Path(a.data).read_text()) if s["sample_id"] == a.sample)
    qs = questions(sample, a.questions)
    # The app's own default reply model (the UI plumbing tests' runner pins a faster one).
    env = {"LLM_EMBEDDED_MODEL": Settings.from_env({}).llm.bundled_model, **dict(kv.split("=", 1) for kv in a.env)}
    from gradio_client import Client

    results = []
    with tempfile.TemporaryDirectory() as tmp:
        app = RunningApp(Path(tmp) / "data", Path(tmp) / "app.log", **env)
        try:
            client = Client(app.url, verbose=False)
            for strategy in a.strategies.split(","):
                results.append(run_strategy(client, json.dumps(sample), sample, qs, strategy))
        finally:
            app.stop()
    print(f"\n{a.sample}: {len(qs)} single-hop questions, app defaults {env or ''}")
    print("| strategy | all answer words | token F1 | reply p50 s | p95 s | errors |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r['strategy']} | {r['all_words']:.2f} | {r['f1']:.3f} | {r['p50_s']} | {r['p95_s']} | {r['errors']} |"
        )
    atomic_write_json(a.out, {"sample": a.sample, "env": env, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
