"""The words people read (issue 20, item 6), without a browser: no exception names, a title for every
segment, one date format in the export. The browser side is in tests/test_ui_readable.py."""

from __future__ import annotations

import json
import re

from memory.settings import Settings
from memory.trace_types import TraceDict
from sessions import open_service
from sessions.users import new_user_id
from tests import locomo_synth
from tests.fakes import ScriptedAgent
from tests.flat_service import FlatService
from ui import panels, see_why

RAW = (
    "compression unavailable: could not load microsoft/llmlingua-2-bert-base-multilingual-cased-meetingbank "
    "(OSError: the model hub cannot be reached and the model is not in the local cache); segment keys are the "
    "original text"
)


def test_exception_names_and_tracebacks_become_plain_words():
    trace: TraceDict = {
        "strategy": "secom",
        "notices": [RAW],
        "error": "The language model failed: APIConnectionError: Connection error. Your message is saved.",
        "llm_calls": [{"purpose": "segment", "status": "error", "detail": "openai.RateLimitError: slow down"}],
        "segments": [{"id": "x", "summary": "", "text": "We talked about surfing at Ocean Beach.", "key": "k"}],
    }
    html = see_why.trace_html(trace) + panels.status_html("Traceback (most recent call last):\n  File x", "error")
    assert not re.search(r"Error\b|Traceback", html), html
    assert "the model hub cannot be reached" in html and "could not connect" in html and "rate limited" in html
    # A segment rebuilt after a deletion has no summary: its opening words title it.
    assert "We talked about surfing at Ocean Beach." in html.split("mc-key")[0]


def test_the_export_writes_every_date_in_one_format(tmp_path):
    svc = FlatService(open_service(Settings(data_dir=tmp_path), ScriptedAgent()))
    uid = new_user_id()
    svc.import_history(uid, json.dumps([locomo_synth.conversation(3)]))
    list(svc.send(uid, "Hello"))
    data = svc.export(uid)
    dates = [s["date"] for s in data["sessions"]]
    assert len(dates) == 4 and all(re.fullmatch(r"\d{4}-\d\d-\d\d( \d\d:\d\d)?", d) for d in dates), dates
    assert dates[0] == "2023-05-03 14:11"  # LoCoMo's "2:11 pm on 3 May, 2023"
    times = re.findall(r'"(?:date|time)": "([^"]*)"', json.dumps(data))
    assert times and not [t for t in times if " on " in t or " pm" in t or " am" in t], times
