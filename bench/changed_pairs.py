"""`python -m bench changed_pairs`: `Changed` on candidate pairs a person labelled (issue 44, item 3).

    python -m bench changed_pairs                                    # the offline rule
    python -m bench changed_pairs --modes offline,llm-score --model qwen0.5b
    python -m bench changed_pairs --superseded                       # + memories an import supersedes

The pairs (bench/changed_pairs.json, labelled by hand: is the older memory no longer true because of
the newer one?) are of two sources:

* locomo: candidate pairs the linking step considers on the dev LoCoMo conversations
  (../shared/data/locomo/locomo_dev.json): each session's offline memories (`linking.summarise`
  without an LLM) against their top-j (Options.j) most similar memories of earlier sessions, as
  `TheanineMemory._candidates` finds them. A memory is stored by reference, (dia_id, the index of its
  sentence in that turn), as the data's licence asks; the text is read from the data file.
* chats: pairs of my own writing (the first-person facts people tell a chat: job, home, relationship,
  habit, pet, ... replaced, and the look-alikes that are not replaced); the rule was tightened on these
  and on the locomo pairs;
* chats-heldout: 50 more, written and labelled after the rule was fixed, and run once: the rule was not
  changed for them.

Modes: offline (memory.theanine.changes.ChangeRule, what a close without an LLM labels), llm-score
(the relation step on the bundled model, its labels read from log-probabilities:
`linking.score_pairs`) and llm (generated labels). Prints precision, recall and pair counts per mode
and source. `--superseded` imports each dev conversation offline through `TheanineMemory.build` (real
Chroma, MiniLM) and prints how many memories end up superseded, with a sample.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from memory.evaluation.machine import machine
from memory.files import atomic_write_json
from memory.locks import UserLocks
from memory.locomo_format import load_sessions
from memory.records import SessionRecord
from memory.theanine import linking
from memory.theanine.changes import ChangeRule
from memory.theanine.extract import sentences
from memory.theanine.graph import Memory

from .common import parser, progress

PAIRS_FILE = Path(__file__).with_name("changed_pairs.json")
DEV = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / "locomo_dev.json"
MODES = ("offline", "llm-score", "llm")
SOURCES = ("locomo", "chats", "chats-heldout", "chats-heldout2", "chats-heldout3")


def conversation_memories(sessions: list[SessionRecord]) -> list[Memory]:
    """Every offline memory of a conversation, session by session (as an import builds them)."""
    out: list[Memory] = []
    for s in sessions:
        out += linking.summarise(s, None)
    return out


def candidates(mems: list[Memory], vecs: np.ndarray, j: int) -> list[tuple[Memory, Memory, float]]:
    """(old, new, cosine): each memory against its top-j most similar memories of earlier sessions
    (sessions are in the conversation's order), as a close finds them in the store."""
    v = vecs / np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
    order = list(dict.fromkeys(m.session_id for m in mems))
    rank = {sid: i for i, sid in enumerate(order)}
    out = []
    for i, m in enumerate(mems):
        earlier = [k for k, o in enumerate(mems) if rank[o.session_id] < rank[m.session_id]]
        if not earlier:
            continue
        sims = v[earlier] @ v[i]
        for k in np.argsort(-sims, kind="stable")[:j]:
            out.append((mems[earlier[k]], m, float(sims[k])))
    return out


def ref_of(m: Memory, turns: dict[str, str]) -> list:
    """(dia_id, sentence index) of a memory: its first source turn and its own (last) sentence."""
    tid = m.turns[0]
    said = sentences(m.event.split(": ", 1)[1])[-1]
    parts = sentences(turns[tid])
    return [tid, next((i for i, p in enumerate(parts) if said.startswith(p[:40]) or p.startswith(said[:40])), 0)]


def memory_at(ref: list, by_turn: dict[str, list[Memory]], turns: dict[str, str]) -> Memory:
    """The offline memory a reference names (the one made from that sentence of that turn)."""
    tid, k = ref
    said = sentences(turns[tid])[k]
    for m in by_turn.get(tid, []):
        if m.event.endswith(said) or said in m.event:
            return m
    raise KeyError(f"no memory of {tid} sentence {k}: {said!r}")


def chat_memory(mid: str, text: str, date: str) -> Memory:
    sid = mid.split(":")[0]
    return Memory(mid, f"user: {text}", date, sid, ts=date, turns=[f"{sid}:0"], speaker="user", excerpt=f"user: {text}")


def load_pairs(data_path: Path) -> list[dict]:
    """Every labelled pair as {"source", "old": Memory, "new": Memory, "changed", "kind"}."""
    spec = json.loads(PAIRS_FILE.read_text(encoding="utf-8"))
    out = []
    for src in SOURCES[1:]:
        for i, p in enumerate(spec[src.replace("-", "_")]):
            old = chat_memory(f"{src}{i}a:m0", p["old"], "2023-01-10")
            new = chat_memory(f"{src}{i}b:m0", p["new"], "2023-06-10")
            out.append({"source": src, "old": old, "new": new, "changed": p["changed"], "kind": p.get("kind", "")})
    if spec["locomo"] and data_path.exists():
        samples = {sid: ss for sid, ss in load_sessions(json.loads(data_path.read_text(encoding="utf-8")))}
        cache: dict[str, tuple] = {}
        for p in spec["locomo"]:
            if p["conv"] not in cache:
                ss = samples[p["conv"]]
                mems = conversation_memories(ss)
                by_turn: dict[str, list[Memory]] = {}
                for m in mems:
                    by_turn.setdefault(m.turns[0], []).append(m)
                cache[p["conv"]] = (by_turn, {t.turn_id: t.text for s in ss for t in s.turns})
            by_turn, turns = cache[p["conv"]]
            out.append(
                {
                    "source": "locomo",
                    "old": memory_at(p["old"], by_turn, turns),
                    "new": memory_at(p["new"], by_turn, turns),
                    "changed": p["changed"],
                    "kind": p.get("kind", ""),
                }
            )
    return out


def balanced(pairs: list[dict], limit: int, seed: int) -> list[dict]:
    """At most `limit` pairs per source, half of them changes where there are enough (a slow LLM's run)."""
    rng, out = random.Random(seed), []
    for src in SOURCES:
        for kind in (True, False):
            got = [p for p in pairs if p["source"] == src and p["changed"] == kind]
            out += rng.sample(got, min(len(got), limit // 2 if kind else limit - min(len(got), limit // 2)))
    return out


def offline_labels(pairs: list[dict], embedder) -> list[bool]:
    return ChangeRule().changed([(p["old"], p["new"]) for p in pairs])


def llm_labels(pairs: list[dict], llm, mode: str) -> list[bool | None]:
    """The relation step's label per pair ("Changed" or not); None where the model gave none."""
    from memory.llm import LLMSession
    from memory.steps_policy import StepPlan
    from memory.theanine.graph import MemoryGraph
    from memory.trace import Trace

    session = LLMSession(llm, Trace("changed_pairs"), temperature=0.0)
    if mode == "llm-score":
        session.plan = StepPlan(relations="score")
    out: list[bool | None] = []
    for i, p in enumerate(pairs):
        g = MemoryGraph()
        g.add_memory(p["old"])
        cand = linking.Candidate(p["new"].id, p["old"].id, 1.0)
        before = len(session.trace.notices)
        got = linking.classify(g, [cand], {p["new"].id: p["new"]}, session, None)
        fell_back = len(session.trace.notices) > before and "offline rule" in session.trace.notices[-1]
        out.append(None if fell_back else got[(p["old"].id, p["new"].id)] == "Changed")
        if (i + 1) % 20 == 0:
            progress(f"{mode}: {i + 1}/{len(pairs)} pairs")
    return out


def scores(pairs: list[dict], labels: list) -> dict:
    """Precision and recall of Changed against the hand labels (a pair the model left unlabelled counts
    as not Changed), with the pair counts."""
    tp = sum(1 for p, lb in zip(pairs, labels, strict=True) if lb and p["changed"])
    fp = sum(1 for p, lb in zip(pairs, labels, strict=True) if lb and not p["changed"])
    pos = sum(p["changed"] for p in pairs)
    return {
        "pairs": len(pairs),
        "changed_pairs": pos,
        "called_changed": tp + fp,
        "true_positives": tp,
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / pos, 3) if pos else None,
        "unlabelled": sum(1 for lb in labels if lb is None),
        "false_changed": [
            [p["old"].event, p["new"].event] for p, lb in zip(pairs, labels, strict=True) if lb and not p["changed"]
        ],
        "missed": [
            [p["old"].event, p["new"].event] for p, lb in zip(pairs, labels, strict=True) if p["changed"] and not lb
        ],
    }


def superseded(data_path: Path, embedder, sample_size: int, seed: int) -> dict:
    """Per dev conversation: memories, candidate pairs, Changed edges and superseded memories after an
    offline import through TheanineMemory.build (real Chroma), with a sample of superseded ones."""
    from memory.settings import Options
    from memory.store import ChromaStore
    from memory.theanine.strategy import TheanineMemory
    from memory.trace import Trace

    rng = random.Random(seed)
    out = {}
    for sid, sessions in load_sessions(json.loads(data_path.read_text(encoding="utf-8"))):
        with tempfile.TemporaryDirectory(prefix="bench-changed-") as tmp:
            tm = TheanineMemory(ChromaStore(path=Path(tmp) / "chroma"), embedder, Path(tmp), UserLocks())
            for s in sessions:
                tm.build("u", s, None, Options(), Trace("close"))
            g = tm.graph("u")
            sup = [(m.event, g.memory(b).event) for m in g.memories() if (b := g.superseded_by(m.id)) is not None]
            out[sid] = {
                "memories": len(list(g.memories())),
                "changed_edges": sum(1 for _, _, r in g.g.edges(data="relation") if r == "Changed"),
                "superseded": len(sup),
                "sample": rng.sample(sup, min(sample_size, len(sup))),
            }
        progress(f"{sid}: {out[sid]['superseded']} of {out[sid]['memories']} memories superseded")
    return out


def print_table(result: dict) -> None:
    def f(x):
        return "-" if x is None else f"{x:.3f}"

    print(f"{'mode':10} {'source':13} {'pairs':>5} {'changed':>7} {'called':>6} {'precision':>9} {'recall':>6}")
    for mode, by in result["modes"].items():
        for src, r in by.items():
            print(
                f"{mode:10} {src:13} {r['pairs']:5d} {r['changed_pairs']:7d} {r['called_changed']:6d} "
                f"{f(r['precision']):>9} {f(r['recall']):>6}"
                + (f"  (unlabelled {r['unlabelled']})" if r["unlabelled"] else "")
            )
    for sid, r in result.get("superseded", {}).items():
        print(f"{sid}: {r['superseded']} of {r['memories']} memories superseded ({r['changed_edges']} Changed edges)")
        for old, new in r["sample"]:
            print(f"    {old}  ->  {new}")


def main(argv: list[str]) -> int:
    p = parser("changed_pairs", __doc__.split("\n")[0], "bench_out/changed_pairs.json")
    p.add_argument("--data", default=str(DEV), help="the dev LoCoMo file the locomo pairs refer to")
    p.add_argument("--modes", default="offline", help=f"subset of {','.join(MODES)}")
    p.add_argument("--model", default="", help="bundled model for the llm modes (default: the configured LLM)")
    p.add_argument("--sources", default=",".join(SOURCES), help=f"subset of {','.join(SOURCES)}")
    p.add_argument("--limit", type=int, default=0, help="per source, at most this many pairs (half changes), sampled")
    p.add_argument("--superseded", action="store_true", help="also import each dev conversation and count")
    p.add_argument("--sample", type=int, default=5, help="superseded memories shown per conversation")
    a = p.parse_args(argv)
    modes = [m for m in a.modes.split(",") if m]
    if set(modes) - set(MODES):
        p.error(f"unknown modes; choose from {', '.join(MODES)}")
    from memory.embeddings import make_embedder
    from memory.settings import LLMConfig, Settings

    settings = Settings.from_env()
    embedder = make_embedder("minilm")
    pairs = [q for q in load_pairs(Path(a.data)) if q["source"] in a.sources.split(",")]
    if a.limit:
        pairs = balanced(pairs, a.limit, a.seed)
    result: dict = {"config": vars(a), "machine": machine(), "modes": {}}
    for mode in modes:
        t0 = time.perf_counter()
        if mode == "offline":
            labels: list = offline_labels(pairs, embedder)
        else:
            from memory.llm import make_llm

            cfg = LLMConfig(backend="embedded", bundled_model=a.model) if a.model else settings.llm
            result["llm"] = cfg.describe()
            labels = llm_labels(pairs, make_llm(cfg), mode)
        by: dict = {}
        for src in ("all", *SOURCES):
            idx = [i for i, q in enumerate(pairs) if src == "all" or q["source"] == src]
            if idx:
                by[src] = scores([pairs[i] for i in idx], [labels[i] for i in idx])
        by["all"]["seconds_per_pair"] = round((time.perf_counter() - t0) / max(len(pairs), 1), 3)
        result["modes"][mode] = by
        atomic_write_json(a.out, result)
    if a.superseded:
        result["superseded"] = superseded(Path(a.data), embedder, a.sample, a.seed)
        atomic_write_json(a.out, result)
    print_table(result)
    return 0
