"""Parts shared by the benchmark commands: arguments, progress, JSON output, machine facts,
percentiles, the LLM a benchmark may use, and packing ranked units into a token budget."""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..tokens import count_tokens

_T0 = time.perf_counter()


def progress(msg: str) -> None:
    """One line on stderr with the elapsed time, flushed at once (benchmarks run for minutes)."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def parser(prog: str, description: str, out_default: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m memory.bench {prog}", description=description)
    p.add_argument("--out", default=out_default, help=f"JSON result file; plots go next to it (default {out_default})")
    p.add_argument("--seed", type=int, default=0, help="seed of every random choice (default 0)")
    return p


def int_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, not {text!r}") from None
    if not out or any(x <= 0 for x in out):
        raise argparse.ArgumentTypeError(f"expected positive whole numbers, not {text!r}")
    return out


def str_list(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def write_json(path: str | Path, obj) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def plot_path(out: str | Path, suffix: str) -> Path:
    """`bench_out/locomo.json` + "recall" -> `bench_out/locomo_recall.png`."""
    out = Path(out)
    return out.with_name(f"{out.stem}_{suffix}.png")


def machine() -> dict:
    """What a reader needs to compare figures: CPU, cores, memory, Python, OS."""
    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem_gb = None
    try:
        mem_gb = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        load = None
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gb": mem_gb, "python": platform.python_version(),
            "os": f"{platform.system()} {platform.release()}", "load_average_1_5_15min": load}


def percentile(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else float("nan")


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports ru_maxrss in KiB)."""
    import resource
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(r / 1024 if sys.platform != "darwin" else r / 2 ** 20, 1)


def llm_configured(env: dict | None = None) -> bool:
    """True when the environment names an LLM endpoint (or explicitly asks for a backend).

    Without it the benchmarks that only *can* use an LLM (linking in `locomo`) use
    the offline rules, rather than the tiny embedded base model.
    """
    e = os.environ if env is None else env
    return bool(e.get("OPENAI_BASE_URL") or e.get("OPENAI_API_KEY") or e.get("LLM_BACKEND")
                or e.get("LLM_GGUF_PATH"))


# --- packing ranked units into a token budget ---------------------------------

@dataclass
class Piece:
    """One line of a unit's context text and the evidence ids it carries whole."""

    text: str
    covers: tuple[str, ...] = ()
    tokens: int = -1

    def n_tokens(self) -> int:
        if self.tokens < 0:
            self.tokens = count_tokens(self.text)
        return self.tokens


@dataclass
class Unit:
    """A memory unit as the reply would read it: pieces joined by `sep`.

    `anchor` is the piece to keep when the unit must be cut to fit (0 = keep a
    prefix; a timeline keeps the memories around its retrieved memory).
    """

    id: str
    pieces: list[Piece]
    sep: str = "\n"
    anchor: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.sep.join(p.text for p in self.pieces)


def _cost(pieces: Sequence[Piece], sep_tokens: int) -> int:
    return sum(p.n_tokens() for p in pieces) + sep_tokens * max(0, len(pieces) - 1)


def _cut(unit: Unit, room: int, sep_tokens: int) -> list[Piece]:
    """The run of pieces around `unit.anchor` that fits in `room` tokens, grown one piece at a time,
    alternately after and before the anchor (empty when the anchor itself does not fit)."""
    ps = unit.pieces
    a = min(max(unit.anchor, 0), len(ps) - 1)
    if ps[a].n_tokens() > room:
        return []
    lo = hi = a
    used = ps[a].n_tokens()
    after_first = True
    while True:
        for j in ((hi + 1, lo - 1) if after_first else (lo - 1, hi + 1)):
            if 0 <= j < len(ps) and used + sep_tokens + ps[j].n_tokens() <= room:
                used += sep_tokens + ps[j].n_tokens()
                lo, hi = min(lo, j), max(hi, j)
                break
        else:
            break
        after_first = not after_first
    return list(ps[lo:hi + 1])


@dataclass
class Packed:
    units: list[str]              # ids of the units used (the last may be cut)
    covered: set[str]             # evidence ids carried whole by the context
    tokens: int                   # token estimate of the context (sum of pieces + separators)
    text: str


UNIT_SEP = "\n\n"


def pack(ranked: Iterable[Unit], budget: int) -> Packed:
    """Fill a context up to `budget` tokens with units in rank order.

    Units go in whole while they fit; the first one that does not fit is cut to
    its pieces around its anchor that fit, and the context ends there. `ranked`
    may be a generator: it is consumed only as far as the budget goes.
    Token counts are per piece plus one per separator, an upper bound of the
    joined text's count (checked by the tests).
    """
    sep_tok, unit_sep_tok = count_tokens("\n"), count_tokens(UNIT_SEP)
    used, ids, covered, parts = 0, [], set(), []
    for u in ranked:
        if not u.pieces:
            continue
        extra = unit_sep_tok if parts else 0
        cost = _cost(u.pieces, sep_tok) + extra
        if used + cost <= budget:
            chosen = list(u.pieces)
            used += cost
            stop = False
        else:
            chosen = _cut(u, budget - used - extra, sep_tok)
            used += (_cost(chosen, sep_tok) + extra) if chosen else 0
            stop = True
        if chosen:
            ids.append(u.id)
            parts.append(u.sep.join(p.text for p in chosen))
            for p in chosen:
                covered.update(p.covers)
        if stop:
            break
    return Packed(ids, covered, used, UNIT_SEP.join(parts))


def evidence_recall(evidence: Sequence[str], covered: set[str]) -> float:
    return sum(1 for e in evidence if e in covered) / len(evidence) if evidence else 0.0


def matplotlib_pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt
