"""Phase II-1: untangle timelines through a retrieved memory.

A timeline starts at a root (a memory with no predecessor) among the retrieved
memory's ancestors, passes through the retrieved memory and runs forward in time
to a memory with no successor. Every root counts, as in the official code's
`get_all_path`: with A->C, B->C, C->D both A-C-D and B-C-D are timelines. The
number of such paths grows exponentially, so instead of listing them we count
them (one linear pass over the ancestors and one over the descendants) and
sample paths uniformly from the counts with a seeded RNG.
"""

from __future__ import annotations

import random

import networkx as nx

from .graph import MemoryGraph


def _ancestors_in_order(graph: MemoryGraph, mid: str) -> list[str]:
    """`mid` and every memory that leads to it, in time order."""
    return sorted(nx.ancestors(graph.g, mid) | {mid}, key=lambda x: graph.memory(x).order)


def _descendants_in_order(graph: MemoryGraph, mid: str) -> list[str]:
    """`mid` and every memory it leads to, in time order."""
    return sorted(nx.descendants(graph.g, mid) | {mid}, key=lambda x: graph.memory(x).order)


def sample_timelines(graph: MemoryGraph, mid: str, n: int, rng: random.Random, max_len: int = 12) -> list[list[str]]:
    """Up to `n` distinct timelines through `mid`, each at most `max_len` memories long.

    A longer path keeps the memories nearest to `mid` (the retrieved memory is
    what made the timeline relevant).
    """
    g = graph.g
    anc = _ancestors_in_order(graph, mid)  # time order, so edges go left to right
    paths_from_start: dict[str, int] = {}  # paths from any root to each ancestor
    for v in anc:
        preds = list(g.predecessors(v))
        paths_from_start[v] = 1 if not preds else sum(paths_from_start[p] for p in preds)
    desc = _descendants_in_order(graph, mid)
    paths_to_end: dict[str, int] = {}
    for v in reversed(desc):
        succ = list(g.successors(v))
        paths_to_end[v] = 1 if not succ else sum(paths_to_end[s] for s in succ)

    def walk_back() -> list[str]:
        path, v = [mid], mid
        while preds := list(g.predecessors(v)):
            v = _pick(rng, preds, [paths_from_start[p] for p in preds])
            path.append(v)
        return path[::-1]

    def walk_forward() -> list[str]:
        path: list[str] = []
        v = mid
        while True:
            succ = list(g.successors(v))
            if not succ:
                return path
            v = _pick(rng, succ, [paths_to_end[s] for s in succ])
            path.append(v)

    total = paths_from_start[mid] * paths_to_end[mid]
    out: list[list[str]] = []
    seen: set[tuple[str, ...]] = set()
    for _ in range(min(n, total) * 4):  # a few extra draws to find distinct paths
        if len(out) >= min(n, total):
            break
        path = walk_back() + walk_forward()
        key = tuple(path)
        if key not in seen:
            seen.add(key)
            out.append(_window(path, path.index(mid), max_len))
    return out


def _pick(rng: random.Random, items: list[str], counts: list[int]) -> str:
    # Path counts can exceed a float's range; scale by the largest (exact int division) first.
    top = max(counts)
    return rng.choices(items, weights=[c / top for c in counts])[0]


def _window(path: list[str], centre: int, max_len: int) -> list[str]:
    if len(path) <= max_len:
        return path
    lo = max(0, min(centre - max_len // 2, len(path) - max_len))
    return path[lo : lo + max_len]


def render(graph: MemoryGraph, path: list[str]) -> str:
    """'[event] -(Relation)- [event] ...' as in the paper, with each memory's date."""
    parts = []
    for i, mid in enumerate(path):
        m = graph.memory(mid)
        if i:
            parts.append(f" -({graph.g.edges[path[i - 1], mid]['relation']})- ")
        parts.append(f"[{m.time}: {m.event}]" if m.time else f"[{m.event}]")
    return "".join(parts)


def adds_memory(path: list[str], shown: set[str]) -> bool:
    """Whether `path` tells the reply something new. A timeline is kept whole, with its own history,
    even where an earlier one shares its root; one whose memories were all shown is left out."""
    return not set(path) <= shown
