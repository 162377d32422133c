"""LoCoMo evidence recall: how much of each question's evidence a memory method puts in a context
of a given token budget.

    python -m bench locomo --data locomo10.json --out bench_out/locomo.json [--budgets 250,500,1000,2000]
        [--path agent|units] [--summariser offline,reference,llm]

`--path agent` (the default) measures the app's own path: sessions closed by
`MemoryAgent.close_session`, the memory text from `MemoryAgent.memory_context`
(what `reply` puts in its prompt); the run is `memory.evaluation.agent_run.run`,
which the app's evaluation tab calls too. `--path units`, the packer-only path kept
for the turn / session baselines and for comparison with earlier figures, is
bench/recall_units.py. This module is the command: flags, tables, JSON and plot.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from memory.evaluation import agent_run
from memory.evaluation.conversations import Conversation, load_samples
from memory.evaluation.scoring import CATEGORIES, CATEGORY_NAMES
from memory.evaluation.spec import AGENT_METHODS, DEFAULT_BUDGETS, DEFAULT_RETRIEVERS, RunSpec
from memory.files import atomic_write_json
from memory.settings import Settings

from . import common, recall_units
from .common import llm_configured, progress
from .plots import plot_recall
from .recall_units import DEFAULT_TIMELINE_LEN, METHODS

ALL_METHODS = tuple(dict.fromkeys(METHODS + AGENT_METHODS))


def load(path: str | Path, only: list[str] | None = None) -> list[Conversation]:
    """The conversations of a LoCoMo file (a missing conversation ends the command)."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    try:
        return load_samples(data, only)
    except LookupError as e:
        raise SystemExit(f"{e.args[0]} in {path}") from None


def best_by_method(results: list[dict], budget: int) -> dict[str, dict]:
    """For each method, the row of its best retriever at `budget`."""
    out: dict[str, dict] = {}
    for r in results:
        if r["budget"] == budget and (r["method"] not in out or (r["recall"] or 0) > (out[r["method"]]["recall"] or 0)):
            out[r["method"]] = r
    return out


def table(results: list[dict], budgets: list[int]) -> str:
    """Markdown: one row per (method, retriever), one column per budget."""
    rows: dict[tuple[str, str], dict] = defaultdict(dict)
    for r in results:
        rows[(r["method"], r["retriever"])][r["budget"]] = r["recall"]
    lines = [
        "| method | retriever | " + " | ".join(str(b) for b in budgets) + " |",
        "| --- | --- | " + " | ".join("---:" for _ in budgets) + " |",
    ]
    for (m, ret), vals in rows.items():
        lines.append(
            f"| {m} | {ret} | "
            + " | ".join(f"{vals[b]:.3f}" if vals.get(b) is not None else "-" for b in budgets)
            + " |"
        )
    return "\n".join(lines)


