"""`python -m bench scale` on tiny synthetic users: the fields, the plot, and that the timed
operations really retrieve something."""

import json

from bench import scale


def test_synthetic_user_is_structured():
    u = scale.SyntheticUser(200, seed=1)
    assert len(u.texts) == len(u.topics) == u.vectors.shape[0] == 200
    assert abs(float((u.vectors**2).sum(axis=1).mean()) - 1.0) < 1e-4
    same = [i for i in range(1, 200) if u.topics[i] == u.topics[0]]
    other = [i for i in range(1, 200) if u.topics[i] != u.topics[0]]
    assert (u.vectors[same] @ u.vectors[0]).mean() > (u.vectors[other] @ u.vectors[0]).mean() + 0.3
    assert u.session_of(9) == u.session_of(0) != u.session_of(10) and u.date_of(0) < u.date_of(10)


def test_one_size_runs_the_engine_operations():
    r = scale.run_one(150, seed=0, reps=4, secom_retriever="hybrid")
    for k in scale.TIMED:
        assert r[k] is not None and r[k] >= 0, k
    assert r["n"] == 150 and r["edges"] > 0 and r["segments"] > 0
    assert r["timelines_per_retrieve"] > 0  # retrieve + untangle found timelines
    assert r["link_llm_pairs"] == 3  # j candidates an LLM would label


def test_command_writes_sizes_and_loglog_plot(tmp_path):
    out = tmp_path / "scale.json"
    assert scale.main(["--sizes", "60,120", "--reps", "3", "--out", str(out)]) == 0
    d = json.loads(out.read_text())
    assert [s["n"] for s in d["sizes"]] == [60, 120]
    for s in d["sizes"]:
        assert set(s) >= set(scale.TIMED)
    assert (tmp_path / "scale_scale.png").stat().st_size > 5000
