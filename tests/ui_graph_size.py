"""Measure one graph render: `python -m tests.ui_graph_size [--sample conv-26] [--data FILE]`.

Imports a LoCoMo conversation in-process (real MiniLM and embedded Chroma; the LLM steps answered by
the scripted server of tests/llm_server.py, so memories are one per turn, at most 12 per
session), then prints the size of what one render puts in the page (the graph HTML with its data)
for the last reply's retrieved memories, and the size of the static page fetched once.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def main() -> None:
    from sessions import new_user_id
    from tests.llm_server import LLMServer
    from tests.reliability_app import components, make_service
    from ui.graph_view import graph_html, static_dir
    from ui.handlers import Handlers
    from ui.views import retrieved_ids

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default="../shared/data/locomo/locomo_dev.json")
    ap.add_argument("--sample", default="conv-26")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    with LLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        svc = make_service(Path(tmp), server, LLM_TIMEOUT=60)
        uid = new_user_id()
        t0 = time.time()
        res = svc.import_history(uid, Path(a.data).read_bytes(), a.sample)
        print(f"import {a.sample}: {res.message} ({time.time() - t0:.0f} s)")
        done = [u for u in svc.send(uid, "What did we talk about last time?", "theanine")][-1]
        h = Handlers(svc, components())
        sizes, times = [], []
        for _ in range(a.reps):
            t = time.perf_counter()
            page = graph_html(
                svc.graph(uid),
                retrieved_ids(done.trace),
                svc.latest_new_memories(uid),
                h.views.session_positions(svc.sessions(uid)),
                h.views.turn_texts(svc.user(uid)),
            )
            times.append(time.perf_counter() - t)
            sizes.append(len(page.encode("utf-8")))
        n = len(svc.graph(uid)["nodes"])
        static = sum(f.stat().st_size for f in static_dir().iterdir())
        print(
            f"memories: {n}; one render: {sizes[0] / 1024:.0f} KB in the page "
            f"(built in {sorted(times)[len(times) // 2] * 1000:.0f} ms, median of {a.reps}); "
            f"static page + vis-network, fetched once: {static / 1024:.0f} KB"
        )


if __name__ == "__main__":
    main()
