"""Screenshots of issue 46's page after a 32-session import, at 1400 and 400 px (docs/ui.md lists them).

    python -m tests.rough_edges_shots [--keep DIR] [--out docs/img]

Starts app.py on its offline defaults and, in headless Chromium, imports LoCoMo conv-41 (32 sessions, about
1,000 memories) through the Data panel (with `--keep DIR`, a DIR kept by an earlier run or by
`python -m tests.timetravel_bench --keep DIR` is used as it is), asks one question, then saves at each width:
the sidebar open (edges_sidebar_*), the memory graph of that reply (edges_graph_*), time travel at its last
step (edges_timetravel_*), the Evaluate tab running with its estimate (edges_eval_running_*) and finished
with the time it took (edges_eval_done_*). Each PNG is kept under 250 KB. Slow (minutes): not a pytest test.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import LOCOMO_SMALL
from tests.scale_shots import snap
from tests.test_ui_timetravel import import_file
from tests.timetravel_bench import kept_state, shrink_png
from tests.ui_fixtures import ROOT, RunningApp, chromium_browser
from ui.timetravel import ACCORDION

DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
SIZES = {"1400": (1400, 900), "400": (400, 850)}
QUESTION = "What did Jolene say about her snake?"


def log(text: str) -> None:
    print(text, flush=True)


def sidebar(page, open_it: bool) -> None:
    is_open = page.locator(".sidebar.open").count() > 0
    if is_open != open_it:
        page.locator('#sidebar button[aria-label="Toggle Sidebar"]').first.click()
        page.wait_for_timeout(800)


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.rough_edges_shots", description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(DEV))
    p.add_argument("--sample", default="conv-41")
    p.add_argument("--keep", default="")
    p.add_argument("--out", default=str(ROOT / "docs" / "img"))
    a = p.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    browsers = chromium_browser()
    browser = next(browsers)
    with tempfile.TemporaryDirectory() as tmp:
        keep = Path(a.keep) if a.keep else Path(tmp)
        keep.mkdir(parents=True, exist_ok=True)
        state = keep / "browser.json"
        app = RunningApp(keep / "data", keep / "shots-app.log")
        try:
            ctx = browser.new_context(viewport={"width": 1400, "height": 900}, storage_state=kept_state(state, app.url))
            page = ctx.new_page()
            page.goto(app.url)
            page.wait_for_selector("#session-header", timeout=120_000)
            if not state.exists():
                sample = next(s for s in json.loads(Path(a.data).read_text()) if s["sample_id"] == a.sample)
                src = Path(tmp) / f"{a.sample}.json"
                src.write_text(json.dumps([sample]))
                import_file(page, src, timeout=3_600_000)
                ctx.storage_state(path=str(state))
            # One question, answered with THEANINE: the graph then marks what the reply read and what was only ranked.
            page.locator("#strategy label", has_text="THEANINE").first.click()
            page.wait_for_timeout(1000)
            bots = "document.querySelectorAll('#chat [data-testid=\"bot\"]')"
            before = page.evaluate(f"() => {bots}.length")
            page.locator("#msg textarea").fill(QUESTION)
            page.locator("#msg textarea").press("Enter")
            page.wait_for_function(  # the reply is complete (no "Reading N tokens of memory…" line left)
                f"(n) => {{ const b = {bots}; const t = b.length > n ? b[b.length - 1].innerText : '';"
                " return t.trim() && !/Reading \\d+ tokens|^\\s*(…|\\.\\.\\.)/.test(t); }",
                arg=before,
                timeout=600_000,
            )
            page.wait_for_timeout(3000)
            for name, (w, h) in SIZES.items():
                page.set_viewport_size({"width": w, "height": h})
                page.wait_for_timeout(1500)
                sidebar(page, True)
                page.evaluate("() => window.scrollTo(0, 0)")
                snap(page, out / f"edges_sidebar_{name}.png")
                sidebar(page, False)
                frame = page.locator("#memory-graph iframe").element_handle().content_frame()
                frame.wait_for_function("() => window.graphReady === true", timeout=300_000, polling=200)
                page.locator("#graph-panel").scroll_into_view_if_needed()
                page.wait_for_timeout(2000)
                snap(page, out / f"edges_graph_{name}.png", "#graph-panel")
            # Time travel at its last step (opened once, then shot at both widths).
            page.get_by_text(ACCORDION).first.click()
            page.wait_for_selector("#tt-graph iframe", timeout=300_000)
            tt = page.locator("#tt-graph iframe").element_handle().content_frame()
            tt.wait_for_function("() => window.graphReady === true && !!window.ttShown", timeout=300_000, polling=200)
            for name, (w, h) in SIZES.items():
                page.set_viewport_size({"width": w, "height": h})
                page.wait_for_timeout(2500)
                # The panel's top (slider, frame, the start of the list): the whole list is pages long.
                page.locator("#timetravel").scroll_into_view_if_needed()
                page.evaluate("() => document.querySelector('#timetravel').scrollIntoView()")
                box = page.locator("#timetravel").bounding_box()
                path = out / f"edges_timetravel_{name}.png"
                page.wait_for_timeout(700)
                top = max(0.0, box["y"])
                clip = {"x": box["x"], "y": top, "width": box["width"], "height": min(box["height"], h - top)}
                page.screenshot(path=str(path), clip=clip)
                log(f"screenshot: {path} ({shrink_png(path, 250 * 1024) / 1024:.0f} KB)")
            shown = tt.evaluate("() => window.ttShown")
            log(f"time travel at step {shown['step']}: {shown['memories']} drawn of {shown['upTo']}")
            # Evaluate: a small LoCoMo file, every strategy at the defaults; running (with its estimate), then done.
            page.set_viewport_size({"width": 1400, "height": 900})
            page.get_by_role("tab", name="Evaluate memory designs").click()
            page.wait_for_selector("#eval-run-btn", timeout=120_000)
            page.locator("#eval-file input[type=file]").set_input_files(str(LOCOMO_SMALL))  # 3 conversations
            page.wait_for_function(
                "() => document.querySelector('#eval-file').innerText.replace(/\\s+/g, '').includes('locomo_small')"
            )
            page.locator("#eval-run-btn").click()
            page.wait_for_function("() => document.querySelector('#eval-progress')?.dataset.eta", timeout=600_000)
            page.wait_for_timeout(8_000)
            for name, (w, h) in SIZES.items():
                page.set_viewport_size({"width": w, "height": h})
                page.wait_for_timeout(1500)
                if page.locator("#eval-progress").count():
                    snap(page, out / f"edges_eval_running_{name}.png", "#eval-tab")
            t0 = time.time()
            page.wait_for_selector("#eval-recall", timeout=1_800_000)
            log(f"evaluation done {time.time() - t0:.0f} s after the running shots")
            for name, (w, h) in SIZES.items():
                page.set_viewport_size({"width": w, "height": h})
                page.wait_for_timeout(2500)
                page.locator("#eval-status").scroll_into_view_if_needed()
                page.evaluate("() => window.scrollBy(0, -60)")
                snap(page, out / f"edges_eval_done_{name}.png")
            ctx.close()
        finally:
            app.stop()
    next(browsers, None)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