def best_table(results: list[dict], budgets: list[int]) -> str:
    """Markdown: each method's best retriever at each budget."""
    methods = list(dict.fromkeys(r["method"] for r in results))
    lines = [
        "| method (best retriever) | " + " | ".join(str(b) for b in budgets) + " |",
        "| --- | " + " | ".join("---:" for _ in budgets) + " |",
    ]
    for m in methods:
        cells = []
        for b in budgets:
            row = best_by_method(results, b).get(m)
            cells.append(f"{row['recall']:.3f} ({row['retriever']})" if row and row["recall"] is not None else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --- command ---------------------------------------------------------------------


def _parser():
    p = common.parser("locomo", __doc__.split("\n\n")[0], "bench_out/locomo.json")
    p.add_argument("--data", required=True, help="a file in LoCoMo's format (a list of samples)")
    p.add_argument(
        "--budgets",
        type=common.int_list,
        default=list(DEFAULT_BUDGETS),
        help="token budgets, comma-separated (default 250,500,1000,2000)",
    )
    p.add_argument(
        "--methods",
        type=common.str_list,
        default=None,
        help=f"subset of {','.join(ALL_METHODS)} (default: all of the path's; app-defaults, --path agent only, "
        "is SeCom and THEANINE with the installed settings)",
    )
    p.add_argument(
        "--after-turns",
        type=int,
        default=RunSpec.after_turns,
        help="--path agent: ask each question after this many real turns of another conversation of the file "
        "(default 4; 0: alone)",
    )
    p.add_argument(
        "--retrievers",
        type=common.str_list,
        default=list(DEFAULT_RETRIEVERS),
        help=f"subset of {','.join(DEFAULT_RETRIEVERS)}",
    )
    p.add_argument(
        "--conversations",
        type=common.str_list,
        default=None,
        help="sample ids to evaluate (default: all in the file), e.g. conv-30,conv-41",
    )
    p.add_argument(
        "--linking",
        choices=("auto", "offline", "llm"),
        default="auto",
        help="THEANINE linking: the configured LLM, or the offline rule (auto: LLM only when an "
        "endpoint is configured)",
    )
    p.add_argument("--no-dates", action="store_true", help="do not prefix units with their session date")
    p.add_argument(
        "--max-len",
        type=int,
        default=DEFAULT_TIMELINE_LEN,
        help=f"longest timeline, in memories (default {DEFAULT_TIMELINE_LEN}: the anchor and its neighbours)",
    )
    p.add_argument(
        "--segment-max-len",
        type=int,
        default=None,
        help="offline segmenter: split segments longer than this many exchanges (default: the segmenter's own setting)",
    )
    p.add_argument(
        "--path",
        choices=("agent", "units"),
        default="agent",
        help="agent: the app's path (MemoryAgent.close_session + memory_context); units: the "
        "packer-only path over LoCoMo's observation facts (default agent)",
    )
    p.add_argument(
        "--summariser",
        type=common.str_list,
        default=["offline"],
        help="--path agent: offline, reference, llm, comma-separated (default offline)",
    )
    p.add_argument(
        "--embedder",
        choices=("minilm", "openai"),
        default=None,
        help="default: the configured embedder (MiniLM offline)",
    )
    p.add_argument(
        "--contexts",
        action="store_true",
        help="--path agent: keep each strategy's packed context in the per-question rows (large files)",
    )
    return p


def main(argv: list[str]) -> int:
    p = _parser()
    args = p.parse_args(argv)
    if args.methods is None:
        args.methods = list(AGENT_METHODS if args.path == "agent" else METHODS)
    bad = [m for m in args.methods if m not in ALL_METHODS]
    bad += [r for r in args.retrievers if r not in DEFAULT_RETRIEVERS]
    if bad:
        p.error(f"unknown method or retriever: {', '.join(bad)}")
    if args.path == "agent":
        return _main_agent(p, args)
    if "app-defaults" in args.methods:
        p.error("app-defaults is measured on the app's path: add --path agent")
    convs = load(args.data, args.conversations)
    out = recall_units.run(args, convs)
    return _report(args, out, f"LoCoMo evidence recall ({', '.join(out['config']['conversations'])})", out["results"])


def _report(args, out: dict, title: str, rows: list[dict]) -> int:
    """Write the JSON and the plot next to it; print the tables."""
    atomic_write_json(args.out, out)
    png = plot_recall(rows, common.plot_path(args.out, "recall"), title=title)
    print(table(rows, args.budgets))
    print()
    print(best_table(rows, args.budgets))
    if out.get("observation_ceiling") is not None:
        print(f"\nobservation facts can carry at most {out['observation_ceiling']:.3f} of the evidence (theanine-*)")
    if args.path == "agent":
        at = 1000 if 1000 in args.budgets else args.budgets[-1]
        print()
        print(category_table(rows, at))
        multi = [r for r in rows if r["budget"] == at and "multi_timeline_share" in r]
        if multi:
            print(f"\n| THEANINE row @{at} | recall | contexts with a timeline of 2+ memories | ... whole |")
            print("| --- | ---: | ---: | ---: |")
            for r in multi:
                shares = f"{r['multi_timeline_share']:.3f} | {r.get('whole_timeline_share', 0.0):.3f}"
                print(f"| {r['method']} ({r['retriever']}) | {r['recall']:.3f} | {shares} |")
    progress(f"wrote {args.out} and {png}")
    return 0


def agent_spec(args) -> RunSpec:
    """The `--path agent` flags as the run they ask for (the evaluation tab builds the same object)."""
    return RunSpec(
        methods=[m for m in args.methods if m in AGENT_METHODS],
        retrievers=args.retrievers,
        budgets=args.budgets,
        summarisers=args.summariser,
        dates=not args.no_dates,
        segment_max_len=args.segment_max_len,
        seed=args.seed,
        contexts=args.contexts,
        embedder=args.embedder,
        after_turns=args.after_turns,
    )


def _main_agent(p, args) -> int:
    spec = agent_spec(args)
    problems = spec.problems(llm_configured())
    if problems:
        p.error("; ".join(problems))
    convs = load(args.data, args.conversations)
    out = agent_run.run(convs, spec, settings=Settings.from_env(), data=str(args.data), log=progress)
    rows = [{**r, "method": agent_run.method_label(r)} for r in out["results"]]
    title = f"LoCoMo evidence recall, agent path ({', '.join(out['config']['conversations'])})"
    return _report(args, out, title, rows)


def category_table(results: list[dict], budget: int) -> str:
    """Markdown: each method's best retriever at `budget`, per LoCoMo category."""
    best = best_by_method(results, budget)
    lines = [
        f"| method @{budget} | all | " + " | ".join(f"{c} {CATEGORY_NAMES[c]}" for c in CATEGORIES) + " |",
        "| --- | ---: | " + " | ".join("---:" for _ in CATEGORIES) + " |",
    ]
    for m, r in best.items():
        cells = [f"{r['by_category'][c]:.3f}" if r["by_category"].get(c) is not None else "-" for c in CATEGORIES]
        lines.append(f"| {m} ({r['retriever']}) | {r['recall']:.3f} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
