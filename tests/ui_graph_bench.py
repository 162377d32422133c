"""The memory graph in real Chromium at 100 and 1,000 memories: render time and overlapping labels.

    python -m tests.ui_graph_bench [--sizes 100 1000] [--runs 3] [--page-from COMMIT] [--limit N]

Each graph is synthetic (tests/ui_graph_synth.py: sessions of 25 memories, relations between them, a
trace's retrieved memories with their timelines) and goes through the app's code path
(ui.graph_view.graph_html, as Views.graph calls it) into a host page served on 127.0.0.1, in a box
of the graph panel's width at 1400 px (600) and at 400 px (380). For the default view and for "Show
everything" it prints, as the median of `--runs` loads: the render time (the frame's navigation to its
first view drawn: page, vis-network, layout, fit and labels), the nodes drawn, the node labels drawn and
the label overlaps: pairs of drawn node labels, on screen, whose boxes (vis-network's own measure of each
label as drawn) intersect. `--page-from COMMIT` draws with the graph page (ui/static) of another commit,
for a before/after (with `--limit 300`: what the page was sent before). A measurement, not a test.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
from pathlib import Path

from tests.ui_fixtures import ROOT, chromium_browser
from tests.ui_graph_synth import GraphHost, render, synthetic

WIDTHS = {"1400": 600, "400": 380}  # the graph panel's width at each viewport
VIEWS = {"default": "", "everything": "all"}

# Measured in the frame from what vis-network drew, whatever page draws it (this one or an older one).
MEASURE = """() => {
  const frame = document.getElementById('mynetwork'), all = network.body.nodes, boxes = [];
  let drawn = 0;
  for (const id of nodes.getIds()) {
    const n = all[id];
    if (!n || n.options.hidden) continue;
    drawn++;
    const s = n.labelModule && n.labelModule.size;
    if (!n.options.label || !s || !s.width) continue;
    const a = network.canvasToDOM({x: s.left, y: s.top});
    const b = network.canvasToDOM({x: s.left + s.width, y: s.top + s.height});
    if (b.x > 0 && b.y > 0 && a.x < frame.clientWidth && a.y < frame.clientHeight) boxes.push([a.x, a.y, b.x, b.y]);
  }
  let overlaps = 0;
  for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) {
    const p = boxes[i], q = boxes[j];
    if (p[0] < q[2] && q[0] < p[2] && p[1] < q[3] && q[1] < p[3]) overlaps++;
  }
  return {drawn, labels: boxes.length, overlaps};
}"""


def page_dir(commit: str, into: Path) -> Path:
    """The graph page of `commit` (ui/static), with this checkout's vis-network."""
    from ui.graph_view import static_dir

    names = subprocess.run(
        ["git", "ls-tree", "--name-only", f"{commit}:ui/static"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()
    for name in names:
        blob = subprocess.run(["git", "show", f"{commit}:ui/static/{name}"], cwd=ROOT, check=True, capture_output=True)
        (into / name).write_bytes(blob.stdout)
    (into / "vis-network.min.js").write_bytes((static_dir() / "vis-network.min.js").read_bytes())
    return into


def once(browser, host: GraphHost, width: int) -> dict:
    viewport = {"width": 1400, "height": 900} if width > 500 else {"width": 400, "height": 850}
    page = browser.new_page(viewport=viewport)
    try:
        page.goto(host.url)
        frame = page.locator("#memory-graph iframe").element_handle().content_frame()
        ms = frame.wait_for_function(
            "() => window.graphReady === true && performance.now()", polling="raf", timeout=300_000
        ).json_value()
        page.wait_for_timeout(300)  # a relabel after the first view (zoom, drag) would show here
        return {"ms": ms, **frame.evaluate(MEASURE)}
    finally:
        page.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.ui_graph_bench", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[100, 1000], help="memories per graph")
    p.add_argument("--runs", type=int, default=3, help="loads per figure (the median is printed)")
    p.add_argument("--page-from", default="", help="draw with the graph page of this commit")
    p.add_argument("--limit", type=int, default=0, help="memories sent to the page (default: GRAPH_MAX_NODES)")
    a = p.parse_args(argv)
    from ui.graph_view import static_dir

    with tempfile.TemporaryDirectory() as tmp:
        static = page_dir(a.page_from, Path(tmp)) if a.page_from else static_dir()
        host = GraphHost(static)
        browsers = chromium_browser()
        browser = next(browsers)
        try:
            print(f"graph page: {a.page_from or 'this checkout'}; median of {a.runs} loads (after one warm-up)")
            print("memories  view        width  render ms  nodes drawn  labels drawn  label overlaps")
            for n in a.sizes:
                s = synthetic(n)
                for view, scope in VIEWS.items():
                    html = render(s, scope=scope, limit=a.limit or None)
                    for size, width in WIDTHS.items():
                        host.show(html, width)
                        once(browser, host, width)  # warm-up: the page and vis-network in the cache
                        rows = [once(browser, host, width) for _ in range(a.runs)]
                        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
                        print(
                            f"{n:>8}  {view:<10}  {size:>5}  {med['ms']:>9.0f}  {med['drawn']:>11.0f}  "
                            f"{med['labels']:>12.0f}  {med['overlaps']:>14.0f}"
                        )
        finally:
            host.close()
            next(browsers, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
