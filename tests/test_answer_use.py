"""Did the reply use the memory (issue 47, item 5): through the real reply path (MiniLM, embedded Chroma,
memory built offline as on the bundled model) with a scripted LLM, each reply's trace names the memory line
its words came from, says "no memory used" when none, and warns when the reply names a replaced value.

The replies are scripted: what is tested is the check, never a model's wording.
"""

from __future__ import annotations

import pytest

from memory.answer_use import Line, marked, match, named_date, words
from memory.records import Turn
from memory.settings import Options
from memory.trace_types import TraceDict
from sessions import upkeep
from tests.fakes import ScriptedLLM, exchanges, offline_agent
from ui.see_why import trace_html

PORTO = "I live in Porto with my two roommates."
LISBON = "I live in Lisbon now, the move went smoothly."
REX = "Last month I adopted a beagle puppy. His name is Rex."


@pytest.fixture(scope="module")
def agent(tmp_path_factory, minilm):
    """Three sessions closed offline: Porto and a distractor, the beagle Rex and Spanish, the move to Lisbon."""
    tmp = tmp_path_factory.mktemp("answer-use")
    llm = ScriptedLLM("ok")
    a = offline_agent(tmp, minilm, llm)
    for s in (
        exchanges("s1", "2023-01-05", (PORTO, "Porto is lovely."), ("I baked banana bread for my colleagues.", "Yum!")),
        exchanges("s2", "2023-02-10", (REX, "A beagle!"), ("I started learning Spanish with a phone app.", "Great.")),
        exchanges("s3", "2023-04-03", (LISBON, "Congratulations on the move!")),
    ):
        a.close_session("u", s, llm_steps=False)
    a.scripted = llm  # type: ignore[attr-defined]
    return a


def ask(agent, strategy: str, question: str, reply: str, history: list[Turn] | None = None):
    agent.scripted.script = [reply]
    events = list(agent.reply("u", history or [], question, "2023-05-01", Options(strategy=strategy)))
    trace = events[-1].trace
    assert trace.error is None and events[-1].text == reply
    return trace


def test_the_changed_fact_is_recorded_as_the_check_expects(agent):
    g = agent.theanine.graph("u")
    porto = next(m.id for m in g.memories() if "Porto" in m.event)
    assert g.superseded_by(porto) is not None and "Lisbon" in g.memory(g.superseded_by(porto)).event


@pytest.mark.parametrize("strategy", ["theanine", "secom"])
def test_a_reply_that_copies_a_memorys_value_names_that_memory(agent, strategy):
    trace = ask(agent, strategy, "What's my dog's name?", "Your beagle is called Rex.")
    use = trace.answer_use
    assert use["checked"] >= 2 and use["sources"], use
    best = use["sources"][0]
    assert "Rex" in best["text"] and "Rex" in best["shared"] and "Rex" in best["values"]
    assert best["kind"] == ("memory" if strategy == "theanine" else "segment")
    assert use["stale"] == []
    html = trace_html(trace.to_dict())
    assert 'id="why-answer"' in html and 'data-used="1"' in html and "<mark>Rex</mark>" in html


def test_a_reply_naming_the_old_city_after_a_change_is_flagged(agent):
    trace = ask(agent, "theanine", "Where do I live now?", "You live in Porto with your roommates.")
    use = trace.answer_use
    [stale] = use["stale"]
    assert "Porto" in stale["old"]["event"] and "Lisbon" in stale["current"]["event"]
    assert stale["named"] == ["Porto"] and stale["current_values"] == ["Lisbon"]
    best = use["sources"][0]  # the words came from the replaced memory, and it is marked so
    assert "Porto" in best["text"] and "Lisbon" in best["superseded_by"]["event"]
    html = trace_html(trace.to_dict())
    assert 'class="mc-status mc-error mc-stale"' in html and 'data-stale="1"' in html


@pytest.mark.parametrize(
    "reply", ["You live in Lisbon.", "You moved from Porto to Lisbon.", "You live in Lisbon now; Porto was before."]
)
def test_a_reply_naming_the_current_city_is_not_flagged(agent, reply):
    use = ask(agent, "theanine", "Where do I live now?", reply).answer_use
    assert use["stale"] == [] and any("Lisbon" in s["text"] for s in use["sources"]), use


@pytest.mark.parametrize("strategy", ["theanine", "secom"])
def test_an_unrelated_reply_used_no_memory(agent, strategy):
    trace = ask(agent, strategy, "How are you today?", "I'm doing fine, thank you for asking! How about you?")
    assert trace.answer_use["sources"] == [] and trace.answer_use["stale"] == []
    assert trace.answer_use["checked"] >= 2  # there was memory to use
    html = trace_html(trace.to_dict())
    assert 'data-used="0"' in html and "No memory used" in html


