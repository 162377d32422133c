"""Did the reply use the memory it was given? Plain word overlap, no model call.

See why shows, beside a reply, the retrieved memory line its words came from (or "no memory used"),
and a warning when the reply names a value of a memory that a later one replaced (a `Changed` edge:
the old city rather than the current one). A person can then tell a memory failure (the answer was
not retrieved) from a model failure (it was, and the reply ignored or misread it).

The rule, kept simple enough to explain on the page:

* The lines compared are those that reached the reply: THEANINE's memories on the packed timelines,
  SeCom's segment lines (the turns packed into the prompt).
* A word counts when it is a content word (no stop word or chat filler), compared stemmed, and the
  person did not type it in the message or earlier in the session: echoing the question is not
  using the memory.
* A line is a source when it shares with the reply a name, a figure or its date (a capitalised word
  inside a sentence, a number; the line's date as the reply may write it: "8 May", "2023-05-08"), or
  a phrase holding two counted words ("aerial yoga"), or three counted words. Two loose words are not
  enough: a chatty reply ("so happy you have such supportive friends and family") shares two with many
  chatty memory lines (calibration on LoCoMo excerpts: docs/ui.md). The best source leads (names,
  figures and dates count 2, other words 1, the phrase's words once more).
* A memory is stale when a `Changed` edge replaced it. The reply is flagged when it names a value of
  the stale memory that the current one lacks (its names and figures, or its differing content
  words when neither has a name) and none of the current memory's own values. Here every word of
  the reply counts, typed ones too: "Yes, you still live in Porto" states the old value.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from difflib import SequenceMatcher
from itertools import pairwise
from typing import TYPE_CHECKING

from .bm25 import tokenize
from .dates import parse as parse_date
from .trace import Trace
from .trace_types import AnswerSource, AnswerUse, MemoryRef, Segment, StaleValue

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from .theanine.graph import MemoryGraph

MIN_WORDS = 3  # loose counted words that make a line a source (else a name, figure, date or phrase)
MIN_PHRASE = 2  # counted words in one shared phrase that make a line a source
MIN_RARE_LETTERS = 5  # in a short reply, a word only one line holds, this long or longer, is enough ("peanuts")
SHORT_REPLY_WORDS = 10
MAX_SOURCES = 3  # the best line and, as "also", the next two

# Words a reply uses whatever it answers; sharing them with a memory says nothing (stop words go too).
_FILLER_WORDS = """hi hello hey thanks thank please sure really well like great glad good nice lol haha wow hmm yep
    user assistant today yesterday tomorrow day time thing things something anything lot much many
    know think remember said say tell told sounds sound let get got make made going go want"""
_FILLER = frozenset(_FILLER_WORDS.split())
_TOKEN = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
# "user: ", "Caroline: " before an offline memory or a segment's turn: who said it, not what.
_SPEAKER = re.compile(r"^\s*(?:user|assistant|[A-Z][\w'.-]*(?: [A-Z][\w'.-]*){0,2}):\s+")
_SENTENCE_START = '.!?:;\n(["“'


@dataclass(frozen=True)
class Word:
    surface: str
    key: str  # stemmed, lower case; "" for a stop word or filler
    value: bool  # a name or a figure
    start: int = 0  # where it starts in the text


def words(text: str) -> list[Word]:
    """The words of `text` with their stemmed keys; which are names or figures."""
    out = []
    for m in _TOKEN.finditer(text or ""):
        tok = m.group()
        low = tok.lower().replace("’", "'").removesuffix("'s")
        key = "" if low in _FILLER or "'" in low else next(iter(tokenize(low)), "")
        if key in _FILLER:
            key = ""
        j = m.start() - 1
        while j >= 0 and text[j] in " \t":
            j -= 1
        first = j < 0 or text[j] in _SENTENCE_START  # a sentence's first word is capitalised anyway
        value = bool(key) and (any(c.isdigit() for c in tok) or (tok[0].isupper() and not first))
        out.append(Word(tok, key, value, m.start()))
    return out


def marked(text: str, shared: list[str]) -> list[tuple[str, bool]]:
    """`text` cut into pieces, True on the words whose key one of `shared` has (the page marks them)."""
    want = set().union(*map(keys, shared)) if shared else set()
    out: list[tuple[str, bool]] = []
    at = 0
    for w in words(text):
        if w.key in want:
            out += [(text[at : w.start], False), (w.surface, True)]
            at = w.start + len(w.surface)
    out.append((text[at:], False))
    return [p for p in out if p[0]]


def body(line: str) -> str:
    """A memory line without its speaker prefix."""
    return _SPEAKER.sub("", line or "", count=1)


@dataclass(frozen=True)
class Line:
    """One line that reached the reply: a THEANINE memory or a turn of a SeCom segment."""

    kind: str  # "memory" | "segment"
    id: str
    text: str
    time: str = ""
    session_id: str = ""
    covers: tuple[str, ...] = ()


def reached_lines(trace: Trace) -> list[Line]:
    """The memory lines the reply prompt held, in the order it read them, each once."""
    out: list[Line] = []
    if trace.strategy.startswith("theanine"):
        known = {str(m.get("id")): m for m in trace.memories}
        seen: set[str] = set()
        for t in trace.timelines_raw:
            chain = {str(c.get("id")): c for c in t.get("chain") or [] if isinstance(c, dict)}
            for nid in (str(n) for n in t.get("nodes") or []):
                m = chain.get(nid) or known.get(nid)
                if m is None or nid in seen:
                    continue
                seen.add(nid)
                out.append(Line("memory", nid, str(m.get("event") or ""), str(m.get("time") or ""), _sid(m)))
    elif trace.strategy == "secom":
        for s in trace.segments:
            covers = tuple(str(c) for c in s.get("covers") or ())
            for line in str(s.get("text") or "").split("\n"):
                if line.strip():
                    out.append(Line("segment", str(s.get("id")), line, str(s.get("date") or ""), _sid(s), covers))
    return out


def _sid(d: Mapping[str, object]) -> str:
    return str(d.get("session_id") or "")


def changes_behind(graph: MemoryGraph, segments: list[Segment]) -> list[tuple[MemoryRef, MemoryRef]]:
    """(old, current) for each THEANINE memory made from the turns of `segments` that a `Changed`
    edge replaced: SeCom's segments know no change, the graph built from the same sessions does."""
    turns = {str(t) for s in segments for t in s.get("covers") or ()}
    out = []
    for m in graph.memories():
        if turns & set(m.turns) and (cur := graph.current(m.id)) != m.id:
            c = graph.memory(cur)
            out.append((MemoryRef(id=m.id, event=m.event, time=m.time), MemoryRef(id=c.id, event=c.event, time=c.time)))
    return out


