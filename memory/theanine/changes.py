"""Changed without an LLM: a later statement by the same speaker that replaces an earlier one.

With an LLM the relation step labels Changed itself (the paper's relation). Offline, a candidate
pair (the older memory is among the newer one's top-j neighbours, from an earlier session) is
labelled Changed by this rule:

1. the same speaker said both, each in the first person and not about someone else
   ("my cousin ...", "my aunt's dog ...");
2. the newer one says something is different now (a cue word: "now", "moved", "new", "instead",
   "lately", ...);
3. each names a value the other lacks: a figure or a capitalised word inside the sentence (a
   name, a place), or, when neither names one, a few content words the other lacks (jazz ->
   techno) while they share a subject word;
4. with those values masked, the two sentences are still alike: the cosine of their embeddings
   (the app's embedder) is at least MASKED_MIN. Masking takes the values out of the comparison,
   so what is compared is what the sentences say about the value ("I live in <v>").

A restatement (the same value again) is not a change.

A pair is also Changed when the newer memory *states* a change of job, home, relationship or habit
and the older one states a fact of that same subject (`stated_change`, no embedding needed):

* the newer one says so in so many words, in the first person and not as a plan or a wish ("I might
  move", "I want a new job", "I didn't quit"): job: "new job", "changed jobs", "quit/left/lost my
  job", "got hired/promoted", "retired", "I now work as ...", "work at ... now", "not a teacher
  anymore", "no longer work"; home: "moved to/out/back", "relocated", "a new flat/house", "live in
  ... now", "no longer live"; relationship: "broke up", "split up", "got married/engaged/divorced",
  "a new partner/boyfriend", "started dating", "single now", "not together anymore"; habit: "quit /
  stopped / gave up smoking", "don't drink anymore" (a stop) or "started running", "took up yoga",
  "vegan now" (a start);
* the older one states a fact of that subject (job: "work as/at/for", "my job", a role such as "a
  teacher"; home: "live in/with", "my flat/house", "moved"; relationship: partner, husband, dating,
  married ...; habit: the same habit, stated the other way: a stop replaces a habit, a start replaces
  its stop ("I quit smoking." -> "I started smoking again."));
* step 1 above holds (same speaker, first person, not about someone else); the older one is not the
  same change told before with nothing new ("I changed jobs." -> "My new job is great."), and the
  newer one is not a restatement: when it names values (a figure, a capitalised word), one of them
  is new unless it says something ended ("not ... anymore", "no longer", "left", "quit", "out of")
  or a relationship's status changed ("I have been dating Anna" -> "I got married to Anna").

Precision and recall on the knowledge-update probe, and the false changes on LoCoMo:
docs/knowledge_update.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..embeddings import Embedder
from .extract import HABITS, ROLES, content_words
from .graph import Memory

# Masked cosine (MiniLM) that makes a pair a change, chosen on the probe's candidate pairs
# (docs/knowledge_update.md): 0.30 made 27 false changes instead of 6 for 2 more true ones; 0.40 lost a third.
MASKED_MIN = 0.35
MAX_PLAIN_VALUES = 3  # without names or figures: at most this many differing content words per side
MASK = "something"

# Words by which people say that something is different now.
CUES = frozenset(
    [
        "now",
        "new",
        "moved",
        "relocated",
        "instead",
        "anymore",
        "longer",
        "lately",
        "changed",
        "switched",
        "joined",
        "started",
        "left",
        "adopted",
        "cancelled",
        "days",
    ]
)
_FIRST_PERSON = frozenset(["i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "we've", "our", "us"])
# "my <one of these>": the sentence is about someone else.
_OTHERS = frozenset(
    [
        "cousin",
        "aunt",
        "uncle",
        "friend",
        "friends",
        "brother",
        "sister",
        "neighbour",
        "neighbor",
        "colleague",
        "colleagues",
        "parents",
        "mother",
        "father",
        "mom",
        "dad",
        "mum",
        "roommate",
        "manager",
        "boss",
        "niece",
        "nephew",
        "grandmother",
        "grandfather",
        "son",
        "daughter",
    ]
)
_TOKEN = re.compile(r"[^\W_][\w'’-]*|\d+(?:[.,]\d+)?")


# --- stated changes (`stated_change`: the second rule of the module docstring) ---------------------
_ROLE_ALT = "|".join(sorted(ROLES))
_ANYMORE = r"any ?more"
# What the newer memory says when a fact of each subject changed (matched on the lower-cased sentence).
_CHANGE: dict[str, re.Pattern[str]] = {
    k: re.compile(v)
    for k, v in {
        "job": (
            r"\bnew (?:job|position|career)\b|\b(?:changed|changing|switched|switching) (?:jobs|careers|my job|"
            r"my career|companies|employers)\b|\b(?:quit|left|lost|resigned from) (?:my|the|that) (?:old )?"
            r"(?:job|position|company|work)\b|\bgot (?:a|the|my|this) (?:new )?job\b|\b(?:got|was|been) "
            r"(?:hired|promoted|fired|laid off)\b|\bretired\b|\b(?:now|started|starting) (?:work|working|"
            r"teaching) (?:as|at|for|in)\b|\bwork(?:ing)? (?:as|at|for) [^.;]{0,40}\bnow\b|\bno longer "
            rf"(?:work|employed|an? )|\bdon't work (?:there|at|as|for)\b.{{0,40}}{_ANYMORE}|\bnot an? "
            rf"(?:\w+ )?(?:{_ROLE_ALT})\b.{{0,12}}{_ANYMORE}|\b(?:i'm|i am) now an? (?:\w+ )?(?:{_ROLE_ALT})\b|"
            rf"\bbecame an? (?:\w+ )?(?:{_ROLE_ALT})\b|\ban? (?:{_ROLE_ALT}) now\b"
        ),
        "home": (
            r"\bmoved (?:to|into|in|out|back|away|house|abroad|here|there|cities|countries)\b|\brelocated\b|"
            r"\bnew (?:apartment|flat|house|home|place)\b|\b(?:bought|rented|renting) (?:a|an|our|my) (?:new )?"
            r"(?:house|home|flat|apartment|place)\b|\bliv(?:e|ing) (?:in|at|with|near) [^.;]{0,40}\bnow\b|"
            rf"\bnow liv(?:e|ing)\b|\bno longer live|\bdon't live (?:in|at|there|with)\b.{{0,40}}{_ANYMORE}"
        ),
        "relationship": (
            r"\bbroke up\b|\bsplit up\b|\b(?:got|getting|am|are|i'm|we're) (?:now )?(?:married|engaged|"
            r"divorced|separated)\b|\bdivorced\b|\bnew (?:partner|boyfriend|girlfriend|husband|wife)\b|"
            r"\b(?:started|am|i'm|now) dating\b|\bseeing someone (?:new|else)?\b|\bsingle "
            r"(?:now|again)\b|\bno longer (?:together|dating|married|seeing)\b|\bnot (?:together|dating|married)"
            rf" {_ANYMORE}"
        ),
    }.items()
}
# What the older memory says when it states a fact of the subject.
_SUBJECT: dict[str, re.Pattern[str]] = {
    "job": re.compile(
        r"\b(?:i|i'm|i've|we|we're)\b[^.;,]{0,20}\bwork(?:s|ed|ing)? (?:as|at|for|in)\b|\bmy (?:new |old |current "
        r"|first )?(?:job|career|work at|position|employer|company|boss)\b|\bjob (?:as|at)\b|\bemployed\b|"
        r"\b(?:got|was|been) (?:hired|promoted)\b|\b(?:i'm|i am|i was|been|as|became) an? (?:\w+ )?"
        rf"(?:{_ROLE_ALT})\b"
    ),
    "home": re.compile(
        r"\bliv(?:e|es|ed|ing) (?:in|at|near|with|on)\b|\bmoved\b|\brelocated\b|\b(?:my|our|new|old) "
        r"(?:apartment|flat|house|home|place|neighbou?rhood)\b"
    ),
    "relationship": re.compile(
        r"\bmy (?:\w+ )?(?:partner|boyfriend|girlfriend|husband|wife|fianc[ée]e?|spouse)\b|\b(?:married|marriage|"
        r"engaged|dating|relationship)\b"
    ),
}
# A habit stopped ("quit smoking", "don't drink anymore") or started ("took up running", "vegan now").
_HABIT_ALT = "|".join(sorted(HABITS))
_HABIT_STOP = re.compile(
    rf"\b(?:quit|stopped|gave up|given up|cut out|kicked|no longer) (?:\w+ )?(?:{_HABIT_ALT})\b|"
    rf"\b(?:don't|do not|not|never) (?:\w+ )?(?:{_HABIT_ALT})\b.{{0,30}}{_ANYMORE}|\bswitched from (?:{_HABIT_ALT})\b"
)
_HABIT_START = re.compile(
    rf"\b(?:started|took up|taken up|began|switched to|now) (?:\w+ )?(?:{_HABIT_ALT})\b|"
    rf"\b(?:{_HABIT_ALT}) now\b"
)
# The same habit under its forms ("smoking", "smoker", "cigarettes" -> "smoke").
_HABIT_ROOT = {
    **dict.fromkeys(["smoke", "smoking", "smoker", "cigarettes", "vape", "vaping"], "smoke"),
    **dict.fromkeys(["drink", "drinking", "alcohol", "sober"], "drink"),
    **dict.fromkeys(["vegan", "vegetarian", "meat"], "meat"),
    **dict.fromkeys(["coffee", "caffeine"], "coffee"),
    **dict.fromkeys(["running", "jogging"], "run"),
    **dict.fromkeys(["meditation", "meditating"], "meditate"),
    **dict.fromkeys(["gym", "workout", "exercising"], "gym"),
}
# Plans, wishes and maybes: not a change (yet). Denials of the change itself ("I didn't move").
_HEDGE = re.compile(
    r"\b(?:will|would|could|should|might|hope|hoping|wish|want|wants|wanna|gonna|going to|plan|plans|planning|"
    r"if|maybe|perhaps|thinking (?:of|about)|considering)\b|'ll\b|'d\b"
)
_DENIED = re.compile(
    r"\b(?:didn't|did not|haven't|have not|hasn't|never|won't|not yet) (?:\w+ )?(?:move|moved|quit|change|changed|"
    r"switch|switched|leave|left|start|started|get|got|break|broke|retire|retired|stop|stopped)\b"
)
# A change told again later ("Losing my job was hard"): how the older memory may mention it.
_RETOLD = re.compile(r"\b(losing|quitting|leaving|moving|relocating|changing)\b")
_RETOLD_AS = {
    "losing": "lost",
    "quitting": "quit",
    "leaving": "left",
    "moving": "moved",
    "relocating": "relocated",
    "changing": "changed",
}
_STATUS = re.compile(r"\b(?:married|engaged|divorced|separated|broke up|split up)\b")
_ENDED = re.compile(rf"{_ANYMORE}|\bno longer\b|\bnot\b|n't\b|\bleft\b|\bquit\b|\bout of\b|\bex\b")


def _lower(text: str) -> str:
    return text.lower().replace("’", "'")


def _habit_roots(text: str) -> set[str]:
    return {_HABIT_ROOT.get(w, w) for w in re.findall(r"[a-z]+", text) if w in HABITS}


def stated_changes(text: str, as_said: bool = True) -> set[str]:
    """The subjects ("job", "home", "relationship", "habit") whose change the sentence states; `as_said`:
    not as a plan, a wish, or denied (False: any mention, "after losing my job" too)."""
    low = _lower(text)
    if as_said and (_HEDGE.search(low) or _DENIED.search(low)):
        return set()
    if not as_said:
        low = _RETOLD.sub(lambda m: _RETOLD_AS[m.group(1)], low)
    found = {k for k, rx in _CHANGE.items() if rx.search(low)}
    if _HABIT_STOP.search(low) or _HABIT_START.search(low):
        found.add("habit")
    return found


def _habit_changed(old: str, new: str) -> bool:
    """The newer sentence stops a habit the older one had, or starts one the older one had stopped."""
    shared = _habit_roots(old) & _habit_roots(new)
    if not shared:
        return False
    old_stopped = bool(_HABIT_STOP.search(old))
    if _HABIT_STOP.search(new):
        return not old_stopped
    return bool(_HABIT_START.search(new)) and old_stopped


def _states(subject: str, text: str) -> bool:
    """The (lower-cased) sentence states a fact of the subject."""
    return bool(_SUBJECT[subject].search(text))


def stated_change(old: Memory, new: Memory) -> str | None:
    """The subject of the change the newer memory states about the older one's fact, else None."""
    if not old.speaker or old.speaker != new.speaker:
        return None
    a, b = _tokens(_body(old)), _tokens(_body(new))
    la, lb = {t.lower() for t in a}, {t.lower() for t in b}
    if not (_FIRST_PERSON & la and _FIRST_PERSON & lb) or _about_someone_else(a) or _about_someone_else(b):
        return None
    low_a, low_b = _lower(_body(old)), _lower(_body(new))
    subjects = stated_changes(low_b)
    if not subjects:
        return None
    va = {t.lower() for i, t in enumerate(a) if _is_value(t, i == 0)}
    vb = {t.lower() for i, t in enumerate(b) if _is_value(t, i == 0)}
    restated = bool(vb) and vb <= va and not _ENDED.search(low_b)  # the same value again
    for subject in ("job", "home", "relationship", "habit"):
        if subject not in subjects or (restated and not (subject == "relationship" and _STATUS.search(low_b))):
            continue  # (marrying the partner one was dating changes the status, not the value)
        if subject == "habit":
            if _habit_changed(low_a, low_b):
                return subject
            continue
        if not _states(subject, low_a):
            continue
        if subject in stated_changes(low_a, as_said=False) and not (va and vb - va):
            continue  # the same change told again, with nothing new ("I changed jobs." -> "My new job ...")
        return subject
    return None


