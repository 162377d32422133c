"""Offline import of one LoCoMo conversation through the running app's API, as a user's script does it.

    python -m tests.import_bench --data ../shared/data/locomo/locomo_dev.json --sample conv-30 --runs 3

Starts `python app.py` on its embedded defaults (no key, no internet) on a free port, imports the
conversation through `/import_history` for a new user per run, and reads `/export_memory`. Prints the
wall time of each import (and the median), the memories and segments built, the share of memories
that are questions, and the recall of LoCoMo's observation facts: the share of facts for which some
memory names one of the fact's dia_ids as its source turn.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memory.files import atomic_write_json
from memory.locomo_format import observations
from tests.ui_fixtures import RunningApp


def measure(client, text: str, sample: dict) -> dict:
    uid = client.predict(api_name="/new_user")
    t0 = time.perf_counter()
    built = client.predict(uid, text, sample["sample_id"], api_name="/import_history")
    seconds = time.perf_counter() - t0
    export = client.predict(uid, api_name="/export_memory")
    memories = export["memory"]["theanine_graph"]["memories"]
    covered = {t for m in memories for t in m["turns"]}
    obs = observations(sample)
    questions = sum(1 for m in memories if m["event"].rstrip().endswith("?"))
    return {
        "seconds": round(seconds, 2),
        "sessions": len(built["closed"]),
        "errors": built["errors"],
        "memories": len(memories),
        "segments": built["segments"],
        "question_share": questions / max(1, len(memories)),
        "observation_recall": sum(1 for o in obs if set(o.dia_ids) & covered) / max(1, len(obs)),
        "built_by": sorted({m.get("built_by", "") for m in memories}),
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.import_bench", description=__doc__.split("\n")[0])
    p.add_argument("--data", default="../shared/data/locomo/locomo_dev.json")
    p.add_argument("--sample", default="conv-30")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--out", default="bench_out/import.json")
    a = p.parse_args(argv)
    sample = next(s for s in json.loads(Path(a.data).read_text()) if s["sample_id"] == a.sample)
    text = json.dumps(sample)
    from gradio_client import Client

    with tempfile.TemporaryDirectory() as tmp:
        app = RunningApp(Path(tmp) / "data", Path(tmp) / "app.log")
        try:
            client = Client(app.url, verbose=False)
            runs = []
            for i in range(a.runs):
                runs.append(measure(client, text, sample))
                print(f"run {i + 1}: {json.dumps(runs[-1])}", flush=True)
        finally:
            app.stop()
    med = statistics.median(r["seconds"] for r in runs)
    r0 = runs[0]
    print(f"\n{a.sample}: {r0['sessions']} sessions imported through /import_history (embedded defaults)")
    print(f"wall time median {med:.1f} s over {len(runs)} runs ({', '.join(str(r['seconds']) for r in runs)})")
    print(
        f"memories {r0['memories']}, segments {r0['segments']}, questions {r0['question_share']:.1%}, "
        f"observation recall {r0['observation_recall']:.1%}, built by {r0['built_by']}"
    )
    atomic_write_json(a.out, {"sample": a.sample, "median_seconds": med, "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
