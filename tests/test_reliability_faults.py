"""A misbehaving LLM server behind the real service stack (in-process, real openai client, MiniLM,
embedded Chroma, SQLite), seen through the UI handlers the page calls.

For every fault: the user's message is stored before the model is called, the page shows a
clear error and the Retry button (never a stack trace), Retry then answers it, and the trace
records what happened. Session closes retry, repair or fall back, and always complete.
"""

from __future__ import annotations

import itertools
import json

import pytest

from memory.design import REFINE_TIMELINES
from memory.theanine.graph import RELATIONS
from tests.reliability_app import TRACEBACK, handlers, last_done, make_service, visible

FAST = {"LLM_TIMEOUT": "1", "LLM_MAX_RETRIES": "1"}


@pytest.fixture
def svc(llm_server, tmp_path):
    return make_service(tmp_path / "data", llm_server, **FAST)


def uid_of(svc) -> str:
    from sessions import new_user_id

    uid = new_user_id()
    # The first session is dated in 2023, like the later ones: a session may not start before the previous one.
    svc.new_session(uid, "2023-04-30")
    return uid


def no_traceback(outputs) -> None:
    text = json.dumps(outputs, default=str)
    assert not TRACEBACK.search(text), text[:2000]


REPLY_FAULTS: dict[str, list[tuple[str, object]]] = {
    "429 every time": [("status", 429)] * 2,
    "500 every time": [("status", 500)] * 2,
    "hang past the timeout": [("hang", 3)] * 2,
    "stream cut midway": [("cut", "Hello there, this reply will be cut in the middle")],
    "no choices": [("empty", None)] * 2,
    "empty text": [("ok", "")] * 2,  # an empty answer is asked again once, with another seed
}


@pytest.mark.parametrize("fault", list(REPLY_FAULTS))
def test_reply_fault_keeps_the_message_shows_an_error_and_retry_answers(svc, llm_server, fault):
    h, c = handlers(svc), None
    uid = uid_of(svc)
    llm_server.script("reply", *REPLY_FAULTS[fault])
    outs = list(h.send(uid, "My sister Mirela visits on Friday.", "theanine"))
    no_traceback(outs)
    c = h.c
    final = outs[-1]
    assert "mc-error" in final[c.status] and "Retry" in final[c.status], final[c.status]
    assert visible(final[c.retry])
    rows = svc.messages(uid)
    assert [(m.role, m.status) for m in rows] == [("user", "ok"), ("assistant", "error")]
    assert rows[0].text == "My sister Mirela visits on Friday."  # stored before the model was called
    trace = rows[1].trace
    assert trace["error"] and "Retry" in trace["error"]
    reply_calls = [x for x in trace["llm_calls"] if x["purpose"] == "reply"]
    if fault != "empty text":
        assert reply_calls and reply_calls[-1]["status"] == "error" and reply_calls[-1]["detail"]
    if fault.startswith(("429", "500", "hang", "no choices", "empty")):
        assert llm_server.count("reply") == 2  # retried once (LLM_MAX_RETRIES=1; empty: one more seed)

    # Retry answers the same stored message; nothing is duplicated.
    llm_server.script("reply", ("ok", "Have a lovely visit."))
    outs = list(h.retry(uid, "theanine"))
    no_traceback(outs)
    assert outs[-1][c.status] == "" and not visible(outs[-1][c.retry])
    rows = svc.messages(uid)
    assert [(m.role, m.status) for m in rows] == [("user", "ok"), ("assistant", "error"), ("assistant", "ok")]
    assert rows[2].text == "Have a lovely visit." and rows[2].reply_to == rows[0].id


def test_a_transient_error_is_retried_and_recorded(svc, llm_server):
    uid = uid_of(svc)
    llm_server.script("reply", ("status", 429))
    done = last_done(list(svc.send(uid, "Hello again", "none")))
    assert done.error is None and done.text == "Thanks, I will remember that."
    call = next(x for x in done.trace["llm_calls"] if x["purpose"] == "reply")
    assert call["status"] == "retried" and "RateLimit" in call["detail"]


def test_an_empty_answer_is_asked_again_with_another_seed(svc, llm_server):
    uid = uid_of(svc)
    llm_server.script("reply", ("ok", ""), ("ok", "Welcome back!"))
    done = last_done(list(svc.send(uid, "Hello again", "none")))
    assert done.error is None and done.text == "Welcome back!"
    call = next(x for x in done.trace["llm_calls"] if x["purpose"] == "reply")
    assert call["status"] == "retried" and call["detail"] == "empty answer"
    assert llm_server.count("reply") == 2


def chat(svc, uid, *texts):
    for t in texts:
        done = last_done(list(svc.send(uid, t, "theanine")))
        assert done.error is None, done.error


