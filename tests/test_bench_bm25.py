"""`python -m bench bm25` at tiny sizes: the corpus, the table and the JSON fields, and (when
bm25s is installed) that both libraries rank alike."""

import json

import pytest

from bench import bm25 as bench
from tests.bench_fixtures import tiny_locomo, write_tiny


def test_corpus_keeps_locomo_segments_and_fills_with_distractors():
    c = bench.make_corpus([tiny_locomo()], 50, n_queries=10, seed=3)
    assert len(c.texts) == len(c.turns) == 50
    real = [t for t in c.turns if t]
    assert {t for ts in real for t in ts} == {f"conv-t:D{s}:{i}" for s in (1, 2) for i in range(1, 5)}
    assert all(not t for t in c.turns[len(real) :])  # distractors cover no evidence
    assert [q for q, _ in sorted(c.queries)] == [
        "What did Alice make in her pottery lessons?",
        "Where did Bob adopt Biscuit the beagle?",
    ]
    assert bench.make_corpus([tiny_locomo()], 50, 10, seed=3).texts == c.texts  # seeded


def test_command_prints_table_and_writes_json(tmp_path, capsys):
    data = write_tiny(tmp_path / "tiny.json", n_samples=2)
    out = tmp_path / "bm25.json"
    argv = ["--data", str(data), "--sizes", "40,120", "--queries", "4", "--runs", "2", "--out", str(out)]
    assert bench.main(argv) == 0
    table = capsys.readouterr().out
    assert table.startswith("| segments | library | build s |") and "| 120 | memory/bm25.py |" in table
    d = json.loads(out.read_text())
    assert [s["n"] for s in d["sizes"]] == [40, 120]
    for s in d["sizes"]:
        engine = s["rows"][0]
        assert engine["library"] == "memory/bm25.py" and engine["overlap_at_10"] == 1.0
        assert 0 < engine["recall_at_10"] <= 1  # distractors copy the same 8 turns here, so not always 1
        for r in s["rows"]:
            assert r["build_s"] >= 0 and r["add_one_s"] >= 0 and r["top10_ms_p95"] >= r["top10_ms_p50"] >= 0
            assert r["build_peak_mb"] >= 0 and r["index_mb"] >= 0


def test_bm25s_ranks_as_the_engine_when_installed():
    pytest.importorskip("bm25s")
    c = bench.make_corpus([tiny_locomo()], 300, n_queries=10, seed=0)
    r = bench.run_size(c, bench.engines(), runs=1)["rows"]
    assert [x["library"].split()[0] for x in r] == ["memory/bm25.py", "bm25s"]
    assert r[1]["overlap_at_10"] >= 0.9 and r[1]["max_score_diff"] < 1e-4
    assert r[1]["recall_at_10"] == r[0]["recall_at_10"]