@dataclass(frozen=True)
class Masked:
    """One side of a pair: its sentence with its values replaced by MASK, and the values."""

    text: str
    values: tuple[str, ...]


def _body(m: Memory) -> str:
    """The sentence without its "Speaker: " prefix (offline memories carry one)."""
    prefix = f"{m.speaker}:"
    return m.event[len(prefix) :].strip() if m.speaker and m.event.startswith(prefix) else m.event


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def _is_value(tok: str, first: bool) -> bool:
    """A figure, or a capitalised word inside the sentence (every sentence's first word is capitalised:
    in LoCoMo, openers such as "Seven" or "Pottery's" made most false changes)."""
    if tok[0].isdigit():
        return True
    return not first and tok[0].isupper() and bool(content_words(tok))  # a stop word ("I") is no value


def _content(tok: str) -> bool:
    return bool(content_words(tok)) and tok.lower() not in CUES


def _about_someone_else(toks: list[str]) -> bool:
    """ "my cousin", "our neighbour's", also past one word: "my best friend", "my older sister"."""
    low = [t.lower().replace("’", "'").removesuffix("'s") for t in toks]
    return any(low[i] in ("my", "our") and any(w in _OTHERS for w in low[i + 1 : i + 3]) for i in range(len(low) - 1))


def mask_pair(old: Memory, new: Memory) -> tuple[Masked, Masked] | None:
    """The two sides masked, or None when the pair cannot be a change by steps 1-3 of the rule."""
    if not old.speaker or old.speaker != new.speaker:
        return None
    a, b = _tokens(_body(old)), _tokens(_body(new))
    la, lb = {t.lower() for t in a}, {t.lower() for t in b}
    if not CUES & lb or not (_FIRST_PERSON & la and _FIRST_PERSON & lb):
        return None  # no sign of a change, or not both about the speaker
    if _about_someone_else(a) or _about_someone_else(b):
        return None
    va = [t for i, t in enumerate(a) if _is_value(t, i == 0) and t.lower() not in lb]
    vb = [t for i, t in enumerate(b) if _is_value(t, i == 0) and t.lower() not in la]
    if not va and not vb and not any(_is_value(t, i == 0) for toks in (a, b) for i, t in enumerate(toks)):
        va = [t for t in a if _content(t) and t.lower() not in lb]
        vb = [t for t in b if _content(t) and t.lower() not in la]
        shared = {t.lower() for t in a if _content(t)} & {t.lower() for t in b if _content(t)}
        if len(va) > MAX_PLAIN_VALUES or len(vb) > MAX_PLAIN_VALUES or not shared:  # no common subject word
            return None
    if not va or not vb:
        return None

    def side(toks: list[str], values: list[str]) -> Masked:
        return Masked(" ".join(MASK if t in values else t for t in toks), tuple(values))

    return side(a, va), side(b, vb)


