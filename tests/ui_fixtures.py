"""Test parts for the app layer: a real browser, and helpers to run app.py (the fast tests use
tests/fakes.py's ScriptedAgent instead)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.llm_server import LLMServer, app_llm_env
from tests.servers import free_port

ROOT = Path(__file__).resolve().parent.parent


# --- a real browser: Debian's chromium through Playwright (never `playwright install`) ----------

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-quic",
    "--no-first-run",
    "--disable-sync",
]


def chromium_browser():
    """A module fixture's body: one headless chromium for the tests of a module."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


# How long a browser test waits for something the page does (a reply, a build step, a drawn graph): what a
# loaded 2-core machine needs with two test files running at once (alone each shows within seconds). A
# wait costs this only when the test fails.
PAGE_WAIT = 180_000  # ms


def upload(page, elem_id: str, path: Path, timeout: float = PAGE_WAIT) -> None:
    """Put a file into a gr.File and wait until the component shows it (the upload is done). The wait
    allows a loaded 2-core machine (alone an upload shows within a few seconds). Gradio draws the name's
    stem and extension in two elements, which a narrow column wraps onto two lines, so whitespace is
    ignored in the comparison."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page.locator(f"#{elem_id} input[type=file]").set_input_files(str(path))
    try:
        page.wait_for_function(
            "([id, name]) => (document.getElementById(id) || {innerText: ''})"
            ".innerText.replace(/\\s+/g, '').includes(name)",
            arg=[elem_id, "".join(path.name.split())],
            timeout=timeout,
        )
    except PlaywrightTimeout:
        shown = page.evaluate("(id) => (document.getElementById(id) || {innerText: ''}).innerText", elem_id)
        raise AssertionError(
            f"the upload of {path.name} did not show in #{elem_id} within {timeout / 1000:.0f} s; it shows {shown!r}"
        ) from None


IMG_DIR = ROOT / "docs" / "img"
MAX_SHOT_BYTES = 150 * 1024


class Screenshots:
    """Saves the browser tests' screenshots (tracked files under docs/) only when `--screenshots` is given."""

    def __init__(self, wanted: bool):
        self.wanted = wanted

    def __call__(self, page, path: Path, full_page: bool = False, clip: dict | None = None) -> None:
        """A PNG of the page at `path`, at most ~150 KB (colours reduced, then scaled down if needed)."""
        if not self.wanted:
            return
        import io

        from PIL import Image

        path.parent.mkdir(parents=True, exist_ok=True)
        # Fonts loaded and two frames painted since the last change: what the page shows now is drawn.
        page.evaluate(
            "() => document.fonts.ready.then(() => new Promise(r => requestAnimationFrame(() => "
            "requestAnimationFrame(r))))"
        )
        im = Image.open(io.BytesIO(page.screenshot(full_page=full_page, clip=clip))).convert("RGB")
        while True:
            buf = io.BytesIO()
            im.quantize(colors=128, method=Image.Quantize.MEDIANCUT).save(buf, "PNG", optimize=True)
            if buf.tell() <= MAX_SHOT_BYTES or im.width < 300:
                break
            im = im.resize((int(im.width * 0.85), int(im.height * 0.85)), Image.Resampling.LANCZOS)
        path.write_bytes(buf.getvalue())


@pytest.fixture(scope="session")
def screenshots(request) -> Screenshots:
    return Screenshots(bool(request.config.getoption("--screenshots")))


# --- running app.py ------------------------------------------------------------------------


def app_env(data_dir: Path, port: int, **extra) -> dict:
    env = dict(os.environ)
    for k in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "HF_TOKEN", "LLM_BACKEND"):
        env.pop(k, None)  # the tests run the embedded defaults whatever the developer's shell holds
    env.update(
        {
            "MEMORY_DATA_DIR": str(data_dir),
            "GRADIO_SERVER_NAME": "127.0.0.1",
            "GRADIO_SERVER_PORT": str(port),
            "GRADIO_ANALYTICS_ENABLED": "False",
            "HF_HUB_OFFLINE": "1",
            "PYTHONUNBUFFERED": "1",
            "MEMORY_DOTENV": "0",
            # The plumbing tests reply with the fastest bundled model; the default (Qwen 0.5B) has its own
            # tests (test_agent_e2e, test_real_qwen).
            "LLM_EMBEDDED_MODEL": env.get("LLM_EMBEDDED_MODEL", "smollm2"),
        }
    )
    env.update({k: str(v) for k, v in extra.items()})
    return env


class RunningApp:
    """`python app.py` in a subprocess on a free port; waits until it answers HTTP."""

    def __init__(self, data_dir: Path, log_path: Path, timeout: float = 600, **env):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.data_dir, self.log_path, self.timeout, self.env = data_dir, log_path, timeout, env
        self.started_in = self.start()

    def start(self) -> float:
        """Start app.py; returns the seconds it took to answer."""
        t0 = time.time()
        self._log = open(self.log_path, "ab")  # noqa: SIM115  (closed in stop())
        log_start = self._log.tell()  # a restart appends: only what this start writes counts
        self.proc = subprocess.Popen(
            [sys.executable, str(ROOT / "app.py")],
            cwd=str(ROOT),
            env=app_env(self.data_dir, self.port, **self.env),
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        timeout = self.timeout
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"app.py exited with {self.proc.returncode}:\n{self.log()}")
            # The port was free when chosen, but another server (a parallel test worker, another run)
            # may take it before app.py binds it: an answer counts only once this app says it listens.
            if not self._listening(log_start):
                time.sleep(1)
                continue
            try:
                with urllib.request.urlopen(self.url + "/", timeout=5) as r:
                    if r.status == 200:
                        return time.time() - t0
            except OSError:
                time.sleep(1)
        self.stop()
        raise RuntimeError(f"app.py did not answer within {timeout}s:\n{self.log()}")

    def _listening(self, log_start: int) -> bool:
        """Gradio's launch line for this port, in what this start has logged."""
        with open(self.log_path, "rb") as f:
            f.seek(log_start)
            return f"Running on local URL:  {self.url}".encode() in f.read()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-6000:]
        except OSError:
            return ""

    def restart(self) -> float:
        """Stop and start again on the same port and data dir (what a deploy or a crash does)."""
        self.stop()
        return self.start()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


def scripted_app(name: str, **settings):
    """A module's `server` and `app` fixtures: the scripted OpenAI-compatible server (tests/llm_server.py)
    and app.py talking to it with these settings. In a test module: `server, app = scripted_app("x", ...)`."""

    @pytest.fixture(scope="module")
    def server():
        with LLMServer() as s:
            yield s

    @pytest.fixture(scope="module")
    def app(tmp_path_factory, server):
        data = tmp_path_factory.mktemp(f"{name}-app")
        a = RunningApp(data, data.parent / f"{name}-app.log", **app_llm_env(server, LLM_MAX_RETRIES=0, **settings))
        yield a
        a.stop()

    return server, app


# Reply length for tests: the embedded model writes ~70 tokens/s on 2 cores.
TEST_REPLY_TOKENS = 40


@pytest.fixture(scope="session")
def live_app(tmp_path_factory):
    """One real app.py (embedded defaults: the bundled llama.cpp model, MiniLM, embedded Chroma) for the session."""
    data = tmp_path_factory.mktemp("app-data")
    app = RunningApp(data, data.parent / "app.log", LLM_MAX_REPLY_TOKENS=TEST_REPLY_TOKENS)
    yield app
    app.stop()
