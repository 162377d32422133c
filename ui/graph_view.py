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
import threading
from html import escape
from pathlib import Path
from urllib.parse import quote

from memory.files import scratch_dir
from sessions.settings import Page

from .html_text import RELATIONS, date_text

# Most recent memories sent to the graph page (GRAPH_MAX_NODES); retrieved and searched-for ones are always
# added. The page draws this reply's part of them one by one and summarises the rest by session
# (ui/static/graph.js); "Show everything" draws them all.
MAX_NODES = Page.from_env().graph_max_nodes
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
            d = scratch_dir("memory-chat-graph-")
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


def select_nodes(nodes: list[dict], keep_ids: set[str], limit: int = MAX_NODES) -> list[dict]:
    """The most recent `limit` memories (the view lists them oldest first) plus every one in `keep_ids`
    (the retrieved ones, a search's matches)."""
    keep = {n["id"] for n in nodes[-limit:]} | (keep_ids & {n["id"] for n in nodes})
    return [n for n in nodes if n["id"] in keep]


# One sequential scale (older = dark blue, newer = yellow): a session's colour is fixed by its date.
_STOPS = ((68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37))
# vis-network options, through pyvis: a seeded layout (the same graph is drawn the same way at every
# render), physics only until the layout is stable (graph.js then turns it off).
OPTIONS = {
    "physics": {
        "solver": "barnesHut",
        "stabilization": {"enabled": True, "iterations": 200},
        "barnesHut": {"gravitationalConstant": -3000, "springLength": 110, "avoidOverlap": 0.2},
    },
    # Each edge carries its relation as a small label on the arrow; graph.js draws it on the arrows of
    # this render's memories, and on every arrow once zoomed in (a dense graph is not covered in words).
    "edges": {
        "smooth": {"type": "continuous"},
        "width": 1.2,
        "arrows": {"to": {"enabled": True, "scaleFactor": 0.5}},
        "font": {"size": 10, "color": "#444444", "strokeWidth": 3, "strokeColor": "#ffffff", "align": "horizontal"},
    },
    "nodes": {"size": 10, "borderWidth": 1, "font": {"size": 13, "strokeWidth": 4, "strokeColor": "#ffffff"}},
    "interaction": {"hover": True, "tooltipDelay": 150},
    "layout": {"randomSeed": 7},
}


class _IdList(list):
    """pyvis keeps node ids in a list and checks it for every node and edge added (quadratic: 1.1 s at
    3,000 memories); the same list with a set beside it answers `in` at once."""

    def __init__(self):
        super().__init__()
        self._ids: set = set()

    def append(self, item) -> None:
        super().append(item)
        self._ids.add(item)

    def __contains__(self, item) -> bool:
        return item in self._ids


def session_colour(position: float) -> str:
    t = max(0.0, min(1.0, float(position or 0)))
    x = t * (len(_STOPS) - 1)
    i = min(int(x), len(_STOPS) - 2)
    f = x - i
    r, g, b = (round(a + (b - a) * f) for a, b in zip(_STOPS[i], _STOPS[i + 1], strict=True))
    return f"#{r:02x}{g:02x}{b:02x}"