class ChangeRule:
    """The rule with its embedder (the app's: the masked sentences are compared by it)."""

    def __init__(self, embedder: Embedder, threshold: float = MASKED_MIN):
        self.embedder, self.threshold = embedder, threshold

    def scores(self, pairs: Sequence[tuple[Memory, Memory]]) -> list[float | None]:
        """Masked cosine per (old, new) pair; None where steps 1-3 already rule a change out."""
        masked = [mask_pair(o, n) for o, n in pairs]
        todo = [m for m in masked if m is not None]
        if not todo:
            return [None] * len(pairs)
        va = self.embedder.embed([m[0].text for m in todo])
        vb = self.embedder.embed([m[1].text for m in todo])
        cos = iter(_cosines(np.asarray(va), np.asarray(vb)))
        return [None if m is None else round(float(next(cos)), 4) for m in masked]

    def changed(self, pairs: Sequence[tuple[Memory, Memory]]) -> list[bool]:
        """Changed per (old, new) pair: a replaced value (masked cosine) or a stated change (`stated_change`)."""
        return [
            (s is not None and s >= self.threshold) or stated_change(o, n) is not None
            for s, (o, n) in zip(self.scores(pairs), pairs, strict=True)
        ]


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    na = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return (a * b).sum(axis=1) / np.where(na == 0, 1.0, na)
