"""How a retrieved memory reads to the reply model: facts about the person, dated as people say dates,
with what is no longer true marked as past.

The strategies store and show their memories in the person's own words ("[2026-10-01: user: I live in
Lyon.]", a SeCom segment's "user: ..." lines): See why, the benchmarks and the refinement prompt read
that form. The bundled 0.5B, given it as is, answered as the person ("I live in Lyon…") and took the
"user:" lines for its own (docs/answers.md). `for_reader` rewrites a raw line for the reply prompt
only: the person's first-person statements in the third person ("They live in Lyon."), the agent's
own lines as "You said", each date once and in words ("1 Oct 2026"), and a superseded memory as
"no longer true since …". Anything it does not recognise (a refined timeline, a named speaker's line
in a LoCoMo import) passes unchanged apart from its dates.
"""

from __future__ import annotations

import re

from .dates import parse

# The person's pronouns, first person to third ("they"), verb forms that change with them.
_PRONOUNS = {
    "i": "they",
    "i'm": "they're",
    "i've": "they've",
    "i'll": "they'll",
    "i'd": "they'd",
    "me": "them",
    "my": "their",
    "mine": "theirs",
    "myself": "themselves",
    "we": "they",
    "we're": "they're",
    "we've": "they've",
    "we'll": "they'll",
    "we'd": "they'd",
    "us": "them",
    "our": "their",
    "ours": "theirs",
    "ourselves": "themselves",
}
_AFTER_THEY = {"am": "are", "was": "were"}
_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")
_CHUNK = re.compile(r"\[(?P<when>[^\[\]:]*?\d{4}-\d{2}-\d{2}[^\[\]]*?): (?P<body>[^\[\]]*)\]")
_UNTIL = re.compile(r"^(?P<since>.+?) until (?P<until>.+)$")
_ROLE = re.compile(r"^(user|assistant): ", re.I)
_SEGMENT_DATE = re.compile(r"^\((?P<date>[^()]*\d{4}[^()]*)\)\s*")


def spoken_date(text: str) -> str:
    """2026-10-01 (or 2026-10-01 13:56) as "1 Oct 2026"; what does not parse, as it is."""
    d = parse(text.strip())
    return f"{d.day} {d:%b %Y}" if d else text.strip()


def third_person(text: str) -> str:
    """The person's own sentence about themselves as a fact about them: I/we -> they, my/our -> their."""
    out: list[str] = []
    pos, prev = 0, ""
    for m in _WORD.finditer(text):
        word = m.group(0)
        low = word.lower().replace("’", "'")
        new = _PRONOUNS.get(low)
        if new is None and prev == "they":
            new = _AFTER_THEY.get(low)
        out.append(text[pos : m.start()])
        if new is None:
            out.append(word)
        else:
            start = not text[: m.start()].strip() or text[: m.start()].rstrip()[-1] in ".!?:"
            out.append(new.capitalize() if start or (word[0].isupper() and low not in ("i", "i'm", "i've")) else new)
        prev = (new or low).lower()
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)


def _speaker_line(body: str) -> str:
    """ "user: I live in Lyon." -> "They live in Lyon."; "assistant: ..." -> "You said: ..."; others unchanged."""
    m = _ROLE.match(body)
    if not m:
        return body
    rest = body[m.end() :]
    return third_person(rest) if m.group(1).lower() == "user" else f"You said: {rest}"


def _chunk(m: re.Match, seen: list[str]) -> str:
    when, body = m.group("when").strip(), _speaker_line(m.group("body").strip())
    until = _UNTIL.match(when)
    if until:
        since, end = spoken_date(until.group("since")), spoken_date(until.group("until"))
        return f"({since}; no longer true since {end}) {body}"
    day = spoken_date(when)
    if seen and seen[-1] == day:  # each date once: a run of one day's memories is dated at its start
        return body
    seen.append(day)
    return f"({day}) {body}"


def for_reader(line: str) -> str:
    """A raw memory line (a THEANINE timeline or a SeCom segment) as the reply model reads it."""
    if _CHUNK.search(line):
        seen: list[str] = []
        text = _CHUNK.sub(lambda m: _chunk(m, seen), line)
        text = re.sub(r"(^|\s)now: ", r"\1Now: ", text)
        return re.sub(r"(^|\s)before: ", r"\1Before that: ", text)
    head = _SEGMENT_DATE.match(line)
    if head or _ROLE.match(line):
        lines = line[head.end() :].split("\n") if head else line.split("\n")
        turns = [_speaker_line(t.strip()) for t in lines if t.strip()]
        date = f"({spoken_date(head.group('date'))}) " if head else ""
        return date + " ".join(t if t.endswith((".", "!", "?")) else t + "." for t in turns)
    return line
