"""Histories in and out: parsing and validating an import before anything is stored, and private, temporary
export files.
"""

from __future__ import annotations

import logging
import os
import secrets
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from memory.dates import MAX_DATE_CHARS, DateError
from memory.dates import check as check_date
from memory.locomo_format import load_sessions
from memory.text import clean_text
from memory.userspace import user_key

from .db import UserError

# --- importer ----------------------------------------------------
# Parse and validate a history to import, before anything is stored.
#
# Two formats are accepted.
#
# The app's own format (also what the export's "sessions" key holds):
#
#     {"sessions": [
#         {"date": "2023-05-08",
#          "turns": [{"speaker": "user", "text": "I adopted a puppy named Rex."},
#                    {"speaker": "assistant", "text": "Congratulations! How old is Rex?"}]},
#         ...]}
#
# `speaker` is "user" or "assistant"; an optional `name` keeps a person's name;
# an optional `id` is kept as the turn's id (memory provenance names it);
# `date` is free text, ISO (YYYY-MM-DD) preferred; it must be a date memory.dates reads, with a year
# in 1900..2199 (the rule for typed dates too), else the whole file is refused, saying which session.
#
# LoCoMo's format (snap-research/LoCoMo, e.g. locomo10.json): one sample or a
# list of samples with a "conversation" object. The first speaker of a
# conversation is shown as the user, the other as the assistant, and both keep
# their names; each turn keeps its `dia_id` ("D3:7") as its id. A file with
# several conversations needs the sample id of the one to import.
#
# Validation is complete before any write, so a malformed file changes nothing.

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


# --- exports -----------------------------------------------------
# Export files: private, temporary, one copy.
#
# Each export is written once, as `<root>/<random token>/memory-export.json`: the folders 0700,
# the file 0600 (only the app's OS user reads them). The page is handed that path and nobody else
# learns it (the token is 192 random bits). A file is deleted shortly after its download, at the
# latest `ttl_s` after it was written, at Forget me, and at the next start (exports are never
# kept). The UI puts `root` inside Gradio's cache folder, so Gradio serves the file from there and
# makes no second copy.

log = logging.getLogger(__name__)

FILE_NAME = "memory-export.json"
DEFAULT_TTL_S = 600.0  # an export not downloaded within 10 minutes is deleted
AFTER_DOWNLOAD_S = 60.0  # kept this long after the download started, so it can complete


class ExportFiles:
    def __init__(self, root: Path | str, ttl_s: float = DEFAULT_TTL_S, sweep_every_s: float | None = 30.0):
        self.root = Path(root)
        self.ttl_s = float(ttl_s)
        self._lock = threading.Lock()
        self._expiry: dict[Path, float] = {}  # folder -> when it is deleted
        self._owner: dict[Path, str] = {}  # folder -> user key
        self._sweep_every_s = sweep_every_s
        self._sweeper: threading.Thread | None = None
        self._clear_root()

    def _clear_root(self) -> None:
        """At start: no export outlives the process that wrote it."""
        if self.root.exists():
            shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True, mode=0o700, exist_ok=True)
        os.chmod(self.root, 0o700)

    def write(self, user_id: str, text: str) -> Path:
        """A new private file holding `text`; returns its path."""
        self.sweep()
        self.root.mkdir(parents=True, mode=0o700, exist_ok=True)
        folder = self.root / secrets.token_urlsafe(24)
        folder.mkdir(mode=0o700)
        path = folder / FILE_NAME
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        with self._lock:
            self._expiry[folder] = time.time() + self.ttl_s
            self._owner[folder] = user_key(user_id)
            if self._sweep_every_s and self._sweeper is None:  # from the first export on
                self._sweeper = threading.Thread(
                    target=self._sweep_loop, args=(self._sweep_every_s,), daemon=True, name="export-sweep"
                )
                self._sweeper.start()
        return path

    def downloaded(self, user_id: str, grace_s: float = AFTER_DOWNLOAD_S) -> None:
        """The user's download started: their export files go `grace_s` from now."""
        k, until = user_key(user_id), time.time() + grace_s
        with self._lock:
            for folder, owner in self._owner.items():
                if owner == k:
                    self._expiry[folder] = min(self._expiry[folder], until)
        self.sweep()

    def forget(self, user_id: str) -> int:
        """Delete every export file of the user now (Forget me); returns how many."""
        k = user_key(user_id)
        with self._lock:
            mine = [f for f, owner in self._owner.items() if owner == k]
        for folder in mine:
            self._delete(folder)
        return len(mine)

    def sweep(self) -> None:
        """Delete what has expired, and any folder under root this process did not write."""
        now = time.time()
        with self._lock:
            due = [f for f, t in self._expiry.items() if t <= now]
            known = set(self._expiry)
        for folder in due:
            self._delete(folder)
        try:
            strays = [p for p in self.root.iterdir() if p not in known]
        except FileNotFoundError:
            return
        for p in strays:  # e.g. written by an earlier process
            if p.is_dir() and p.stat().st_mtime < now - self.ttl_s:
                shutil.rmtree(p, ignore_errors=True)

    def _delete(self, folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        with self._lock:
            self._expiry.pop(folder, None)
            self._owner.pop(folder, None)

    def _sweep_loop(self, every_s: float) -> None:
        while True:
            time.sleep(every_s)
            try:
                self.sweep()
            except Exception:  # the sweeper must keep running
                log.exception("export sweep failed")
