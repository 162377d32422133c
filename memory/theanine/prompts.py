"""THEANINE prompts, each next to the schema and validator of the answer it expects."""

from __future__ import annotations

import re

from .extract import content_words
from .graph import RELATIONS

# --- Phase I-0: summarise a session into memories ------------------------------
# No cap on the number of memories: a session with many facts keeps all of them (linking.summarise
# sizes the answer budget to the session and summarises long sessions in parts).

SUMMARISE_SCHEMA = {
    "type": "object",
    "properties": {
        "memories": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "speaker": {"type": "string"},
                    "event": {"type": "string"},
                    "turns": {"type": "array", "items": {"type": "integer"}},
                },
                # turns required: a memory's provenance needs them
                "required": ["speaker", "event", "turns"],
            },
        }
    },
    "required": ["memories"],
}


ASSISTANT = "assistant"  # the app's own turns: what the assistant said is not a fact about a person
_SECOND_PERSON = re.compile(r"\byou(r|rs|rself|'re|'ve|'ll|'d)?\b", re.I)


# A worked example (the official prompt has one): what counts as a fact, and what does not.
SUMMARY_EXAMPLE = """For example, from
[0] Mia: I finally booked the flight to Lisbon for June!
[1] Tom: Nice. I can't travel this year, my knee surgery is in May.
[2] Mia: Oh no, good luck with it.
the memories are "Mia booked a flight to Lisbon for June." (turns [0]) and "Tom has knee surgery in
May, so he cannot travel this year." (turns [1]); "good luck" is not a fact about anyone."""


def summarise_messages(
    date: str, numbered_turns: list[str], speakers: list[str] | None = None, part: tuple[int, int] | None = None
) -> list[dict]:
    dialogue = "\n".join(numbered_turns)
    who = f" between {', '.join(speakers)}" if speakers else ""
    where = f" (part {part[0]} of {part[1]}; the other parts are summarised separately)" if part and part[1] > 1 else ""
    # A user-assistant chat: the memory is the user's (the assistant's small talk is not about them).
    whose = (
        "The assistant's own words are not memories: list facts about the user, and of the assistant only "
        "what it promised to do. "
        if speakers and "assistant" in (s.lower() for s in speakers)
        else ""
    )
    return [
        {
            "role": "system",
            "content": "You write long-term memories of a conversation. Answer in JSON only.\n\n" + SUMMARY_EXAMPLE,
        },
        {
            "role": "user",
            "content": f"Conversation{who} of {date}{where}:\n{dialogue}\n\n"
            "List every fact about each speaker worth remembering in later conversations "
            "(events, plans, preferences, feelings, changes, people and things they mention), one short "
            "third-person sentence each that names the speaker, with the numbers of the turns it comes from. "
            "Write only facts that can be deduced from what the speakers say; guess nothing. "
            f"{whose}Leave none out. Answer as "
            '{"memories": [{"speaker": "...", "event": "...", "turns": [0]}]}',
        },
    ]


def _speaker_of(it: dict, turns: list[int], turn_speakers: list[str]) -> str | None:
    """The session speaker a memory is about: the one it names, else the speaker of its first turn,
    else the only person (not the assistant) of the session; None when none fits."""
    speakers = {sp.lower(): sp for sp in dict.fromkeys(turn_speakers) if sp}
    named = str(it.get("speaker", "")).strip().lower()
    if named in speakers:
        return speakers[named]
    if turns:
        return turn_speakers[turns[0]]
    people = [sp for low, sp in speakers.items() if low != ASSISTANT]
    return people[0] if len(people) == 1 else None


def _stems(text: str) -> set[str]:
    # a word's first five letters: "adopted" and "adoption" meet, "Lisbon" and "listen" do not
    return {w[:5] for w in content_words(text)}


def _grounded(event: str, turns: list[int], lo: int, hi: int, turn_texts: list[str], names: set[str]) -> bool:
    """A memory says something its source turns say: one of its content words (speaker names aside) is
    in the turns it cites, or in the part's turns when it cites none. A small model copies the prompt's
    worked example ("... booked a flight to Lisbon ...") into sessions that never mention it."""
    source = set().union(*(_stems(turn_texts[t]) for t in (turns or range(lo, hi))))
    return bool((_stems(event) - names) & source)


