"""`python -m bench relations`: the relation step on pairs whose answer is known, with and
without the explanation before each label, against the scripted server (known answers, every request
recorded)."""

import json

from bench import relations
from bench.ku_histories import histories
from tests.llm_server import ok


def answer(label: str, explain: bool = False) -> str:
    why = {"explanation": "A and B are about the same fact."} if explain else {}
    return json.dumps({**why, "relation": label})


def test_every_history_gives_four_known_pairs():
    ps = relations.probes(histories(6))
    assert len(ps) == 6 and all(list(p.later) == list(relations.PAIR_KINDS) for p in ps)
    for p in ps:
        assert p.a.time < p.later["change"].time and p.a.excerpt  # the first statement, with its session's dialogue
        assert all(m.session_id != p.a.session_id for m in p.later.values())


def test_scores_per_mode_from_the_labels_the_llm_gave(tmp_path, fake_endpoint):
    out = tmp_path / "relations.json"
    # each history: change right, restate wrongly Changed, other None, unrelated None; one call per pair
    per_history = ["Changed", "Changed", "None", "None"] * 6
    fake_endpoint.script(
        "relation", *[ok(answer(r)) for r in per_history], *[ok(answer(r, explain=True)) for r in per_history]
    )
    assert relations.main(["--histories", "6", "--modes", "offline,llm,llm-explain", "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["pairs"] == 24
    for mode in ("llm", "llm-explain"):
        r = d["modes"][mode]
        assert r["changed_recall"] == 1.0 and r["changed_precision"] == 0.5 and r["other_called_changed"] == 0.0
        assert r["calls"] == 24 and r["first_try_valid"] == 1.0  # one call per pair, as the official code makes
        assert r["linked"] == {"change": 1.0, "restate": 1.0, "other": 0.0, "unrelated": 0.0}
        assert r["pairs_by_offline_rule"] == 0
    assert d["modes"]["offline"]["calls"] == 0 and d["modes"]["offline"]["changed_precision"] in (None, 1.0)
    asked = [b["messages"][-1]["content"] for b in fake_endpoint.bodies("relation")]
    assert len(asked) == 48
    assert not any("first explain" in a for a in asked[:24]) and all("first explain" in a for a in asked[24:])
    # each pair's prompt holds both sessions' whole dialogue
    pairs = [(p.a, p.later[k]) for p in relations.probes(histories(6)) for k in relations.PAIR_KINDS]
    for prompt, (a, b) in zip(asked[:24], pairs, strict=True):
        assert all(line in prompt for m in (a, b) for line in m.excerpt.split("\n"))
    assert (tmp_path / "relations_labels.png").exists()
