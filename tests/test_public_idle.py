"""python -m sessions idle: reports idle users; deletes them only with --delete, and says so."""

from __future__ import annotations

import io
import time

from memory.settings import Settings
from memory.userspace import user_key
from sessions import new_user_id, open_service
from sessions.__main__ import main
from sessions.users import fingerprint
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService

DAY = 86400


def test_idle_users_reported_then_deleted_on_request_only(tmp_path):
    agent = ScriptedAgent()
    svc = FlatService(open_service(Settings(data_dir=tmp_path), agent))
    old, recent = new_user_id(), new_user_id()
    for uid in (old, recent):
        list(svc.send(uid, "hello"))
        svc.end_session(uid)
    now = time.time() + 40 * DAY
    list(svc.send(recent, "still here"))
    assert svc.store.user_exists(old) and svc.store.user_exists(recent)
    # "recent" was active now; pretend 40 days pass for everyone but them by moving the clock and
    # touching "recent" again at that time.
    from sessions.schema import messages

    with svc.store._write() as db:
        db.execute(messages.update().where(messages.c.user_id == user_key(recent)).values(created_at=now))

    out = io.StringIO()
    assert main(["idle", "--days", "30"], service=svc, out=out, now=now) == 0
    report = out.getvalue()
    assert "1 idle" in report and fingerprint(old) in report and fingerprint(recent) not in report
    assert old not in report  # ids are credentials: never printed
    assert "Nothing deleted" in report
    assert svc.store.user_exists(old) and svc.sessions(old)  # a report changes nothing

    out = io.StringIO()
    main(["idle", "--days", "30", "--delete"], service=svc, out=out, now=now)
    assert f"deleted user {fingerprint(old)}" in out.getvalue() and "Deleted 1 idle users." in out.getvalue()
    assert not svc.store.user_exists(old) and svc.sessions(old) == []
    assert ("forget", user_key(old)) in agent.calls
    assert svc.store.user_exists(recent) and svc.sessions(recent)
