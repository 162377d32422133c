"""`python -m bench closeprobe --dry-run`: a close with every LLM step and the questions after it,
every prompt built and sized with the bundled Qwen 0.5B's own tokenizer (no generation), on the small
LoCoMo file. Checks that refinement is asked and sized too, and that no prompt meets the window."""

from __future__ import annotations

import json

import pytest

from bench import closeprobe
from memory.llm import bundled_gguf_path
from tests.conftest import LOCOMO_SMALL


@pytest.mark.slow
def test_the_dry_run_sizes_every_step_including_refinement(tmp_path, monkeypatch):
    try:
        bundled_gguf_path("qwen0.5b")
    except Exception as e:  # the part packages are in requirements.txt: only a broken install lands here
        pytest.skip(f"the bundled Qwen 0.5B is not installed ({e})")
    monkeypatch.setenv("LLM_CONTEXT_WINDOW", "2048")
    out = tmp_path / "closeprobe.json"
    args = ["--model", "qwen0.5b", "--data", str(LOCOMO_SMALL), "--sessions", "1", "--min-turns", "20"]
    assert closeprobe.main([*args, "--before", "1", "--questions", "2", "--dry-run", "--out", str(out)]) == 0
    [row] = json.loads(out.read_text())["closes"]
    asked = row["dry_run"]["per_step"]
    assert (
        asked.get("summarise")
        and asked.get("relation")
        and asked.get("segment")
        and asked.get("reply") == len(row["replies"]) > 0
    )
    assert asked.get("refine")  # the retrieved timelines were sent to be refined
    # the summary in the embedded backend's small parts: at least two per 20+-turn session, each asked twice
    assert asked["summarise"] >= 4
    assert row["dry_run"]["over_window"] == 0 and row["dry_run"]["max_prompt_plus_answer"] <= 2048
