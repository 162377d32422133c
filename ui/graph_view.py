"""The THEANINE memory graph: a static page (vis-network) fed with one render's data.

The page (ui/static: graph.html, graph.js, graph.css, plus vis-network's script
taken from the pyvis package) is served by the app and cached by the browser,
so a render sends only its data: the nodes and edges, as JSON in the iframe's
URL fragment (a fragment never reaches a server). The iframe is sandboxed
(`allow-scripts`, no `allow-same-origin`): the graph page cannot read the app's
cookies or storage, and its Content-Security-Policy allows no request but its
own scripts. The page sets every text as text (textContent, DOM tooltips,
canvas labels); memory texts also lose their angle brackets (< > become ‹ ›),
so no tag can form even where a text ends up in HTML.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import threading
from html import escape
from pathlib import Path
from urllib.parse import quote

MAX_NODES = 300  # most recent memories drawn; retrieved ones are always added
TURN_CHARS = 300  # each source turn, as shown on click
EVENT_CHARS = 300
STATIC_SRC = Path(__file__).resolve().parent / "static"
_static_lock = threading.Lock()
_static_dir: Path | None = None


def _vis_script() -> str:
    """vis-network's standalone script, as shipped inside pyvis (which the app already depends on)."""
    import pyvis

    root = Path(pyvis.__file__).resolve().parent
    found = sorted(root.glob("templates/lib/vis-*/vis-network.min.js"))
    if found:
        return found[-1].read_text(encoding="utf-8")
    from pyvis.network import Network  # older layouts: take the script pyvis inlines in a page

    page = Network(cdn_resources="in_line").generate_html()
    scripts = re.findall(r"<script[^>]*>(.*?)</script>", page, re.S)
    return max(scripts, key=len)


def static_dir() -> Path:
    """The folder the app serves the graph page from (made once per process)."""
    global _static_dir
    with _static_lock:
        if _static_dir is None:
            d = Path(tempfile.mkdtemp(prefix="memory-chat-graph-"))
            for f in STATIC_SRC.iterdir():
                if f.is_file():
                    shutil.copy(f, d / f.name)
            (d / "vis-network.min.js").write_text(_vis_script(), encoding="utf-8")
            _static_dir = d
        return _static_dir


def page_url() -> str:
    """The graph page's URL, relative to the app's page (works under a proxy's path prefix)."""
    return f"gradio_api/file={static_dir().as_posix()}/graph.html"


def short_text(value, n: int = EVENT_CHARS) -> str:
    """`value` on one line, at most `n` characters, with no angle brackets (safe inside the page's markup)."""
    t = " ".join(str(value or "").split()).replace("<", "‹").replace(">", "›")
    return t if len(t) <= n else t[: n - 1] + "…"


def select_nodes(nodes: list[dict], retrieved: set[str], limit: int = MAX_NODES) -> list[dict]:
    """The most recent `limit` memories (the view lists them oldest first) plus every retrieved one."""
    keep = {n["id"] for n in nodes[-limit:]} | (retrieved & {n["id"] for n in nodes})
    return [n for n in nodes if n["id"] in keep]


def graph_data(
    view: dict,
    retrieved=(),
    new=(),
    sessions: list[tuple[str, str, float]] | None = None,
    turns=None,
    scope: str = "",
    limit: int = MAX_NODES,
) -> dict:
    """One render's data, compact: sessions [id, label, position 0..1 by date], nodes [id, event, time,
    session index, flags (1 retrieved, 2 new), source turns, id of the memory that superseded it or ""],
    edges [from index, to index, relation].

    `sessions`: the user's sessions in time order as (id, label, position); `turns(ids)` gives
    {turn id: (speaker, text)} for the source turns shown on click.
    """
    retrieved, new = set(retrieved), set(new)
    all_nodes = view.get("nodes") or []
    nodes = select_nodes(all_nodes, retrieved, limit)
    sess = list(sessions or [])
    index = {sid: i for i, (sid, _, _) in enumerate(sess)}
    for n in nodes:  # a memory of a session the list does not know (should not happen)
        sid = str(n.get("session_id", ""))
        if sid not in index:
            index[sid] = len(sess)
            sess.append((sid, sid, 1.0))
    texts = turns([t for n in nodes for t in n.get("turns") or []]) if turns else {}
    pos = {str(n["id"]): i for i, n in enumerate(nodes)}
    out_nodes = []
    for n in nodes:
        nid = str(n["id"])
        src = [
            [short_text(texts[t][0], 60), short_text(texts[t][1], TURN_CHARS)]
            for t in n.get("turns") or []
            if t in texts
        ]
        out_nodes.append(
            [
                nid,
                short_text(n.get("event")),
                short_text(n.get("time"), 60),
                index[str(n.get("session_id", ""))],
                (1 if nid in retrieved else 0) | (2 if nid in new else 0),
                src,
                str(n.get("superseded_by") or ""),  # drawn faded, with its Changed edge (issue 22)
            ]
        )
    out_edges = [
        [pos[str(e.get("source"))], pos[str(e.get("target"))], short_text(e.get("relation"), 20)]
        for e in view.get("edges") or []
        if str(e.get("source")) in pos and str(e.get("target")) in pos
    ]
    used = sorted({index[str(n.get("session_id", ""))] for n in nodes})
    remap = {old: i for i, old in enumerate(used)}
    for n in out_nodes:
        n[3] = remap[n[3]]
    return {
        "v": 1,
        "total": len(all_nodes),
        "scope": scope,
        "s": [[sess[i][0], short_text(sess[i][1], 80), round(float(sess[i][2]), 4)] for i in used],
        "n": out_nodes,
        "e": out_edges,
    }


def graph_html(view: dict, retrieved=(), new=(), sessions=None, turns=None, height: int = 460, scope: str = "") -> str:
    """What gr.HTML shows: the sandboxed iframe with this render's data, or a hint when there is no memory."""
    if not view.get("nodes"):
        return (
            '<div id="memory-graph" class="mc-muted mc-graph-empty">The memory graph is empty: chat, then '
            "press <b>End session</b> to turn the session into memories.</div>"
        )
    data = graph_data(view, retrieved, new, sessions, turns, scope)
    frag = quote(json.dumps(data, ensure_ascii=False, separators=(",", ":")), safe="")
    shown = len(data["n"])
    note = (
        f"{shown} of {data['total']} memories"
        if data["total"] > shown
        else (f"{shown} memories" if shown != 1 else "1 memory")
    )
    return (
        f'<div id="memory-graph" data-memories="{shown}">'
        f'<iframe class="mc-graph-frame" title="Memory graph ({note})" sandbox="allow-scripts" '
        f'style="width:100%;height:{int(height)}px;border:1px solid #ddd;border-radius:6px" '
        f'src="{escape(page_url() + "#" + frag, quote=True)}"></iframe></div>'
    )


def busy_html(text: str) -> str:
    return f'<div id="memory-graph" class="mc-muted mc-graph-empty">{escape(text)}</div>'
