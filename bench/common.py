"""Parts shared by the benchmark commands: arguments, progress, plot paths, percentiles, peak memory.
(Machine facts, evidence recall and the LLM check live in memory.evaluation, which the commands share
with the app.)"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

_T0 = time.perf_counter()


def progress(msg: str) -> None:
    """One line on stderr with the elapsed time, flushed at once (benchmarks run for minutes)."""
    print(f"[{time.perf_counter() - _T0:7.1f}s] {msg}", file=sys.stderr, flush=True)


def parser(prog: str, description: str, out_default: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"python -m bench {prog}", description=description)
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


def plot_path(out: str | Path, suffix: str) -> Path:
    """`bench_out/locomo.json` + "recall" -> `bench_out/locomo_recall.png`."""
    out = Path(out)
    return out.with_name(f"{out.stem}_{suffix}.png")


def percentile(xs: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), q)) if len(xs) else float("nan")


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far (Linux reports ru_maxrss in KiB)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(r / 1024 if sys.platform != "darwin" else r / 2**20, 1)


def llm_configured(env: dict | None = None) -> bool:
    """True when the environment names an LLM endpoint (or explicitly asks for a backend).

    Without it, what only *can* use an LLM (the benchmark's linking, the tab's llm summariser) uses
    the offline rules, rather than the tiny embedded base model.
    """
    e = os.environ if env is None else env
    return bool(e.get("OPENAI_BASE_URL") or e.get("OPENAI_API_KEY") or e.get("LLM_BACKEND") or e.get("LLM_GGUF_PATH"))
