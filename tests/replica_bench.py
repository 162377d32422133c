"""Reply and session-close latency with the embedded SQLite store vs a PostgreSQL server.

    python -m tests.replica_bench                    # median of 5 of each, same machine, same code
    python -m tests.replica_bench --runs 5 --history 3

Everything but the store is the same and real (MemoryAgent from settings: MiniLM, embedded
Chroma, the `openai` client) except the LLM, the scripted OpenAI-compatible server
(tests/llm_server.py), which answers at once so the figures are the app's own work. Each
run: one user sends `--history` THEANINE messages (each timed: stored, memory retrieved, reply
streamed and stored) and ends the session (timed: both memories built, graph committed, session
marked closed). The user's graph grows by one session per run, as a real user's would.
PostgreSQL runs locally (initdb + pg_ctl, fsync on, default settings); SQLite runs in WAL mode
with synchronous=NORMAL, as the app uses it. The two backends run interleaved, session by
session. Printed: each latency and the part of it spent in database transactions; a replica's
graph reload (what it does when another replica wrote); one store write (a message and its reply).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.flat_service import FlatService

HERE = Path(__file__).resolve().parent

TOPICS = [
    "a puppy named Rex",
    "a trip to Lisbon",
    "learning the violin",
    "a new job at the bakery",
    "my sister's wedding",
    "a broken bicycle",
    "the garden tomatoes",
    "a chess tournament",
]


def ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:.1f}"


class DbClock:
    """Wall time spent inside the store's transactions (sessions.db.read / write, which every store,
    graph and version call goes through), so the database's share of a reply or close is printed."""

    def __init__(self):
        from contextlib import contextmanager

        from sessions import db

        self.spent = 0.0
        clock = self

        def timed(fn):
            @contextmanager
            def wrapper(engine):
                t0 = time.perf_counter()
                try:
                    with fn(engine) as conn:
                        yield conn
                finally:
                    clock.spent += time.perf_counter() - t0

            return wrapper

        db.read, db.write = timed(db.read), timed(db.write)


class Replica:
    """One user's service on one backend; `run()` is one session: `history` replies and a close."""

    def __init__(self, backend: str, url: str | None, data: Path, server, clock: DbClock):
        from memory.agent import MemoryAgent
        from memory.settings import Settings
        from sessions import open_service
        from sessions.store import open_store
        from tests.llm_server import app_llm_env

        settings = Settings.from_env({"MEMORY_DATA_DIR": str(data), **app_llm_env(server, LLM_TIMEOUT=60)})
        self.store = open_store(data, url or "")
        self.agent = MemoryAgent.from_settings(settings)
        self.svc = FlatService(open_service(settings, self.agent, self.store))
        self.uid, self.clock = f"bench_{backend}_" + "u" * 16, clock
        self.out: dict[str, list[float]] = {
            k: [] for k in ("reply", "reply db", "close", "close db", "graph reload", "store write")
        }
        list(self.svc.send(self.uid, "warm up the embedder and the connection pool", "theanine"))
        self.svc.end_session(self.uid)

    def timed(self, key: str, fn):
        db0, t0 = self.clock.spent, time.perf_counter()
        result = fn()
        self.out[key].append(time.perf_counter() - t0)
        self.out[key + " db"].append(self.clock.spent - db0)
        return result

    def run(self, r: int, history: int) -> None:
        svc, uid = self.svc, self.uid
        for i in range(history):
            text = f"Let me tell you about {TOPICS[(r + i) % len(TOPICS)]} (run {r}, {i})."
            ups = self.timed("reply", lambda text=text: list(svc.send(uid, text, "theanine")))
            assert not ups[-1].error, ups[-1]
        res = self.timed("close", lambda: svc.end_session(uid))
        assert not res.errors and res.closed and res.closed[0].report, res.message
        t0 = time.perf_counter()
        self.agent.theanine.graphs.load(uid)
        self.out["graph reload"].append(time.perf_counter() - t0)
        sid = svc.current_session(uid).session_id
        t0 = time.perf_counter()
        mid = self.store.add_user_message(uid, sid, "timed write")
        assert mid is not None
        self.store.add_reply(uid, sid, mid, "timed reply", "none", {"tokens": 1})
        self.out["store write"].append(time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--history", type=int, default=3, help="messages per session")
    args = ap.parse_args(argv)
    from tests.llm_server import LLMServer
    from tests.pg_server import postgres, unavailable_reason

    reason = unavailable_reason()
    if reason:
        sys.exit(reason)
    clock = DbClock()
    with LLMServer() as server, postgres(fsync=True) as url, tempfile.TemporaryDirectory() as tmp:
        reps = {
            "sqlite": Replica("sqlite", None, Path(tmp) / "sqlite", server, clock),
            "postgres": Replica("postgres", url, Path(tmp) / "pg", server, clock),
        }
        for r in range(args.runs):  # interleaved, so a change in the machine's load hits both
            for rep in reps.values():
                rep.run(r, args.history)
        for rep in reps.values():
            rep.store.engine.dispose()
    print(
        f"\nmedian ms: {args.runs} sessions, {args.runs * args.history} replies per backend "
        "(scripted LLM, MiniLM, embedded Chroma; 'db' = time inside database transactions)"
    )
    cols = ["reply", "reply db", "close", "close db", "graph reload", "store write"]
    print(f"{'':10}" + "".join(f"{c:>14}" for c in cols))
    for name, rep in reps.items():
        print(f"{name:10}" + "".join(f"{ms(rep.out[c]):>14}" for c in cols))


if __name__ == "__main__":
    main()
