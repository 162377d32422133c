"""Memories from a session without an LLM: the statements people made, one per sentence.

THEANINE summarises a session into short facts with an LLM. When no capable
LLM is configured (the bundled tiny model, or MEMORY_LLM_STEPS=off) this is
the designed path instead, and also what a failed summary falls back to:

* every turn is split into sentences; questions, greetings, thanks and short
  reactions ("That's awesome!") are not memories;
* a sentence must carry at least MIN_CONTENT_WORDS content words, and a short
  exclamation that says nothing of the speaker ("Way to go, Jon!") is a cheer;
* a shorter sentence is kept when it states a fact (`is_short_fact`): a name ("Her name is Mia."),
  a number ("She is 3.", "It cost $40."), a place ("We moved to Berlin."), a role ("I'm a nurse.")
  or, said in the first person, a change ("I also changed jobs.", "I quit smoking.") or a lasting
  personal fact (memory.theanine.personal_facts: "I love jazz.", "I have a dog.", "My sister is
  pregnant.", "I live alone.", "I don't eat meat."). It must speak
  of someone (a personal pronoun, or a name as its subject) and not hedge or deny ("I won't quit.",
  "I might move to Lyon.", "I didn't move."; "not ... anymore" and "no longer" do state a change);
* a short fact that opens with a pronoun (he, she, it, they, his, her, its, their, this ...) carries
  its referent: the nearest earlier sentence of the same turn that says something (not itself such
  a reference, nor a bare reaction or a short question), written before it in the event:
  "user: Last month we got a kitten. Her name is Mia." A referent longer than REFERENT_CHARS is
  cut; it stays a memory of its own when it is one. A reference with no such sentence before it in
  its turn (it opens the turn) is kept as said;
* each kept sentence becomes one memory "Speaker: sentence", with its speaker
  and the index of the turn it came from (provenance);
* near-duplicates within the session (same content words and figures, Jaccard >= DEDUP; a
  referenced fact by its own sentence, not its referent) are merged, keeping every source turn;
* in a user-assistant chat the memory is the user's: the assistant's sentences
  are left out, except what it promised to do.

Deterministic and fast (no model): a 20-turn session takes well under a millisecond.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..records import Turn
from .personal_facts import is_personal_fact

# How a memory was made (Memory.built_by), in the words the UI shows.
BUILT_BY = {
    "llm": "summarised by the LLM",
    "extracted": "a sentence from the conversation (built without an LLM)",
    "extracted-fallback": "a sentence from the conversation (the LLM's summary was unusable)",
}

MIN_CONTENT_WORDS = 3
DEDUP_JACCARD = 0.8
MAX_EVENT_CHARS = 300
CHEER_MAX_WORDS = 6
REFERENT_CHARS = 200  # a longer referent is cut (the short fact after it is kept whole)

# A sentence ends at . ! ? (or an ellipsis / a line break) followed by space.
_SENTENCE_END = re.compile(r"(?<=[.!?\u2026])[\"')\]]*\s+|\n+")
_WORD = re.compile(r"[^\W\d_][\w'’-]*")

_STOP_WORDS = """
a an the and or but so if then than that this these those it its it's is are was were be been being am i i'm
i've i'd i'll me my mine we we're our ours you you're your yours he him his she her hers they them their to of
in on at by for with from about as into over after before up down out off just very really too also do does
did doing done have has had having can could would should will shall may might must not no yes there here what
which who whom whose when where why how all any some much many more most such own same oh ah aw wow hey hi
hello yeah yep ok okay well like lol haha hmm um uh sure thanks thank please s t re ve ll d m don't didn't
doesn't isn't wasn't aren't can't won't couldn't wouldn't shouldn't
"""
_STOP = frozenset(_STOP_WORDS.split())

# Openers of sentences that ask rather than tell (some questions lack their "?").
_QUESTION_OPENERS_WORDS = """
what who whom whose when where why how which do does did is are was were can could would will should shall
have has had may might am isn't aren't don't doesn't didn't won't wouldn't couldn't shouldn't
"""
_QUESTION_OPENERS = frozenset(_QUESTION_OPENERS_WORDS.split())
# Openers of reactions and pleasantries; such a sentence is kept only if it speaks of the speaker.
_REACTION_OPENERS_WORDS = """
that that's thats sounds wow oh aw awesome great cool nice good glad congrats congratulations thanks thank
haha lol yay omg amazing wonderful hi hello hey bye goodbye take see talk
"""
_REACTION_OPENERS = frozenset(_REACTION_OPENERS_WORDS.split())
_FIRST_PERSON = frozenset(
    ["i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "we", "we're", "we've", "our", "ours", "myself"]
)

# --- short facts -----------------------------------------------------------------------------------
# Pronouns that refer back to something said before ("Her name is Mia.": whose?).
_BACK_REFS_WORDS = """
he he's she she's it it's they they're they've his her its their this these those him them
"""
_BACK_REFS = frozenset(_BACK_REFS_WORDS.split())
# Someone the sentence speaks of: a short fact needs one (or a name as its subject).
_PERSONS = (_FIRST_PERSON | _BACK_REFS | frozenset(["us"])) - frozenset(["this", "these", "those", "him", "them"])
# Words a sentence may open with before its subject ("Oh, I've been to Paris!", "And her name is Mia.").
_FILLERS_WORDS = """
oh ah and also so well yeah yes actually btw but plus anyway now
"""
_FILLERS = frozenset(_FILLERS_WORDS.split())
_SUBJECT_VERBS_WORDS = """
is was has had lives lived works worked moved turned turns got became
"""
_SUBJECT_VERBS = frozenset(_SUBJECT_VERBS_WORDS.split())
# Plans, wishes and maybes are not facts (yet): "I might move to Lyon.", "I won't quit.", "I'll start."
_HEDGES_WORDS = """
will would could should might must can can't cannot hope hoping wish want wanna gonna going plan
planning if maybe perhaps thinking considering
"""
_HEDGES = frozenset(_HEDGES_WORDS.split())
# Roles and occupations ("I'm a nurse.", "I'm not a teacher anymore"): a job as a fact (also changes.py).
_ROLES_WORDS = """
teacher nurse doctor engineer developer programmer designer lawyer accountant student manager chef cook
waiter waitress driver pilot firefighter farmer artist musician writer author journalist scientist
researcher professor lecturer tutor consultant analyst architect electrician plumber carpenter mechanic
pharmacist dentist therapist counselor counsellor psychologist vet veterinarian cashier clerk secretary
assistant receptionist banker barista baker painter photographer actor dancer singer coach trainer officer
soldier policeman policewoman cop paramedic librarian salesman saleswoman freelancer entrepreneur intern
volunteer retiree nanny caregiver carer babysitter
"""
ROLES = frozenset(_ROLES_WORDS.split())
# Family roles are facts too ("I'm a mom."), but not jobs: changes.py does not take them for one.
_FAMILY_ROLES = frozenset(["mom", "mum", "dad", "mother", "father", "parent", "grandparent", "grandmother"])
_NUMERALS_WORDS = """
two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen twenty thirty forty
fifty sixty seventy eighty ninety hundred thousand million dozen
"""
_NUMERALS = frozenset(_NUMERALS_WORDS.split())
_NAMED = re.compile(r"\b(?:name is|name's|name’s|named|called)\s+[A-Z]")
_FIGURE = re.compile(r"[$€£]\s?\d|\d(?![\d.,]*\s?%)")  # a figure, not a percentage ("I 100% agree")
_PLACE = re.compile(r"\b(?:in|to|from|at|near)\s+(?:the\s+)?[A-Z][\w'’-]*")
_ROLE = re.compile(r"\b(?:a|an)\s+([\w-]+)(?:\s+([\w-]+))?", re.IGNORECASE)  # "a nurse", "a school teacher"
# Said in the first person, these state a change of job, home, relationship or habit.
_CHANGE_WORDS_WORDS = """
moved relocated switched quit started changed retired resigned divorced engaged married hired fired promoted
joined left stopped anymore longer
"""
CHANGE_WORDS = frozenset(_CHANGE_WORDS_WORDS.split())
# Habits, a subject of change ("I'm vegan now.", "I quit smoking."; also changes.py).
_HABITS_WORDS = """
smoke smoking smoker cigarettes vape vaping drink drinking alcohol sober vegan vegetarian meat diet gym
running jogging yoga meditation meditating coffee caffeine sugar workout exercising cycling swimming
"""
HABITS = frozenset(_HABITS_WORDS.split())
CHANGE_PHRASE = re.compile(
    r"\b(?:new (?:job|home|house|flat|apartment|place|partner|boyfriend|girlfriend)|broke up|split up|"
    r"gave up|took up)\b",
    re.IGNORECASE,
)


# Titles and abbreviations whose full stop ends no sentence ("a nurse at St. Mary's hospital").
_ABBREVIATIONS = frozenset(
    ["st.", "dr.", "mr.", "mrs.", "ms.", "mx.", "prof.", "mt.", "jr.", "sr.", "vs.", "e.g.", "i.e."]
)


def sentences(text: str) -> list[str]:
    """The sentences of a turn, whitespace-normalised."""
    out: list[str] = []
    for p in _SENTENCE_END.split(text or ""):
        if not (p and p.strip()):
            continue
        p = " ".join(p.split())
        if out and out[-1].rsplit(" ", 1)[-1].lower() in _ABBREVIATIONS:
            out[-1] = f"{out[-1]} {p}"
        else:
            out.append(p)
    return out


def _words(sentence: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(sentence)]


def content_words(sentence: str) -> set[str]:
    return {w for w in _words(sentence) if w not in _STOP and len(w) > 1}


def _negated(words: list[str]) -> bool:
    return any(w in ("not", "never", "no") or w.endswith("n't") for w in words)


def _opening(words: list[str]) -> str:
    """The sentence's first word after openers such as "Oh," or "And"."""
    return next((w for w in words if w not in _FILLERS), "")


