"""The fault table: one corrupt row in each table that holds JSON, then what still works.

    python -m tests.fault_table

For each JSON column (sessions/db.py), a fresh data dir gets a user with two sessions
(replies with traces, a compare run, a built memory), one row of that column is overwritten
with broken JSON, and a restarted service (real MiniLM, embedded Chroma, SQLite, the scripted
LLM server) is asked for everything a user does: load the page, history, export, send, end the
session, the graph. Prints a markdown table (docs/reliability.md holds a copy).
"""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sessions import new_user_id
from tests.llm_server import LLMServer
from tests.reliability_app import handlers, make_service

# One corruption per JSON column: (table.column, the SQL that breaks one row).
CORRUPTIONS: dict[str, str] = {
    "messages.trace": "UPDATE messages SET trace='{broken' "
    "WHERE id=(SELECT MAX(id) FROM messages WHERE trace IS NOT NULL)",
    "graph_memories.turns": "UPDATE graph_memories SET turns='{not json' "
    "WHERE memory_id=(SELECT MIN(memory_id) FROM graph_memories)",
    "sessions.report": "UPDATE sessions SET report='[1,' WHERE session_id='s1'",
    "users.prefs": "UPDATE users SET prefs='nul'",
    "compares.results": "UPDATE compares SET results='{\"theanine\":'",
}


def populate(svc, uid: str) -> None:
    svc.new_session(uid, "2023-05-08")
    for text in ("I adopted a puppy named Rex.", "I started surfing five years ago."):
        list(svc.send(uid, text, "theanine"))
    list(svc.compare(uid, "What is my dog's name?"))
    svc.save_settings(uid, {"k": 3})
    svc.end_session(uid, "2023-05-09")
    list(svc.send(uid, "Rex chewed my shoes today.", "theanine"))


def _try(fn: Callable[[], Any]) -> tuple[bool, Any]:
    try:
        return True, fn()
    except Exception as e:  # the table records what a user would meet
        from sessions.service import user_message

        return False, user_message(e)


def counts(svc, uid: str) -> dict:
    exp = svc.export(uid)
    return {
        "turns": sum(len(s["turns"]) for s in exp["sessions"]),
        "memories": len(exp["memory"]["theanine_graph"]["memories"]),
        "segments": len(exp["memory"]["secom_segments"]),
    }


def run_case(column: str, data_dir: Path, server: LLMServer) -> dict:
    """One row of the table: corrupt `column` in a fresh data dir, restart, try everything."""
    svc = make_service(data_dir, server)
    uid = new_user_id()
    populate(svc, uid)
    before = counts(svc, uid)
    db = sqlite3.connect(data_dir / "sessions.sqlite3")
    with db:
        assert db.execute(CORRUPTIONS[column]).rowcount == 1
    db.close()
    svc = make_service(data_dir, server)  # a restart: no cached graph
    h = handlers(svc)
    out: dict = {"column": column, "user_id": uid}
    ok, page = _try(lambda: h.load(uid))
    out["page load"] = ok and "mc-error" not in str(page.get(h.c.status, "")) and bool(page.get(h.c.chatbot))
    out["history"] = _try(lambda: [svc.messages(uid, s.session_id) for s in svc.sessions(uid)])[0]
    ok, exp = _try(lambda: svc.export(uid))
    out["export"] = ok
    out["after"] = counts(svc, uid) if ok else {}
    out["before"] = before
    ok, done = _try(lambda: [u for u in svc.send(uid, "What is my dog's name?", "theanine")][-1])
    out["send"] = ok and not getattr(done, "error", None)
    out["graph"] = _try(lambda: svc.graph(uid))[0]
    out["compares"] = _try(lambda: svc.store.compares(uid))[0]
    ok, end = _try(lambda: svc.end_session(uid, "2023-05-10"))
    out["end session"] = ok and not end.errors
    out["damaged"] = svc.damage(uid)
    out["shown"] = " ".join(d["message"] for d in out["damaged"])
    out["export_json_ok"] = ok and json.dumps(exp) is not None
    return out


def _mark(v: bool) -> str:
    return "yes" if v else "**no**"


def render(rows: list[dict]) -> str:
    head = (
        "| corrupt row | page load | history | send (THEANINE) | end session | graph "
        "| export: turns / memories / segments (before → after) | message shown |"
    )
    lines = [head, "|" + "---|" * 8]
    for r in rows:
        b, a = r["before"], r["after"]
        exp = f"{b['turns']}/{b['memories']}/{b['segments']} → " + (
            f"{a['turns']}/{a['memories']}/{a['segments']}" if a else "**failed**"
        )
        lines.append(
            f"| {r['column']} | {_mark(r['page load'])} | {_mark(r['history'])} | {_mark(r['send'])} | "
            f"{_mark(r['end session'])} | {_mark(r['graph'])} | {exp} | {r['shown'] or '(none)'} |"
        )
    return "\n".join(lines)


def main() -> None:
    rows = []
    with LLMServer() as server, tempfile.TemporaryDirectory() as tmp:
        for column in CORRUPTIONS:
            server.reset()
            rows.append(run_case(column, Path(tmp) / column, server))
    print(render(rows))


if __name__ == "__main__":
    main()
