"""The retrieval query's form, measured on one build: LoCoMo evidence recall of SeCom and THEANINE as
installed, and of THEANINE in the paper's setting, with the message alone, the dialogue (the last turns,
then the message) and the message first (the message, then the turns newest first).

    python -m bench queryforms --data ../shared/data/locomo/locomo_dev.json --budgets 1000,200

Each conversation is closed into memory once (offline, `agent_run.build`) and read with every form
through `MemoryAgent.memory_context`, each question after the turns `agent_run.chat_before` gives
(another conversation's: never a session of the memory searched). `bench locomo` measures one form
per run (MEMORY_QUERY_TURNS, MEMORY_QUERY_ORDER); this reads them all from one build.
"""

from __future__ import annotations

import tempfile
from collections import defaultdict
from pathlib import Path

from memory.evaluation import agent_run
from memory.evaluation.machine import machine
from memory.evaluation.scoring import evidence_recall, mean
from memory.evaluation.spec import RunSpec
from memory.files import atomic_write_json
from memory.settings import PAPER_SETTING, Settings
from memory.trace import Trace

from . import common
from .common import progress
from .locomo_recall import load

# form -> (query_turns, query_order); None: the row's own number of turns (the paper's 6, else 4)
FORMS = {"message alone": (0, "time"), "dialogue": (None, "time"), "message first": (None, "message-first")}
ROWS = ("secom", "theanine", "theanine-paper")


def _options(base, row: str, form: str, budget: int):
    turns, order = FORMS[form]
    if row == "theanine-paper":
        # the paper's setting with this query (theanine_mode "paper" would set its own query_turns)
        paper = {**PAPER_SETTING, "query_turns": PAPER_SETTING["query_turns"] if turns is None else turns}
        return base.with_(strategy="theanine", budget=budget, query_order=order, **paper)
    return base.with_(strategy=row, budget=budget, query_turns=4 if turns is None else turns, query_order=order)


def main(argv: list[str]) -> int:
    p = common.parser("queryforms", __doc__.split("\n\n")[0], "bench_out/query_forms.json")
    p.add_argument("--data", required=True, help="a file in LoCoMo's format")
    p.add_argument("--budgets", type=common.int_list, default=[1000, 200])
    p.add_argument("--conversations", type=common.str_list, default=None)
    p.add_argument("--after-turns", type=int, default=RunSpec.after_turns)
    args = p.parse_args(argv)
    settings = Settings.from_env()
    base = settings.options.with_(seed=args.seed)
    convs = load(args.data, args.conversations)
    recall: dict[tuple, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="bench-queryforms-") as tmp:
        for conv in convs:
            progress(f"{conv.sample_id}: closing {len(conv.sessions)} sessions")
            b = agent_run.build(conv, "offline", settings, Path(tmp) / conv.sample_id, base)
            for i, q in enumerate(conv.questions):
                history = agent_run.chat_before(convs, conv, i, args.after_turns, args.seed)
                for row in ROWS:
                    for form in FORMS:
                        for budget in args.budgets:
                            opts = _options(base, row, form, budget)
                            ctx = b.agent.memory_context(b.user, history, q.question, opts, Trace(row), None)
                            covered = {t for c in ctx.covers for t in c}
                            recall[(row, form, budget)].append(evidence_recall(q.evidence, covered))
            progress(f"{conv.sample_id}: {len(conv.questions)} questions read")
    results = [
        {"row": row, "form": form, "budget": bud, "recall": mean(xs), "n": len(xs)}
        for (row, form, bud), xs in recall.items()
    ]
    out = {
        "results": results,
        "config": {
            "data": args.data,
            "conversations": [c.sample_id for c in convs],
            "budgets": args.budgets,
            "after_turns": args.after_turns,
            "seed": args.seed,
            "machine": machine(),
        },
    }
    atomic_write_json(args.out, out)
    print("| row | query | " + " | ".join(f"@{b}" for b in args.budgets) + " |")
    print("| --- | --- | " + " | ".join("---:" for _ in args.budgets) + " |")
    for row in ROWS:
        for form in FORMS:
            cells = [f"{mean(recall[(row, form, b)]):.3f}" for b in args.budgets]
            print(f"| {row} | {form} | " + " | ".join(cells) + " |")
    progress(f"wrote {args.out}")
    return 0
