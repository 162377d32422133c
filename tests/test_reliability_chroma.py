"""Chroma in server mode (a real `chroma run` started here) stopped and started while app.py runs.

While the server is down: a reply ends with a clear error (the message is saved, Retry offered),
ending a session keeps it pending with a clear error. When it is back: Retry answers, the pending
close completes, and memory from before the outage is retrieved again.
"""

from __future__ import annotations

import pytest

from tests.llm_server import LLMServer, app_llm_env
from tests.servers import chroma_cmd, free_port, running
from tests.ui_fixtures import RunningApp

pytestmark = pytest.mark.slow


def test_chroma_server_outage_gives_a_clear_error_and_work_resumes(tmp_path):
    from gradio_client import Client

    port = free_port()
    cmd, health = chroma_cmd(tmp_path / "chroma", port), f"http://127.0.0.1:{port}/api/v2/heartbeat"
    with LLMServer() as server:
        with running(cmd, health, log=tmp_path / "chroma1.log"):
            app = RunningApp(
                tmp_path / "data",
                tmp_path / "app.log",
                **app_llm_env(server, CHROMA_HOST="127.0.0.1", CHROMA_PORT=port),
            )
            try:
                c = Client(app.url, verbose=False)
                uid = c.predict(api_name="/new_user")
                c.predict(uid, "2023-04-30", api_name="/new_session")  # sessions may not go back in time
                reply, trace = c.predict(uid, "My cat Miso hates thunderstorms.", "theanine", api_name="/send_message")
                assert not trace.get("error")
                ended = c.predict(uid, "2023-05-01", api_name="/end_session")
                assert ended["errors"] == [] and ended["closed"][0]["new_memories"]
                c.predict(uid, "2023-05-08", api_name="/new_session")
            except BaseException:
                app.stop()
                raise
        try:
            # The server is gone.
            reply, trace = c.predict(uid, "Is Miso still scared of storms?", "theanine", api_name="/send_message")
            assert trace["error"] and "cannot be reached" in trace["error"] and "Retry" in trace["error"]
            assert "Traceback" not in str(trace)
            turns = c.predict(uid, api_name="/history")["sessions"][-1]["turns"]
            assert turns[0]["text"] == "Is Miso still scared of storms?" and turns[-1]["status"] == "error"
            ended = c.predict(uid, "2023-05-09", api_name="/end_session")
            assert ended["errors"] and "will be built again" in ended["errors"][0]
            assert [s["status"] for s in c.predict(uid, api_name="/history")["sessions"]] == [
                "closed",
                "closing",
                "open",
            ]
            with running(cmd, health, log=tmp_path / "chroma2.log"):
                # Back: the pending close completes and Retry-like work resumes.
                ended = c.predict(uid, "", api_name="/end_session")
                assert ended["errors"] == [] and len(ended["closed"]) == 1, ended
                reply, trace = c.predict(
                    uid, "Tell me about Miso and the storms.", "theanine", api_name="/send_message"
                )
                assert not trace.get("error") and reply
                assert any("Miso" in m["event"] for m in trace["memories"])  # memory from before the outage
                assert [s["status"] for s in c.predict(uid, api_name="/history")["sessions"]] == [
                    "closed",
                    "closed",
                    "open",
                ]
        finally:
            app.stop()
