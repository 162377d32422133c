"""Delete means gone, in the whole timeline See why draws: a forgotten memory that did not reach the
reply is taken out of the kept timeline's chain."""

from memory.trace_types import ChainMemory, TraceDict
from sessions import upkeep


def test_a_forgotten_memory_leaves_the_chain_of_a_timeline_it_did_not_reach():
    f = upkeep.Forgotten.of("s1:m0", "user: I adopted a cat named Tom.", {})
    chain: list[ChainMemory] = [
        {"id": "s1:m0", "event": "user: I adopted a cat named Tom.", "relation": "", "used": False},
        {"id": "s2:m0", "event": "user: Tom chewed my shoes.", "relation": "Cause", "used": True},
    ]
    t: TraceDict = {
        "timelines_raw": [
            {"anchor": "s2:m0", "nodes": ["s2:m0"], "text": "[user: Tom chewed my shoes.]", "chain": chain}
        ],
        "timelines_refined": [""],
    }
    out = upkeep.trace(t, f)
    assert [m["id"] for m in out["timelines_raw"][0]["chain"]] == ["s2:m0"]
    assert "adopted" not in str(out)
    assert len(t["timelines_raw"][0]["chain"]) == 2  # the input is not changed
