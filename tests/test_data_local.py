"""The test suite runs on a user's clone: no test reads the benchmark data kept beside our checkout."""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
# The one test that checks the segmentation benchmark's own files; it skips, with its reason, without them.
BENCHMARK_DATA_CHECKS = {"test_secom_metrics.py"}
# ("shared" as a path part: `ROOT.parent / "shared"`, not a dict key such as `src["shared"]`)
OUTSIDE = re.compile(r"SHARED_DATA|shared/data|/\s*\"shared\"|\"shared\"\s*/|locomo_dev\.json")


def test_no_test_module_reads_data_outside_the_repository():
    readers = sorted(p.name for p in HERE.glob("test_*.py") if OUTSIDE.search(p.read_text(encoding="utf-8")))
    assert set(readers) <= BENCHMARK_DATA_CHECKS | {Path(__file__).name}, readers


def test_the_locomo_excerpt_has_what_the_tests_use():
    import json

    from tests.conftest import LOCOMO_SMALL

    data = {s["sample_id"]: s for s in json.loads(LOCOMO_SMALL.read_text(encoding="utf-8"))}
    assert set(data) == {"conv-26", "conv-30", "conv-41"}
    assert all(s["qa"] and s["observation"] for s in data.values())
    assert "session_4" in data["conv-30"]["conversation"]  # the time-travel browser test steps through 4