def is_role(sentence: str) -> bool:
    """The sentence names a role: "a nurse", "an English teacher", "a mom"."""
    roles = ROLES | _FAMILY_ROLES
    return any(w and w.lower() in roles for m in _ROLE.finditer(sentence) for w in m.groups())


def is_short_fact(sentence: str) -> bool:
    """A sentence too short for MIN_CONTENT_WORDS that still states a fact: a name, a number, a place,
    a role or (in the first person) a change, said of someone, neither hedged nor denied."""
    words = _words(sentence)
    raw = [w for w in _WORD.findall(sentence) if w.lower() not in _FILLERS]
    named_subject = len(raw) > 1 and raw[0][0].isupper() and raw[1].lower() in _SUBJECT_VERBS  # "Mia is 3."
    if not (_PERSONS.intersection(words) or named_subject):
        return False
    changed = "anymore" in words or "longer" in words  # "not ... anymore", "no longer": a stated change
    if _HEDGES.intersection(words) or any(w.endswith(("'ll", "'d")) for w in words):
        return False
    if is_personal_fact(sentence):  # "I love jazz.", "I have a dog.", "I don't eat meat."
        return True
    if _negated(words) and not changed:
        return False
    if _NAMED.search(sentence) or _FIGURE.search(sentence) or _NUMERALS.intersection(words):
        return True
    if _PLACE.search(sentence) or is_role(sentence):
        return True
    now_habit = "now" in words and bool(HABITS.intersection(words))  # "I'm vegan now." (not "I'm tired now.")
    return bool(_FIRST_PERSON.intersection(words)) and bool(
        CHANGE_WORDS.intersection(words) or CHANGE_PHRASE.search(sentence) or now_habit
    )


