"""Changed without an LLM: a later statement by the same speaker that says an earlier one no longer holds.

With an LLM the relation step labels Changed itself (the paper's relation). Offline, a candidate
pair (the older memory is among the newer one's top-j neighbours, from an earlier session) is
labelled Changed by this rule (`change_of`), text only:

1. the same speaker said both, about themself ("I", "my", "we"), not about someone else ("my
   cousin moved ...": someone else is the subject; "I live with my parents" is about the speaker);
   neither is a plan, a wish or a denial ("I might move", "I didn't get the job");
2. and the newer one says in so many words that the older one's fact changed, in one of three ways:
   a stated change of the same subject (`stated_change`, below), the end of the very thing the older
   one states (`replaced.ended`: "I sold the Civic" after "I drive a red Honda Civic", "Miso passed
   away" after "I have a cat named Miso"), or a new value in the older one's "my <thing>" slot
   (`replaced.replaced_slot`: "I have a new doctor" after "My doctor is Dr. Patel").

A shared topic with a cue word is not enough: until issue 44 a pair with a cue ("now", "new",
"lately") and a masked-sentence cosine >= 0.35 was Changed too, and that made most false changes
("I chill out when I do yoga." -> "I've been into yoga lately."). Precision and recall on pairs a
person labelled (`python -m bench changed_pairs`): docs/knowledge_update.md.

A pair is also Changed when the newer memory *states* a change of job, home, relationship, school or
habit and the older one states a fact of that same subject (`stated_change`, no embedding needed;
offline, such a memory is checked against every earlier memory: `linking.stated_change_candidates`):

* the newer one says so in so many words, in the first person and not as a plan or a wish ("I might
  move", "I want a new job", "I didn't quit"; a message may drop its "I": "Sold the car"): job: "new
  job", "changed jobs", "quit/left/lost my job", "handed in my notice", "made redundant", "my last
  shift at", "got hired/promoted", "retired", "I now work as ...", "work at ... now", "not a teacher
  anymore", "no longer work"; home: "moved to/out/back", "relocated", "a new flat/house", "signed a
  lease", "live in ... now", "no longer live"; relationship: "broke up", "split up", "got married/
  engaged/divorced", "remarried", "called off the engagement", "a new partner/boyfriend", "started
  dating", "single now", "not together anymore"; school: "graduated", "dropped out", "finished my
  degree"; habit: "quit /
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

"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from . import replaced
from .extract import HABITS, ROLES, content_words
from .graph import Memory

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
_OTHER_PERSON = re.compile(r"\b(?:he|she|they|his|her|their|him|them|you|your|he's|she's|they're)\b")
_SUBJECT_WORDS = frozenset(["i", "i'm", "i've", "i'd", "i'll", "we", "we're", "we've"])
_TOKEN = re.compile(r"[^\W_][\w'’-]*|\d+(?:[.,]\d+)?")


# --- stated changes (`stated_change`: the second rule of the module docstring) ---------------------
_ROLE_ALT = "|".join(sorted(ROLES))
_ANYMORE = r"any ?more"
# What the newer memory says when a fact of each subject changed (matched on the lower-cased sentence).
_CHANGE: dict[str, re.Pattern[str]] = {
    k: re.compile(v)
    for k, v in {
        "job": (
            r"\bnew (?:job|position|career)\b|\bhanded in (?:my|our) notice\b|\bmade redundant\b|\b(?:my|our) last "
            r"(?:day|shift|week) (?:at|with)\b|\bretirement party\b|\blet go from\b|"
            r"\b(?:changed|changing|switched|switching) (?:jobs|careers|my job|"
            r"my career|companies|employers)\b|\b(?:quit|left|lost|resigned from) (?:my|the|that) (?:old )?"
            r"(?:job|position|company|work)\b|\b(?:got|took|landed|accepted|found|started) (?:a|the|my|this) (?:new )?"
            r"(?:full-time |part-time )?(?:job|position)\b(?! offer| interview)|\b(?:got|was|been) "
            r"(?:hired|promoted|fired|laid off)\b|\bretired\b|\b(?:now|started|starting) (?:work|working|"
            r"teaching) (?:as|at|for|in)\b|\bwork(?:ing)? (?:as|at|for) [^.;]{0,40}\bnow\b|\bno longer "
            rf"(?:work|employed|an? )|\bdon't work (?:there|at|as|for)\b.{{0,40}}{_ANYMORE}|\bnot an? "
            rf"(?:\w+ )?(?:{_ROLE_ALT})\b.{{0,12}}{_ANYMORE}|\b(?:i'm|i am) now an? (?:\w+ )?(?:{_ROLE_ALT})\b|"
            rf"\bbecame an? (?:\w+ )?(?:{_ROLE_ALT})\b|\ban? (?:{_ROLE_ALT}) now\b|"
            rf"\b(?:i'm|i am) an? (?:\w+ )?(?:{_ROLE_ALT})\b[^.;]{{0,40}}\bnow\b"
        ),
        "home": (
            r"\bmoved (?:to|into|in|out|back|away|house|abroad|here|there|cities|countries)\b|\brelocated\b|"
            r"\bsince (?:relocating|moving)\b|\bsigned (?:a|the) lease\b|\bclosed on (?:a|the|our|my) (?:new )?"
            r"(?:house|home|flat|apartment|place|condo)\b|"
            r"\bnew (?:apartment|flat|house|home|place)\b|\b(?:bought|rented|renting) (?:a|an|our|my) (?:new )?"
            r"(?:house|home|flat|apartment|place)\b|\bliv(?:e|ing) [^.;]{0,40}\bnow\b|"
            rf"\bnow liv(?:e|ing)\b|\bno longer live|\bdon't live (?:in|at|there|with)\b.{{0,40}}{_ANYMORE}"
        ),
        "relationship": (
            r"\bbroke up\b|\bsplit up\b|\bcalled off (?:the|our|my) (?:engagement|wedding)\b|\bremarried\b|"
            r"\bdivorce (?:papers|is final|was finali[sz]ed|came through|went through)\b|"
            r"\b(?:got|getting|am|are|i'm|we're) (?:now )?(?:married|engaged|"
            r"divorced|separated)\b|\bdivorced\b|\bnew (?:partner|boyfriend|girlfriend|husband|wife)\b|"
            r"\b(?:started|am|i'm|now) dating\b|\bseeing someone (?:new|else)?\b|\bsingle "
            r"(?:now|again)\b|\bno longer (?:together|dating|married|seeing)\b|\bnot (?:together|dating|married)"
            rf" {_ANYMORE}"
        ),
        # school: "I graduated", "dropped out of uni", "finished my degree"
        "school": (
            r"\bgraduated\b|\bgraduation was\b|\b(?:degree|master's|masters|course|program|programme|phd) "
            r"(?:is|was) (?:finally )?(?:over|done|finished)\b|\bdropped out\b|\bfinished (?:my )?(?:degree|studies|"
            r"school|university|uni|college|phd|"
            r"masters?)\b|\bno longer (?:a student|at (?:school|university|uni|college))\b"
        ),
    }.items()
}
# What the older memory says when it states a fact of the subject.
_SUBJECT: dict[str, re.Pattern[str]] = {
    "job": re.compile(
        r"\b(?:i|i'm|i've|we|we're)\b[^.;,]{0,20}\bwork(?:s|ed|ing)?\b(?: \w+){0,2} (?:as|at|for|in)\b|"
        r"\bi (?:teach|nurse|manage|run) \w+|\b(?:i've been|i'm|i am) teaching\b|\bmy (?:new |old |current "
        r"|first )?(?:job|career|work at|position|employer|company|boss)\b|\bjob (?:as|at)\b|\bemployed\b|"
        r"\b(?:got|was|been) (?:hired|promoted)\b|\b(?:i'm|i am|i was|been|as|became) an? (?:\w+ )?"
        rf"(?:{_ROLE_ALT})\b"
    ),
    "home": re.compile(
        r"\bliv(?:e|es|ed|ing) (?:in|at|near|with|on)\b|\bmoved\b|\brelocated\b|\b(?:rent|renting|own|share|"
        r"sharing) (?:a|an|my|our|the) (?:[\w-]+ )?(?:flat|apartment|house|home|place|room|studio)\b|"
        r"\b(?:my|our|new|old) (?:apartment|flat|house|home|place|neighbou?rhood)\b"
    ),
    "relationship": re.compile(
        r"\b(?:my|a|our) (?:\w+ )?(?:partner|boyfriend|girlfriend|husband|wife|fianc[ée]e?|spouse)\b|\b(?:married|"
        r"marriage|engaged|dating|relationship|single|divorced|separated|widowed)\b"
    ),
    "school": re.compile(
        r"\b(?:a|an) (?:\w+ )?(?:student|pupil|undergrad|undergraduate|postgrad)\b|"
        r"\bi(?:'m| am) (?:studying|in (?:my )?(?:first|second|third|final|last) year)\b|\bi study\b|"
        r"\bmy (?:degree|studies|course|classes|phd)\b"
    ),
}
# A habit stopped ("quit smoking", "don't drink anymore") or started ("took up running", "vegan now").
_HABIT_ALT = "|".join(sorted(HABITS))
_HABIT_STOP = re.compile(
    rf"\b(?:quit|stopped|gave up|given up|cut out|kicked|no longer) (?:\w+ )?(?:{_HABIT_ALT})\b|"
    rf"\b(?:haven't|have not|hasn't) (?:had (?:a |any )?|touched (?:a |any )?)?(?:{_HABIT_ALT}|smoked)\b"
    r"[^.;]{0,20}\b(?:in|since|for)\b|\b(?:cigarette|smoke|alcohol|sugar|caffeine|meat)-free\b|"
    rf"\b(?:don't|do not|not|never) (?:\w+ )?(?:{_HABIT_ALT})\b.{{0,30}}{_ANYMORE}|\bswitched from (?:{_HABIT_ALT})\b"
)
_HABIT_START = re.compile(
    rf"\b(?:started|took up|taken up|began|switched to|now) (?:\w+ )?(?:{_HABIT_ALT})\b|"
    rf"\b(?:{_HABIT_ALT}) now\b"
)
_VEG_START = re.compile(
    r"\b(?:went|gone|going|became|become|turned) (?:fully )?(?:vegan|vegetarian)\b|\b(?:vegan|vegetarian) now\b"
)
# The same habit under its forms ("smoking", "smoker", "cigarettes" -> "smoke").
_HABIT_ROOT = {
    **dict.fromkeys(["smoke", "smoked", "smoking", "smoker", "cigarette", "cigarettes", "vape", "vaping"], "smoke"),
    **dict.fromkeys(["drink", "drinking", "alcohol", "sober"], "drink"),
    **dict.fromkeys(["vegan", "vegetarian", "meat"], "meat"),
    **dict.fromkeys(["coffee", "caffeine"], "coffee"),
    **dict.fromkeys(["run", "running", "jogging"], "run"),
    **dict.fromkeys(["meditation", "meditating"], "meditate"),
    **dict.fromkeys(["gym", "workout", "exercising"], "gym"),
}
# Plans, wishes and maybes: not a change (yet). Denials of the change itself ("I didn't move").
_HEDGE = re.compile(
    r"\b(?:will|would|could|should|might|hope|hoping|wish|want|wants|wanna|gonna|(?:i'm|i am|we're|we are) going "
    r"to|plan|plans|planning|"
    r"if|maybe|perhaps|(?<!in )(?<!of )may|thinking (?:of|about)|considering)\b|'ll\b|'d\b"
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
_STATUS = re.compile(r"\b(?:married|remarried|engaged|divorced|separated|broke up|split up|called off)\b")
_ENDED = re.compile(rf"{_ANYMORE}|\bno longer\b|\bnot\b|n't\b|\bleft\b|\bquit\b|\bout of\b|\bex\b|\bcalled off\b")
# A change that ends something (told again as an end, it is the same change: "Lost my job" -> "Losing my job
# was hard"; an end after a start is a new change: "I'm enjoying my new job" -> "I lost my job").
_ENDING = re.compile(
    rf"\b(?:quit|left|lost|resigned|retired|fired|laid off|broke up|split up|divorced|separated|moved out|gave up|"
    rf"stopped|no longer)\b|{_ANYMORE}"
)


_THIRD_PERSON = frozenset(["he", "she", "they", "his", "her", "their", "he's", "she's", "they've"])


# A chat message that drops its "I": "Switched to tea and haven't touched coffee since.", "Finally sold the car."
_DROPPED_I = re.compile(r"[a-z]+ed|quit|left|sold|got|had|went|took|gave|made|began|became|spent|cut")
_NOT_A_VERB = frozenset(["need", "red", "bed", "shed", "seed", "feed", "speed", "weed", "bread", "led"])
_OPENERS = frozenset(["just", "finally", "also", "so", "today", "yesterday"])


def _says_i(toks: list[str]) -> bool:
    """The sentence speaks in the first person, or opens with a past verb whose "I" was dropped."""
    low = [t.lower() for t in toks]
    if _FIRST_PERSON & set(low):
        return True
    verb = low[1:2] if low[:1] and low[0] in _OPENERS else low[:1]
    return bool(verb) and verb[0] not in _NOT_A_VERB and bool(_DROPPED_I.fullmatch(verb[0]))


def _denied(low: str) -> bool:
    """The sentence denies a change, said by the speaker: "I didn't move"; not "he didn't get along"."""
    return any(not (set(re.findall(r"[a-z']+", low[: m.start()])[-1:]) & _THIRD_PERSON) for m in _DENIED.finditer(low))


def _lower(text: str) -> str:
    return text.lower().replace("’", "'")


def _habit_roots(text: str) -> set[str]:
    return {_HABIT_ROOT.get(w, w) for w in re.findall(r"[a-z]+", text) if w in HABITS or w in _HABIT_ROOT}


def _said_of(low: str, at: int, others: frozenset[str]) -> bool:
    """The change found at `at` is not said of someone else: the two words before it name no other person
    ("Tom got a job", "she moved to Lyon"); `others`: the sentence's names, lower-cased."""
    before = re.findall(r"[a-z']+", low[:at])[-2:]
    return not any(w in _THIRD_PERSON or w in others for w in before)


