"""The "Evaluate memory designs" tab in real Chromium on app.py, offline (no key: memory is built
without LLM calls, so every figure is deterministic), against the CLI on the same file.

A small LoCoMo-format file is cut from conv-30 (its first sessions and the questions whose evidence
lies in them). `python -m bench locomo` runs on it with the tab's settings; the tab then runs
on the same file and the test reads what the page shows: the plot, the recall table (every strategy
at every budget), the per-question table (the evidence each strategy's context held), a question's
contexts, and the downloaded JSON. All must equal the CLI's JSON. Refused input shows a message and
starts nothing; a reload during the run shows its progress; the chat answers meanwhile.

Run alone: python -m pytest tests/test_ui_eval.py -v -s
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.bench_fixtures import small_locomo
from tests.conftest import LOCOMO_SMALL
from tests.ui_fixtures import PAGE_WAIT, ROOT, RunningApp, app_env, chromium_browser, free_port

LOCOMO = LOCOMO_SMALL
BUDGETS = "250,1000"
RETRIEVERS = ["bm25", "dense"]  # hybrid left out (unticked in the page)
RUN_TIMEOUT = 900_000
VOLATILE = ("data", "seconds", "machine")  # config fields that name the run, not its figures

pytestmark = pytest.mark.slow

browser = pytest.fixture(scope="module")(chromium_browser)


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("eval-data") / "conv30_small.json"
    path.write_text(json.dumps([small_locomo(LOCOMO, "conv-30", n_sessions=3)]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def cli(small, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("eval-cli") / "cli.json"
    cmd = [sys.executable, "-m", "bench", "locomo", "--data", str(small), "--out", str(out)]
    cmd += ["--budgets", BUDGETS, "--retrievers", ",".join(RETRIEVERS), "--summariser", "offline", "--contexts"]
    env = app_env(out.parent / "data", free_port())
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, timeout=900, capture_output=True)
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    data = tmp_path_factory.mktemp("eval-app")
    a = RunningApp(data, data.parent / "eval-app.log", LLM_MAX_REPLY_TOKENS=20)
    yield a
    a.stop()


def _open(page, url):
    page.goto(url)
    page.wait_for_selector("#session-header", timeout=PAGE_WAIT)
    page.get_by_role("tab", name="Evaluate memory designs").click()
    page.wait_for_selector("#eval-run-btn", timeout=PAGE_WAIT)


def _fill(page, budgets: str):
    page.locator("#eval-budgets textarea, #eval-budgets input").first.fill(budgets)


def _status(page) -> str:
    return page.locator("#eval-status").inner_text()


def _recall_table(page) -> dict[tuple[str, int], str]:
    cells = {}
    for row in page.locator("#eval-recall tbody tr").all():
        label = row.get_attribute("data-strategy")
        for td in row.locator("td").all():
            cells[(label, int(td.get_attribute("data-budget")))] = td.inner_text().strip()
    return cells


def _question_rows(page, n_rows: int, n_cols: int) -> list[list[str]]:
    """Every row of the per-question grid (it renders the rows in view: scroll to reach the rest)."""
    grid = page.locator("#eval-questions")
    rows: list[list[str]] = []
    for r in range(n_rows):
        first = grid.locator(f'[data-testid="cell-{r}-0"]')
        for _ in range(20):
            if first.count():
                break
            grid.locator(f'[data-testid="cell-{r - 1}-0"]').scroll_into_view_if_needed()
            page.mouse.wheel(0, 200)
            time.sleep(0.2)
        first.scroll_into_view_if_needed()
        rows.append([grid.locator(f'[data-testid="cell-{r}-{c}"]').inner_text().strip() for c in range(n_cols)])
    return rows


def _expected_cell(q: dict, label: str, budget: str) -> str:
    held, ev = q["strategies"][label][budget]["held"], q["evidence"]
    mark = "✓" if len(held) == len(ev) else ("✗" if not held else "◐")
    return f"{mark} {len(held)}/{len(ev)}" + (f" ({', '.join(held)})" if 0 < len(held) < len(ev) else "")


def _same_run(a: dict, b: dict) -> None:
    assert a["results"] == b["results"]
    assert a["questions"] == b["questions"]
    assert a["close"]["offline"].keys() == b["close"]["offline"].keys()
    for cid in a["close"]["offline"]:
        x, y = dict(a["close"]["offline"][cid]), dict(b["close"]["offline"][cid])
        x.pop("seconds"), y.pop("seconds")
        assert x == y

    def strip(c):
        return {k: v for k, v in c.items() if k not in VOLATILE}

    assert strip(a["config"]) == strip(b["config"])


def test_the_tab_shows_the_clis_figures(browser, app, small, cli, tmp_path):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = ctx.new_page()
    _open(page, app.url)

    # Refused input: a clear message, nothing starts.
    page.locator("#eval-run-btn").click()
    page.wait_for_function("() => document.querySelector('#eval-status').innerText.includes('file first')")
    page.locator("#eval-file input[type=file]").set_input_files(str(small))
    page.wait_for_function("() => document.querySelector('#eval-file').innerText.includes('conv30')", timeout=PAGE_WAIT)
    _fill(page, "10,1000")
    page.locator("#eval-run-btn").click()
    page.wait_for_function("() => document.querySelector('#eval-status').innerText.includes('between 50')")
    assert page.locator("#eval-progress").count() == 0 and page.locator("#eval-recall").count() == 0

    # The run, with the CLI's settings: every strategy, bm25 + dense, 250 and 1000 tokens, offline.
    _fill(page, BUDGETS)
    page.locator("#eval-retrievers label", has_text="hybrid").click()
    page.locator("#eval-run-btn").click()
    page.wait_for_selector("#eval-progress", timeout=PAGE_WAIT)
    assert "Started" in _status(page)
    page.reload()  # a reload finds the running (or finished) run
    page.wait_for_selector("#session-header", timeout=PAGE_WAIT)
    page.get_by_role("tab", name="Evaluate memory designs").click()
    page.wait_for_selector("#eval-progress, #eval-recall", timeout=PAGE_WAIT)
    page.locator("#msg textarea").fill("Hello, how are you?")  # the chat answers meanwhile
    page.locator("#msg textarea").press("Enter")
    page.wait_for_function(
        """() => { const b = document.querySelectorAll('#chat [data-testid="bot"]');
                   return b.length >= 1 && b[b.length - 1].innerText.trim() !== '…'; }""",
        timeout=300_000,
    )
    page.wait_for_selector("#eval-recall", timeout=RUN_TIMEOUT)
    assert "Evaluated" in _status(page), _status(page)

    # The plot (the figure of bench's plots) and the recall table: the CLI's figures.
    # (the status and table come with the run's end; the plot's image is drawn a moment after them)
    page.locator("#eval-plot img").first.wait_for(state="visible", timeout=PAGE_WAIT)
    assert page.locator("#eval-bars img").first.is_visible()
    shown = _recall_table(page)
    want = {(r["strategy"], r["budget"]): format(r["recall"], ".4f") for r in cli["results"]}
    assert shown == want
    assert {s for s, _ in shown} >= {"turn (bm25)", "secom [offline] (dense)", "theanine-timeline [offline] (dense)"}

    # The per-question table at 1000 tokens: what each strategy's context held, as the CLI's rows say (the
    # strategies shown side by side at first: the app's own and a baseline; the chooser adds others).
    from ui.eval_results import first_strategies

    every = list(dict.fromkeys(r["strategy"] for r in cli["results"]))
    labels = first_strategies(every)
    assert len(labels) == 3 and all(lab in every for lab in labels)
    qs = cli["questions"]
    rows = _question_rows(page, len(qs), 4 + len(labels))
    for i, (row, q) in enumerate(zip(rows, qs, strict=True)):
        assert row[:4] == [str(i + 1), q["question"], str(q["category"]), ", ".join(q["evidence"])]
        assert row[4:] == [_expected_cell(q, lab, "1000") for lab in labels], (i, q["question"])

    # Clicking a row shows every strategy's packed context with the evidence held and missed.
    last = len(qs) - 1  # in view after reading the grid
    page.locator(f'#eval-questions [data-testid="cell-{last}-1"]').click()
    page.wait_for_selector("#eval-context-view", timeout=PAGE_WAIT)
    view = page.locator("#eval-context-view")
    assert f"Question {last + 1}: {qs[last]['question']}" in view.inner_text()
    for lab in every:
        cell = qs[last]["strategies"][lab]["1000"]
        summary = view.locator(f'details[data-strategy="{lab}"] summary').inner_text()
        assert f"recall {cell['recall']:.4f}" in summary
        assert f"held {', '.join(sorted(cell['held'])) or 'none'}" in summary

    # The download is the benchmark's JSON, equal to the CLI's but for where and when it ran.
    with page.expect_download() as dl:
        page.locator("#eval-download").click()
    got = json.loads(Path(dl.value.path()).read_text(encoding="utf-8"))
    _same_run(got, cli)
    ctx.close()


def test_the_tab_shows_the_measured_answer_quality(browser, app):
    """The answer-quality figures `python -m bench answers` wrote (docs/results/answers.json):
    the same F1 per strategy in the tab's table, and their plot."""
    from ui.eval_results import ANSWERS_TITLE, MEASURED_ANSWERS

    measured = json.loads(MEASURED_ANSWERS.read_text(encoding="utf-8"))
    page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
    _open(page, app.url)
    page.get_by_text(ANSWERS_TITLE).first.click()
    page.wait_for_selector("#eval-answers-f1", state="visible", timeout=PAGE_WAIT)
    shown = {
        r.get_attribute("data-strategy"): r.locator("td").first.inner_text().strip()
        for r in page.locator("#eval-answers-f1 tbody tr").all()
    }
    assert shown == {s["strategy"]: f"{s['f1']:.3f}" for s in measured["summary"]}
    assert page.locator("#eval-answers-plot img").first.is_visible()
