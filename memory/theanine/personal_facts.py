"""Short first-person facts that carry no name, figure, place or role: "I love jazz.", "I have a dog.",
"My sister is pregnant.", "I work at a bakery.", "I play guitar.", "I am allergic to peanuts.",
"I live alone.", "I hate running." (extract.is_short_fact keeps them).

A fact is told by its verb and its object; small talk uses the same openers with a pronoun or a
mood instead ("I love it.", "I have a question.", "I'm tired now.", "My bad.", "My day was good."),
so each pattern names what may follow. Test sets of both kinds: tests/test_short_facts.py.
"""

from __future__ import annotations

import re

# What a fact's object is not: a pronoun or a word of small talk ("I love that!", "I see you.").
_NOT_OBJECT = (
    r"(?:it|that|this|them|you|your|yours|those|these|him|her|one|everything|so|too|the idea|the way|"
    r"a question|a feeling|an idea|a point|a minute|a moment|a sec|a second|a clue|no idea|a great time|"
    r"a good time|fun|a blast|to|what|how|when|where|why|if|been|had|done|seen|heard|got|gotten|made|said|told|"
    r"always|ever|never|already|a lot of fun|a break|a look|care)\b"
)
_SUBJ = r"(?:i|we)"
_ADV = r"(?:(?:really|also|absolutely|totally|just|still|kinda|do|actually|usually|mostly|honestly) )?"
_NEG = r"(?:(?:don't|do not|never) )?"  # "I don't eat meat." is a fact; "I don't know." has no fact verb
_VERB = {
    # liking and disliking something named
    "taste": r"(?:love|like|enjoy|hate|adore|dislike|prefer|detest|loathe)",
    # having or keeping something
    "have": r"(?:have|own|keep|raise|foster|rent|share)",
    # what one does: an activity, a language, a diet, a treatment
    "do": (
        r"(?:play|practi[cs]e|speak|study|teach|drive|ride|cook|bake|knit|sew|paint|draw|sing|dance|swim|run|"
        r"jog|hike|climb|surf|ski|skate|garden|volunteer|collect|write|read|eat|drink|smoke|vape|wear|take|"
        r"meditate|fish|hunt|sail|box|lift|train|coach|go (?:\w+ing)|broke|sprained|injured|hurt)"
    ),
}
# "I love jazz.", "I have a dog.", "I don't eat meat.", "I knit." (an activity needs no object)
_I_VERB = re.compile(
    rf"^{_SUBJ} {_ADV}{_NEG}(?:{_VERB['taste']}|{_VERB['have']}|{_VERB['do']})\b(?: (?!{_NOT_OBJECT})\w|[.!]?$)"
)
# "I live alone.", "I work nights.", "I grew up on a farm.": where one lives and works is a fact whatever follows.
_I_LIVE = re.compile(rf"^{_SUBJ} {_ADV}(?:live|work|study|grew up|was born|commute)\b")
# "I'm allergic to peanuts.", "I'm vegan.", "I'm afraid of spiders.", "I'm learning Spanish."
_LASTING = (
    r"allergic|vegan|vegetarian|pescatarian|pregnant|married|single|divorced|engaged|widowed|retired|"
    r"unemployed|self-employed|diabetic|asthmatic|epileptic|deaf|blind|colou?rblind|left-handed|"
    r"right-handed|lactose|gluten|intolerant|introverted|an introvert|an extrovert|extroverted|religious|"
    r"christian|muslim|jewish|catholic|buddhist|hindu|atheist|gay|lesbian|bisexual|straight|trans|adopted|"
    r"a twin|an only child|autistic|dyslexic|sober|homeschooled|disabled|an orphan|a morning person|"
    r"a night owl"
)
_I_AM = re.compile(
    rf"^(?:i'm|i am|we're|we are) {_ADV}(?:(?:{_LASTING})\b|(?:afraid|scared|terrified) of (?!{_NOT_OBJECT})\w|"
    rf"(?:good|great|bad|terrible) at (?!{_NOT_OBJECT})\w|into (?!{_NOT_OBJECT})\w|"
    rf"(?:learning|studying|training for|renovating|saving for) (?!{_NOT_OBJECT})\w)"
)
# "My sister is pregnant.", "My dad has diabetes.", "Our house is small.", "My hamster died."; not "My bad.",
# "My pleasure!", "My day was good." (a mood, not a fact).
_MOOD_NOUNS = r"(?:bad|pleasure|goodness|god|gosh|word|heart|day|weekend|week|morning|evening|night|afternoon|thoughts)"
_MY = re.compile(
    rf"^(?:my|our) (?!{_MOOD_NOUNS}\b)(?:\w+ ){{0,2}}?(?:is|are|was|has|have|lives|works|plays|loves|likes|hates|"
    r"died|passed away|got|keeps|studies|runs|owns|drives)\b"
)
_OPENERS = re.compile(r"^(?:(?:oh|ah|and|also|so|well|yeah|yes|actually|btw|but|plus|anyway),? )+")


def is_personal_fact(sentence: str) -> bool:
    """A short first-person (or "my ...") statement of a lasting fact: a taste, a possession, an
    activity, where one lives or works, a lasting condition, a fact about one's family or things."""
    low = " ".join(sentence.lower().replace("’", "'").split())
    low = _OPENERS.sub("", low).rstrip("!. ")
    low = re.sub(r"[,;:].*$", "", low)  # the first clause says it ("I play guitar, badly")
    if not low or low.endswith("?"):
        return False
    return any(rx.search(low) for rx in (_I_VERB, _I_LIVE, _I_AM, _MY))
