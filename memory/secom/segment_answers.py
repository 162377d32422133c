"""Reading a segmentation answer from an LLM and repairing it into a valid cover.

SeCom's format is JSON lines inside `<segmentation>` tags (one object per segment); models also answer
`{"segments": [...]}`, bare lists, fenced blocks or pairs of numbers. `repair_segments` turns any of
these into segments that cover every exchange exactly once, in order (the official code does not
check this and silently drops exchanges).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

Segment = tuple[int, int, str]  # (start, end) inclusive, 0-based; summary

_FENCE = re.compile(r"```(?:jsonl?|json lines)?\s*(.*?)```", re.S)
_START_KEYS = ("start_exchange_number", "start_exchange", "start", "from")
_END_KEYS = ("end_exchange_number", "end_exchange", "end", "to")


_OPEN_TAG = re.compile(r"<\s*segmentation\s*>", re.I)
_CLOSE_TAG = re.compile(r"<\s*/\s*segmentation\s*>", re.I)
_NEXT = re.compile(r"[\[{]|<\s*/\s*segmentation\s*>", re.I)


def _json_objects(text: str, stop_at_close_tag: bool = False) -> list[Any]:
    """Every top-level JSON value in `text` (JSON lines, a list, an object, or prose around them).

    With `stop_at_close_tag`, scanning ends at a `</segmentation>` that lies
    outside any JSON value (a tag inside a JSON string does not end the block).
    """
    dec = json.JSONDecoder()
    out: list[Any] = []
    i = 0
    while True:
        m = _NEXT.search(text, i)
        if m is None:
            break
        j = m.start()
        if text[j] == "<":
            if stop_at_close_tag:
                break
            i = m.end()
            continue
        try:
            val, end = dec.raw_decode(text, j)
        except json.JSONDecodeError:
            i = j + 1
            continue
        out.append(val)
        i = end
    return out


def _items(answer: Any) -> list[Any]:
    """The list of segment-like items in an answer of any accepted shape."""
    if answer is None:
        return []
    if isinstance(answer, (bytes, bytearray)):
        answer = answer.decode("utf-8", "replace")
    if isinstance(answer, str):
        text, in_block = answer, False
        m = _OPEN_TAG.search(text)
        if m:
            text, in_block = text[m.end() :], True
        else:
            f = _FENCE.search(text)
            if f:
                text = f.group(1)
        values = _json_objects(text, stop_at_close_tag=in_block)
        items: list[Any] = []
        for v in values:
            items.extend(_items(v) if isinstance(v, (list, dict)) and not _looks_like_segment(v) else [v])
        return items
    if isinstance(answer, dict):
        if _looks_like_segment(answer):
            return [answer]
        for key in ("segments", "segmentation", "result", "output"):
            if key in answer:
                return _items(answer[key])
        lists = [v for v in answer.values() if isinstance(v, list)]
        return _items(lists[0]) if len(lists) == 1 else []
    if isinstance(answer, (list, tuple)):
        out: list[Any] = []
        for v in answer:
            if isinstance(v, (list, tuple)) and len(v) >= 2 and all(not isinstance(x, (dict, list)) for x in v):
                out.append(v)  # [start, end(, summary)]
            elif isinstance(v, dict):
                out.append(v)
            elif isinstance(v, str):
                out.extend(_items(v))
        return out
    return []


def _looks_like_segment(v: Any) -> bool:
    return isinstance(v, dict) and any(k in v for k in _START_KEYS + _END_KEYS)


def _as_int(v: Any) -> int | None:
    """An integer from 3, 3.0, "3", " 3 " or "Exchange 3"; None for anything else (3.5, "three", True)."""
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if math.isfinite(v) and v == int(v) else None
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(?:\[?\s*exchange\s*)?(-?\d+)\s*\]?\s*", v, re.I)
        return int(m.group(1)) if m else None
    return None


def _get(d: dict, keys: Sequence[str]) -> Any:
    for k in keys:
        if k in d:
            return d[k]
    return None


def _summary_of(v: Any) -> str:
    if isinstance(v, dict):
        s = v.get("summary", v.get("topic", ""))
    elif isinstance(v, (list, tuple)) and len(v) >= 3:
        s = v[2]
    else:
        s = ""
    s = " ".join(str(s if s is not None else "").split())
    return s[:300]


def repair_segments(answer: Any, n_exchanges: int) -> tuple[list[Segment], bool]:
    """Like `parse_and_repair`, keeping each segment's summary."""
    if n_exchanges <= 0:
        return [], False
    repaired = False
    raw: list[tuple[int, int, str]] = []
    for it in _items(answer):
        if isinstance(it, dict):
            s, e = _as_int(_get(it, _START_KEYS)), _as_int(_get(it, _END_KEYS))
            if e is None and s is not None:
                cnt = _as_int(it.get("num_exchanges"))
                if cnt is not None and cnt > 0:
                    e, repaired = s + cnt - 1, True
        elif isinstance(it, (list, tuple)):
            s, e = _as_int(it[0]), _as_int(it[1])
        else:
            continue
        if s is None or e is None:
            repaired = True  # non-integer or missing numbers: dropped
            continue
        raw.append((s, e, _summary_of(it)))
    if not raw:
        raise ValueError("no segments in the answer")

    # 1-based answers: nothing starts at 0 and something ends at n.
    if min(min(s, e) for s, e, _ in raw) >= 1 and max(max(s, e) for s, e, _ in raw) == n_exchanges:
        raw = [(s - 1, e - 1, t) for s, e, t in raw]
        repaired = True

    clean: list[tuple[int, int, str]] = []
    for s, e, t in raw:
        if s > e:
            s, e, repaired = e, s, True  # reversed
        if e < 0 or s > n_exchanges - 1:
            repaired = True  # entirely out of range: dropped
            continue
        if s < 0 or e > n_exchanges - 1:
            s, e, repaired = max(s, 0), min(e, n_exchanges - 1), True
        clean.append((s, e, t))
    if not clean:
        raise ValueError("every segment in the answer is out of range")
    order = sorted(range(len(clean)), key=lambda i: (clean[i][0], clean[i][1]))
    if order != list(range(len(clean))):
        repaired = True

    out: list[list] = []
    nxt = 0  # first exchange not yet covered
    for i in order:
        s, e, t = clean[i]
        if e < nxt:  # wholly inside earlier segments: drop
            if out and t and not out[-1][2]:
                out[-1][2] = t
            repaired = True
            continue
        if s < nxt:  # overlap: trim the start
            s, repaired = nxt, True
        elif s > nxt:  # gap: the previous segment absorbs it (or this one starts at 0)
            repaired = True
            if out:
                out[-1][1] = s - 1
            else:
                s = 0
        out.append([s, e, t])
        nxt = e + 1
    if nxt < n_exchanges:  # trailing exchanges: the last segment absorbs them
        out[-1][1] = n_exchanges - 1
        repaired = True
    return [(s, e, t) for s, e, t in out], repaired


