"""One rule for session dates, typed or imported (memory.dates.check): invalid ones are refused with a
message naming the session, nothing is stored; a date stored before the rule no longer blocks; and a
session's date can be corrected afterwards."""

from __future__ import annotations

import json

import pytest

from memory import dates
from memory.settings import Settings
from sessions import UserError, new_user_id, open_service
from sessions.graph_store import SqlGraphStore
from sessions.transfer import ImportFormatError
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService

INVALID = ["9999-12-31", "2023-02-30", "not a date", "-5", "1e308", "", "1066-10-14", "x" * 70]


def svc_for(tmp_path) -> FlatService:
    return FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent()))


def history(*dated: str) -> str:
    return json.dumps(
        {"sessions": [{"date": d, "turns": [{"speaker": "user", "text": f"on {d} I went out"}]} for d in dated]}
    )


@pytest.mark.parametrize("bad", INVALID)
def test_typed_and_imported_dates_follow_one_rule(tmp_path, bad):
    with pytest.raises(dates.DateError):
        dates.check(bad)
    assert dates.parse(bad) is None  # not a date: ordered as undated wherever it is met
    svc, uid = svc_for(tmp_path), new_user_id()
    with pytest.raises(UserError):
        svc.new_session(uid, bad)
    with pytest.raises(ImportFormatError) as e:
        svc.import_history(uid, history("2023-05-01", bad))
    assert "sessions[1].date" in str(e.value)  # names the session
    assert svc.sessions(uid) == [] or all(s.source != "import" for s in svc.sessions(uid))  # nothing stored


def test_numbers_and_nulls_as_dates_are_refused(tmp_path):
    svc, uid = svc_for(tmp_path), new_user_id()
    for bad in (-5, 1e308, None, ["2023-05-01"]):
        doc = {"sessions": [{"date": bad, "turns": [{"speaker": "user", "text": "hi"}]}]}
        with pytest.raises(ImportFormatError, match=r"sessions\[0\]\.date must be a string"):
            svc.import_history(uid, json.dumps(doc))


def test_good_imported_dates_are_kept_as_written(tmp_path):
    svc, uid = svc_for(tmp_path), new_user_id()
    svc.import_history(uid, history("1:56 pm on 8 May, 2023", "2023-05-09"))
    assert [s.date for s in svc.sessions(uid) if s.source == "import"] == ["1:56 pm on 8 May, 2023", "2023-05-09"]


def test_a_far_future_date_stored_before_the_rule_no_longer_blocks_later_sessions(tmp_path):
    svc, uid = svc_for(tmp_path), new_user_id()
    svc.import_history(uid, history("2023-05-01"))
    imported = svc.sessions(uid)[0]
    with svc.store.engine.begin() as c:  # what an older version let in
        c.exec_driver_sql(f"UPDATE sessions SET date='9999-12-31' WHERE session_id='{imported.session_id}'")
    opened = svc.new_session(uid, "2023-05-10").session
    assert opened is not None and opened.date == "2023-05-10"  # not "would come before"


def test_a_session_date_can_be_corrected(tmp_path):
    svc, uid = svc_for(tmp_path), new_user_id()
    svc.import_history(uid, history("2023-05-01", "2023-05-02"))
    first = svc.sessions(uid)[0]
    msg = svc.set_session_date(uid, first.session_id, "3 May 2023")
    assert "now dated Wed 3 May 2023" in msg
    row = svc.store.session(uid, first.session_id)
    assert row is not None and row.date == "2023-05-03"
    assert [s.session_id for s in svc.sessions(uid) if s.source == "import"][-1] == first.session_id  # re-ordered
    row = svc.store.session(uid, first.session_id)
    assert row is not None and row.status == "closed"  # its memory built again
    with pytest.raises(UserError, match="out of range"):
        svc.set_session_date(uid, first.session_id, "9999-12-31")
    with pytest.raises(UserError):
        svc.set_session_date(uid, "s999", "2023-05-04")
    cur = svc.current_session(uid)
    assert "now dated" in svc.set_session_date(uid, cur.session_id, "2023-06-01")
    assert svc.current_session(uid).date == "2023-06-01"
    with pytest.raises(UserError, match="before session"):  # the open session keeps the order rule
        svc.set_session_date(uid, cur.session_id, "2023-04-01")


def test_correcting_a_date_moves_the_sessions_memories(tmp_path):
    svc = svc_for(tmp_path)
    graphs = SqlGraphStore(svc.store.engine)
    uid = new_user_id()
    m = {"id": "s1:m0", "event": "e", "time": "2023-05-01", "ts": "2023-05-01T00:00:00", "session_id": "s1"}
    graphs.save(uid, [{"session_id": "s1", "memories": [m], "edges": []}])
    v = graphs.version(uid)
    graphs.set_session_time(uid, "s1", "2023-05-03", dates.iso_key("2023-05-03"))
    [part], version = graphs.load(uid)
    assert (part["memories"][0]["time"], part["memories"][0]["ts"]) == ("2023-05-03", "2023-05-03T00:00:00")
    assert version == v + 1  # every replica reloads
