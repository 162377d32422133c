"""Reply and session-close latency with the embedded SQLite store vs a PostgreSQL server.

    python -m tests.replica_bench                    # median of 5 of each, same machine, same code
    python -m tests.replica_bench --runs 5 --history 3

Everything but the store is the same and real (MemoryAgent from settings: MiniLM, embedded
Chroma, the `openai` client) except the LLM, the scripted OpenAI-compatible server
(tests/reliability_llm.py), which answers at once so the figures are the app's own work. Each
run: one user sends `--history` THEANINE messages (each timed: stored, memory retrieved, reply
streamed and stored) and ends the session (timed: both memories built, graph committed, session
marked closed). The user's graph grows by one session per run, as a real user's would.
PostgreSQL runs locally (initdb + pg_ctl, fsync on, default settings); SQLite runs in WAL mode
with synchronous=NORMAL, as the app uses it. Also timed: a replica's graph reload (what a
replica does when another wrote), and one store write (a message and its reply).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE, HERE.parent):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

TOPICS = ["a puppy named Rex", "a trip to Lisbon", "learning the violin", "a new job at the bakery",
          "my sister's wedding", "a broken bicycle", "the garden tomatoes", "a chess tournament"]


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:8.1f}"


def bench(backend: str, url: str | None, runs: int, history: int, server) -> dict[str, list[float]]:
    from memory.agent import MemoryAgent
    from memory.settings import Settings
    from memory.trace import Trace  # noqa: F401 - loaded before timing
    from reliability_llm import app_llm_env
    from sessions import SessionService
    from sessions.store import open_store

    out: dict[str, list[float]] = {"reply": [], "close": [], "graph reload": [], "store write": []}
    with tempfile.TemporaryDirectory(prefix=f"bench-{backend}-") as tmp:
        data = Path(tmp)
        settings = Settings.from_env({"MEMORY_DATA_DIR": str(data), **app_llm_env(server, LLM_TIMEOUT=60)})
        store = open_store(data, env={"DATABASE_URL": url} if url else {})
        svc = SessionService(settings, MemoryAgent.from_settings(settings), store)
        uid = f"bench_{backend}_" + "u" * 16
        list(svc.send(uid, "warm up the embedder and the connection pool", "theanine"))
        svc.end_session(uid)
        for r in range(runs):
            for i in range(history):
                t0 = time.perf_counter()
                ups = list(svc.send(uid, f"Let me tell you about {TOPICS[(r + i) % len(TOPICS)]} (run {r}, {i}).",
                                    "theanine"))
                out["reply"].append(time.perf_counter() - t0)
                assert not ups[-1].error, ups[-1]
            t0 = time.perf_counter()
            res = svc.end_session(uid)
            out["close"].append(time.perf_counter() - t0)
            assert not res.errors and res.closed and res.closed[0].report, res.message
            t0 = time.perf_counter()
            parts, _ = svc.agent.theanine.graphs.load(uid)
            out["graph reload"].append(time.perf_counter() - t0)
            sid = svc.current_session(uid).session_id
            t0 = time.perf_counter()
            mid = store.add_user_message(uid, sid, "timed write")
            store.add_reply(uid, sid, mid, "timed reply", "none", {"n": 1})
            out["store write"].append(time.perf_counter() - t0)
        out["graph sessions"] = [float(len(parts))]
        store.engine.dispose()
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--history", type=int, default=3, help="messages per session")
    args = ap.parse_args(argv)
    from pg_server import postgres, unavailable_reason
    from reliability_llm import LLMServer
    reason = unavailable_reason()
    if reason:
        sys.exit(reason)
    with LLMServer() as server:
        results = {"sqlite": bench("sqlite", None, args.runs, args.history, server)}
        with postgres(fsync=True) as url:
            results["postgres"] = bench("postgres", url, args.runs, args.history, server)
    print(f"\nmedian ms over {args.runs} sessions ({args.runs * args.history} replies), scripted LLM, "
          "MiniLM, embedded Chroma")
    print(f"{'':14}{'reply':>9}{'close':>9}{'graph reload':>14}{'store write':>13}")
    for name, r in results.items():
        print(f"{name:14}{ms(r['reply'])} {ms(r['close'])} {ms(r['graph reload']):>13} {ms(r['store write']):>12}")


if __name__ == "__main__":
    main()
