"""Memories from a session without an LLM: the statements people made, one per sentence.

THEANINE summarises a session into short facts with an LLM. When no capable
LLM is configured (the bundled tiny model, or MEMORY_LLM_STEPS=off) this is
the designed path instead, and also what a failed summary falls back to:

* every turn is split into sentences; questions, greetings, thanks and short
  reactions ("That's awesome!") are not memories;
* a sentence must carry at least MIN_CONTENT_WORDS content words, and a short
  exclamation that says nothing of the speaker ("Way to go, Jon!") is a cheer;
* each kept sentence becomes one memory "Speaker: sentence", with its speaker
  and the index of the turn it came from (provenance);
* near-duplicates within the session (same content words, Jaccard >= DEDUP)
  are merged, keeping every source turn;
* in a user-assistant chat the memory is the user's: the assistant's sentences
  are left out, except what it promised to do.

Deterministic and fast (no model): a 20-turn session takes well under a millisecond.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..records import Turn

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


def sentences(text: str) -> list[str]:
    """The sentences of a turn, whitespace-normalised."""
    parts = _SENTENCE_END.split(text or "")
    return [" ".join(p.split()) for p in parts if p and p.strip()]


def _words(sentence: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(sentence)]


def content_words(sentence: str) -> set[str]:
    return {w for w in _words(sentence) if w not in _STOP and len(w) > 1}


def is_statement(sentence: str) -> bool:
    """A sentence worth remembering: tells something, is not a question, greeting or bare reaction."""
    words = _words(sentence)
    if not words or sentence.rstrip("\"') ").endswith("?"):
        return False
    if words[0] in _QUESTION_OPENERS and not sentence.rstrip().endswith((".", "!")):
        return False
    if len(content_words(sentence)) < MIN_CONTENT_WORDS:
        return False
    about_self = bool(_FIRST_PERSON.intersection(words))
    if words[0] in _REACTION_OPENERS and not about_self:
        return False
    # A short exclamation to the other person ("Way to go, Jon!") cheers; it tells nothing to remember.
    return not (
        sentence.rstrip("\"') ").endswith("!") and not about_self and len(content_words(sentence)) < CHEER_MAX_WORDS
    )


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


def _jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def extract_memories(turns: Sequence[Turn]) -> list[dict]:
    """[{"speaker", "event", "turns": [turn indexes]}] in the order they were said. The app's assistant
    contributes only its promises; two named speakers (LoCoMo) both count."""
    out: list[dict] = []
    keys: list[set[str]] = []
    for i, t in enumerate(turns):
        for s in sentences(t.text):
            if not is_statement(s) or (is_assistant(t.speaker) and not is_promise(s)):
                continue
            key = content_words(s)
            dup = next(
                (j for j, k in enumerate(keys) if out[j]["speaker"] == t.speaker and _jaccard(k, key) >= DEDUP_JACCARD),
                None,
            )
            if dup is not None:
                if i not in out[dup]["turns"]:
                    out[dup]["turns"].append(i)
                continue
            event = s if len(s) <= MAX_EVENT_CHARS else s[: MAX_EVENT_CHARS - 1].rstrip() + "…"
            out.append({"speaker": t.speaker, "event": f"{t.speaker}: {event}", "turns": [i]})
            keys.append(key)
    return out
