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
from datetime import UTC, datetime

UNDATED_TS = -1.0  # SeCom's stored timestamp for a date that cannot be read

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
    """The moment a session date names (naive; one with a UTC offset is converted to UTC), or None."""
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
