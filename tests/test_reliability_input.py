"""Bad input: empty and huge messages, control characters, lone surrogates, right-to-left text,
emoji; malformed, huge, deeply nested and wrong-format imports; out-of-range settings; bad dates
and user ids. Each is stored cleanly or refused with a message for people, and a refusal changes
nothing. The UI handlers are called as the page calls them.
"""

from __future__ import annotations

import json

import pytest

from memory.settings import Settings
from sessions import UserError, new_user_id, open_service
from sessions.transfer import MAX_FILE_BYTES
from sessions.users import OPTION_FIELDS
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService
from tests.reliability_app import TRACEBACK, handlers, last_done


@pytest.fixture
def fake(tmp_path):
    """The session service on the scripted agent (fast: no model)."""
    return FlatService(open_service(Settings(data_dir=tmp_path / "data"), ScriptedAgent()))


def user(svc) -> str:
    uid = new_user_id()
    svc.current_session(uid)
    return uid


def error_html(out: dict, key: str) -> str:
    html = out[key]
    assert "mc-error" in html and not TRACEBACK.search(json.dumps(out, default=str)), out
    return html


@pytest.mark.parametrize("message", ["", "   ", "\n\t \n", None, "\x00\x01\x1b", "\u00a0\u3000\u2028"])
def test_empty_messages_are_refused_and_nothing_is_stored(fake, message):
    uid = user(fake)
    with pytest.raises(UserError, match="Type a message"):
        list(fake.send(uid, message))
    out = list(handlers(fake).send(uid, message, "none"))
    assert "Type a message" in error_html(out[-1], "status")
    assert fake.messages(uid) == []


def test_a_200000_character_message_is_stored_whole_and_cut_for_the_llm(llm_service, llm_server):
    uid = user(llm_service)
    long = ("The quick brown fox jumps over the lazy dog near the river bank. " * 3200)[:200_000].strip()
    done = last_done(list(llm_service.send(uid, long, "theanine")))
    assert done.error is None
    assert any("long" in n and "saved" in n for n in done.trace["notices"]), done.trace["notices"]
    assert llm_service.messages(uid)[0].text == long  # stored whole
    sent = llm_server.bodies("reply")[-1]["messages"][-1]["content"]
    assert len(sent) < 20_000  # the model read the start only
    # The long message in the history does not overflow the next prompt either.
    done = last_done(list(llm_service.send(uid, "And a short one.", "theanine")))
    assert done.error is None
    body = llm_server.bodies("reply")[-1]
    assert sum(len(m["content"]) for m in body["messages"]) < 30_000
    result = llm_service.end_session(uid)
    assert result.errors == [] and result.closed[0].report["new_memories"]


MIXED = (
    "Hi \ud800 there\x00\x07\x1b[31m! RTL: \u202eעברית مرحبا بك\u202c emoji: 😀👍🏽🇫🇷 "
    "zero\u200bwidth, tab\tand\r\nnewline"
)


def test_control_characters_surrogates_rtl_and_emoji_are_stored_cleanly(llm_service, llm_server):
    uid = user(llm_service)
    llm_server.script("reply", ("ok", "Reply with a lone \udfff surrogate, עברית and 😀"))
    done = last_done(list(llm_service.send(uid, MIXED, "theanine")))
    assert done.error is None and "\udfff" not in done.text and "😀" in done.text
    rows = llm_service.messages(uid)
    text = rows[0].text
    assert "\ud800" not in text and "\ufffd" in text
    assert not any(ch in text for ch in "\x00\x07\x1b\r")
    for kept in ("עברית مرحبا بك", "\u202e", "😀👍🏽🇫🇷", "zero\u200bwidth", "tab\tand\nnewline"):
        assert kept in text
    assert rows[1].text == "Reply with a lone \ufffd surrogate, עברית and 😀"
    result = llm_service.end_session(uid)
    assert result.errors == [], result.errors
    events = " ".join(n["event"] for n in llm_service.graph(uid)["nodes"])
    assert "עברית" in events and "😀" in events
    json.dumps(llm_service.export(uid), ensure_ascii=False).encode("utf-8")  # the export encodes
    # the page renders it (handlers go through the same views)
    out = handlers(llm_service).load(uid)
    assert "mc-error" not in (out.get("status") or "")


def test_a_lone_surrogate_written_by_the_llm_into_memory_does_not_block_the_close(llm_service, llm_server):
    uid = user(llm_service)
    assert (
        last_done(list(llm_service.send(uid, "My friend Bob plays the violin on Sundays.", "theanine"))).error is None
    )
    llm_server.script(
        "summarise",
        (
            "ok",
            json.dumps(
                {
                    "memories": [
                        {"speaker": "user", "event": "The user has a friend \ud800 Bob who plays violin", "turns": [0]}
                    ]
                }
            ),
        ),
    )
    assert llm_service.end_session(uid).errors == []


# --- imports ------------------------------------------------------------------------------------

GOOD = {
    "sessions": [
        {
            "date": "2023-05-01",
            "turns": [
                {"speaker": "user", "text": "I moved to Lisbon."},
                {"speaker": "assistant", "text": "How exciting!"},
            ],
        }
    ]
}


def nested(depth: int) -> bytes:
    return b'{"sessions": ' + b"[" * depth + b"]" * depth + b"}"


