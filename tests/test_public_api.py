"""Through the real Gradio API: ten sends of one user at once give one reply and nine "busy" refusals."""

from __future__ import annotations

import time

import pytest

from memory.settings import Settings
from sessions import open_service
from tests.fakes import WAIT, GatedAgent
from tests.flat_service import FlatService
from tests.servers import free_port


@pytest.fixture
def gated_app(tmp_path):
    from ui import build_demo

    agent = GatedAgent()
    settings = Settings(data_dir=tmp_path)
    svc = FlatService(open_service(settings, agent))
    demo = build_demo(svc, settings, "test-secret-0123456789")
    demo.queue(default_concurrency_limit=4)
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True)
    yield f"http://127.0.0.1:{port}/", svc, agent
    agent.reply_gate.set()
    agent.close_gate.set()
    demo.close()


def test_ten_api_sends_at_once_one_answer_nine_refusals(gated_app):
    from gradio_client import Client

    url, svc, agent = gated_app
    c = Client(url, verbose=False)
    uid = c.predict(api_name="/new_user")
    jobs = [c.submit(uid, f"message {i}", "theanine", api_name="/send_message") for i in range(10)]
    assert agent.in_reply.wait(WAIT)  # one send holds the reply (its gate is closed)
    deadline = time.monotonic() + WAIT
    while sum(j.done() for j in jobs) < 9 and time.monotonic() < deadline:
        time.sleep(0.05)  # the nine others are answered while it is held
    done = [j for j in jobs if j.done()]
    assert len(done) == 9
    refusals = [str(j.exception()) for j in done]
    assert all("Busy with answering your message" in r for r in refusals), refusals
    agent.reply_gate.set()
    held = next(j for j in jobs if j not in done)
    answered = [held.result(timeout=WAIT)]
    assert len(answered) == 1 and answered[0][0]
    msgs = svc.messages(uid)
    assert [m.role for m in msgs] == ["user", "assistant"] and msgs[1].status == "ok"