def validate_memories(
    raw, n_turns: int, lo: int = 0, turn_speakers: list[str] | None = None, turn_texts: list[str] | None = None
) -> list[dict]:
    """The memories of an answer; turn numbers outside [lo, n_turns) are dropped.

    With `turn_speakers` (each turn's speaker) a memory must be a statement about one of the session's
    speakers, in the third person: not addressed to someone ("great to hear that you ..."), not a
    question, and not the assistant's words given as a fact about someone else (a memory about the
    assistant itself, e.g. what it promised, may come from its turns). With `turn_texts` (each turn's
    text) it must also be grounded in its turns (`_grounded`)."""
    names = {w[:5] for sp in turn_speakers or [] for w in content_words(sp)}
    items = raw.get("memories") if isinstance(raw, dict) else raw
    if not isinstance(items, list):
        raise ValueError("expected a list of memories")
    out = []
    for it in items:
        if not isinstance(it, dict) or not isinstance(it.get("event", ""), str):
            continue
        event = " ".join(str(it.get("event", "")).split())[:400]
        if len(re.findall(r"[^\W\d_]{2,}", event)) < 3:  # placeholders like "..." are not memories
            continue
        turns = sorted({t for t in it.get("turns", []) or [] if isinstance(t, int) and lo <= t < n_turns})
        if turn_texts is not None and not _grounded(event, turns, lo, n_turns, turn_texts, names):
            continue
        speaker: str | None = str(it.get("speaker", ""))[:80]
        if turn_speakers is not None:
            if event.endswith("?") or _SECOND_PERSON.search(event):
                continue
            speaker = _speaker_of(it, turns, turn_speakers)
            if speaker is None:
                continue
            only_assistant = turns and all(turn_speakers[t].lower() == ASSISTANT for t in turns)
            if only_assistant and speaker.lower() != ASSISTANT:
                continue
        out.append({"speaker": speaker, "event": event, "turns": turns})
    if not out:
        raise ValueError("no usable memory in the answer")
    return out


# --- Phase I-2: relation between an earlier memory and a new one -------------------

RELATION_LABELS = (*RELATIONS, "None")


def relation_schema(explain: bool = False) -> dict:
    """One pair's label; with `explain`, a one-sentence explanation first (the official prompt asks
    "- Explanation: ... - Relation: ..."), so the label is written after the reasoning."""
    props: dict[str, dict] = {}
    if explain:
        props["explanation"] = {"type": "string"}
    props["relation"] = {"type": "string", "enum": list(RELATION_LABELS)}
    return {"type": "object", "properties": props, "required": list(props)}


RELATION_SCHEMA = relation_schema()

# The relation set and its reading as the authors define it: always "A <relation> B", A the earlier
# memory and B the later one (note Reason: A is due to B, i.e. B explains A).
RELATION_GUIDE = """Relations, read as "A <relation> B" (A is the earlier memory, B the later one):
- Changed: A changed into B (a preference, state, plan or fact about the person is different in B).
- Cause: A causes B.
- Reason: A is due to B (B is the reason for A).
- HinderedBy: B can be hindered by A, and vice versa (one gets in the way of the other).
- React: B is a speaker's reaction to A.
- Want: because of A, a speaker wants B.
- SameTopic: A and B are about the same topic, and none of the relations above holds.
- None: no relation.
Mind which speaker each memory is about: two speakers doing similar things is not Changed, Cause or
Reason. Give a relation other than None only with clear evidence in the memories and the
conversations they come from; otherwise answer None."""


def dialogue_heading(time: str, which: str) -> str:
    """The line above one conversation of a pair; `which` is "A", "B" or "A and B"."""
    return f"Conversation of {time}, where {which} {'come' if ' and ' in which else 'comes'} from:"


def pair_text(a: dict, b: dict, dialogues: list[tuple[str, str]]) -> str:
    """One pair: the conversations (heading, text) it comes from, then A and B (time, speaker, event)."""
    convs = [f"{head}\n{text or '(no dialogue kept)'}" for head, text in dialogues]
    mems = []
    for tag, m in (("A", a), ("B", b)):
        who = f" [about {m['speaker']}]" if m.get("speaker") else ""
        mems.append(f"{tag} ({m['time']}){who}: {m['event']}")
    return "\n\n".join([*convs, "\n".join(mems)])


# One pair per call, as the official code asks (the label after its explanation with `explain`).
EXPLAIN_ASK = (
    "For this pair, first explain in one short sentence the relation of B to A, then name it. "
    'Answer as {"explanation": "...", "relation": "None"}'
)
PLAIN_ASK = 'Name the relation of B to A. Answer as {"relation": "None"}'


def relation_messages(a: dict, b: dict, dialogues: list[tuple[str, str]], explain: bool = False) -> list[dict]:
    """`a`, `b`: the pair in time order, each {"time", "event", "speaker"}; `dialogues`: (heading, text)
    of the conversations they come from (linking.classify fits them to the window)."""
    ask = EXPLAIN_ASK if explain else PLAIN_ASK
    return [
        {"role": "system", "content": "You relate memories of a person across conversations. Answer in JSON only."},
        {"role": "user", "content": RELATION_GUIDE + "\n\n" + pair_text(a, b, dialogues) + "\n\n" + ask},
    ]


