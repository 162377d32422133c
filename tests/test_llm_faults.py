"""The real `openai` client (OpenAIChat + LLMSession) against the scripted server: retries, Retry-After,
timeouts, cut streams, servers without structured outputs, and the purpose header on every request."""

import json

import pytest

from memory.errors import LLMError
from memory.llm import MAX_RETRY_AFTER, PURPOSE_HEADER, LLMSession, OpenAIChat
from memory.settings import LLMConfig
from memory.theanine import prompts
from memory.trace import Trace
from tests.llm_server import ANY, cut, empty, hang, ok, refuse, status

MSG = [{"role": "user", "content": "hi"}]
PAIR = ({"time": "t1", "event": "a"}, {"time": "t2", "event": "b"})


def session(llm_server, timeout=5.0, sleep=None):
    cfg = LLMConfig(
        backend="openai", model="m", base_url=llm_server.url, api_key="sk-test-not-a-real-key", timeout=timeout
    )
    kw = {} if sleep is None else {"sleep": sleep}
    return LLMSession(OpenAIChat(cfg), Trace("t"), max_retries=2, backoff=0.01, **kw)


def relations(s):
    return s.json(
        "relation",
        prompts.relation_messages(*PAIR, []),
        prompts.RELATION_SCHEMA,
        prompts.validate_relation,
        lambda: "None",
    )


def formats(llm_server):
    return [(b.get("response_format") or {}).get("type") for b in llm_server.bodies()]


def test_429_and_500_are_retried_with_backoff(llm_server):
    llm_server.script(ANY, status(429), status(500), ok("fine"))
    s = session(llm_server)
    assert s.text("x", MSG) == "fine"
    assert len(llm_server.requests) == 3 and s.trace.llm_calls[0].status == "retried"


def test_persistent_errors_and_hangs_end_in_a_clear_error(llm_server):
    llm_server.script(ANY, *[status(503)] * 3)
    s = session(llm_server)
    with pytest.raises(LLMError):
        s.text("x", MSG)
    assert len(llm_server.requests) == 3 and s.trace.llm_calls[0].status == "error"
    llm_server.script(ANY, *[hang(3)] * 3)
    s = session(llm_server, timeout=0.5)
    with pytest.raises(LLMError, match="Timeout"):
        s.text("x", MSG)


def test_a_stream_cut_midway_is_an_error_and_keeps_what_arrived(llm_server):
    llm_server.script("reply", cut("Hello there, this reply will be cut"))
    s = session(llm_server)
    got = []
    with pytest.raises(LLMError):
        for p in s.stream("reply", MSG):
            got.append(p)
    assert "".join(got).startswith("Hello") and s.trace.llm_calls[0].status == "error"


@pytest.mark.parametrize("answer", ["", "not json", json.dumps({"relation": "Destroys"})])
def test_bad_structured_answers_fall_back(llm_server, answer):
    llm_server.script("relation", ok(answer), ok(answer))
    s = session(llm_server)
    assert relations(s) == "None" and s.trace.llm_calls[0].status == "fallback"


def test_an_empty_choice_list_is_retried_then_reported(llm_server):
    llm_server.script(ANY, *[empty()] * 3)
    s = session(llm_server)
    with pytest.raises(LLMError):
        s.text("x", MSG)
    assert len(llm_server.requests) == 3


def test_the_key_never_reaches_the_trace(llm_server):
    llm_server.script(ANY, status(401))  # the server echoes the key in its error
    s = session(llm_server)
    with pytest.raises(LLMError):
        s.text("x", MSG)
    assert "sk-test" not in json.dumps(s.trace.to_dict())


# --- structured outputs and the retry policy --------------------------------------------------------


def test_an_outage_500_is_retried_with_json_schema_and_not_taken_for_a_refusal(llm_server):
    llm_server.script("relation", status(500), status(500))
    s = session(llm_server)
    assert relations(s) == "SameTopic"
    assert formats(llm_server) == ["json_schema"] * 3 and s.trace.llm_calls[0].status == "retried"
    assert s.llm.structured_outputs


def test_retry_after_is_honoured(llm_server):
    waits: list[float] = []
    llm_server.script(ANY, status(429, retry_after=7), status(503, retry_after=2), ok("fine"))
    s = session(llm_server, sleep=waits.append)
    assert s.text("x", MSG) == "fine"
    assert waits == [7.0, 2.0]


def test_retry_after_over_the_limit_is_an_error_at_once(llm_server):
    waits: list[float] = []
    llm_server.script(ANY, status(429, retry_after=MAX_RETRY_AFTER + 90))
    s = session(llm_server, sleep=waits.append)
    with pytest.raises(LLMError, match="asks to wait 120 s; try again later"):
        s.text("x", MSG)
    assert waits == [] and len(llm_server.requests) == 1 and s.trace.llm_calls[0].status == "error"


@pytest.mark.parametrize("code", [400, 422, 500])
def test_a_refusal_of_json_schema_is_answered_with_json_object_and_kept(llm_server, code):
    llm_server.refuse_json_schema = code  # a server without structured outputs refuses every json_schema request
    s = session(llm_server)
    assert relations(s) == "SameTopic"
    assert formats(llm_server) == ["json_schema", "json_object"] and s.trace.llm_calls[0].status == "ok"
    assert relations(s) == "SameTopic"  # later calls go straight to json_object
    assert formats(llm_server) == ["json_schema", "json_object", "json_object"]


def test_a_scripted_refusal_then_json_object(llm_server):
    llm_server.script("summarise", refuse(500))
    s = session(llm_server)
    out = s.json("summarise", MSG, {"type": "object"}, lambda raw: raw, dict)
    assert "memories" in out and formats(llm_server) == ["json_schema", "json_object"]


def test_the_purpose_header_is_on_every_request(llm_server):
    s = session(llm_server)
    s.text("x", MSG)
    relations(s)
    "".join(s.stream("reply", MSG))
    assert [r.headers[PURPOSE_HEADER.lower()] for r in llm_server.requests] == ["x", "relation", "reply"]
    assert [r.purpose for r in llm_server.requests] == ["x", "relation", "reply"]
    assert llm_server.requests[1].body["response_format"]["json_schema"]["name"] == "relation"


def test_the_purpose_header_through_the_app_service(llm_server, llm_service):
    """reply, summarise, relation, segment and refine calls made by SessionService each carry their step."""
    from sessions import new_user_id
    from tests.reliability_app import last_done

    svc, uid = llm_service, new_user_id()
    svc.new_session(uid, "2023-04-30")
    for text in ("I adopted a puppy named Rex.", "Rex loves long walks in the park."):
        assert last_done(list(svc.send(uid, text, "theanine"))).error is None
    assert svc.end_session(uid, "2023-05-01").errors == []
    assert last_done(list(svc.send(uid, "I took Rex to the vet today.", "theanine"))).error is None
    assert svc.end_session(uid, "2023-05-08").errors == []
    assert last_done(list(svc.send(uid, "How is Rex?", "theanine"))).error is None
    sent = [r.headers.get(PURPOSE_HEADER.lower()) for r in llm_server.requests]
    assert None not in sent and {"reply", "summarise", "segment", "relation", "refine"} <= set(sent)
    for r in llm_server.requests:
        fmt = r.body.get("response_format")
        assert r.purpose == r.headers[PURPOSE_HEADER.lower()]
        if fmt:  # JSON steps name their schema after the step
            assert fmt["json_schema"]["name"] == r.purpose