def superseded(
    trace: Trace, changes: Iterable[tuple[MemoryRef, MemoryRef]] = ()
) -> dict[str, tuple[MemoryRef, MemoryRef]]:
    """{old memory id: (the old memory, the memory that holds its fact now)}, from what the trace
    records: a retrieved memory's `superseded_by`, the earlier versions a timeline gave with its
    (current) anchor, and a `Changed` arrow along a timeline; and `changes` (`changes_behind`)."""
    out: dict[str, tuple[MemoryRef, MemoryRef]] = {str(old.get("id")): (old, cur) for old, cur in changes}
    for m in trace.memories:
        by = m.get("superseded_by")
        if isinstance(by, dict) and by.get("id"):
            out.setdefault(str(m.get("id")), (m, by))
    for t in trace.timelines_raw:
        chain = [c for c in t.get("chain") or [] if isinstance(c, dict)]
        anchor = next((c for c in chain if c.get("anchor")), None)
        path = [c for c in chain if not c.get("history")]
        for c in chain:
            if c.get("history") and anchor is not None:
                out.setdefault(str(c.get("id")), (c, anchor))
        for a, b in pairwise(path):
            if b.get("relation") == "Changed":
                out.setdefault(str(a.get("id")), (a, b))
    return out


def keys(text: str) -> set[str]:
    return {w.key for w in words(text) if w.key}


def match(
    reply: str, line: Line, said: set[str], got: set[str] | None = None, rare: frozenset[str] = frozenset()
) -> AnswerSource | None:
    """What `line` shares with the reply beyond the person's words, or None when it is no source.
    `got`: the reply's word keys, when the caller has them; `rare`: words no other line that reached the
    reply holds (one of them, long enough, names its line: a one-word answer such as "peanuts")."""
    got = got if got is not None else keys(reply)
    text = body(line.text)
    shared: dict[str, Word] = {}
    for w in words(text):
        if w.key and w.key in got and w.key not in said:
            old = shared.get(w.key)
            shared[w.key] = w if old is None or (w.value and not old.value) else old
    when = named_date(reply, line.time)
    if when:
        shared["date:" + line.time] = Word(when, "date:" + line.time, True)
    span, in_span = shared_phrase(reply, text, set(shared))
    has_value = any(w.value for w in shared.values())
    # an answer, not chat that happens to share a word; a memory (one statement), not a segment (many words)
    short = len(reply.split()) <= SHORT_REPLY_WORDS and line.kind == "memory"
    one_rare = short and any(k in rare and len(w.surface) >= MIN_RARE_LETTERS for k, w in shared.items())
    if not (has_value or one_rare or len(shared) >= MIN_WORDS or in_span >= MIN_PHRASE):
        return None
    return {
        "kind": line.kind,
        "id": line.id,
        "text": line.text,
        "time": line.time,
        "session_id": line.session_id,
        "covers": list(line.covers),
        "shared": [w.surface for w in shared.values()],
        "values": [w.surface for w in shared.values() if w.value],
        "span": span,
        "score": sum(2 if w.value else 1 for w in shared.values()) + in_span,
    }


