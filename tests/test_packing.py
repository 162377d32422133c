"""memory.packing: the rules that fit ranked memory units into a reply's token budget."""

from memory.packing import Piece, Unit, pack, pack_anchors_first
from memory.tokens import count_tokens

SEP = count_tokens("\n\n")


def unit(uid, *texts, anchor=0, keys=None):
    pieces = [Piece(t, (f"{uid}:{i}",), key=(keys or {}).get(t, f"{uid}:{i}")) for i, t in enumerate(texts)]
    return Unit(uid, pieces, anchor=anchor)


def test_pack_takes_whole_units_then_cuts_the_next_around_its_anchor():
    a = unit("a", "alpha beta gamma")
    b = unit("b", "one", "two", "three", "four", "five", anchor=2)
    cost_a = count_tokens("alpha beta gamma")
    # room for a, the separator and three pieces of b (3 tokens + 2 newlines)
    p = pack([a, b], cost_a + SEP + 5)
    assert p.units == ["a", "b"]
    assert p.covered == {"a:0", "b:1", "b:2", "b:3"}  # around the anchor "three"
    assert p.tokens <= cost_a + SEP + 5 and count_tokens(p.text) <= p.tokens
    # a unit whose anchor does not fit adds nothing, and the context ends there
    c = unit("c", "x")
    p = pack([a, unit("big", "word " * 50), c], cost_a + 3)
    assert p.units == ["a"] and p.covered == {"a:0"}
    # nothing fits
    assert pack([a], 1).covered == set()


def test_anchors_first_shows_every_anchor_before_any_history():
    """Where whole units fit only the first timeline, anchors-first shows all three retrieved memories."""
    units = [unit(u, "one", "two", "three", "four", "five", anchor=2) for u in "abc"]
    anchors = 3 * 1 + 2 * SEP  # "three" is one token
    assert pack(units, anchors + 4).units == ["a"]
    p = pack_anchors_first(units, anchors)
    assert p.units == ["a", "b", "c"] and p.covered == {"a:2", "b:2", "c:2"}
    # what is left grows the timelines in rank order, one memory each per round, after the anchor first
    p = pack_anchors_first(units, anchors + 2 + 2 + 2)  # one more memory (1 token + 1 newline) for each of three
    assert p.covered == {"a:2", "a:3", "b:2", "b:3", "c:2", "c:3"}
    p = pack_anchors_first(units, anchors + 2 * 4)  # four: a grows on both sides
    assert p.covered >= {"a:1", "a:2", "a:3"} and "c:1" not in p.covered
    assert count_tokens(p.text) <= p.tokens <= anchors + 8
    # a budget that holds the whole of them holds what pack holds
    assert pack_anchors_first(units, 10_000).covered == pack(units, 10_000).covered


def test_anchors_first_shows_a_memory_once():
    """Two timelines through the same memories: the second stops where the first already shows them,
    and a unit whose anchor is shown already is left out."""
    keys = {"common": "m1", "mine": "m2", "theirs": "m3"}
    a = unit("a", "common", "mine", anchor=1, keys=keys)
    b = unit("b", "common", "theirs", anchor=1, keys=keys)
    again = unit("again", "mine", anchor=0, keys=keys)
    p = pack_anchors_first([a, b, again], 10_000)
    assert p.units == ["a", "b"]
    assert p.text.count("common") == 1 and p.text.count("mine") == 1


def test_a_retrieved_memory_next_to_an_earlier_timeline_joins_it():
    """Retrieved memories next to an earlier timeline's run join that run (with their links) instead of
    being shown again as timelines of their own; one further away starts its own run, and the two
    grow towards each other without showing a memory twice."""
    path = ["m1", "m2", "m3"]

    def timeline(anchor):
        pieces = [Piece(t, (t,), key=t, link="" if i == 0 else "-(Cause)- ") for i, t in enumerate(path)]
        return Unit(f"t:{path[anchor]}", pieces, sep=" ", anchor=anchor)

    assert pack([timeline(2), timeline(1)], 10_000).units == ["t:m3", "t:m2"]  # whole: the same memories twice
    chain = "m1 -(Cause)- m2 -(Cause)- m3"
    p = pack_anchors_first([timeline(2), timeline(1), timeline(0)], count_tokens(chain) + 4)
    assert p.units == ["t:m3"] and p.text == chain and count_tokens(p.text) <= p.tokens
    p = pack_anchors_first([timeline(2), timeline(0)], 10_000)  # m1 is two memories from m3
    assert p.units == ["t:m3", "t:m1"] and p.text.count("m2") == 1
    # a run that starts after its timeline's first memory goes without that memory's link
    assert pack_anchors_first([timeline(2)], count_tokens("m3")).text == "m3"


def test_the_first_timelines_go_in_whole_before_the_other_anchors():
    """whole_first = 1: the best-ranked timeline is read whole (root to leaf), then the other retrieved
    memories; with whole_first = 0 the same budget shows every anchor first."""
    units = [unit(u, "one", "two", "three", "four", "five", anchor=2) for u in "abc"]
    whole_a = 5 * 1 + 4  # five one-token pieces and four newlines
    budget = whole_a + 2 * (SEP + 1)
    p = pack_anchors_first(units, budget, whole_first=1)
    assert p.units == ["a", "b", "c"]
    assert {f"a:{i}" for i in range(5)} <= p.covered and {"b:2", "c:2"} <= p.covered
    assert "b:1" not in p.covered and count_tokens(p.text) <= p.tokens <= budget
    q = pack_anchors_first(units, budget)  # anchors first: a grows no further than the others
    assert not {f"a:{i}" for i in range(5)} <= q.covered
    # a whole timeline that does not fit is grown around its anchor as far as the budget goes
    p = pack_anchors_first(units, 3, whole_first=1)
    assert p.units == ["a"] and p.covered == {"a:2", "a:3"}  # after the anchor first, as _cut grows