def validate_relation(raw) -> str:
    """The pair's label from the fixed set (case-insensitive). A model that answers in the list form
    {"relations": [{"pair": 0, "relation": ...}]} is read by its first item for pair 0 (or without a
    pair number): an item for any other pair answers nothing that was asked."""
    canon = {r.lower(): r for r in RELATION_LABELS}
    item = raw if isinstance(raw, dict) and "relation" in raw else None
    if item is None and isinstance(raw, dict) and isinstance(raw.get("relations"), list):
        item = next((it for it in raw["relations"] if isinstance(it, dict) and it.get("pair", 0) == 0), None)
    label = canon.get(str(item.get("relation", "")).strip().lower()) if isinstance(item, dict) else None
    if label is None:
        raise ValueError("no valid relation label in the answer")
    return label


# Label scoring (linking.classify, mode "score"): one pair per prompt, the relation guide first (the
# same tokens for every pair, so llama.cpp keeps them in its KV cache), the answer not generated but
# each label's probability read from the model (LLMSession.label_probabilities).
SCORE_ASK = "Which relation holds between A and B? Answer with one word: " + ", ".join(RELATION_LABELS) + "."


def relation_score_messages(a: dict, b: dict, dialogues: list[tuple[str, str]] | None = None) -> list[dict]:
    """The prompt whose answer is scored over RELATION_LABELS; arguments as in relation_messages."""
    return [
        {"role": "system", "content": "You relate memories of a person across conversations."},
        {"role": "user", "content": RELATION_GUIDE + "\n\n" + pair_text(a, b, dialogues or []) + "\n\n" + SCORE_ASK},
    ]


# --- Phase II-2: refine timelines for the current dialogue -------------------------

REFINE_SCHEMA = {
    "type": "object",
    "properties": {"timelines": {"type": "array", "items": {"type": "string"}}},
    "required": ["timelines"],
}


REFINE_ASK = (
    "Rewrite {which} for the agent's next reply in the current conversation: say what happened, in "
    "order, and how the events lead to one another. Where the relation given between two events does "
    "not fit them, connect them in the way that reads naturally instead. Keep dates, who each event "
    "is about and how things changed; leave out what does not help the next reply. {length}"
)


def refine_messages(dialogue: str, timelines: list[str], sentences: str = "") -> list[dict]:
    """Phase II-2: the relation definitions, the current dialogue and the timelines, one refined text
    per timeline (the official instruction, in our words: one call per timeline in the official code;
    several timelines per call where the caller batches them). `sentences` sizes the answer ("": no
    length asked, as the official instruction; the caller's answer tokens bound it)."""
    numbered = "\n".join(f"Timeline {i}: {t}" for i, t in enumerate(timelines))
    which = "the timeline" if len(timelines) == 1 else "each timeline"
    ask = REFINE_ASK.format(which=which, length=f"Write {sentences} per timeline." if sentences else "").rstrip()
    return [
        {"role": "system", "content": "You prepare memories for a conversational agent. Answer in JSON only."},
        {
            "role": "user",
            "content": RELATION_GUIDE.split("\nMind which speaker")[0] + "\n\n"
            f"Current conversation:\n{dialogue}\n\nPast memory timelines (events linked by the relations above, "
            f"oldest first):\n{numbered}\n\n{ask} Answer as "
            f'{{"timelines": ["...", ...]}} with exactly {len(timelines)} entries, one per timeline, in order.',
        },
    ]


def _refined_text(item) -> str:
    """A refined timeline as text: a string as it is; an object by its sentences (its string values of
    three words or more, e.g. {"relation": "None", "event1": "...", "event2": "..."}), never its repr;
    anything else is no text ("")."""
    if isinstance(item, str):
        return " ".join(item.split())[:1200]
    if isinstance(item, dict):
        parts = [" ".join(v.split()) for v in item.values() if isinstance(v, str) and len(v.split()) >= 3]
        return " ".join(p if p.endswith((".", "!", "?")) else p + "." for p in parts)[:1200]
    return ""


def validate_refined(raw, n: int) -> list[str]:
    """One text per timeline ("" where the answer gave none: the caller keeps the raw timeline)."""
    items = raw.get("timelines") if isinstance(raw, dict) else raw
    if not isinstance(items, list) or not items:
        raise ValueError("expected a list of refined timelines")
    if len(items) != n:
        raise ValueError(f"expected {n} refined timelines, got {len(items)}")
    out = [_refined_text(t) for t in items]
    if not any(out):
        raise ValueError("no refined timeline is text")
    return out
