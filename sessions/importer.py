"""Parse and validate a history to import, before anything is stored.

Two formats are accepted.

The app's own format (also what the export's "sessions" key holds):

    {"sessions": [
        {"date": "2023-05-08",
         "turns": [{"speaker": "user", "text": "I adopted a puppy named Rex."},
                   {"speaker": "assistant", "text": "Congratulations! How old is Rex?"}]},
        ...]}

`speaker` is "user" or "assistant"; an optional `name` keeps a person's name;
an optional `id` is kept as the turn's id (memory provenance names it);
`date` is free text, ISO (YYYY-MM-DD) preferred; it must be a date memory.dates reads, with a year
in 1900..2199 (the rule for typed dates too), else the whole file is refused, saying which session.

LoCoMo's format (snap-research/LoCoMo, e.g. locomo10.json): one sample or a
list of samples with a "conversation" object. The first speaker of a
conversation is shown as the user, the other as the assistant, and both keep
their names; each turn keeps its `dia_id` ("D3:7") as its id. A file with
several conversations needs the sample id of the one to import.

Validation is complete before any write, so a malformed file changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.dates import MAX_DATE_CHARS, DateError
from memory.dates import check as check_date
from memory.locomo_format import load_sessions
from memory.text import clean_text

from .errors import UserError

MAX_SESSIONS = 300
MAX_TURNS_PER_SESSION = 2000
MAX_TEXT_CHARS = 20000
MAX_TURN_ID_CHARS = 100
MAX_FILE_BYTES = 20 * 1024 * 1024


class ImportFormatError(UserError):
    """The file is not a valid history; the message says where and why."""


@dataclass
class ImportedSession:
    date: str
    turns: list[tuple[str, str, str, str | None]] = field(default_factory=list)  # (role, speaker, text, turn id)


def _text(value, where: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ImportFormatError(f"{where} must be a string")
    if len(value) > limit:
        raise ImportFormatError(f"{where} is longer than {limit} characters")
    return clean_text(value)


def _date(value, where: str) -> str:
    """A session date of the file, by the same rule as a typed one (memory.dates.check); kept as written."""
    if not isinstance(value, str):
        raise ImportFormatError(f"{where} must be a string such as 2023-05-08")
    date = clean_text(value[: MAX_DATE_CHARS + 1]).strip()
    try:
        check_date(date)
    except DateError as e:
        raise ImportFormatError(f"{where}: {e}") from None
    return date


def _parse_own(obj: dict) -> list[ImportedSession]:
    sessions = obj.get("sessions")
    if not isinstance(sessions, list) or not sessions:
        raise ImportFormatError('"sessions" must be a non-empty list')
    if len(sessions) > MAX_SESSIONS:
        raise ImportFormatError(f"at most {MAX_SESSIONS} sessions can be imported at once")
    out = []
    for i, s in enumerate(sessions):
        where = f"sessions[{i}]"
        if not isinstance(s, dict):
            raise ImportFormatError(f'{where} must be an object with "date" and "turns"')
        date = _date(s.get("date"), f"{where}.date")
        turns = s.get("turns")
        if not isinstance(turns, list) or not turns:
            raise ImportFormatError(f"{where}.turns must be a non-empty list")
        if len(turns) > MAX_TURNS_PER_SESSION:
            raise ImportFormatError(f"{where} has more than {MAX_TURNS_PER_SESSION} turns")
        parsed = []
        for j, t in enumerate(turns):
            tw = f"{where}.turns[{j}]"
            if not isinstance(t, dict):
                raise ImportFormatError(f'{tw} must be an object with "speaker" and "text"')
            speaker = t.get("speaker")
            if speaker not in ("user", "assistant"):
                raise ImportFormatError(f'{tw}.speaker must be "user" or "assistant"')
            text = _text(t.get("text"), f"{tw}.text", MAX_TEXT_CHARS)
            if not text.strip():
                raise ImportFormatError(f"{tw}.text is empty")
            name = t.get("name", speaker)
            name = _text(name, f"{tw}.name", 200).strip() or speaker
            tid = t.get("id")
            if tid is not None:
                tid = _text(tid, f"{tw}.id", MAX_TURN_ID_CHARS).strip() or None
            parsed.append((speaker, name, text, tid))
        out.append(ImportedSession(date, parsed))
    return out


def _parse_locomo(obj, sample_id: str = "") -> list[ImportedSession]:
    try:
        samples = load_sessions(obj)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ImportFormatError(f"not a valid LoCoMo file: {e}") from None
    if not samples:
        raise ImportFormatError("the LoCoMo file holds no conversation")
    if sample_id:
        chosen = [s for s in samples if s[0] == sample_id]
        if not chosen:
            raise ImportFormatError(
                f"no conversation {sample_id!r} in this file; it holds: " + ", ".join(s[0] for s in samples)
            )
    elif len(samples) > 1:
        raise ImportFormatError(
            f"this LoCoMo file holds {len(samples)} conversations ("
            + ", ".join(s[0] for s in samples)
            + "); give the id of the one to import"
        )
    else:
        chosen = samples
    records = chosen[0][1]
    if not records:
        raise ImportFormatError("the conversation has no sessions")
    if len(records) > MAX_SESSIONS:
        raise ImportFormatError(f"at most {MAX_SESSIONS} sessions can be imported at once")
    first_speaker = records[0].turns[0].speaker if records[0].turns else ""
    out = []
    for rec in records:
        if len(rec.turns) > MAX_TURNS_PER_SESSION:
            raise ImportFormatError(f"session {rec.session_id} has more than {MAX_TURNS_PER_SESSION} turns")
        turns = []
        for t in rec.turns:
            speaker = _text(t.speaker, f"session {rec.session_id} speaker", 200).strip() or "speaker"
            text = _text(t.text, f"session {rec.session_id} turn {t.turn_id}", MAX_TEXT_CHARS)
            if text.strip():
                tid = clean_text(t.turn_id)[:MAX_TURN_ID_CHARS].strip() or None
                turns.append(("user" if speaker == first_speaker else "assistant", speaker, text, tid))
        date = _date(rec.date, f"session {rec.session_id} date")
        if turns:
            out.append(ImportedSession(date, turns))
    if not out:
        raise ImportFormatError("the conversation has no turns with text")
    return out


def parse_history(obj, sample_id: str = "") -> list[ImportedSession]:
    """Validated sessions from a decoded JSON document, or ImportFormatError."""
    if isinstance(obj, dict) and "sessions" in obj:
        return _parse_own(obj)
    if (isinstance(obj, dict) and "conversation" in obj) or (
        isinstance(obj, list) and obj and all(isinstance(s, dict) and "conversation" in s for s in obj)
    ):
        return _parse_locomo(obj, sample_id.strip())
    raise ImportFormatError(
        'unknown format: expected {"sessions": [{"date": ..., "turns": '
        '[{"speaker": "user"|"assistant", "text": ...}]}]} or a LoCoMo file'
    )