def refers_back(sentence: str) -> bool:
    """A short fact whose subject is a pronoun ("Her name is Mia."): it needs the sentence before it."""
    return len(content_words(sentence)) < MIN_CONTENT_WORDS and _opening(_words(sentence)) in _BACK_REFS


def _reaction(sentence: str, words: list[str]) -> bool:
    """A bare reaction, greeting or thanks ("That's awesome!", "Thanks so much!"), or a cheer: a short
    exclamation to the other person ("Way to go, Jon!"). It tells nothing to remember."""
    about_self = bool(_FIRST_PERSON.intersection(words))
    if words[0] in _REACTION_OPENERS and not about_self:
        return True
    return sentence.rstrip("\"') ").endswith("!") and not about_self and len(content_words(sentence)) < CHEER_MAX_WORDS


def is_statement(sentence: str) -> bool:
    """A sentence worth remembering: tells something, is not a question, greeting or bare reaction."""
    words = _words(sentence)
    if not words or sentence.rstrip("\"') ").endswith("?"):
        return False
    if words[0] in _QUESTION_OPENERS and not sentence.rstrip().endswith((".", "!")):
        return False
    if len(content_words(sentence)) < MIN_CONTENT_WORDS:
        # A short fact may be an exclamation ("Her name is Mia!"); a bare reaction is still none.
        return is_short_fact(sentence) and not (words[0] in _REACTION_OPENERS and not _FIRST_PERSON & set(words))
    return not _reaction(sentence, words)


