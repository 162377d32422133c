"""Screenshots of the page at scale: a 32-session LoCoMo conversation imported through the real page.

    python -m tests.scale_shots [--data FILE] [--conversation conv-41] [--question TEXT] [--out docs/img]

Starts app.py at its defaults (the bundled Qwen 0.5B model, no key, a temporary MEMORY_DATA_DIR, a
free port) and, in headless Chromium, does what a new user would: the first screen, then Your data →
import the conversation (conv-41 of the LoCoMo dev file: 32 sessions, about 850 memories), one
question, See why, a graph search, Compare. It saves, at 1400x900 and at 400x850, scale_first_*,
scale_sidebar_* (scale_sidebar_listed_1400: the imported run listed), scale_graph_*, scale_graph_search_*,
scale_trace_* and scale_compare_*.png, and prints what each view showed (sessions listed, memories drawn
of how many, Compare's columns).
Slow: 15-30 minutes on 2 cores (the import builds every session's memory). Not a pytest test.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from tests.three_session_shot import PAINTED, REPLY_DONE, close_sidebar, log
from tests.timetravel_bench import shrink_png
from tests.ui_fixtures import ROOT, RunningApp, chromium_browser, upload

DEV = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
IMPORT_TIMEOUT = 3_600_000  # ms: 32 sessions summarised, linked, segmented and compressed offline
REPLY_TIMEOUT = 300_000  # ms: Compare runs four strategies one after another on the bundled model
SIZES = {"1400": (1400, 900), "400": (400, 850)}


def snap(page, path: Path, selector: str | None = None) -> None:
    """The viewport (or one element) as a PNG of at most ~250 KB."""
    page.wait_for_timeout(500)
    page.evaluate(PAINTED)
    if selector is None:
        page.evaluate("() => window.scrollTo(0, 0)")
        page.screenshot(path=str(path))
    else:
        el = page.locator(selector).first
        el.scroll_into_view_if_needed()
        el.screenshot(path=str(path))
    log(f"screenshot: {path.name} ({shrink_png(path, 250 * 1024) / 1024:.0f} KB)")


def graph_frame(page):
    """The graph's frame once it has drawn and stayed drawn: a new render, or the page's layout changing
    with the viewport, may replace or reload the iframe after it was first ready."""
    for _ in range(5):
        page.wait_for_timeout(1500)
        frame = page.locator("#memory-graph iframe").element_handle().content_frame()
        frame.wait_for_function("() => window.graphReady === true", timeout=180_000)
        page.wait_for_timeout(1000)
        now = page.locator("#memory-graph iframe").element_handle().content_frame()
        if now == frame and frame.evaluate("() => window.graphReady === true"):
            break
    return frame


def sidebar(page, open_: bool) -> None:
    if (page.locator(".sidebar.open").count() > 0) != open_:
        page.locator('button[aria-label="Toggle Sidebar"]').first.click()
        page.wait_for_timeout(800)


def views(page, out: Path, size: str, search: str) -> None:
    """The five views at one width (the page already holds the import, the question and Compare)."""
    w, h = SIZES[size]
    page.set_viewport_size({"width": w, "height": h})
    page.wait_for_timeout(1500)
    sidebar(page, w > 700)
    snap(page, out / f"scale_first_{size}.png")
    sidebar(page, True)
    snap(page, out / f"scale_sidebar_{size}.png", "#sidebar" if w > 700 else None)
    sessions = page.locator("#session-list label").count()
    log(f"{size}: {sessions} entries listed: {page.locator('#session-list label').all_inner_texts()[:3]}")
    fold = page.locator("#session-list label").filter(has_text="sessions imported")
    if w > 700 and fold.count():  # the imported run listed one by one, then folded again
        fold.first.click()
        page.wait_for_function("() => document.querySelectorAll('#session-list label').length > 10", timeout=60_000)
        snap(page, out / f"scale_sidebar_listed_{size}.png", "#sidebar")
        page.locator("#session-list label").filter(has_text="sessions imported").first.click()
        page.wait_for_function("() => document.querySelectorAll('#session-list label').length < 10", timeout=60_000)
    sidebar(page, w > 700)
    page.locator('#chat [data-testid="bot"]').last.click()
    page.wait_for_selector("#why-panel[data-strategy]", timeout=60_000)
    graph_frame(page)
    log(f"{size}: graph {page.locator('#memory-graph').get_attribute('data-memories')} memories drawn")
    snap(page, out / f"scale_graph_{size}.png", "#memory-graph")
    page.fill("#graph-search textarea, #graph-search input", search)
    page.click("#graph-find-btn")
    page.wait_for_function(
        "() => /Found|No memory/.test((document.querySelector('#graph-found') || {innerText: ''}).innerText)",
        timeout=120_000,
    )
    log(f"{size}: search {page.inner_text('#graph-found').strip()!r}")
    graph_frame(page)
    snap(page, out / f"scale_graph_search_{size}.png", "#graph-panel")
    snap(page, out / f"scale_trace_{size}.png", "#why-wrap")
    snap(page, out / f"scale_compare_{size}.png", "#compare-wrap")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.scale_shots", description=__doc__.split("\n")[0])
    p.add_argument("--data", default=str(DEV), help="a LoCoMo file (default: the shared dev file)")
    p.add_argument("--conversation", default="conv-41", help="the sample id to import (default conv-41)")
    p.add_argument(
        "--question", default="What type of volunteering have John and Maria both done?", help="the question asked"
    )
    p.add_argument("--search", default="shelter", help="the word searched on the graph")
    p.add_argument("--out", default="docs/img", help="folder for the PNGs")
    a = p.parse_args(argv)
    data = Path(a.data)
    if not data.exists():
        p.error(f"{data} is missing: pass --data with a LoCoMo-format file")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    samples = [s for s in json.loads(data.read_text(encoding="utf-8")) if s.get("sample_id") == a.conversation]
    if not samples:
        p.error(f"no conversation {a.conversation} in {data}")
    browsers = chromium_browser()
    browser = next(browsers)
    with tempfile.TemporaryDirectory() as tmp:
        upload_file = Path(tmp) / f"locomo_{a.conversation}.json"
        upload_file.write_text(json.dumps(samples), encoding="utf-8")
        app = RunningApp(Path(tmp) / "data", Path(tmp) / "app.log", LLM_EMBEDDED_MODEL="qwen0.5b")
        log(f"app.py answered at {app.url} after {app.started_in:.0f} s")
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            page.goto(app.url)
            page.wait_for_selector("#session-header", timeout=120_000)
            page.get_by_text("Your data: import, export").click()
            upload(page, "import-file", upload_file, timeout=120_000)
            page.fill("#sample-id textarea, #sample-id input", a.conversation)
            t0 = time.time()
            page.click("#import-btn")
            page.wait_for_function(
                "() => !document.querySelector('#job-progress') && "
                "/Import finished|failed|error/.test(document.querySelector('#data-status').innerText)",
                timeout=IMPORT_TIMEOUT,
            )
            log(f"import: {page.inner_text('#data-status').strip()!r} ({time.time() - t0:.0f} s)")
            n = page.locator('#chat [data-testid="bot"]').count()
            page.fill("#msg textarea", a.question)
            page.locator("#msg textarea").press("Enter")
            page.wait_for_function(REPLY_DONE, arg=n + 1, timeout=REPLY_TIMEOUT)
            log(f"reply: {page.locator('#chat [data-testid=bot]').last.inner_text().strip()[:200]!r}")
            page.fill("#msg textarea", a.question)
            page.click("#compare-btn")
            page.wait_for_function(
                "() => /Compared|failed/.test(document.querySelector('#status').innerText)", timeout=REPLY_TIMEOUT
            )
            cards = page.locator("#compare-panel section.mc-compare")
            log(f"compare: {[cards.nth(i).get_attribute('data-strategy') for i in range(cards.count())]}")
            close_sidebar(page)
            for size in SIZES:
                views(page, out, size, a.search)
        finally:
            app.stop()
            text = (Path(tmp) / "app.log").read_text(errors="replace")
            bad = [ln for ln in text.splitlines() if "Traceback" in ln or "ERROR" in ln]
            print("===== app.log errors =====")
            print("\n".join(bad[-30:]) or "none")
    next(browsers, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