def stated_changes(text: str, as_said: bool = True, others: frozenset[str] = frozenset()) -> set[str]:
    """The subjects ("job", "home", "relationship", "habit") whose change the sentence states; `as_said`:
    not as a plan, a wish, or denied (False: any mention, "after losing my job" too); a change said of
    one of `others` (names in the sentence) or of "he"/"she" is not the speaker's."""
    low = _lower(text)
    if as_said and (_HEDGE.search(low) or _denied(low)):
        return set()
    if not as_said:
        low = _RETOLD.sub(lambda m: _RETOLD_AS[m.group(1)], low)
    found = {k for k, rx in _CHANGE.items() if any(_said_of(low, m.start(), others) for m in rx.finditer(low))}
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
    if _VEG_START.search(new) and "meat" in old and not old_stopped:
        return True  # "I'm vegetarian now." replaces "I eat meat every day."
    return bool(_HABIT_START.search(new)) and old_stopped


def _states(subject: str, text: str) -> bool:
    """The (lower-cased) sentence states a fact of the subject."""
    return bool(_SUBJECT[subject].search(text))


def stated_change(old: Memory, new: Memory) -> str | None:
    """The subject of the change the newer memory states about the older one's fact, else None."""
    if not old.speaker or old.speaker != new.speaker:
        return None
    a, b = _tokens(_body(old)), _tokens(_body(new))
    la = {t.lower() for t in a}
    if not (_FIRST_PERSON & la and _says_i(b)) or _about_someone_else(a) or _about_someone_else(b):
        return None
    low_a, low_b = _lower(_body(old)), _lower(_body(new))
    names = frozenset(t.lower() for i, t in enumerate(b) if i and t[0].isupper() and t.lower() not in _FIRST_PERSON)
    subjects = stated_changes(low_b, others=names)
    if not subjects or _denied(low_a):  # "I didn't get the job at the bank." holds no job to change
        return None
    va = {t.lower() for i, t in enumerate(a) if _is_value(t, i == 0)}
    vb = {t.lower() for i, t in enumerate(b) if _is_value(t, i == 0)}
    restated = bool(vb) and vb <= va and not _ENDED.search(low_b)  # the same value again
    for subject in ("job", "home", "relationship", "school", "habit"):
        if subject not in subjects or (restated and not (subject == "relationship" and _STATUS.search(low_b))):
            continue  # (marrying the partner one was dating changes the status, not the value)
        if subject == "habit":
            if _habit_changed(low_a, low_b):
                return subject
            continue
        if not _states(subject, low_a):
            continue
        retold = _RETOLD.sub(lambda m: _RETOLD_AS[m.group(1)], low_a)
        same_way = bool(_ENDING.search(retold)) == bool(_ENDING.search(low_b))
        if subject in stated_changes(low_a, as_said=False) and same_way and not (va and vb - va):
            continue  # the same change told again, with nothing new ("I changed jobs." -> "My new job ...")
        return subject
    return None


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


