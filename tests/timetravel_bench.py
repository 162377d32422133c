"""How long one time-travel slider step takes in a real browser, at LoCoMo conv-30's ~500 memories.

    python -m tests.timetravel_bench --sample conv-30 --steps 20 [--shot docs/img/timetravel_1400.png]
    python -m tests.timetravel_bench --sample conv-41 --keep /tmp/tt-conv41   # 32 sessions, ~850 memories

Starts `python app.py` on its offline defaults (no key: memory is built without LLM calls), imports
the conversation through the page's Data panel in headless Chromium, opens "Time travel", then moves
the slider 20 times (the range input, as a person drags it) and prints the median time from the
slider's change until the sandboxed graph frame shows that step's memories (hidden/marked and
redrawn), and the time until the "what changed" list beside it shows the step. Both clocks are the
browser's (Date.now() in the page and in the frame). `--keep DIR` keeps the app's data and the browser's
storage in DIR: a second run (another version of the page, the same memory) skips the import.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from tests.test_ui_timetravel import import_file, open_timetravel
from tests.ui_fixtures import RunningApp, chromium_browser
from ui.timetravel import ACCORDION

ROOT = Path(__file__).resolve().parent.parent

# Sets the slider as a drag does (the range input's value, then input and change events); returns the start time.
MOVE = """(k) => {
  const r = document.querySelector('#tt-slider input[type=range]');
  const t0 = Date.now();
  Object.getOwnPropertyDescriptor(HTMLInputElement.prototype, 'value').set.call(r, String(k));
  r.dispatchEvent(new Event('input', {bubbles: true}));
  r.dispatchEvent(new Event('change', {bubbles: true}));
  return t0;
}"""


def step_sequence(n_steps: int, count: int) -> list[int]:
    """`count` steps spread over 1..n, each different from the one before (big and small jumps)."""
    out: list[int] = []
    k = n_steps
    for i in range(count):
        k = (k + 7 + (i % 3)) % (n_steps + 1)
        if out and k == out[-1]:
            k = (k + 1) % (n_steps + 1)
        out.append(k)
    return out


def shrink_png(path: Path, limit: int = 300 * 1024) -> int:
    """Keep a screenshot under `limit` bytes: a 256-colour palette (text stays sharp)."""
    from PIL import Image

    if path.stat().st_size <= limit:
        return path.stat().st_size
    img = Image.open(path).convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT)
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=True)
    path.write_bytes(buf.getvalue())
    return len(buf.getvalue())


def kept_state(path: Path, url: str) -> dict | None:
    """The browser storage a first run kept (the user's id), moved to this run's origin (a new free port)."""
    if not path.exists():
        return None
    state = json.loads(path.read_text())
    for o in state.get("origins", []):
        o["origin"] = url
    return state


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.timetravel_bench", description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"))
    p.add_argument("--sample", default="conv-30")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--shot", default="", help="also save a 1400 px wide screenshot here (PNG)")
    p.add_argument("--shot-step", type=int, default=4)
    p.add_argument("--keep", default="", help="keep the app's data and the browser's storage here (reused)")
    a = p.parse_args(argv)
    sample = next(s for s in json.loads(Path(a.data).read_text()) if s["sample_id"] == a.sample)
    browsers = chromium_browser()
    browser = next(browsers)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / f"{a.sample}.json"
        src.write_text(json.dumps([sample]))
        keep = Path(a.keep) if a.keep else Path(tmp)
        keep.mkdir(parents=True, exist_ok=True)
        state = keep / "browser.json"
        app = RunningApp(keep / "data", keep / "app.log")
        try:
            viewport = {"width": 1400, "height": 1000}
            ctx = browser.new_context(viewport=viewport, storage_state=kept_state(state, app.url))
            page = ctx.new_page()
            page.goto(app.url)
            page.wait_for_selector("#session-header", timeout=120_000)
            t0 = time.time()
            if not state.exists():
                import_file(page, src, timeout=3_600_000)
                ctx.storage_state(path=str(state))
            built = time.time() - t0
            t0 = time.time()
            page.get_by_text(ACCORDION).first.click()
            page.wait_for_selector("#tt-graph iframe", timeout=120_000)
            assembled = time.time() - t0
            frame = open_timetravel(page, click=False)
            opened = time.time() - t0
            page.locator("#tt-graph").scroll_into_view_if_needed()  # as a person looks at it
            n_steps = int(page.locator("#tt-memory-graph").get_attribute("data-steps"))
            n_memories = frame.evaluate("() => typeof raw === 'undefined' ? nodes.length : raw.length")
            n_edges = frame.evaluate("() => edges.length")
            frame_kb = page.evaluate("() => document.querySelector('#tt-graph').innerHTML.length") / 1024
            frame_ms, list_ms, shown = [], [], []
            for k in step_sequence(n_steps, a.steps):
                start = page.evaluate(MOVE, k)
                frame.wait_for_function("(k) => window.ttShown && window.ttShown.step === k", arg=k, polling=10)
                done = frame.evaluate("() => window.ttShown")
                frame_ms.append(done["at"] - start)
                shown.append(done["memories"])
                page.wait_for_function(
                    "(k) => document.querySelector('#tt-changes-panel')?.dataset.step === String(k)",
                    arg=k,
                    polling=10,
                    timeout=60_000,
                )
                # When the page switched the list (its own clock; a page that fetched it: when the wait saw it).
                at = page.evaluate("(k) => window.__ttList?.step === k ? window.__ttList.at : Date.now()", k)
                list_ms.append(at - start)
            if a.shot:
                # The sidebar closed (its toggle), so the "what changed" list sits beside the graph.
                if page.locator(".sidebar.open").count():
                    page.locator('button[aria-label="Toggle Sidebar"]').first.click()
                    page.wait_for_timeout(800)
                if k == a.shot_step:
                    page.evaluate(MOVE, 0)
                    frame.wait_for_function("() => window.ttShown.step === 0")
                page.evaluate(MOVE, a.shot_step)
                frame.wait_for_function("(k) => window.ttShown.step === k", arg=a.shot_step)
                page.locator("#timetravel").scroll_into_view_if_needed()
                page.evaluate("() => window.scrollBy(0, -90)")
                page.wait_for_timeout(1000)
                out = Path(a.shot)
                out.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(out))
                size = shrink_png(out)
                print(f"screenshot: {out} ({size / 1024:.0f} KB)")
            ctx.close()
        finally:
            app.stop()
    with contextlib.suppress(StopIteration):
        next(browsers)  # closes the browser
    print(
        f"\n{a.sample}: {n_steps} sessions, {n_memories} memories, {n_edges} edges; import built in {built:.1f} s; "
        f"time travel opened: data in the page after {assembled:.1f} s, graph drawn after {opened:.1f} s; "
        f"frame data {frame_kb:.0f} KB, sent once"
    )
    print(f"steps: {len(frame_ms)} (memories shown per step: {shown})")
    print(
        f"slider step -> frame shows the step: median {statistics.median(frame_ms):.0f} ms "
        f"(min {min(frame_ms):.0f}, max {max(frame_ms):.0f})"
    )
    print(
        f"slider step -> 'what changed' list shows the step: median "
        f"{statistics.median(list_ms):.0f} ms (min {min(list_ms):.0f}, max {max(list_ms):.0f})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