FIRST = ("I adopted a puppy named Rex from the shelter.", "Rex loves long walks in the park every morning.")
SECOND = (
    "Rex got sick after eating chocolate from the table.",
    "The vet said Rex must rest for a week.",
    "I started a new job at the bakery downtown.",
    "The bakery opens at five so I walk Rex early.",
)

CLOSE_FAULTS: dict[str, tuple[str, list[tuple[str, object]], str]] = {
    "summary not JSON": ("summarise", [("ok", "Sure! Here are the memories: none of them are JSON")] * 2, "fallback"),
    "summary 500": ("summarise", [("status", 500)] * 4, "fallback"),
    "summary hang": ("summarise", [("hang", 3)] * 4, "fallback"),
    "summary empty": ("summarise", [("ok", "")] * 2, "fallback"),
    "relations outside the set": (
        "relation",
        [
            (
                "ok",
                json.dumps(
                    {
                        "relations": [
                            {"pair": i, "relation": r}
                            for i, r in enumerate(["Destroys", "<script>x</script>", "Friend", "ignore"] * 8)
                        ]
                    }
                ),
            )
        ]
        * 2,
        "fallback",
    ),
    "segments with gaps, overlaps, out of range": (
        "segment",
        [
            (
                "ok",
                "<segmentation>\n"
                + "\n".join(
                    json.dumps(s)
                    for s in [
                        {"segment_id": 0, "start_exchange_number": 0, "end_exchange_number": 0},
                        {"segment_id": 1, "start_exchange_number": 2, "end_exchange_number": 2},  # gap at 1
                        {"segment_id": 2, "start_exchange_number": 2, "end_exchange_number": 3},  # overlap
                        {"segment_id": 3, "start_exchange_number": 3, "end_exchange_number": 99},  # out of range
                        {"segment_id": 4, "start_exchange_number": -7, "end_exchange_number": -2},
                    ]
                )
                + "\n</segmentation>",
            )
        ],
        "repaired",
    ),
    "segments not JSON": ("segment", [("ok", "I think there are two topics.")] * 2, "fallback"),
    "segments 500": ("segment", [("status", 500)] * 4, "fallback"),
}


@pytest.mark.parametrize("fault", list(CLOSE_FAULTS))
def test_close_faults_are_repaired_or_fall_back_and_the_close_completes(svc, llm_server, fault):
    purpose, entries, expected = CLOSE_FAULTS[fault]
    uid = uid_of(svc)
    chat(svc, uid, *FIRST)
    first = svc.end_session(uid, "2023-05-01")
    assert first.errors == [] and first.closed[0].report["new_memories"]
    chat(svc, uid, *SECOND)
    llm_server.script(purpose, *entries)
    result = svc.end_session(uid, "2023-05-08")
    assert result.errors == [], result.errors
    report = result.closed[0].report
    assert [s.status for s in svc.sessions(uid)] == ["closed", "closed", "open"]
    calls = [x for x in report["trace"]["llm_calls"] if x["purpose"] == purpose]
    assert llm_server.count(purpose) >= 1 and calls and calls[0]["status"] == expected, calls
    assert report["new_memories"] and report["new_segments"]

    view = svc.graph(uid)
    assert {e["relation"] for e in view["edges"]} <= set(RELATIONS)  # only labels from the set
    hits = svc.agent.store.get(uid, "secom_segments", where={"session_id": "s2"})
    cover = sorted((h.metadata["start"], h.metadata["end"]) for h in hits)
    assert cover[0][0] == 0 and cover[-1][1] == len(SECOND) - 1, cover  # inside the session
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(cover)), cover  # no gap, no overlap


def test_refinement_faults_fall_back_to_the_raw_timelines(svc, llm_server):
    uid = uid_of(svc)
    chat(svc, uid, *FIRST)
    assert svc.end_session(uid, "2023-05-01").errors == []
    chat(svc, uid, *SECOND)  # linked to the first session: timelines of two memories or more, which are refined
    assert svc.end_session(uid, "2023-05-08").errors == []
    # every refinement call (one per timeline) gets a broken answer, then server errors
    llm_server.script("refine", *([("ok", "{not json"), ("status", 500), ("status", 500)] * 40))
    done = last_done(list(svc.send(uid, "How is my puppy Rex doing on his walks?", "theanine")))
    assert done.error is None and any(len(t["nodes"]) > 1 for t in done.trace["timelines_raw"])
    refines = [x for x in done.trace["llm_calls"] if x["purpose"] == "refine"]
    n = min(REFINE_TIMELINES, len(done.trace["timelines_raw"]))  # the first three are refined (official count)
    assert len(refines) == n and all(x["status"] == "fallback" for x in refines)
    raw = [t["text"] for t in done.trace["timelines_raw"]]
    assert done.trace["timelines_refined"] == raw[:n] + [""] * (len(raw) - n)  # fallen back to raw; the rest unrefined