def _referent(sentence: str) -> bool:
    """A sentence a later "Her name is Mia." may refer back to: it says something ("We got a kitten.";
    a question only with MIN_CONTENT_WORDS: "Did I tell you we got a kitten?", not "Isn't she cute?"),
    is no reference itself and no bare reaction."""
    words, n = _words(sentence), len(content_words(sentence))
    if not n or refers_back(sentence) or _reaction(sentence, words):
        return False
    return n >= MIN_CONTENT_WORDS or not sentence.rstrip("\"') ").endswith("?")


# In a user-assistant chat the app's agent speaks as ASSISTANT (sessions.store.Message.speaker). Its
# small talk and claims are not memories of the user (they stay in the transcript and in SeCom's
# segments); what it promised to do is: "I'll remind you on Friday to call the vet."
ASSISTANT = "assistant"
_PROMISE = re.compile(
    r"\b(?:i'll|will|promised? to|agreed to|i'm going to|i am going to|i've noted|i have noted|noted)\b.{0,60}?"
    r"\b(?:remind|remember|note|keep|save|follow up|check|send|call|book|schedule|bring|tell)",
    re.IGNORECASE,
)


def is_promise(sentence: str) -> bool:
    """An undertaking of the assistant's, worth remembering like a fact about the user."""
    return bool(_PROMISE.search(sentence.replace("’", "'")))


def is_assistant(speaker: str) -> bool:
    return speaker.strip().lower() == ASSISTANT


def _key(sentence: str) -> set[str]:
    """What near-duplicates share: the content words and the figures ("She is 3." is not "She is 4.")."""
    return content_words(sentence) | set(re.findall(r"\d+(?:[.,]\d+)?", sentence))


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def extract_memories(turns: Sequence[Turn]) -> list[dict]:
    """[{"speaker", "event", "turns": [turn indexes]}] in the order they were said. The app's assistant
    contributes only its promises; two named speakers (LoCoMo) both count."""
    out: list[dict] = []
    keys: list[set[str]] = []
    for i, t in enumerate(turns):
        referent = ""  # what a later "Her name is Mia." of this turn refers back to
        for s in sentences(t.text):
            back = refers_back(s)
            keep = is_statement(s) and (not is_assistant(t.speaker) or is_promise(s))
            text = f"{referent} {s}" if keep and back and referent else s
            if _referent(s):
                referent = s if len(s) <= REFERENT_CHARS else s[: REFERENT_CHARS - 1].rstrip() + "…"
            if not keep:
                continue
            key = _key(s)  # the sentence's own words: a fact is not a duplicate of its referent
            dup = next(
                (j for j, k in enumerate(keys) if out[j]["speaker"] == t.speaker and _jaccard(k, key) >= DEDUP_JACCARD),
                None,
            )
            if dup is not None:
                if i not in out[dup]["turns"]:
                    out[dup]["turns"].append(i)
                continue
            event = text if len(text) <= MAX_EVENT_CHARS else text[: MAX_EVENT_CHARS - 1].rstrip() + "…"
            out.append({"speaker": t.speaker, "event": f"{t.speaker}: {event}", "turns": [i]})
            keys.append(key)
    return out