def parse_and_repair(answer: Any, n_exchanges: int) -> tuple[list[tuple[int, int]], bool]:
    """Validate a segmentation answer and repair it into a cover of 0..n_exchanges-1.

    Accepts SeCom's JSON lines (inside `<segmentation>` tags or not), a JSON list,
    `{"segments": [...]}`, or already-parsed Python values. Returns the
    (start, end) ranges, inclusive and in order, and whether anything had to be
    repaired (gaps filled, overlaps trimmed, out-of-range numbers clipped,
    reversed or non-integer numbers fixed or dropped). Raises ValueError when
    nothing usable is left (e.g. an empty answer), so `LLMSession.json` retries
    or falls back.
    """
    segs, repaired = repair_segments(answer, n_exchanges)
    return [(s, e) for s, e, _ in segs], repaired


def is_valid_cover(ranges: Sequence[tuple], n: int) -> bool:
    nxt = 0
    for r in ranges:
        s, e = int(r[0]), int(r[1])
        if s != nxt or e < s or e > n - 1:
            return False
        nxt = e + 1
    return (nxt == n and n > 0) or (n == 0 and not ranges)


def parse_segmentation(text: str) -> tuple[Any, bool]:
    """`LLMSession.json`'s parser for segmentation answers: (value, repaired).

    SeCom's own format (several JSON lines in tags) is not one JSON value: its objects are gathered
    into `{"segments": [...]}`. Anything else goes through the generic repair.
    """
    from ..llm import parse_json

    try:
        return json.loads(text), False
    except (json.JSONDecodeError, TypeError):
        pass
    items = _items(text)
    if items:
        return {"segments": items}, False
    return parse_json(text)
