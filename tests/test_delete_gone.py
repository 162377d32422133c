"""Delete means gone: a unique token planted in a memory is nowhere after the memory is deleted
(every table, every file under the data dir); exports are private files that Forget me removes
(nothing under the data dir, Gradio's temp folder or the system temp folder holds the token).

Real parts: MiniLM, embedded Chroma, SQLite, the `openai` client on the scripted server.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from memory.trace_types import TraceDict
from sessions import new_user_id
from sessions.transfer import ExportFiles
from tests.reliability_app import handlers, make_service


def new_token() -> str:
    """Unique per test: no file of an earlier run or test can hold it."""
    return "ZQX" + uuid.uuid4().hex[:10].upper()


MAX_SCAN_BYTES = 64 * 1024 * 1024


def files_with(root: Path, token: str, since: float = 0.0) -> list[str]:
    """Files under `root` holding `token` (only those changed since `since`: the token is this run's)."""
    hits = []
    # os.walk passes over a folder that vanishes while it is read (other processes' temp dirs under /tmp,
    # e.g. a browser of a test running beside this one); rglob raises.
    paths = (Path(d) / f for d, _, files in os.walk(root) for f in files)
    for p in paths:
        try:
            st = p.stat()
            if (
                p.is_file()
                and st.st_mtime >= since
                and st.st_size <= MAX_SCAN_BYTES
                and token.encode() in p.read_bytes()
            ):
                hits.append(str(p))
        except OSError:
            continue
    return hits


def rows_with(db: Path, token: str) -> list[str]:
    con = sqlite3.connect(db)
    try:
        return [line[:200] for line in con.iterdump() if token in line]
    finally:
        con.close()


def _history(svc, uid: str, token: str) -> None:
    """A memory holding the token, retrieved by later replies of both strategies and a compare run."""
    svc.new_session(uid, "2023-05-08")
    for text in (f"My locker code at the gym is {token} and I never forget it.", "I also swim every morning."):
        list(svc.send(uid, text, "theanine"))
    svc.end_session(uid, "2023-05-09")
    for strategy in ("theanine", "secom"):
        list(svc.send(uid, "What is my locker code at the gym?", strategy))
    list(svc.compare(uid, "What is my locker code?"))


@pytest.mark.slow
def test_a_deleted_memory_leaves_no_copy_in_any_table_or_file(tmp_path, llm_server):
    data = tmp_path / "data"
    svc = make_service(data, llm_server)
    uid, token = new_user_id(), new_token()
    _history(svc, uid, token)
    assert rows_with(data / "sessions.sqlite3", token) and files_with(data, token)  # planted where we look
    mem = next(n for n in svc.graph(uid)["nodes"] if token in n["event"])
    gone = svc.delete_memory(uid, mem["id"], redact=True)
    assert gone is not None and "stored copies" in gone["message"]
    assert rows_with(data / "sessions.sqlite3", token) == []
    assert files_with(data, token) == []  # SQLite free pages and WAL, Chroma's log, index and free pages
    # The rest still works: the other memory is there, and both strategies answer.
    assert any("swim" in n["event"] for n in svc.graph(uid)["nodes"])
    for strategy in ("theanine", "secom"):
        assert not [u for u in svc.send(uid, "Do I swim?", strategy)][-1].error
    assert token not in str(svc.export(uid))


@pytest.mark.slow
def test_without_redact_only_the_transcript_keeps_the_turn(tmp_path, llm_server):
    data = tmp_path / "data"
    svc = make_service(data, llm_server)
    uid, token = new_user_id(), new_token()
    _history(svc, uid, token)
    mem = next(n for n in svc.graph(uid)["nodes"] if token in n["event"])
    svc.delete_memory(uid, mem["id"])
    hits = rows_with(data / "sessions.sqlite3", token)
    assert len(hits) == 1 and hits[0].startswith('INSERT INTO "messages"')  # the user's own message
    assert [p for p in files_with(data, token) if "chroma" in p] == []
    exp = svc.export(uid)
    assert token not in str(exp["memory"])  # neither THEANINE nor SeCom holds it
    assert sum(token in t["text"] for s in exp["sessions"] for t in s["turns"]) == 1


def _temp_dirs() -> list[Path]:
    from gradio.utils import get_upload_folder

    return [Path(get_upload_folder()), Path(tempfile.gettempdir()) / "gradio", Path(tempfile.gettempdir())]


@pytest.mark.slow
def test_exports_are_private_and_forget_me_leaves_the_token_nowhere_on_disk(tmp_path, llm_server, monkeypatch):
    monkeypatch.setenv("GRADIO_TEMP_DIR", str(tmp_path / "gradio"))  # this test's own Gradio cache
    start = time.time() - 1
    data = tmp_path / "data"
    svc = make_service(data, llm_server)
    h = handlers(svc)
    uid, token = new_user_id(), new_token()
    _history(svc, uid, token)
    out = h.data.export(uid)
    path = Path(out[h.c.export_file]["value"])
    assert token in path.read_text(encoding="utf-8")
    assert path.is_relative_to(tmp_path / "gradio")  # inside Gradio's cache: served without a copy
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(h.exports.root.stat().st_mode) == 0o700
    h.data.forget(uid, True)
    assert not path.exists()
    assert files_with(data, token) == []
    for d in _temp_dirs():
        assert files_with(d, token, since=start) == [], d


def test_an_export_is_deleted_after_its_download_and_after_its_time(tmp_path):
    ex = ExportFiles(tmp_path / "exports", ttl_s=3600, sweep_every_s=None)
    a = ex.write("user-a" * 4, "A's export")
    b = ex.write("user-b" * 4, "B's export")
    ex.downloaded("user-a" * 4, grace_s=0)
    assert not a.exists() and b.exists()  # only the downloader's file
    ex.ttl_s = 0  # a file not downloaded goes when its time is up
    c = ex.write("user-b" * 4, "B again")
    ex.sweep()
    assert not c.exists() and b.exists()
    assert ex.forget("user-b" * 4) == 1 and not b.exists()  # Forget me
    old = tmp_path / "exports" / "left-by-an-earlier-process"
    old.mkdir()
    os.utime(old, (time.time() - 10, time.time() - 10))
    ex.sweep()
    assert not old.exists()
    ExportFiles(tmp_path / "exports", sweep_every_s=None)  # a start wipes what is left
    assert list((tmp_path / "exports").iterdir()) == []


def test_scrub_takes_a_memory_out_of_a_trace_a_compare_run_and_an_excerpt():
    from sessions import upkeep

    f = upkeep.Forgotten.of("s1:m0", "John started surfing five years ago.", {"s1:3": ("John", "I started  surfing!")})
    trace: TraceDict = {
        "memories": [{"id": "s1:m0", "event": "John started surfing five years ago."}, {"id": "s1:m1", "event": "x"}],
        "timelines_raw": [
            {"anchor": "s1:m1", "nodes": ["s1:m0", "s1:m1"], "text": "[...]", "covers": ["s1:3"]},
            {"anchor": "s2:m0", "nodes": ["s2:m0"], "text": "[John started surfing five years ago. too]", "covers": []},
        ],
        "timelines_refined": ["John has surfed for years", "other"],
        "segments": [{"text": "John: I started surfing!", "covers": ["s1:3"]}, {"text": "kept", "covers": ["s1:4"]}],
    }
    out = upkeep.trace(trace, f)
    assert [m["id"] for m in out["memories"]] == ["s1:m1"]
    assert [t["anchor"] for t in out["timelines_raw"]] == ["s2:m0"] and out["timelines_refined"] == ["other"]
    assert out["timelines_raw"][0]["text"] == f"[{upkeep.REMOVED} too]"
    assert [s["text"] for s in out["segments"]] == ["kept"]
    report = {"new_memories": ["s1:m0", "s1:m1"], "trace": trace}
    assert upkeep.value(report, f)["new_memories"] == ["s1:m1"]
    compare = {"theanine": {"text": "reply", "trace": trace}}
    assert "surfing five" not in str(upkeep.value(compare, f))
    ex = "Mary: hi / John: I started surfing! / Mary: wow"
    assert upkeep.excerpt(ex, f) == f"Mary: hi / John: {upkeep.REMOVED} / Mary: wow"
