"""20 users at once against app.py on the embedded model (the bundled GGUF, MiniLM, embedded Chroma).

Each user sends 2 messages naming its own token, ends its session (one user twice at once), and
asks once more with SeCom memory. Asserted: every reply arrives without an error, no token
reaches another user, the doubled close builds the session once, and no traceback is logged.
That replies never wait behind other users' memory builds is asserted deterministically in
tests/test_public_jobs.py::test_other_users_reply_while_a_build_runs (here it would be timing).
The same run as a benchmark, with reply and close times: python -m tests.load_bench
"""

from __future__ import annotations

import json

import pytest

from tests.load_bench import run_load
from tests.ui_fixtures import RunningApp

pytestmark = pytest.mark.slow


def test_twenty_users_at_once(tmp_path):
    app = RunningApp(tmp_path / "data", tmp_path / "app.log", LLM_MAX_REPLY_TOKENS=16)
    try:
        out = run_load(app.url, users=20, messages=2)
    finally:
        app.stop()
    print("load:", json.dumps(out))
    assert out["errors"] == 0, out["error_samples"]
    assert out["messages"] == out["expected_messages"] == 60
    assert out["crossed_users"] == []
    assert out["closes_run"] == 20  # 21 close requests, the doubled one ran once
    assert "Traceback" not in app.log()