def test_the_persons_own_words_are_not_the_memorys(agent):
    """Echoing the message (or an earlier turn of the session) is not using the memory."""
    history = [Turn("user", "Guess what, I adopted a beagle and his name is Rex."), Turn("assistant", "Cute!")]
    use = ask(agent, "theanine", "Do you remember my beagle Rex?", "Your beagle Rex!", history).answer_use
    assert use["sources"] == [], use


def test_without_memory_or_without_a_reply_there_is_nothing_to_check(agent):
    trace = ask(agent, "none", "What's my dog's name?", "Rex.")
    assert trace.answer_use == {} and 'id="why-answer"' not in trace_html(trace.to_dict())
    agent.scripted.script = [""]
    events = list(agent.reply("u", [], "What's my dog's name?", "2023-05-01", Options(strategy="theanine")))
    assert events[-1].trace.answer_use == {}


def test_forgetting_a_memory_takes_it_out_of_the_check(agent):
    t = ask(agent, "theanine", "Where do I live now?", "You live in Porto with your roommates.").to_dict()
    porto = t["answer_use"]["stale"][0]["old"]
    f = upkeep.Forgotten.of(porto["id"], porto["event"], {})
    scrubbed = upkeep.trace(t, f)
    assert scrubbed["answer_use"]["stale"] == []
    assert porto["id"] not in {s["id"] for s in scrubbed["answer_use"]["sources"]}
    assert "Porto with my two roommates" not in str(scrubbed)


def test_the_page_escapes_what_it_quotes_and_marks_whole_words():
    trace: TraceDict = {
        "strategy": "theanine",
        "answer_use": {
            "checked": 1,
            "sources": [
                {
                    "kind": "memory",
                    "id": "s1:m0",
                    "text": "user: my cat <img src=x onerror=alert(1)> Rex",
                    "shared": ["Rex"],
                }
            ],
            "stale": [],
        },
    }
    html = trace_html(trace)
    assert "<img" not in html and "&lt;img" in html and "<mark>Rex</mark>" in html
    assert [p for p, hit in marked("Rexford and Rex", ["rex"]) if hit] == ["Rex"]
    assert [w.value for w in words("Rex is here. I met Rex")] == [False, False, False, False, False, True]


def test_a_secom_reply_naming_the_old_city_is_flagged_from_the_graph_of_the_same_turns(agent):
    """SeCom's segments know no change; the THEANINE graph built from the same sessions does."""
    use = ask(agent, "secom", "Where do I live now?", "You live in Porto.").answer_use
    [stale] = use["stale"]
    assert stale["named"] == ["Porto"] and "Lisbon" in stale["current"]["event"]
    assert ask(agent, "secom", "Where do I live now?", "You live in Lisbon.").answer_use["stale"] == []


def test_two_loose_chatty_words_are_no_source_but_a_phrase_a_name_or_the_lines_date_is():
    family = Line(
        "segment", "s1:seg0", "Maria: It's wonderful to have such a supportive and loving family.", "2023-05-08"
    )
    assert match("I'm so happy you have such supportive friends and family.", family, set()) is None
    yoga = Line("memory", "s2:m3", "user: I started aerial yoga on Sundays.")
    src = match("You do aerial yoga.", yoga, set())
    assert src is not None and src["span"] == "aerial yoga" and src["values"] == []
    assert match("You do aerial yoga.", yoga, {"aerial"}) is None  # the person's own word does not count
    dated = match("That was on 8 May.", family, set())
    assert dated is not None and dated["values"] == ["8 May"]
    assert [named_date(r, "2023-05-08") for r in ("May 8th", "2023-05-08", "you may be 8", "in May 2023")] == [
        "8 May",
        "8 May 2023",
        "",
        "May 2023",
    ]


def test_a_one_word_answer_names_the_only_line_that_holds_its_word():
    """ "What am I allergic to?" -> "Peanuts, you said." : one shared word, but no other line holds it."""
    from memory.answer_use import keys

    peanuts = Line("memory", "s1:m3", "user: I'm allergic to peanuts, so I have to be careful at parties.")
    said = keys("What am I allergic to?")
    assert match("You're allergic to peanuts.", peanuts, said) is None  # one loose word: not enough alone
    src = match("You're allergic to peanuts.", peanuts, said, rare=frozenset(keys("peanuts")))
    assert src is not None and src["shared"] == ["peanuts"]
    assert match("You're allergic to nuts.", peanuts, said, rare=frozenset(keys("nuts"))) is None  # not its word