def _about_someone_else(toks: list[str]) -> bool:
    """Someone else is the sentence's subject: "my cousin ...", "our neighbour's dog ...", also past one
    word ("my best friend", "my older sister"), before any "I" or "we" and not joined by "and I" ("My
    sister and I moved"). "I live with my parents." is about the speaker."""
    low = [t.lower().replace("’", "'").removesuffix("'s").rstrip("'") for t in toks]
    for i, w in enumerate(low):
        if w in _SUBJECT_WORDS:
            return False
        if w in ("my", "our") and any(x in _OTHERS for x in low[i + 1 : i + 3]):
            rest = low[i + 1 : i + 6]
            return not ("and" in rest and ("i" in rest or "me" in rest))
    return False


def _same_speaker_first_person(old: Memory, new: Memory, new_first_person: bool = True) -> bool:
    """Step 1: one speaker said both, about themself ("I", "my", "we"), not about someone else."""
    if not old.speaker or old.speaker != new.speaker:
        return False
    a, b = _tokens(_body(old)), _tokens(_body(new))
    la = {t.lower() for t in a}
    if not _FIRST_PERSON & la or (new_first_person and not _says_i(b)):
        return False
    return not (_about_someone_else(a) or _about_someone_else(b))


def change_of(old: Memory, new: Memory) -> str | None:
    """Why the newer memory supersedes the older one: the subject of a stated change ("job", "home",
    "relationship", "habit"), "ended" (the thing the older one states ended) or "replaced" (a new value
    in the older one's slot); None when it does not."""
    if not _same_speaker_first_person(old, new, new_first_person=False):
        return None
    low_a, low_b = _lower(_body(old)), _lower(_body(new))
    if _HEDGE.search(low_b) or _denied(low_b) or _denied(low_a):
        return None
    first_person = _same_speaker_first_person(old, new)
    if not first_person and _OTHER_PERSON.search(low_b) and not replaced.ended(low_a, low_b, first_person=False):
        return None  # "She moved to Lyon.": not the speaker's fact ("Kiwi died, he was 20." ends the speaker's Kiwi)
    if first_person and (subject := stated_change(old, new)) is not None:
        return subject
    if replaced.ended(low_a, low_b, first_person):
        return "ended"
    return "replaced" if replaced.replaced_slot(low_a, low_b) else None


def changed_facts(new: Memory, earlier: Iterable[Memory]) -> list[Memory]:
    """The earlier memories whose fact `new` states a change of (job, home, relationship, school, habit),
    by the rule above; [] without reading `earlier` when `new` states no such change."""
    if not stated_changes(_lower(_body(new))):
        return []
    return [m for m in earlier if stated_change(m, new) is not None and change_of(m, new) is not None]


class ChangeRule:
    """The offline Changed label of a close's candidate pairs (the module docstring's rule; text only)."""

    def changed(self, pairs: Sequence[tuple[Memory, Memory]]) -> list[bool]:
        return [change_of(o, n) is not None for o, n in pairs]
