"""`python -m bench relations`: the relation step (Phase I-2) on pairs whose answer is known.

    python -m bench relations --model qwen1.5b --histories 36 --out bench_out/relations.json

The pairs come from the knowledge-update histories (bench.ku_histories). In each history the
first statement of a fact (A) meets four later memories:

- change: the statement that replaces it (the answer is Changed);
- restate: a later mention of the same value in passing (not Changed: the fact holds);
- other: the same kind of fact about someone else, "My cousin lives in Madrid" (not Changed);
- unrelated: another sentence of the change session (None).

Each memory is the app's offline memory of its turn (`linking.summarise` without an LLM), with its
session's whole dialogue. A history's four pairs are labelled in one `linking.classify` call (one LLM
call per pair, showing both sessions' dialogue), as a session close labels its pairs, once per mode:
the offline rule, the LLM, the LLM explaining each pair before its label (Options.explain_relations),
and the labels scored by the model's log-probabilities (one evaluation per pair, no generation:
`linking.score_pairs`; each pair's probabilities are kept).
Prints, per mode, the precision and recall of Changed, the share of other-person pairs called
Changed, the labels per kind of pair, first-try valid answers and seconds per pair.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.records import SessionRecord
from memory.steps_policy import StepPlan
from memory.theanine import linking
from memory.theanine.changes import ChangeRule
from memory.theanine.graph import Memory, MemoryGraph
from memory.trace import Trace

from .closeprobe import first_try_valid
from .common import parser, plot_path, progress
from .ku_histories import KINDS, History, histories

PAIR_KINDS = ("change", "restate", "other", "unrelated")
MODES = ("offline", "llm", "llm-explain", "llm-score")


@dataclass
class Probe:
    """One history's first statement (A) and the later memories it is paired with, by kind."""

    hid: str
    a: Memory
    later: dict[str, Memory]


def _memory_of(session: SessionRecord, turn_id: str) -> Memory | None:
    """The app's offline memory of a turn (the first one that cites it)."""
    return next((m for m in linking.summarise(session, None) if turn_id in m.turns), None)


def _session_of(h: History, turn_id: str) -> SessionRecord:
    return next(s for s in h.sessions if any(t.turn_id == turn_id for t in s.turns))


def _other_turn(h: History) -> str | None:
    """The turn that states the same kind of fact about someone else."""
    openers = [t.split("{v}")[0] for t in next(k for k in KINDS if k.name == h.kind).other]
    for s in h.sessions:
        for t in s.turns:
            if t.speaker == "user" and any(t.text.startswith(o) for o in openers if o):
                return t.turn_id
    return None


def probes(hs: list[History]) -> list[Probe]:
    out = []
    for h in hs:
        change_session = _session_of(h, h.change_turn)
        unrelated = next(t.turn_id for t in change_session.turns if t.speaker == "user" and t.turn_id != h.change_turn)
        turns = {
            "change": h.change_turn,
            "restate": h.old_turns[1] if len(h.old_turns) > 1 else None,
            "other": _other_turn(h),
            "unrelated": unrelated,
        }
        a = _memory_of(_session_of(h, h.old_turns[0]), h.old_turns[0])
        later = {}
        for kind, tid in turns.items():
            m = _memory_of(_session_of(h, tid), tid) if tid else None
            if m is not None:
                later[kind] = dataclasses.replace(m, id=f"{m.id}:{kind}")
        if a is not None:
            out.append(Probe(h.hid, a, later))
    return out


def label(probe: Probe, mode: str, llm_session, embedder) -> dict[str, str]:
    """The relation of each later memory to A, from one classify call (a session close's)."""
    g = MemoryGraph()
    g.add_memory(probe.a)
    kinds = list(probe.later)
    vecs = embedder.embed([probe.a.event] + [probe.later[k].event for k in kinds])
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    cands = [
        linking.Candidate(probe.later[k].id, probe.a.id, float(vecs[0] @ vecs[i + 1])) for i, k in enumerate(kinds)
    ]
    got = linking.classify(
        g,
        cands,
        {m.id: m for m in probe.later.values()},
        None if mode == "offline" else llm_session,
        ChangeRule(),
        explain=mode == "llm-explain",
    )
    return {k: got[(probe.a.id, probe.later[k].id)] for k in kinds}


def probabilities(call) -> dict[str, float]:
    """A scored pair's label probabilities, from its call's detail (LLMSession.label_probabilities)."""
    text = call.detail.removeprefix("probabilities: ")
    return {lb: float(p) for lb, p in (part.rsplit(" ", 1) for part in text.split(", ") if " " in part)}


def scores(rows: list[dict]) -> dict:
    by_kind = {k: Counter(r["labels"][k] for r in rows if k in r["labels"]) for k in PAIR_KINDS}
    called = sum(c["Changed"] for c in by_kind.values())
    right = by_kind["change"]["Changed"]
    n_change = sum(by_kind["change"].values())
    n_other = sum(by_kind["other"].values())
    return {
        "changed_precision": round(right / called, 3) if called else None,
        "changed_recall": round(right / n_change, 3) if n_change else None,
        "other_called_changed": round(by_kind["other"]["Changed"] / n_other, 3) if n_other else None,
        "unrelated_called_none": round(by_kind["unrelated"]["None"] / sum(by_kind["unrelated"].values()), 3)
        if by_kind["unrelated"]
        else None,
        # a label other than None links the pair in the graph (linking.link): what a timeline can follow
        "linked": {k: round(1 - c["None"] / sum(c.values()), 3) if c else None for k, c in by_kind.items()},
        "labels": {k: dict(c) for k, c in by_kind.items()},
    }


