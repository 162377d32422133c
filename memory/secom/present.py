"""Whether a message asks about the present ("Where do I live now?", "What is my job these days?").

For such a question SeCom's retrieval must reach the latest statement of a fact too, which often
shares no word with the question ("I moved to Lisbon last week" for "Which city do I live in?"), and
the reply should read it first (`SecomMemory.retrieve`). A rule on the words, no model: an explicit
present cue ("now", "currently", "these days", ...), or a question in the present tense (a present
form of be or do) with no past marker ("last", "ago", "when", ...); never with a past form ("did",
"was", "before", "previous", "used to", ...).
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
CUES = ("now", "currently", "current", "nowadays", "anymore", "these days", "at the moment", "at present")
# Present forms of be and do. Not "has" / "have": "What books has she read?" (the present perfect) asks
# about past events, and "does she have" is found by "does".
PRESENT = {"am", "is", "are", "do", "does", "i'm", "what's", "where's", "who's", "how's", "it's"}
# A past form or marker: the question is about an earlier state ("Where did I live before?")
PAST_FORMS = {"did", "was", "were", "had", "used", "before", "previous", "previously", "former", "formerly"}
PAST_FORMS |= {"originally"}
# Words that make a plain present-tense question about a past event ("When is ...", "the first ...")
PAST = PAST_FORMS | {"ago", "last", "first", "earlier", "yesterday", "once", "ever", "when"}
OPENERS = {"what", "where", "who", "whom", "whose", "which", "how", "why", "do", "does", "is", "are", "am"}


def _last_line(text: str) -> str:
    lines = [ln for ln in (text or "").strip().split("\n") if ln.strip()]
    return lines[-1] if lines else ""


def asks_present(text: str) -> bool:
    """True when the message (its last line: a retrieval query may start with earlier turns) asks
    about the present state of something."""
    line = _last_line(text).lower().replace("\u2019", "'")
    words = _WORD.findall(line)
    if not words:
        return False
    padded = " " + " ".join(words) + " "
    if PAST_FORMS.intersection(words):
        return False
    if any(f" {c} " in padded for c in CUES):
        return True
    is_question = line.rstrip().endswith("?") or words[0] in OPENERS
    return is_question and bool(PRESENT.intersection(words)) and not PAST.intersection(words)
