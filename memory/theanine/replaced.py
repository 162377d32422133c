"""Two ways a later statement supersedes an earlier one by naming what the earlier one said
(memory.theanine.changes calls them after its speaker checks; both take lower-cased sentences):

* `ended`: the newer one says the earlier one's thing ended, naming it: "I sold the Civic" after "I
  drive a red Honda Civic", "Miso passed away" after "I have a cat named Miso", "I gave up tennis",
  "I switched from biology to ...", "I don't run anymore", "I'm not allergic to penicillin after all";
* `replaced_slot`: the newer one gives the earlier one's "my <thing>" a new value: "I have a new
  doctor" after "My doctor is Dr. Patel", "I changed gyms" after "My gym is the one on Main Street",
  "My favourite band these days is ..." after "My favourite band is Radiohead", "I turned 35" after
  "I'm 34".

A word shared by chance does not do: the end must take the shared word as its object or subject, the
slot must be the earlier sentence's "my ..." and the newer one must mark it new (or now).
"""

from __future__ import annotations

import re

from .extract import content_words

# Words too general to name a thing ("I left work early" does not end "I work at a bakery").
_GENERIC_WORDS = "work home time day days today tonight week weekend place thing things way lot job anymore longer bit"
_GENERIC = frozenset(_GENERIC_WORDS.split())
# People: a new one does not replace the earlier one ("my new colleague" after "my colleague is kind").
_PEOPLE_WORDS = """
friend friends colleague colleagues kid kids child children son daughter baby sister brother mom dad mum mother
father parents cousin aunt uncle neighbour neighbor boss manager family
"""
_PEOPLE = frozenset(_PEOPLE_WORDS.split())
_END = (
    r"(?:quit|left|lost|sold|gave up(?: on)?|given up(?: on)?|stopped|rehomed?|re-homed?|moved out of|broke up with|"
    r"split up with|switched from|ditched|(?:tapered|came|come|got|went) (?:me )?off|"
    r"changed from|moved (?:[\w'-]+ ){0,2}from|(?:got|was|been) (?:laid off|fired|let go) "
    r"from|resigned from|retired from|dropped out of|dropped|cancell?ed|closed|got rid of|gave away)"
)
_END_OBJECT = re.compile(
    rf"\b{_END} ((?:[\w'-]+ ){{0,3}}[\w'-]+)|\b(?:gave|given|put) ((?:[\w'-]+ ){{0,2}}[\w'-]+) (?:away|down)\b"
)
_END_SUBJECT = re.compile(
    r"\b([\w'-]+) (?:passed away|died|is gone|has gone|ran away|was put down|didn't make it|did not make it)\b|"
    r"\b([\w'-]+) and (?:i|me) (?:broke up|split up|separated|got divorced|are getting divorced|are divorced)\b"
)
_NOT_NOW = re.compile(
    r"\b(?:i|i'm|we|we're|i've)\b[^.;,]{0,15}\b(?:not|don't|do not|never|can't)\b[^.;]*?\b(?:any ?more|after all)\b|"
    r"\b(?:i|we|i'm|we're) no longer\b"
)
_NEGATED = re.compile(r"\b(?:not|never|no longer)\b|n't\b")
_CLAUSE = re.compile(r"[,;]|\b(?:and|but)\b")

_SLOT_OPEN = re.compile(r"\b(?:my|our) ((?:[\w'-]+ ){0,2}[\w'-]+)")
_VERBS_WORDS = "ends starts died lives loves likes keeps makes gets goes looks works says helps needs"
_VERBS = frozenset(_VERBS_WORDS.split())
_NOW = r"(?:now|these days|lately|nowadays|anymore)"
_AGE_OLD = re.compile(r"\b(?:i'm|i am) (\d{1,2})(?: years old)?\b(?! ?(?:%|minutes|hours|days|weeks|months|km|miles))")
_AGE_NEW = re.compile(r"\bi (?:just )?turned (\d{1,2})\b|\b(?:i'm|i am) (\d{1,2}) now\b")


# A thing and the word for having it: "I cancelled my membership" ends "I'm a member of the gym".
_SAME_THING = {"membership": "member", "subscription": "subscriber"}


def _stem(w: str) -> str:
    w = _SAME_THING.get(w, w)
    return w[:-1] if w.endswith("s") and not w.endswith("ss") and len(w) > 3 else w


def _things(text: str) -> set[str]:
    return {_stem(w) for w in content_words(text)} - _GENERIC


def _ends(text: str, as_subject_only: bool = False) -> set[str]:
    """The things a sentence says ended; `as_subject_only`: only as the subject ("Peanut died")."""
    out = {_stem(n) for m in _END_SUBJECT.finditer(text) for n in m.groups() if n} - _GENERIC
    if as_subject_only:
        return out
    out |= {t for m in _END_OBJECT.finditer(text) for t in _things(m.group(1) or m.group(2))}
    if _NOT_NOW.search(text):
        out |= _things(text)
    return out


def ended(old: str, new: str, first_person: bool = True) -> bool:
    """The newer sentence ends a thing the older one states (and the older one is no end of it itself; a
    thing it states in a negated clause it does not hold: "I'm not allergic to X"). Without `first_person`
    (the newer one says no "I"), only a thing named as the subject counts."""
    ends = _ends(new, as_subject_only=not first_person)
    held = set().union(*(_things(c) for c in _CLAUSE.split(old) if not _NEGATED.search(c)))
    return bool(ends & held) and not (_ends(old) & ends)


def _slot_nouns(text: str) -> set[str]:
    """The head nouns of the sentence's "my ..." phrases: the last content word before a stop word or
    a verb ("my favourite band is" -> band, "my dance studio and" -> studio, "my phone number ends" -> number)."""
    out = set()
    for m in _SLOT_OPEN.finditer(text):
        head = ""
        for w in m.group(1).split():
            if not content_words(w) or w in _VERBS:
                break
            head = w
        if head:
            out.add(_stem(head))
    return out - _GENERIC - _PEOPLE


def replaced_slot(old: str, new: str) -> bool:
    """The newer sentence gives the older one's "my <thing>" (or age) a new value."""
    a_age, b_age = _AGE_OLD.search(old), _AGE_NEW.search(new)
    if a_age and b_age and a_age.group(1) != next(g for g in b_age.groups() if g):
        return True
    for noun in _slot_nouns(old):
        n = re.escape(noun)
        if re.search(rf"\bnew (?:[\w'-]+ )?{n}s?\b", old):
            continue  # the older one was itself the new value
        if re.search(rf"\bnew (?:[\w'-]+ )?{n}\b(?!s)|\b(?:changed|switched) {n}s?\b", new):  # not "new customers"
            return True
        # "My favourite band is Radiohead." -> "My favourite band these days is Arctic Monkeys."
        was = re.search(rf"\b(?:my|our) (?:[\w'-]+ )?{n}s? (?:is|are|was) (.+)", old)
        now = re.search(rf"\b(?:my|our) (?:[\w'-]+ )?{n}s? (?:{_NOW} )?(?:is|are) (?:{_NOW} )?(.+)", new)
        if was and now and re.search(rf"\b{_NOW}\b", new) and _things(now.group(1)) - _things(was.group(1)):
            return True
    return False
