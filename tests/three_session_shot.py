"""Screenshots of See why after a three-session personal chat typed through the real page.

    python -m tests.three_session_shot [--out docs/img]

Starts app.py at its defaults (the bundled reply model, no key, a temporary MEMORY_DATA_DIR, a free
port) and, in headless Chromium at 1400x900, chats like a person: session 1 (learning the cello, a
teacher), End session and build its memory, Start next session, session 2 (the neighbour, a practice
mute, now a nurse), end and build again, then session 3 asks two questions about the earlier sessions.
It opens See why for the last reply and saves see_why_timelines_1400.png (the retrieved timelines as
chains), see_why_graph_1400.png (the memory graph) and see_why_timelines_400.png (400x850). It prints
the timelines as the page shows them, how many hold 2+ memories, the relation labels seen, and how many
of the 10 replies were a stock refusal (memory.reply_prompts.is_refusal, as `python -m bench refusals`).
Slow: about 10-20 minutes on 2 cores. Not a pytest test (no test_ prefix).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from memory.reply_prompts import is_refusal
from memory.settings import Settings
from tests.timetravel_bench import shrink_png
from tests.ui_fixtures import RunningApp, chromium_browser

SESSIONS = [
    [
        "I started learning the cello last month.",
        "My teacher told me to practise every morning before work.",
        "So I now get up at six to practise.",
        "I'm a teacher at a primary school myself, so the mornings are my only quiet time.",
        "My favourite piece so far is the prelude from Bach's first cello suite.",
    ],
    [
        "My neighbour complained about the noise in the morning.",
        "Because of that I bought a practice mute.",
        "I'm also not a teacher anymore, I now work as a nurse.",
    ],
    ["Why did I buy the practice mute?", "What do I do for work now?"],
]
REPLY_TIMEOUT = 180_000  # ms per reply: retrieval, refinement and the reply on the bundled model
BUILD_TIMEOUT = 1_200_000  # ms: summarise, link, segment, compress a session
REPLY_DONE = """(n) => {
  const bots = document.querySelectorAll('#chat [data-testid="bot"]');
  const busy = document.querySelector('#status .mc-busy');
  const stop = document.querySelector('#stop-btn');
  const stopShown = stop && stop.offsetParent !== null;
  return bots.length >= n && bots[bots.length - 1].innerText.trim() !== '…' && !busy && !stopShown;
}"""
PAINTED = (
    "() => document.fonts.ready.then(() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))))"
)


def person_sessions(name: str, n_questions: int) -> list[list[str]]:
    """A person of the answers benchmark's personal chats: their messages, session by session, then a
    last session of their first `n_questions` questions."""
    import json

    data = json.loads((Path(__file__).resolve().parents[1] / "bench" / "data" / "personal_chats.json").read_text())
    person = next(p for p in data["people"] if p["person"] == name)
    said = [[text for role, text in s["turns"] if role == "user"] for s in person["sessions"]]
    return [*said, [q["q"] for q in person["questions"][:n_questions]]]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def send(page, text: str) -> str:
    """Type a message, press Enter, wait until the reply has finished streaming; returns it."""
    n = page.locator('#chat [data-testid="bot"]').count()
    box = page.locator("#msg textarea")
    box.click()
    box.press_sequentially(text, delay=15)
    box.press("Enter")
    page.wait_for_function(REPLY_DONE, arg=n + 1, timeout=REPLY_TIMEOUT)
    page.wait_for_timeout(500)
    reply = page.locator('#chat [data-testid="bot"]').last.inner_text().strip()
    log(f"you: {text}\n           bot: {reply}")
    return reply


def end_session(page) -> str:
    page.click("#end-session-btn")
    page.wait_for_function(
        "() => /Session ended|failed/.test(document.querySelector('#status').innerText)", timeout=120_000
    )
    ended = page.inner_text("#status").strip()
    t0 = time.time()
    page.wait_for_function(
        "() => !document.querySelector('#job-progress') && "
        "/Memory built|failed/.test(document.querySelector('#status').innerText)",
        timeout=BUILD_TIMEOUT,
    )
    built = page.inner_text("#status").strip()
    log(f"end session: {ended!r} -> {built!r} ({time.time() - t0:.0f} s)")
    return built


def start_next(page, seq: int) -> str:
    page.click("#new-session-btn")
    page.wait_for_function(
        "(s) => document.querySelector('#session-header').innerText.includes('Session ' + s)", arg=seq, timeout=120_000
    )
    page.wait_for_timeout(500)
    header = page.inner_text("#session-header").strip()
    log(f"header: {header!r}")
    return header


def close_sidebar(page) -> None:
    if page.locator(".sidebar.open").count():
        page.locator('button[aria-label="Toggle Sidebar"]').first.click()
        page.wait_for_timeout(800)


def shot(page, locator, path: Path, clip_to: str | None = None) -> None:
    """An element's screenshot (or from `locator` down to the end of `clip_to`), kept under ~300 KB."""
    locator.scroll_into_view_if_needed()
    page.wait_for_timeout(600)
    page.evaluate(PAINTED)
    path.parent.mkdir(parents=True, exist_ok=True)
    if clip_to is None:
        locator.screenshot(path=str(path))
    else:
        top, end = locator.bounding_box(), page.locator(clip_to).bounding_box()
        assert top and end
        scroll = page.evaluate("() => window.scrollY")  # boxes are in viewport coordinates
        clip = {
            "x": top["x"] - 4,
            "y": top["y"] + scroll - 4,
            "width": top["width"] + 8,
            "height": end["y"] + end["height"] - top["y"] + 8,
        }
        page.screenshot(path=str(path), clip=clip, full_page=True)
    log(f"screenshot: {path} ({shrink_png(path, 300 * 1024) / 1024:.0f} KB)")


