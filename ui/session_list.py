"""The sidebar's list of sessions: one entry per session, with long runs of imported sessions folded.

An import of a LoCoMo conversation brings 20-30 sessions at once; listed one by one they push the other
sessions (and, on a phone, everything) far down. When the list is longer than FOLD_OVER, each run of at
least FOLD_RUN consecutive imported sessions (in time order) is one entry, "▸ 30 sessions imported
(Session 1-30, …) · list them"; choosing it lists them under it ("▾ …", chosen again: folded). The folded entry's value
names its first session, prefixed with FOLD, so the radio's change handler can tell it from a session.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sessions.lifecycle import human_date

FOLD = "fold:"
FOLD_OVER = 15  # sessions listed before imported runs fold (a 10-session import still reads one by one)
FOLD_RUN = 3


def imported_runs(rows: Sequence) -> list[list]:
    """Runs of at least FOLD_RUN consecutive imported sessions (rows in time order)."""
    runs, run = [], []
    for s in [*rows, None]:
        if s is not None and s.source == "import" and s.status != "open":
            run.append(s)
            continue
        if len(run) >= FOLD_RUN:
            runs.append(run)
        run = []
    return runs


def fold_label(run: Sequence, is_open: bool) -> str:
    first, last = run[0], run[-1]
    span = f"Session {first.label}-{last.label}, {human_date(first.date)} to {human_date(last.date)}"
    return f"{'▾' if is_open else '▸'} {len(run)} sessions imported ({span}) · {'fold' if is_open else 'list'} them"


def choices(rows: Sequence, entry: Callable[[object], str], unfolded: bool) -> list[tuple[str, str]]:
    """(label, value) of every entry: `entry(row)` labels a session; `unfolded`: the runs are listed."""
    folded: dict[str, list] = {}
    if len(rows) > FOLD_OVER:
        folded = {run[0].session_id: run for run in imported_runs(rows)}
    inside = {s.session_id for run in folded.values() for s in run}
    out: list[tuple[str, str]] = []
    for s in rows:
        run = folded.get(s.session_id)
        if run is not None:
            out.append((fold_label(run, unfolded), FOLD + s.session_id))
        if s.session_id not in inside or unfolded:
            out.append((entry(s), s.session_id))
    return out
