import json

import pytest

from bench.secom import seg_metrics as M

REF = [0, 0, 0, 1, 0, 0]  # 6 units, a new segment at 3; k = max(2, round(6 / 4)) = 2


def test_window_k_rule():
    assert M.window_k(REF) == 2
    assert M.window_k([0] * 20) == 10  # one segment: round(20 / 2)
    assert M.window_k([0] * 10 + [1] + [0] * 9) == 5  # two segments: round(20 / 4)
    assert M.window_k([0, 1, 1, 1, 1, 1]) == 2  # never below 2


def test_hand_computed_near_miss():
    # hypothesis one unit early: windows (k=2) 1 and 3 of 5 disagree; no exact boundary match
    r = M.evaluate_one(REF, [0, 0, 1, 0, 0, 0])
    assert r["pk"] == pytest.approx(0.4) and r["windowdiff"] == pytest.approx(0.4)
    assert r["f1"] == 0.0 and r["score"] == pytest.approx(0.25 * 0.6 + 0.25 * 0.6)


def test_hand_computed_extra_boundary():
    # boundaries {3, 5} against {3}: P = 1/2, R = 1, F1 = 2/3; the last window disagrees
    r = M.evaluate_one(REF, [0, 0, 0, 1, 0, 1])
    assert r["precision"] == 0.5 and r["recall"] == 1.0 and r["f1"] == pytest.approx(2 / 3)
    assert r["pk"] == pytest.approx(0.2) and r["windowdiff"] == pytest.approx(0.2)
    assert r["score"] == pytest.approx(0.5 * 2 / 3 + 0.25 * 0.8 + 0.25 * 0.8)


def test_perfect_and_empty():
    assert M.evaluate_one(REF, REF)["score"] == 1.0
    assert M.evaluate_one([0] * 5, [0] * 5)["f1"] == 1.0
    assert M.boundary_prf([0, 0, 1], [0, 0, 0]) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError):
        M.evaluate_one([0, 0], [0, 0, 0])


def test_corpus_means():
    res = M.evaluate([REF, REF], [REF, [0, 0, 1, 0, 0, 0]])
    assert res["pk"] == pytest.approx(0.2) and res["f1"] == pytest.approx(0.5)
    assert res["score"] == pytest.approx(M.score_of(0.5, 0.2, 0.2)) and res["n_dialogues"] == 2


def test_conversions():
    assert M.boundaries_from_lengths([3, 3]) == REF
    assert M.ranges_from_boundaries(REF) == [(0, 2), (3, 5)]
    assert M.boundaries_from_ranges([(0, 2, "a"), (3, 5, "b")], 6) == REF
    assert M.lengths_from_boundaries(REF) == [3, 3]


def test_baselines_shapes():
    assert M.baseline_every_utterance(4) == [0, 1, 1, 1]
    assert M.baseline_no_boundary(3) == [0, 0, 0]
    assert M.baseline_even(10, 4) == [0, 0, 0, 0, 1, 0, 0, 0, 1, 0]


def test_loaders(tmp_path):
    ds = tmp_path / "d.json"
    ds.write_text(json.dumps([{"dial_id": 7, "utterances": ["a", "b", "c"], "segments": [2, 1]}]))
    d = M.load(ds, "dialseg711")[0]
    assert d.boundaries == [0, 0, 1] and d.n_segments == 2 and d.dial_id == "7"
    ti = tmp_path / "t.json"
    ti.write_text(json.dumps({"1": [["hi", "-1"], ["yo", "0"], ["cats?", "1"], ["yes", "0"]]}))
    t = M.load(ti, "tiage")[0]
    assert t.boundaries == [0, 0, 1, 0] and t.segment_lengths() == [2, 2]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"utterances": ["a"], "segments": [3]}]))
    with pytest.raises(ValueError):
        M.load(bad, "dialseg711")
    with pytest.raises(ValueError):
        M.load(ti, "nope")


def test_shared_files_load():
    from tests.conftest import SHARED_DATA

    seg = SHARED_DATA / "segmentation"
    if not seg.exists():
        pytest.skip("checks the segmentation benchmark's data files (../shared/data), which only the benchmark reads")
    d = M.load(seg / "dialseg711_dev.json", "dialseg711")
    t = M.load(seg / "tiage_dev.json", "tiage")
    assert len(d) == 200 and len(t) == 100
    assert all(len(x.boundaries) == len(x.utterances) for x in d + t)