def describe_timelines(page) -> None:
    """Print the timeline section as the page shows it, chains of 2+ memories, relation labels."""
    print("\n===== See why: timelines of the last reply (as the page shows them) =====")
    print(page.inner_text("#why-panel h4").strip())
    print(page.inner_text("#why-timelines").strip())
    items = page.locator("#why-timelines li.timeline")
    sizes = [items.nth(i).locator(".mc-node").count() for i in range(items.count())]
    labels = page.eval_on_selector_all(
        "#why-timelines .mc-link", "els => els.map(e => e.getAttribute('data-relation'))"
    )
    print("===== summary =====")
    print(f"timelines: {len(sizes)}; memories per timeline: {sizes}")
    print(f"timelines with 2+ memories: {sum(s >= 2 for s in sizes)}")
    print(f"relation labels seen: {sorted(set(labels))} (all: {labels})")
    print("===== retrieved memories =====")
    print(page.inner_text("#why-memories").strip())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.three_session_shot", description=__doc__.split("\n")[0])
    p.add_argument("--out", default="docs/img", help="folder for the three PNGs")
    p.add_argument(
        "--person", default="", help="a person of bench/data/personal_chats.json instead (their messages and questions)"
    )
    p.add_argument("--questions", type=int, default=5, help="with --person: how many of their questions (5)")
    a = p.parse_args(argv)
    out = Path(a.out)
    sessions, prefix = SESSIONS, ""
    if a.person:
        sessions, prefix = person_sessions(a.person, a.questions), f"{a.person}_"
    browsers = chromium_browser()
    browser = next(browsers)
    with tempfile.TemporaryDirectory() as tmp:
        # app.py at its defaults; ui_fixtures picks the fastest model for tests, so name the default back.
        model = Settings.from_env({}).llm.bundled_model
        app = RunningApp(Path(tmp) / "data", Path(tmp) / "app.log", LLM_EMBEDDED_MODEL=model)
        log(f"app.py answered at {app.url} after {app.started_in:.0f} s")
        try:
            ctx = browser.new_context(viewport={"width": 1400, "height": 900})
            page = ctx.new_page()
            problems: list[str] = []
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

            def on_dialog(d) -> None:
                problems.append(f"dialog: {d.message}")
                d.dismiss()

            page.on("dialog", on_dialog)
            page.goto(app.url)
            page.wait_for_selector("#session-header", timeout=120_000)
            log(f"header: {page.inner_text('#session-header').strip()!r}")
            replies: list[str] = []
            for i, messages in enumerate(sessions):
                if i:
                    start_next(page, i + 1)
                for text in messages:
                    replies.append(send(page, text))
                if i < len(sessions) - 1:
                    end_session(page)
            # See why for the last reply: click it (its trace shows), wait for the panel and the graph.
            page.locator('#chat [data-testid="bot"]').last.click()
            page.wait_for_selector("#why-panel[data-strategy]", timeout=60_000)
            page.wait_for_selector("#why-timelines", timeout=60_000)
            close_sidebar(page)
            describe_timelines(page)
            refused = [r for r in replies if is_refusal(r)]
            print(f"refusals: {len(refused)} of {len(replies)} replies" + "".join(f"\n  {r[:100]!r}" for r in refused))
            frame = page.locator("#memory-graph iframe").element_handle().content_frame()
            frame.wait_for_function("() => window.graphReady === true", timeout=120_000)
            print(f"graph: {page.locator('#memory-graph').get_attribute('data-memories')} memories shown")
            why = out / f"{prefix}see_why_timelines_1400.png"
            shot(page, page.locator("#why-panel"), why, clip_to="#why-timelines")
            shot(page, page.locator("#memory-graph"), out / f"{prefix}see_why_graph_1400.png")
            page.set_viewport_size({"width": 400, "height": 850})
            page.wait_for_timeout(1500)
            close_sidebar(page)
            shot(page, page.locator("#why-timelines"), out / f"{prefix}see_why_timelines_400.png")
            print("===== page problems =====")
            print("\n".join(problems) or "none")
        finally:
            app.stop()
            log_text = (Path(tmp) / "app.log").read_text(errors="replace")
            warn = [ln for ln in log_text.splitlines() if any(w in ln for w in ("Traceback", "ERROR", "Error"))]
            print("===== app.log errors =====")
            print("\n".join(warn[-30:]) or "none")
    next(browsers, None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
