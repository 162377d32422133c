"""Fairness: user B's reply latency while user A imports a LoCoMo conversation, against no import.

    python -m tests.fairness_bench                      # conv-30 of LoCoMo dev; short and long replies
    python -m tests.fairness_bench --sample conv-26 --replies 5 --reply-tokens 64

`--reply-tokens` takes one or more lengths (default 16,160: a short reply, under a second alone on
2 cores, and a long one); each length is one case, with its own app and import, and one ratio.

Starts app.py (it needs the /import_history endpoint of the offline-mode change) on the
embedded defaults in a temporary data dir, with MEMORY_LLM_STEPS=off (memory builds without LLM
calls, honoured once the offline-mode change is in). User B first sends `replies` messages with
nothing else running (after one warm-up reply), then user A starts the import through the API
and B sends `replies` more while it runs, then `replies` more after it (the "no import" median is
of the replies before and after). Prints each latency, both medians, their ratio (target
<= 2x), whether the import was still running at B's last reply, and the import's own duration.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

LOCOMO = HERE.parent.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
QUESTIONS = [
    "I went hiking with my sister last weekend.",
    "What should I cook tonight?",
    "My cat knocked over a plant again.",
    "I start a new job on Monday.",
    "Any tips for sleeping better?",
    "I finished reading a long novel.",
    "The weather turned cold today.",
]


def timed_reply(client, uid: str, text: str, strategy: str) -> float:
    t0 = time.perf_counter()
    _, trace = client.predict(uid, text, strategy, api_name="/send_message")
    dt = time.perf_counter() - t0
    if trace.get("error"):
        print(f"    (reply error: {trace['error']})", flush=True)
    return dt


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.fairness_bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(LOCOMO), help="LoCoMo file")
    ap.add_argument("--sample", default="conv-30", help="conversation user A imports")
    ap.add_argument("--replies", type=int, default=5, help="replies of user B per condition")
    ap.add_argument("--reply-tokens", default="16,160", help="LLM_MAX_REPLY_TOKENS of the app, one case each")
    ap.add_argument("--strategy", default="theanine")
    ap.add_argument("--llm-steps", default="off", help="MEMORY_LLM_STEPS given to the app")
    ap.add_argument("--lead", type=float, default=3.0, help="seconds A's import runs before B starts")
    ap.add_argument("--keep", action="store_true", help="keep the data dir")
    a = ap.parse_args(argv)
    cases = [int(x) for x in str(a.reply_tokens).split(",") if x.strip()]
    text = Path(a.data).read_text(encoding="utf-8")
    summary = []
    for tokens in cases:
        out = run_case(a, tokens, text)
        if out is None:
            return 2
        summary.append((tokens, *out))
    print("\nsummary (B's reply median alone -> during A's import)")
    for tokens, m0, m1 in summary:
        print(
            f"  LLM_MAX_REPLY_TOKENS={tokens}: {m0:.2f} s -> {m1:.2f} s, ratio {m1 / m0:.2f}x "
            f"(target <= 2x): {'met' if m1 <= 2 * m0 else 'NOT met'}"
        )
    return 0


def run_case(a, reply_tokens: int, text: str) -> tuple[float, float] | None:
    """One case: B's replies alone, then during A's import. Returns the two medians."""
    from gradio_client import Client

    data = Path(tempfile.mkdtemp(prefix="fairness-"))
    print(
        f"starting the app (embedded model, MEMORY_LLM_STEPS={a.llm_steps}, "
        f"LLM_MAX_REPLY_TOKENS={reply_tokens}) in {data}",
        flush=True,
    )
    from tests.ui_fixtures import RunningApp

    app = RunningApp(
        data, data / "app.log", timeout=900, MEMORY_LLM_STEPS=a.llm_steps, LLM_MAX_REPLY_TOKENS=reply_tokens
    )
    try:
        url = app.url
        ca, cb = Client(url, verbose=False), Client(url, verbose=False)
        api = ca.view_api(print_info=False, return_format="dict")["named_endpoints"]
        if "/import_history" not in api:
            print("this app has no /import_history endpoint (it comes with the offline-mode change)")
            return None
        ua, ub = ca.predict(api_name="/new_user"), cb.predict(api_name="/new_user")
        timed_reply(cb, ub, "Hello! Nice to meet you.", a.strategy)  # warm-up, not counted
        alone = []
        for i in range(a.replies):
            alone.append(timed_reply(cb, ub, QUESTIONS[i % len(QUESTIONS)], a.strategy))
            print(f"  B alone, reply {i + 1}: {alone[-1]:.2f} s", flush=True)

        sample = next(s for s in json.loads(text) if s.get("sample_id") == a.sample)
        n_sessions = sum(1 for k in sample["conversation"] if k.startswith("session_") and not k.endswith("date_time"))
        result: dict = {}

        def run_import():
            t0 = time.perf_counter()
            try:
                result["out"] = ca.predict(ua, text, a.sample, api_name="/import_history")
            except Exception as e:
                result["error"] = str(e)
            result["seconds"] = time.perf_counter() - t0

        importer = threading.Thread(target=run_import, daemon=True)
        importer.start()
        print(f"A imports {a.sample} ({n_sessions} sessions) through /import_history", flush=True)
        time.sleep(a.lead)
        during, overlapped = [], []
        for i in range(a.replies):
            during.append(timed_reply(cb, ub, QUESTIONS[(i + 2) % len(QUESTIONS)], a.strategy))
            overlapped.append(importer.is_alive())
            print(
                f"  B during A's import, reply {i + 1}: {during[-1]:.2f} s"
                f"{'' if overlapped[-1] else ' (import had finished)'}",
                flush=True,
            )
        still_running = importer.is_alive()
        importer.join(3600)
        # B alone again after the import: the baseline is before and after, so a change in the machine's
        # other load during the run (a shared machine) weighs on both sides alike.
        for i in range(a.replies):
            alone.append(timed_reply(cb, ub, QUESTIONS[(i + 4) % len(QUESTIONS)], a.strategy))
            print(f"  B alone after the import, reply {i + 1}: {alone[-1]:.2f} s", flush=True)
        m0, m1 = statistics.median(alone), statistics.median(during)
        print("\nresults")
        print(f"  MEMORY_LLM_STEPS={a.llm_steps} (set in the app's environment); import through /import_history")
        print(f"  B reply median, no import:     {m0:.2f} s   ({', '.join(f'{x:.2f}' for x in alone)})")
        print(f"  B reply median, during import: {m1:.2f} s   ({', '.join(f'{x:.2f}' for x in during)})")
        print(f"  ratio: {m1 / m0:.2f}x (target <= 2x): {'met' if m1 <= 2 * m0 else 'NOT met'}")
        print(
            f"  replies that overlapped the import: {sum(overlapped)}/{len(overlapped)}; "
            f"import still running after B's last reply: {still_running}"
        )
        if "error" in result:
            print(f"  A's import failed: {result['error']}")
        else:
            out = result.get("out") or {}
            print(
                f"  A's import: {result.get('seconds', 0):.1f} s, {len(out.get('closed', []))} sessions built, "
                f"errors: {len(out.get('errors', []))}"
            )
    finally:
        app.stop()
        if not a.keep:
            import shutil

            shutil.rmtree(data, ignore_errors=True)
    return m0, m1


if __name__ == "__main__":
    sys.exit(main())
