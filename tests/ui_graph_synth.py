"""Synthetic memory graphs for the graph page, and a small local server that shows one render.

`synthetic(n)` makes a THEANINE-shaped graph view (what the memory room's `graph()` returns): `n` memories
in sessions of 25, each new memory linked to one or two earlier ones by a relation, plus a trace's
retrieved memories (anchors and the timelines behind them) and the source turns. `GraphHost` serves the
graph page (ui/static, or another copy of it) and a host page holding exactly what `graph_html` puts in
the app's page, so a browser draws it as the app does. Used by tests/ui_graph_bench.py and
tests/test_ui_graph_scale.py.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from datetime import date, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PER_SESSION = 25
RELATIONS = ("Cause", "Reason", "Want", "React", "SameTopic", "HinderedBy", "Changed")
PEOPLE = ("Caroline", "Melanie", "John", "Maria")
DOING = (
    "started going to a pottery class on Tuesdays",
    "planned a camping trip to the lake with the kids",
    "volunteered at the food bank over the weekend",
    "finished reading a long novel about a lighthouse",
    "signed up for a charity run in the autumn",
    "painted the garden fence a pale shade of green",
    "took the dog to the vet for a sore paw",
    "joined a choir that sings at the town hall",
    "cooked a big curry for the neighbours",
    "fixed an old bicycle found in the garage",
)
# A fact only the oldest session holds: what a search for an old memory must find.
OLD_FACT = "adopted a corn snake called Noodle from the reptile shelter"
OLD_WORD = "snake"


@dataclass
class Synthetic:
    view: dict  # {"nodes": [...], "edges": [...]}, oldest first, as the service returns it
    sessions: list[tuple[str, str, float]]  # (id, label, position by date): Views.session_positions
    retrieved: set[str]  # a trace's memories and their timelines: views.retrieved_ids
    texts: dict[str, tuple[str, str]] = field(default_factory=dict)

    def turns(self, ids: list[str]) -> dict[str, tuple[str, str]]:
        return {t: self.texts[t] for t in ids if t in self.texts}


def synthetic(n: int, seed: int = 7) -> Synthetic:
    """`n` memories in sessions of PER_SESSION, dated a week apart from 1 May 2023."""
    rng = random.Random(seed)
    n_sessions = max(1, -(-n // PER_SESSION))
    start = date(2023, 5, 1)
    sessions = [
        (f"s{i + 1}", f"Session {i + 1} · {_human(start + timedelta(days=7 * i))}", i / max(1, n_sessions - 1))
        for i in range(n_sessions)
    ]
    nodes: list[dict] = []
    edges: list[dict] = []
    texts: dict[str, tuple[str, str]] = {}
    for k in range(n):
        si, m = divmod(k, PER_SESSION)
        who = PEOPLE[k % len(PEOPLE)]
        event = f"{who} {OLD_FACT}" if k == 3 else f"{who} {DOING[rng.randrange(len(DOING))]} (note {k})"
        day = start + timedelta(days=7 * si)
        turn = f"t{k}"
        texts[turn] = (who, f"{event}. It came up while we talked about the week, and I wanted you to remember it.")
        nodes.append(
            {
                "id": f"s{si + 1}:m{m}",
                "event": event,
                "time": f"{day.isoformat()} 18:{m:02d}",
                "session_id": f"s{si + 1}",
                "turns": [turn],
            }
        )
        if k and rng.random() < 0.5 and m:  # the memory before it, same session
            edges.append(_edge(nodes[k - 1]["id"], nodes[k]["id"], rng))
        if k >= PER_SESSION and rng.random() < 0.7:  # an earlier session's memory
            edges.append(_edge(nodes[rng.randrange(k - m)]["id"], nodes[k]["id"], rng))
    return Synthetic({"nodes": nodes, "edges": edges}, sessions, _trace(nodes, edges, rng), texts)


def _edge(a: str, b: str, rng: random.Random) -> dict:
    return {"source": a, "target": b, "relation": RELATIONS[rng.randrange(len(RELATIONS))]}


def _human(d: date) -> str:
    return f"{d:%a} {d.day} {d:%b %Y}"


def _trace(nodes: list[dict], edges: list[dict], rng: random.Random) -> set[str]:
    """Six anchors across the history, each with the timeline behind it (two links back), as THEANINE
    retrieves them."""
    into: dict[str, list[str]] = {}
    for e in edges:
        into.setdefault(e["target"], []).append(e["source"])
    ids = [x["id"] for x in nodes]
    picked: set[str] = set()
    for a in (ids[int(len(ids) * f)] for f in (0.15, 0.4, 0.6, 0.8, 0.9, 0.99)):
        at = a
        picked.add(at)
        for _ in range(2):
            if not into.get(at):
                break
            at = into[at][rng.randrange(len(into[at]))]
            picked.add(at)
    return picked


class GraphHost:
    """A local HTTP server: `/` is a host page holding one `graph_html` render in a box of the graph
    panel's width; `/gradio_api/file=<static dir>/...` serves the graph page as Gradio does."""

    def __init__(self, static: Path):
        self.static = static.resolve()
        self.host_html = ""
        host = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                path = self.path.split("#", 1)[0].split("?", 1)[0]
                if path == "/":
                    return self._send(host.host_html.encode(), "text/html; charset=utf-8")
                prefix = "/gradio_api/file="
                if path.startswith(prefix):
                    f = Path(path[len(prefix) :]).resolve()
                    if f.parent == host.static and f.is_file():
                        kind = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}[f.suffix]
                        return self._send(f.read_bytes(), kind + "; charset=utf-8")
                self.send_error(404)

            def _send(self, body: bytes, kind: str) -> None:
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "max-age=3600")  # the page and vis-network are fetched once
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def show(self, graph: str, width: int) -> None:
        """The host page: the render as gr.HTML shows it, with the graph page from this server's static dir."""
        import ui.graph_view as gv

        graph = graph.replace(gv.static_dir().as_posix(), self.static.as_posix())
        self.host_html = (
            f'<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:8px">'
            f'<div id="graph-panel" style="width:{width}px">{graph}</div></body></html>'
        )

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def render(s: Synthetic, found=(), open_id: str = "", scope: str = "", limit: int | None = None) -> str:
    """One render's HTML through the app's code path (ui.graph_view.graph_html), as Views.graph
    makes it (no memories new since the last close)."""
    from ui import graph_view

    return graph_view.graph_html(
        s.view,
        s.retrieved,
        (),
        s.sessions,
        s.turns,
        scope=scope,
        found=found,
        open_id=open_id,
        limit=limit or graph_view.MAX_NODES,
    )
