"""`python -m bench cost`: the calls counted from the agent's traces match the engine's design
(THEANINE: refine + reply; SeCom: reply) and the official patterns are derived from the same run."""

import json

from bench import cost
from memory.design import REFINE_TIMELINES
from memory.settings import Options, Settings


def test_calls_per_reply_and_close_match_the_design(tmp_path, fake_embedder):
    agent = cost.make_agent(Settings(data_dir=tmp_path), tmp_path, fake_embedder, llm_instance=cost.StandInLLM())
    sessions = cost.synthetic_sessions(3, turns=8)
    out = cost.run(agent, sessions, ["What did my puppy chew?", "How is pottery going?"], options=Options())
    r = out["replies"]
    # the first REFINE_TIMELINES timelines that reached the reply are refined, one call each (the official
    # code refines its k = 3), then the reply
    n = r["theanine"]["timelines_per_reply"]
    refine = r["theanine"]["by_purpose"]["refine"]
    assert n >= 1 and 1 <= refine <= min(REFINE_TIMELINES, n) and r["theanine"]["calls_per_op"] == refine + 1
    assert r["theanine"]["by_purpose"] == {"refine": refine, "reply": 1.0}
    assert r["secom"]["calls_per_op"] == 1 and r["secom"]["by_purpose"] == {"reply": 1.0}
    assert r["none"]["calls_per_op"] == 1
    assert all(x["errors"] == 0 for x in r.values())
    assert r["theanine"]["tokens_per_op"] > r["none"]["tokens_per_op"] > 0  # memory in the prompt costs tokens
    # closes: summarise + segment, plus one relation call per candidate pair once earlier memories exist
    purposes = [c["by_purpose"] for c in out["close_each"]]
    pairs = [c["relation_pairs"] for c in out["close_each"]]  # counted in each close's trace
    assert purposes[0] == {"summarise": 1, "segment": 1} and pairs[0] == 0
    assert all(
        n > 0 and p == {"summarise": 1, "relation": n, "segment": 1}
        for p, n in zip(purposes[1:], pairs[1:], strict=True)
    )
    off = cost.official(out, Options())
    assert off["theanine"]["reply_calls_per_op"] == r["theanine"]["timelines_per_reply"] + 1
    assert off["theanine"]["close_calls_per_op"] == sum(1 + p for p in pairs) / len(pairs)
    assert off["secom"]["reply_calls_per_op"] == 1.0


def test_command_writes_json_and_plot(tmp_path):
    out = tmp_path / "cost.json"
    assert cost.main(["--out", str(out), "--sessions", "2", "--questions", "2"]) == 0
    d = json.loads(out.read_text())
    assert set(d) >= {"ours", "official", "config"} and set(d["ours"]["replies"]) == {"theanine", "secom", "none"}
    assert (tmp_path / "cost_calls.png").stat().st_size > 5000
