"""Shared fixtures and paths. The hand-written fakes are in tests/fakes.py, the scripted LLM server in
tests/llm_server.py, the browser and running-app fixtures in tests/ui_fixtures.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.errors import TransientLLMError
from tests.fakes import HashEmbedder
from tests.llm_server import LLMServer

ROOT = Path(__file__).resolve().parent.parent

SHARED_DATA = ROOT.parent / "shared" / "data"  # benchmark data beside the clone: benchmarks only, never tests
# The LoCoMo excerpt the tests use (tests/data/README.md): the first sessions of the three dev conversations.
LOCOMO_SMALL = ROOT / "tests" / "data" / "locomo_small.json"

# The browser and running-app fixtures live in ui_fixtures; registering it here shares them with every test.
pytest_plugins = ["tests.ui_fixtures"]


# A module's fixture that fails (an app that did not start, say) fails its first test with the reason;
# the module's later tests, which would repeat the same error, are reported as skipped naming that test.
_fixture_errors: dict[tuple[str, str], str] = {}


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    if rep.when == "setup" and rep.failed and call.excinfo is not None:
        key = (str(item.path), f"{call.excinfo.type.__name__}: {call.excinfo.value}")
        first = _fixture_errors.setdefault(key, item.nodeid)
        if first != item.nodeid:
            rep.outcome = "skipped"
            rep.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: the same setup error as {first}")
    return rep


def pytest_addoption(parser):
    parser.addoption(
        "--screenshots",
        action="store_true",
        default=False,
        help="let the browser tests rewrite their screenshots in docs/ (tracked files; off by default)",
    )


@pytest.fixture
def fake_embedder():
    return HashEmbedder()


@pytest.fixture
def chroma_store(tmp_path):
    from memory.store import ChromaStore

    return ChromaStore(path=tmp_path / "chroma")


@pytest.fixture(scope="session")
def minilm():
    from memory.embeddings import make_embedder

    return make_embedder("minilm")


@pytest.fixture
def transient():
    return TransientLLMError("503 from the scripted server")


@pytest.fixture(scope="session")
def _llm_server_running():
    with LLMServer() as s:
        yield s


@pytest.fixture
def llm_server(_llm_server_running):
    """The scripted OpenAI-compatible server (tests/llm_server.py), its queues and records cleared."""
    _llm_server_running.reset()
    _llm_server_running.refuse_json_schema = None
    return _llm_server_running


@pytest.fixture
def llm_service(llm_server, tmp_path):
    """The real session service (MiniLM, embedded Chroma, SQLite, the openai client) on the scripted server."""
    from tests.reliability_app import make_service

    return make_service(tmp_path / "data", llm_server, LLM_TIMEOUT="2", LLM_MAX_RETRIES="1")


@pytest.fixture
def fake_endpoint(monkeypatch):
    """A fresh scripted server as the app's configured endpoint (model "fake"; no other provider set)."""
    with LLMServer() as srv:
        for k in ("LLM_BACKEND", "LLM_GGUF_PATH", "EMBEDDER", "SECOM_SEGMENTER", "CHROMA_HOST"):
            monkeypatch.delenv(k, raising=False)
        monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        monkeypatch.setenv("LLM_MODEL", "fake")
        yield srv


@pytest.fixture
def embedded_env(monkeypatch):
    """The app's embedded defaults: no endpoint, key or other provider from the environment."""
    for k in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "LLM_BACKEND", "LLM_GGUF_PATH", "EMBEDDER", "SECOM_SEGMENTER"):
        monkeypatch.delenv(k, raising=False)