_MONTHS: tuple[str, ...] = ("january", "february", "march", "april", "may", "june")
_MONTHS += ("july", "august", "september", "october", "november", "december")


def named_date(reply: str, stored: str) -> str:
    """The line's date as the reply names it ("8 May 2023"): its ISO day, its month's name with the
    day, or with the year; "" when it does not."""
    d = parse_date(stored) if stored else None
    if d is None:
        return ""
    if f"{d:%Y-%m-%d}" in reply:
        return f"{d.day} {d:%B %Y}"
    name = _MONTHS[d.month - 1]
    month = r"\bMay\b" if name == "may" else rf"(?i:\b(?:{name}|{name[:3]})\b)"  # not "you may"
    if re.search(month, reply):
        if re.search(rf"(?<![\d:]){d.day}(?:st|nd|rd|th)?(?![\d:])", reply):
            return f"{d.day} {d:%B}"
        if re.search(rf"\b{d.year}\b", reply):
            return f"{d:%B %Y}"
    return ""


def shared_phrase(reply: str, text: str, counted: set[str]) -> tuple[str, int]:
    """The run of words `text` shares with the reply (stop words inside it too) that holds most of
    `counted`, as `text` writes it, and how many it holds; ("", 0) without one of two words or more."""
    a, b = words(text), words(reply)
    la = [w.key or w.surface.lower() for w in a]
    lb = [w.key or w.surface.lower() for w in b]
    best, n_best = "", 0
    for m in SequenceMatcher(None, la, lb, autojunk=False).get_matching_blocks():
        run = a[m.a : m.a + m.size]
        n = len({w.key for w in run if w.key in counted})
        if m.size >= 2 and n and (n, m.size) > (n_best, len(best.split())):
            best, n_best = " ".join(w.surface for w in run), n
    return best, n_best


def _values(text: str, other: str) -> list[Word]:
    """The values of `text` that `other` lacks: its names and figures, or, when neither line names
    one, its content words."""
    mine, theirs = words(body(text)), words(body(other))
    keys = {w.key for w in theirs if w.key}
    if any(w.value for w in mine) or any(w.value for w in theirs):
        pick = [w for w in mine if w.value and w.key not in keys]
    else:
        pick = [w for w in mine if w.key and w.key not in keys]
    return list({w.key: w for w in pick}.values())


def stale_values(reply: str, old: dict[str, tuple[MemoryRef, MemoryRef]]) -> list[StaleValue]:
    """Every replaced memory of `old` (`superseded`) whose own value the reply names while it names
    none of the current one's."""
    got = keys(reply)
    out: list[StaleValue] = []
    for old_id, (was, cur) in old.items():
        old_text, cur_text = str(was.get("event") or ""), str(cur.get("event") or "")
        named = [w.surface for w in _values(old_text, cur_text) if w.key in got]
        current = _values(cur_text, old_text)
        if named and current and not any(w.key in got for w in current):
            out.append(
                {
                    "old": {"id": old_id, "event": old_text, "time": str(was.get("time") or "")},
                    "current": {"id": str(cur.get("id") or ""), "event": cur_text, "time": str(cur.get("time") or "")},
                    "named": named,
                    "current_values": [w.surface for w in current],
                }
            )
    return out


def answer_use(
    reply: str, trace: Trace, said: list[str], changes: Iterable[tuple[MemoryRef, MemoryRef]] = ()
) -> AnswerUse:
    """Where the reply's words came from among the memory lines that reached it, and the stale values
    it names. `said`: what the person typed (the message, their earlier turns); `changes`: replaced
    memories the trace does not record (`changes_behind`, for SeCom). {} without memory."""
    lines = reached_lines(trace)
    if not reply.strip() or (not lines and not trace.memories):
        return {}
    said_keys = set().union(*map(keys, said)) if said else set()
    got = keys(reply)
    seen = Counter(k for line in lines for k in keys(body(line.text)))
    rare = frozenset(k for k, n in seen.items() if n == 1)
    found = [m for line in lines if (m := match(reply, line, said_keys, got, rare)) is not None]
    found.sort(key=lambda m: (-m["score"], -len(m["span"].split())))  # stable: the prompt's order breaks ties
    old = superseded(trace, changes)
    for m in found:
        if m["kind"] == "memory" and m["id"] in old:
            cur = old[m["id"]][1]
            m["superseded_by"] = MemoryRef(
                id=str(cur.get("id") or ""), event=str(cur.get("event") or ""), time=str(cur.get("time") or "")
            )
    return {"checked": len(lines), "sources": found[:MAX_SOURCES], "stale": stale_values(reply, old)}
