"""Screenshot of a changed fact in the real app: the superseded memory faded in the graph, its Changed
edge, and See why naming what replaced it.

    python -m tests.changed_fact_shot --shot docs/img/changed_fact_1400.png

Starts app.py (embedded defaults), imports a short history (I live in Porto ... I live in Lisbon now)
through the Data panel, asks where the user lives, and saves the See why column at 1400 px wide.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from tests.test_ui_timetravel import import_file
from tests.timetravel_bench import shrink_png
from tests.ui_fixtures import RunningApp, chromium_browser

HISTORY = {
    "sessions": [
        {
            "date": "2023-01-05",
            "turns": [
                {"speaker": "user", "text": "I live in Porto with my two roommates."},
                {"speaker": "assistant", "text": "Porto is lovely."},
                {"speaker": "user", "text": "I baked banana bread for my colleagues this morning."},
                {"speaker": "assistant", "text": "Nice."},
            ],
        },
        {
            "date": "2023-02-10",
            "turns": [
                {"speaker": "user", "text": "I started learning Spanish with a phone app."},
                {"speaker": "assistant", "text": "Good luck!"},
            ],
        },
        {
            "date": "2023-04-03",
            "turns": [
                {"speaker": "user", "text": "I live in Lisbon now, the move went smoothly."},
                {"speaker": "assistant", "text": "Welcome to Lisbon!"},
            ],
        },
    ]
}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.changed_fact_shot", description=__doc__.split("\n")[0])
    p.add_argument("--shot", default="docs/img/changed_fact_1400.png")
    a = p.parse_args(argv)
    browsers = chromium_browser()
    browser = next(browsers)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "moved.json"
        src.write_text(json.dumps(HISTORY))
        app = RunningApp(Path(tmp) / "data", Path(tmp) / "app.log", LLM_MAX_REPLY_TOKENS="40")
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 1050}).new_page()
            page.goto(app.url)
            page.wait_for_selector("#session-header", timeout=120_000)
            import_file(page, src, timeout=600_000)
            box = page.locator("#msg textarea")
            box.fill("Which city do I live in?")
            box.press("Enter")
            page.wait_for_selector("#why-memories tbody tr", timeout=300_000)
            page.wait_for_selector(".mc-superseded", timeout=60_000)
            frame = page.locator("#memory-graph iframe").element_handle().content_frame()
            frame.wait_for_function("() => window.graphReady === true", timeout=120_000)
            if page.locator(".sidebar.open").count():
                page.locator('button[aria-label="Toggle Sidebar"]').first.click()
                page.wait_for_timeout(800)
            page.locator("#memory-graph").scroll_into_view_if_needed()
            page.wait_for_timeout(1000)
            graph = page.locator("#memory-graph").bounding_box()
            why = page.locator("#why-memories").bounding_box()
            assert graph and why
            scroll = page.evaluate("() => window.scrollY")  # boxes are in viewport coordinates; the clip in page ones
            x, y = min(graph["x"], why["x"]) - 10, graph["y"] + scroll - 40
            why["y"] += scroll
            clip = {
                "x": x,
                "y": y,
                "width": max(graph["width"], why["width"]) + 20,
                "height": why["y"] + why["height"] - y + 10,
            }
            out = Path(a.shot)
            out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(out), clip=clip, full_page=True)
            print(f"screenshot: {out} ({shrink_png(out, 150 * 1024) / 1024:.0f} KB)")
        finally:
            app.stop()
    next(browsers, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
