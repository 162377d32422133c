"""The one reader of session dates, shared by both memories and the sessions list.

Session dates are free text: ISO ("2023-05-08", "2023-05-08 13:56", "2023-05-08T13:56:00Z"),
LoCoMo's "1:56 pm on 8 May, 2023", or what people type ("8 May 2023", "May 8, 2023", "1st May 2023").
`parse` reads them all the same way for everyone; the keys below order them the same way:
dated first, by time; undated after them, in the order they came (Python's sort is stable, and each
caller adds its own tie-breaker: insertion order, session number).

`iso_key` is what THEANINE stores per memory (`Memory.ts`) and `timestamp` what SeCom stores per
segment (`date_ts`, a number because vector-store metadata is flat); both come from `parse`.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime

UNDATED_TS = -1.0  # SeCom's stored timestamp for a date that cannot be read
# The one range of session dates, typed or imported: outside it a date is a typo (9999-12-31), not a
# session date; `parse` reads it as undated, and `check` refuses it with a message.
MIN_YEAR, MAX_YEAR = 1900, 2199
MAX_DATE_CHARS = 64


class DateError(ValueError):
    """A session date that cannot be read or is out of range; the message is written for people."""


# ISO first (datetime.fromisoformat), then these: day-month and month-day forms with month names,
# and LoCoMo's dates.
_FORMATS = (
    "%Y/%m/%d",
    "%d %B %Y",
    "%d %b %Y",
    "%d %B, %Y",
    "%d %b, %Y",
    "%B %d %Y",
    "%B %d, %Y",
    "%b %d %Y",
    "%b %d, %Y",
    "%A %d %B %Y",
    "%a %d %b %Y",
    "%I:%M %p on %d %B, %Y",
    "%I:%M %p on %d %b, %Y",
)
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?(Z|[+-]\d{2}:?\d{2})?")


def parse(text: str | None) -> datetime | None:
    """The moment a session date names (naive; one with a UTC offset is converted to UTC), or None
    (also for a year outside MIN_YEAR..MAX_YEAR: such a date is ordered as undated)."""
    d = _read(text)
    return d if d is not None and MIN_YEAR <= d.year <= MAX_YEAR else None


def check(text: str | None) -> datetime:
    """A session date people typed or a file gave, read by `parse`; DateError says what is wrong."""
    s = " ".join(str(text or "").split())
    if not s:
        raise DateError("the date is empty; give one such as 2023-05-08")
    if len(s) > MAX_DATE_CHARS:
        raise DateError(f"the date is longer than {MAX_DATE_CHARS} characters")
    d = _read(s)
    if d is None:
        raise DateError(f"cannot read the date {s!r}; use the form 2023-05-08")
    if not MIN_YEAR <= d.year <= MAX_YEAR:
        raise DateError(f"the date {s!r} is out of range: give a year between {MIN_YEAR} and {MAX_YEAR}")
    return d


def _read(text: str | None) -> datetime | None:
    s = " ".join(str(text or "").replace(",", ", ").split()).replace(" ,", ",")
    if not s:
        return None
    if _ISO.fullmatch(s):
        try:
            d = datetime.fromisoformat(s.replace("Z", "+00:00"))
        except ValueError:
            return None
        if d.tzinfo is not None:
            d = d.astimezone(UTC).replace(tzinfo=None)
        return d
    s = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", s)  # "1st May 2023"
    for fmt in _FORMATS:
        try:
            return datetime.strptime(s, fmt)
        except ValueError:
            continue
    return None


def iso_key(text: str | None) -> str:
    """A sortable ISO timestamp ("2023-05-08T13:56:00") for a session date, or "" when it cannot be read."""
    d = parse(text)
    return d.isoformat() if d else ""


def order_key(iso: str) -> tuple[bool, str]:
    """How an `iso_key` sorts: dated by time, then undated ("")."""
    return (not iso, iso)


def sort_key(text: str | None) -> tuple[bool, str]:
    """The one sort key for session dates: dated first, by time; undated after (a stable sort keeps their order)."""
    return order_key(iso_key(text))


def timestamp(text: str | None) -> float:
    """Seconds since 1970 (the date read as UTC) for a session date, or UNDATED_TS when it cannot be read."""
    d = parse(text)
    return d.replace(tzinfo=UTC).timestamp() if d else UNDATED_TS


def ts_order_key(ts: float) -> tuple[bool, float]:
    """How a stored `timestamp` sorts, the same way as `sort_key` (a date before 1970 is negative, not undated)."""
    return (ts == UNDATED_TS, ts)


# How the app shows and stores dates: one style for every panel (Mon 8 May 2023 13:56), one stored form.


def today() -> str:
    return date.today().isoformat()


def iso_date(d: datetime) -> str:
    """How dates are stored: 2023-05-08, or 2023-05-08 13:56 when a time of day was given."""
    return d.strftime("%Y-%m-%d %H:%M") if (d.hour, d.minute) != (0, 0) else d.strftime("%Y-%m-%d")


def human_date(stored: str) -> str:
    """A stored date as people say it ("Mon 8 May 2023"); unreadable ones as they are."""
    d = parse(stored)
    if d is None:
        return stored
    out = f"{d:%a} {d.day} {d:%b %Y}"
    return out + (f" {d:%H:%M}" if (d.hour, d.minute) != (0, 0) else "")


def date_positions(dates: list[str]) -> list[float]:
    """Each date's place between the earliest and the latest (0..1): the graph's colour scale by session.
    When the dates cannot be read (or are all the same), by order instead."""
    times = [parse(d) for d in dates]
    known = [t for t in times if t]
    lo, hi = (min(known), max(known)) if known else (None, None)
    out = []
    for i, t in enumerate(times):
        if t and lo and hi and hi > lo:
            out.append((t - lo).total_seconds() / (hi - lo).total_seconds())
        else:
            out.append(i / max(len(dates) - 1, 1))
    return out
