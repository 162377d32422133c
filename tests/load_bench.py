"""Load: many users chatting at once against app.py through the documented API (gradio_client).

    python -m tests.load_bench                       # starts app.py (embedded model) in a temp dir
    python -m tests.load_bench --url http://127.0.0.1:7860 --users 20 --messages 2

Each simulated user (one thread, one client) creates an id, sends `messages` messages that name
a token only it knows, ends its session (one user asks twice at once: the close must run once; the second request is
answered "Busy with ..." while the first runs),
then sends one more message with SeCom memory. Every reply must arrive, and no other user's token
may appear in the user's replies, traces or history. Prints users, messages, errors, p50/p95 reply
time, close times, and whether replies completed while other users' closes were running.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

TOPICS = [
    "hiking",
    "baking",
    "chess",
    "sailing",
    "pottery",
    "cycling",
    "painting",
    "fishing",
    "climbing",
    "knitting",
    "surfing",
    "archery",
    "gardening",
    "juggling",
    "skating",
    "rowing",
    "singing",
    "dancing",
    "fencing",
    "origami",
]


@dataclass
class UserRun:
    index: int
    token: str = ""
    uid: str = ""
    replies: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of each reply
    closes: list[tuple[float, float]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # JSON of everything the user got back
    closed_sessions: int = 0
    busy_refusals: int = 0  # the doubled close answered "Busy with ..." (one job per user)


def _user(url: str, run: UserRun, messages: int, double_close: bool, start: threading.Barrier) -> None:
    from gradio_client import Client

    try:
        c = Client(url, verbose=False)
        run.uid = c.predict(api_name="/new_user")
        topic = TOPICS[run.index % len(TOPICS)]
        start.wait(120)

        def send(text: str, strategy: str):
            t0 = time.time()
            reply, trace = c.predict(run.uid, text, strategy, api_name="/send_message")
            run.replies.append((t0, time.time()))
            run.outputs.append(json.dumps([reply, trace]))
            if trace.get("error"):
                run.errors.append(f"reply: {trace['error']}")

        for i in range(messages):
            send(f"My code word is {run.token}. Message {i + 1}: I love {topic} on weekends.", "theanine")
        t0 = time.time()
        jobs = [c.submit(run.uid, "", api_name="/end_session") for _ in range(2 if double_close else 1)]
        results = []
        for j in jobs:
            try:
                results.append(j.result(timeout=1800))
            except Exception as e:
                if "Busy with" not in str(e):
                    raise
                run.busy_refusals += 1
        run.closes.append((t0, time.time()))
        run.outputs.append(json.dumps(results))
        run.closed_sessions = sum(len(r["closed"]) for r in results)
        run.errors += [f"close: {e}" for r in results for e in r["errors"]]
        send("What is my code word and which hobby do I love?", "secom")
        run.outputs.append(json.dumps(c.predict(run.uid, api_name="/history")))
    except Exception as e:
        run.errors.append(f"{type(e).__name__}: {e}")


def run_load(url: str, users: int = 20, messages: int = 2) -> dict:
    runs = [UserRun(i, token=f"tok{i:02d}x{int(time.time() * 1000) % 100000:05d}q") for i in range(users)]
    start = threading.Barrier(users)
    threads = [threading.Thread(target=_user, args=(url, r, messages, r.index == 0, start), daemon=True) for r in runs]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join(3600)
    wall = time.time() - t0
    tokens = {r.token for r in runs}
    crossed = []
    for r in runs:
        text = " ".join(r.outputs)
        others = [t for t in tokens - {r.token} if t in text]
        if others:
            crossed.append((r.index, others))
    times = sorted(e - s for r in runs for s, e in r.replies)
    closes = sorted(e - s for r in runs for s, e in r.closes)
    close_spans = [(r.index, s, e) for r in runs for s, e in r.closes]
    # Replies that arrived while another user's session close was running: closes do not block chats.
    during_close = sum(
        1 for r in runs for s, e in r.replies if any(i != r.index and cs < e < ce for i, cs, ce in close_spans)
    )

    def pct(xs, q):
        return round(xs[min(len(xs) - 1, int(q * len(xs)))], 2) if xs else None

    return {
        "users": users,
        "messages": sum(len(r.replies) for r in runs),
        "expected_messages": users * (messages + 1),
        "errors": sum(len(r.errors) for r in runs),
        "error_samples": [e for r in runs for e in r.errors][:5],
        "reply_p50_s": pct(times, 0.5),
        "reply_p95_s": pct(times, 0.95),
        "reply_mean_s": round(statistics.mean(times), 2) if times else None,
        "close_p50_s": pct(closes, 0.5),
        "close_max_s": round(max(closes), 2) if closes else None,
        "replies_done_during_another_users_close": during_close,
        "closes_run": sum(r.closed_sessions for r in runs),
        "busy_refusals": sum(r.busy_refusals for r in runs),
        "crossed_users": crossed,
        "wall_s": round(wall, 1),
    }


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", help="a running app; default: start app.py on the embedded model")
    ap.add_argument("--users", type=int, default=20)
    ap.add_argument("--messages", type=int, default=2)
    ap.add_argument("--reply-tokens", type=int, default=24, help="LLM_MAX_REPLY_TOKENS of the app started here")
    args = ap.parse_args(argv)
    if args.url:
        out = run_load(args.url, args.users, args.messages)
    else:
        from tests.ui_fixtures import RunningApp

        data = Path(tempfile.mkdtemp(prefix="memory-load-"))
        app = RunningApp(data / "data", data / "app.log", LLM_MAX_REPLY_TOKENS=args.reply_tokens)
        try:
            out = run_load(app.url, args.users, args.messages)
        finally:
            app.stop()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