def graph_data(
    view: dict,
    retrieved=(),
    new=(),
    sessions: list[tuple[str, str, float]] | None = None,
    turns=None,
    scope: str = "",
    limit: int = MAX_NODES,
    found=(),
    open_id: str = "",
    ranked=(),
) -> dict:
    """One render's data: the nodes, edges and options of a pyvis Network (`get_network_data()`), plus
    the sessions [id, label, position 0..1 by date].

    A node's label is its memory's event; it also carries `tm` its date as the sidebar writes dates
    (`tr` the stored text), `si` session index, `fl` flags (1 read by the reply: `retrieved`, 2 new, 4 found by
    a search, 8 ranked by retrieval but not given to the reply: `ranked`)
    and `src` source turns; the page names it as the sidebar numbers sessions, from its session's label
    and its id ("Session 15 · memory 46" for s18:m46). An edge carries its relation as `label` (drawn on
    the arrow) and `title`. `sessions`: the user's sessions in time order as (id, label, position), the
    label as the sidebar names the session ("Session 15 · Mon 8 May 2023"); `turns(ids)` gives {turn id:
    (speaker, text)} for the source turns shown on click; `found`: a search's matches (drawn even when
    older than the `limit` most recent); `open_id`: the memory to open at once.
    """
    from pyvis.network import Network

    retrieved, new, found = set(retrieved), set(new), set(found)
    ranked = set(ranked) - retrieved
    all_nodes = view.get("nodes") or []
    nodes = select_nodes(all_nodes, retrieved | ranked | found | ({open_id} if open_id else set()), limit)
    sess = list(sessions or [])
    index = {sid: i for i, (sid, _, _) in enumerate(sess)}
    for n in nodes:  # a memory of a session the list does not know (should not happen)
        sid = str(n.get("session_id", ""))
        if sid not in index:
            index[sid] = len(sess)
            sess.append((sid, sid, 1.0))
    used = sorted({index[str(n.get("session_id", ""))] for n in nodes})
    remap = {old: i for i, old in enumerate(used)}
    texts = turns([t for n in nodes for t in n.get("turns") or []]) if turns else {}
    net = Network(directed=True)
    if isinstance(net.node_ids, list) and not net.node_ids:
        net.node_ids = _IdList()
    net.set_options(json.dumps(OPTIONS))
    for n in nodes:
        nid = str(n["id"])
        si = index[str(n.get("session_id", ""))]
        colour = session_colour(sess[si][2])
        # The label is the whole event (graph.js draws its first LABEL_CHARS where labels are shown).
        net.add_node(
            nid,
            label=short_text(n.get("event")) or "(empty)",
            shape="dot",
            color=colour,
            tm=short_text(date_text(n.get("time")), 60),
            tr=short_text(n.get("time"), 60),
            si=remap[si],
            fl=(1 if nid in retrieved else 0)
            | (2 if nid in new else 0)
            | (4 if nid in found else 0)
            | (8 if nid in ranked else 0),
            src=[
                [short_text(texts[t][0], 60), short_text(texts[t][1], TURN_CHARS)]
                for t in n.get("turns") or []
                if t in texts
            ],
            sup=str(n.get("superseded_by") or ""),  # drawn faded, with its Changed edge (knowledge updates)
        )
    drawn = set(net.node_map)
    for e in view.get("edges") or []:
        a, b = str(e.get("source")), str(e.get("target"))
        if a in drawn and b in drawn:
            rel = short_text(e.get("relation"), 20)
            net.add_edge(a, b, title=rel, label=rel, color=RELATIONS.get(rel, "#9d9d9d"))
    vis_nodes, vis_edges, _heading, _height, _width, options = net.get_network_data()
    return {
        "v": 2,
        "total": len(all_nodes),
        "scope": scope,
        "open": open_id if open_id in drawn else "",
        "s": [[sess[i][0], short_text(sess[i][1], 80), round(float(sess[i][2]), 4)] for i in used],
        "n": vis_nodes,
        "e": vis_edges,
        "o": json.loads(options),
        "ramp": [session_colour(t) for t in (0, 0.25, 0.5, 0.75, 1)],  # the legend's date scale
    }


def find_memories(view: dict, query: str, limit: int = 50) -> list[dict]:
    """Every memory whose event holds all the words of `query` (case-insensitive), newest first:
    the search runs on the server over the whole memory, not only the drawn part."""
    words = [w for w in " ".join(str(query or "").lower().split()).split(" ") if w][:12]
    if not words:
        return []
    hits = [n for n in view.get("nodes") or [] if all(w in str(n.get("event") or "").lower() for w in words)]
    return hits[::-1][:limit]


def graph_html(
    view: dict,
    retrieved=(),
    new=(),
    sessions=None,
    turns=None,
    height: int = 460,
    scope: str = "",
    found=(),
    open_id: str = "",
    limit: int = MAX_NODES,
    ranked=(),
) -> str:
    """What gr.HTML shows: the sandboxed iframe with this render's data, or a hint when there is no memory."""
    if not view.get("nodes"):
        return (
            '<div id="memory-graph" class="mc-muted mc-graph-empty">The memory graph is empty: chat, then '
            "press <b>End session</b> to turn the session into memories.</div>"
        )
    data = graph_data(view, retrieved, new, sessions, turns, scope, limit, found=found, open_id=open_id, ranked=ranked)
    frag = fragment(data)
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


def fragment(data: dict) -> str:
    """A render's data as a URL fragment: JSON, percent-encoded except the JSON punctuation a fragment
    may hold as it is (the page reads it with decodeURIComponent); a third smaller than encoding all."""
    return quote(json.dumps(data, ensure_ascii=False, separators=(",", ":")), safe=":,[]{}")


def busy_html(text: str) -> str:
    return f'<div id="memory-graph" class="mc-muted mc-graph-empty">{escape(text)}</div>'
