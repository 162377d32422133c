"""Write tests/data/locomo_small.json: the first sessions of the three LoCoMo dev conversations, with
the questions whose evidence lies in them and their observation facts and summaries.

    python -m tests.data.make_locomo_small ../shared/data/locomo/locomo_dev.json

Run once by a maintainer who has the data set; the tests read only the written excerpt.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from memory.locomo_format import clean_evidence

KEEP = {"conv-26": 3, "conv-30": 4, "conv-41": 3}  # sessions kept per conversation
OUT = Path(__file__).with_name("locomo_small.json")


def excerpt(sample: dict, n_sessions: int) -> dict:
    keep = {f"D{n}" for n in range(1, n_sessions + 1)}
    conv = {k: v for k, v in sample["conversation"].items() if not k.startswith("session_")}
    per_session: dict[str, dict] = {"observation": {}, "session_summary": {}, "event_summary": {}}
    for n in range(1, n_sessions + 1):
        conv[f"session_{n}"] = sample["conversation"][f"session_{n}"]
        conv[f"session_{n}_date_time"] = sample["conversation"][f"session_{n}_date_time"]
        for field, key in (
            ("observation", f"session_{n}_observation"),
            ("session_summary", f"session_{n}_summary"),
            ("event_summary", f"events_session_{n}"),
        ):
            if key in sample.get(field, {}):
                per_session[field][key] = sample[field][key]
    qa = [
        q
        for q in sample["qa"]
        if (ev := clean_evidence(q.get("evidence", []))) and all(e.split(":")[0] in keep for e in ev)
    ]
    return {"sample_id": sample["sample_id"], "conversation": conv, "qa": qa, **per_session}


def main(source: str) -> None:
    data = {s["sample_id"]: s for s in json.loads(Path(source).read_text(encoding="utf-8"))}
    out = [excerpt(data[sid], n) for sid, n in KEEP.items()]
    OUT.write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"{OUT}: {OUT.stat().st_size / 1024:.0f} KB, {sum(len(s['qa']) for s in out)} questions")


if __name__ == "__main__":
    main(sys.argv[1])