def plot(result: dict, path) -> None:
    from .plots import plot_bars

    modes = list(result["modes"])
    series = {
        "Changed recall": [result["modes"][m]["changed_recall"] or 0.0 for m in modes],
        "Changed precision": [result["modes"][m]["changed_precision"] or 0.0 for m in modes],
        "other person called Changed": [result["modes"][m]["other_called_changed"] or 0.0 for m in modes],
        "change pair linked": [result["modes"][m]["linked"]["change"] or 0.0 for m in modes],
        "unrelated pair linked": [result["modes"][m]["linked"]["unrelated"] or 0.0 for m in modes],
    }
    plot_bars(modes, series, path, "Relation step on known pairs (knowledge-update histories)", "share")


def offline_pairs(notices: list[str]) -> int:
    """Pairs the LLM left unlabelled (asked twice), labelled by the offline rule: linking.classify's notices."""
    return sum(int(m.group(1)) for n in notices if (m := re.match(r"relations: (\d+) of \d+ pairs", n)))


def print_table(result: dict, n_histories: int, with_llm: bool) -> None:
    def f(x):
        return "-" if x is None else f"{x:.2f}"

    print(f"{n_histories} histories, {result['pairs']} pairs; LLM: {result['llm'] if with_llm else 'none'}")
    print(
        f"{'mode':12} {'Changed P':>9} {'Changed R':>9} {'other→Changed':>13} {'unrelated→None':>14} "
        f"{'linked: change / restate / other / unrelated':>44} {'first-try':>9} {'s/pair':>7}"
    )
    for mode, r in result["modes"].items():
        print(
            f"{mode:12} {f(r['changed_precision']):>9} {f(r['changed_recall']):>9} {f(r['other_called_changed']):>13} "
            f"{f(r['unrelated_called_none']):>14} {' / '.join(f(r['linked'][k]) for k in PAIR_KINDS):>44} "
            f"{f(r['first_try_valid']):>9} {r['seconds_per_pair']:7.2f}"
        )


def main(argv: list[str]) -> int:
    p = parser("relations", __doc__.split("\n")[0], "bench_out/relations.json")
    p.add_argument("--model", default="", help="bundled model (default: the configured LLM)")
    p.add_argument("--histories", type=int, default=36, help="knowledge-update histories (six kinds of fact in turn)")
    p.add_argument("--modes", default=",".join(MODES), help=f"subset of {','.join(MODES)}")
    a = p.parse_args(argv)
    modes = [m for m in a.modes.split(",") if m]
    if set(modes) - set(MODES):
        p.error(f"unknown modes; choose from {', '.join(MODES)}")
    from memory.embeddings import make_embedder
    from memory.llm import LLMSession, make_llm
    from memory.settings import LLMConfig, Settings

    settings = Settings.from_env()
    cfg = LLMConfig(backend="embedded", bundled_model=a.model) if a.model else settings.llm
    embedder = make_embedder(settings.embedder, api_key=cfg.api_key, base_url=cfg.base_url, model=settings.embed_model)
    llm = make_llm(cfg) if any(m != "offline" for m in modes) else None
    ps = probes(histories(a.histories, a.seed))
    result: dict = {"config": vars(a), "llm": cfg.describe(), "machine": machine(), "pairs": 0, "modes": {}}
    for mode in modes:
        trace = Trace("relations")
        session = LLMSession(llm, trace, temperature=0.0, max_retries=cfg.max_retries) if llm is not None else None
        if session is not None and mode == "llm-score":
            session.plan = StepPlan(relations="score")
        rows, t0 = [], time.perf_counter()
        for i, pr in enumerate(ps):
            before = len(trace.llm_calls)
            row: dict = {"history": pr.hid, "labels": label(pr, mode, session, embedder)}
            if mode == "llm-score":
                row["probabilities"] = dict(
                    zip(row["labels"], map(probabilities, trace.llm_calls[before:]), strict=False)
                )
            rows.append(row)
            if (i + 1) % 6 == 0:
                progress(f"{mode}: {i + 1}/{len(ps)} histories")
        pairs = sum(len(r["labels"]) for r in rows)
        calls = list(trace.llm_calls)
        result["pairs"] = pairs
        result["modes"][mode] = {
            **scores(rows),
            "seconds_per_pair": round((time.perf_counter() - t0) / max(pairs, 1), 2),
            "calls": len(calls),
            "first_try_valid": round(sum(map(first_try_valid, calls)) / len(calls), 3) if calls else None,
            "pairs_by_offline_rule": offline_pairs(trace.notices),
            "rows": rows,
        }
        atomic_write_json(a.out, result)
    plot(result, plot_path(a.out, "labels"))
    print_table(result, len(ps), llm is not None)
    return 0
