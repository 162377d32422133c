"""The THEANINE memory graph as a pyvis page inside a sandboxed iframe.

gr.HTML does not run <script>, so the pyvis page goes into an
`<iframe srcdoc=... sandbox="allow-scripts">`: scripts run, but without
allow-same-origin the page cannot touch the app's cookies or storage. Its
resources are inlined (cdn_resources="in_line", ~700 KB) so it renders without
internet, and a Content-Security-Policy forbids any network request from it.

pyvis labels and titles can reach HTML: vis draws labels on the canvas and sets
string titles with innerText, but pyvis's tooltip_link mode (any title holding
"href") writes titles with innerHTML. Memory texts therefore lose their angle
brackets (< > become ‹ ›): no tag can form in any of these modes, and the text
stays readable where html.escape would show "&lt;" or "&amp;" on the canvas.
"""
from __future__ import annotations

import json
import re
from html import escape

from pyvis.network import Network

MAX_NODES = 300          # most recent memories drawn; retrieved ones are always added
LABEL_CHARS = 40
SESSION_COLOURS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#ff9da7", "#9c755f",
                   "#bab0ac", "#86bcb6", "#d37295", "#a0cbe8"]
RELATION_COLOURS = {"Changed": "#e15759", "Cause": "#f28e2b", "Reason": "#edc948", "HinderedBy": "#b07aa1",
                    "React": "#59a14f", "Want": "#4e79a7", "SameTopic": "#9d9d9d"}
RETRIEVED_COLOUR = "#d62728"

# No network at all from the graph page: inline scripts and styles only.
CSP = ("<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
       "script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; font-src data:\">")
_EMPTY_HEADING = re.compile(r"<center>\s*<h1>\s*</h1>\s*</center>")
_FIT = ("<style>html, body {margin: 0; padding: 0; overflow: hidden} .card {border: 0 !important} "
        "#mynetwork {border: 0 !important; height: 100vh !important}</style>")
_REMOTE_TAGS = re.compile(r"<link[^>]+https?://[^>]*>|<script[^>]+src=\"https?://[^\"]*\"[^>]*>\s*</script>", re.S)

OPTIONS = {
    "physics": {"solver": "barnesHut", "stabilization": {"enabled": True, "iterations": 150},
                "barnesHut": {"gravitationalConstant": -4000, "springLength": 120}},
    "edges": {"arrows": {"to": {"enabled": True, "scaleFactor": 0.6}}, "smooth": {"type": "dynamic"},
              "font": {"size": 10, "align": "middle"}},
    "nodes": {"font": {"size": 12}},
    "interaction": {"hover": True, "tooltipDelay": 150},
}


def _text(value) -> str:
    """Memory text for a pyvis label or title: single spaces, and no "<" or ">" (see the module doc)."""
    return " ".join(str(value or "").split()).replace("<", "‹").replace(">", "›")


def _short(text: str, n: int = LABEL_CHARS) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def select_nodes(nodes: list[dict], retrieved: set[str], limit: int = MAX_NODES) -> list[dict]:
    """The most recent `limit` memories (the view lists them oldest first) plus every retrieved one."""
    keep = {n["id"] for n in nodes[-limit:]} | (retrieved & {n["id"] for n in nodes})
    return [n for n in nodes if n["id"] in keep]