BAD_FILES = {
    "not JSON": (b"{this is not json", "not valid JSON"),
    "empty file": (b"", "empty"),
    "binary (PNG)": (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)), "not valid JSON"),
    "CSV": (b"speaker,text\nuser,hello\n", "not valid JSON"),
    "a JSON number": (b"42", "unknown format"),
    "wrong shape": (json.dumps({"sessions": "yesterday"}).encode(), "non-empty list"),
    "turn without text": (
        json.dumps({"sessions": [{"date": "2023-05-01", "turns": [{"speaker": "user"}]}]}).encode(),
        "must be a string",
    ),
    "bad speaker": (
        json.dumps({"sessions": [{"date": "2023-05-01", "turns": [{"speaker": "root", "text": "x"}]}]}).encode(),
        "speaker",
    ),
    "deeply nested (100000 levels)": (nested(100_000), "nested too deeply"),
    "nested 500 levels": (nested(500), "must be an object"),
    "huge (over 20 MB)": (b'{"sessions": [' + b" " * (MAX_FILE_BYTES + 10) + b"]}", "larger than 20 MB"),
    "LoCoMo with several samples and no id": (
        json.dumps([{"sample_id": "a", "conversation": {}}, {"sample_id": "b", "conversation": {}}]).encode(),
        "LoCoMo",
    ),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_imports_give_a_clear_error_and_change_nothing(fake, tmp_path, case):
    data, expected = BAD_FILES[case]
    uid = user(fake)
    for text in ("Before the import", "Still here"):
        list(fake.send(uid, text))
    before = (
        [(s.session_id, s.status, s.n_messages) for s in fake.sessions(uid)],
        [m.text for m in fake.messages(uid)],
    )
    with pytest.raises(UserError) as e:
        fake.import_history(uid, data)
    assert expected.lower() in str(e.value).lower(), str(e.value)
    path = tmp_path / "history.json"
    path.write_bytes(data)
    out = handlers(fake).data.import_history(uid, str(path), "")
    assert expected.lower() in error_html(out, "data_status").lower()
    after = ([(s.session_id, s.status, s.n_messages) for s in fake.sessions(uid)], [m.text for m in fake.messages(uid)])
    assert after == before
    assert not [c for c in fake.agent.calls if c[0] == "close"]


def test_a_good_import_with_odd_characters_is_stored_cleanly(fake):
    uid = user(fake)
    doc = json.loads(json.dumps(GOOD))
    doc["sessions"][0]["turns"][0]["text"] = "I moved to Lisbon \ud83d 😀 עברית\x00"
    result = fake.import_history(uid, json.dumps(doc))
    assert result.errors == []
    texts = [m.text for m in fake.messages(uid, fake.sessions(uid)[0].session_id)]
    assert texts[0] == "I moved to Lisbon \ufffd 😀 עברית"


# --- settings, dates, user ids ----------------------------------------------------------------------

BAD_SETTINGS = [
    ("temperature", -0.1),
    ("temperature", 2.5),
    ("temperature", float("nan")),
    ("temperature", float("inf")),
    ("temperature", "hot"),
    ("j", 0),
    ("j", 21),
    ("j", 2.5),
    ("k", 0),
    ("k", 1000),
    ("n", 0),
    ("n", 11),
    ("compression_rate", 0.0),
    ("compression_rate", 1.5),
    ("max_reply_tokens", 1),
    ("max_reply_tokens", 100_000),
    ("retriever", "magic"),
    ("j", True),
]


@pytest.mark.parametrize("field,value", BAD_SETTINGS)
def test_out_of_range_settings_are_rejected_with_a_message(fake, field, value):
    from memory.errors import InvalidOptions

    uid = user(fake)
    fake.save_settings(uid, {"temperature": 0.3, "k": 5})
    with pytest.raises(InvalidOptions, match=field):
        fake.save_settings(uid, {field: value})
    h = handlers(fake)
    values = {
        "temperature": 0.3,
        "j": 3,
        "k": 5,
        "n": 1,
        "whole_timelines": 3,
        "theanine_mode": "tuned",
        "compression_rate": 0.75,
        "retriever": "hybrid",
        "max_reply_tokens": 256,
        field: value,
    }
    out = h.side.save_settings(uid, "embedded", "", "", *[values[f] for f in OPTION_FIELDS])
    from ui.handlers import FIELD_LABELS

    assert FIELD_LABELS[field] in error_html(out, "settings_status")  # the form's label, not the option name
    o = fake.options(uid)
    assert (o.temperature, o.k) == (0.3, 5)  # the saved values are kept
    assert out["temperature"] == 0.3 and out["k"] == 5  # and shown again


@pytest.mark.parametrize("date", ["", "   ", "not a date at all", "9" * 5000, "\ud800", "2023-13-45"])
def test_bad_session_dates_are_refused(fake, date):
    uid = user(fake)
    with pytest.raises(UserError):
        fake.new_session(uid, date)
    assert [s.status for s in fake.sessions(uid)] == ["open"]


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "short",
        "../../etc/passwd",
        "a" * 65,
        "ü" * 30,
        None,
        12345,
        "x" * 20 + "/..",
        "x" * 20 + "\x00",
        "x" * 19 + "\n",
    ],
)
def test_bad_user_ids_never_reach_the_store(fake, bad):
    from sessions import InvalidUserId

    for call in (
        lambda: list(fake.send(bad, "hi")),
        lambda: fake.sessions(bad),
        lambda: fake.export(bad),
        lambda: fake.import_history(bad, json.dumps(GOOD)),
        lambda: fake.forget(bad),
    ):
        with pytest.raises(InvalidUserId):
            call()
    out = handlers(fake).side.end_session(bad)
    assert "user id" in error_html(out, "status")