def graph_page(view: dict, retrieved: set[str] = frozenset(), new: set[str] = frozenset(),
               session_labels: dict[str, str] | None = None, limit: int = MAX_NODES) -> str:
    """A standalone HTML page drawing the graph; `view` is MemoryAgent.graph_view()."""
    labels = session_labels or {}
    nodes = select_nodes(view.get("nodes") or [], set(retrieved), limit)
    sessions = list(dict.fromkeys(str(n.get("session_id", "")) for n in nodes))
    colour = {s: SESSION_COLOURS[i % len(SESSION_COLOURS)] for i, s in enumerate(sessions)}
    net = Network(height="440px", width="100%", directed=True, cdn_resources="in_line", bgcolor="#ffffff")
    for n in nodes:
        nid, sid = str(n["id"]), str(n.get("session_id", ""))
        event = " ".join(str(n.get("event", "")).split())
        marks = (["retrieved for this reply"] if nid in retrieved else []) + (["new"] if nid in new else [])
        title = "\n".join([_text(event), f"time: {_text(n.get('time'))}",
                           f"session: {_text(labels.get(sid, sid))}", f"id: {_text(nid)}"]
                          + ([f"made: {_text(n['built_by'])}"] if n.get("built_by") else [])
                          + ([f"({', '.join(marks)})"] if marks else []))
        attrs = {"color": {"background": colour[sid], "border": RETRIEVED_COLOUR if nid in retrieved else colour[sid]},
                 "borderWidth": 4 if nid in retrieved else 1, "size": 22 if nid in retrieved else 14,
                 "shape": "star" if nid in retrieved else ("diamond" if nid in new else "dot")}
        net.add_node(nid, label=_short(_text(event)), title=title, **attrs)
    kept = {str(n["id"]) for n in nodes}
    for e in view.get("edges") or []:
        s, t, rel = str(e.get("source")), str(e.get("target")), str(e.get("relation") or "")
        if s in kept and t in kept:
            net.add_edge(s, t, label=_text(rel), title=_text(rel), color=RELATION_COLOURS.get(rel, "#9d9d9d"))
    net.set_options(json.dumps(OPTIONS))
    page = net.generate_html()
    page = _EMPTY_HEADING.sub("", _REMOTE_TAGS.sub("", page))
    return page.replace("<head>", "<head>" + CSP, 1).replace("</head>", _FIT + "</head>", 1)


def legend_html(view: dict, session_labels: dict[str, str], retrieved: set[str], new: set[str],
                limit: int = MAX_NODES) -> str:
    nodes = select_nodes(view.get("nodes") or [], set(retrieved), limit)
    sessions = list(dict.fromkeys(str(n.get("session_id", "")) for n in nodes))
    items = [f'<span class="mc-chip" style="background:{SESSION_COLOURS[i % len(SESSION_COLOURS)]}">'
             f"{escape(session_labels.get(s, s))}</span>" for i, s in enumerate(sessions)]
    rels = sorted({str(e.get("relation")) for e in view.get("edges") or []})
    items += [f'<span class="mc-rel" style="border-color:{RELATION_COLOURS.get(r, "#9d9d9d")}">{escape(r)}</span>'
              for r in rels]
    total = len(view.get("nodes") or [])
    shown = f"{len(nodes)} of {total} memories" if total > len(nodes) else f"{total} memories"
    return (f'<div class="mc-legend">{shown} · ★ retrieved ({len(retrieved & {n["id"] for n in nodes})}) · '
            f'◆ new ({len(new & {n["id"] for n in nodes})}) · {"".join(items)}</div>')


def graph_html(view: dict, retrieved=(), new=(), session_labels: dict[str, str] | None = None,
               height: int = 460) -> str:
    """What gr.HTML shows: a legend and the iframe, or a hint when there is no memory yet."""
    retrieved, new, labels = set(retrieved), set(new), session_labels or {}
    if not view.get("nodes"):
        return ('<div id="memory-graph" class="mc-muted mc-graph-empty">The memory graph is empty: chat, then '
                "press <b>End session</b> to turn the session into memories.</div>")
    page = graph_page(view, retrieved, new, labels)
    return (f'<div id="memory-graph">{legend_html(view, labels, retrieved, new)}'
            f'<iframe class="mc-graph-frame" title="Memory graph" sandbox="allow-scripts" '
            f'style="width:100%;height:{int(height)}px;border:1px solid #ddd;border-radius:6px" '
            f'srcdoc="{escape(page, quote=True)}"></iframe></div>')
