"""Plots of the benchmark results (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from memory.evaluation.figures import STYLE, bars_figure, matplotlib_pyplot


def plot_recall(results: list[dict], path: str | Path, title: str = "LoCoMo evidence recall") -> Path:
    """Recall vs token budget, one line per method, one panel per retriever."""
    plt = matplotlib_pyplot()
    retrievers = list(dict.fromkeys(r["retriever"] for r in results)) or ["-"]
    lines: dict[tuple[str, str], list[tuple[int, float]]] = defaultdict(list)
    best: dict[tuple[str, int], float] = {}
    for r in results:
        if r["recall"] is not None:
            lines[(r["retriever"], r["method"])].append((r["budget"], r["recall"]))
            key = (r["method"], r["budget"])
            best[key] = max(best.get(key, 0.0), r["recall"])
    if len(retrievers) > 1:  # first panel: each method with its best retriever per budget
        for (m, b), v in best.items():
            lines[("best retriever", m)].append((b, v))
        retrievers = ["best retriever", *retrievers]
    fig, axes = plt.subplots(1, len(retrievers), figsize=(4.6 * len(retrievers), 4.2), sharey=True, squeeze=False)
    budgets = sorted({r["budget"] for r in results})
    for ax, ret in zip(axes[0], retrievers, strict=False):
        for (r2, method), pts in lines.items():
            if r2 != ret:
                continue
            pts.sort()
            color, marker = STYLE.get(method, (None, "."))
            ax.plot([b for b, _ in pts], [v for _, v in pts], marker=marker, color=color, label=method)
        ax.set_xscale("log", base=2)
        ax.set_xticks(budgets, [str(b) for b in budgets])
        ax.minorticks_off()
        ax.set_title(ret)
        ax.set_xlabel("context budget (tokens, cl100k)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("evidence recall")
    axes[0][0].set_ylim(0, 1)
    axes[0][-1].legend(loc="lower right", fontsize=8)
    return save_figure(plt, fig, title, path)


def save_figure(plt, fig, title: str, path: str | Path, dpi: int = 110) -> Path:
    """Title, tight layout, write the PNG (folders made) and free the figure."""
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def plot_scale(sizes: list[dict], path: str | Path, title: str = "Scale: latency and memory per user") -> Path:
    """Latency percentiles and peak memory against memories per user, log-log, with a linear guide."""
    plt = matplotlib_pyplot()
    ns = [s["n"] for s in sizes]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for key, color in (("link", "tab:green"), ("timeline", "tab:red"), ("secom", "tab:blue")):
        for q, style in (("p50", "--"), ("p95", "-")):
            ys = [s.get(f"{key}_ms_{q}") for s in sizes]
            if any(y is not None for y in ys):
                ax.plot(ns, ys, style, marker="o", color=color, label=f"{key} {q}")
    ys = [s.get("link_without_save_ms_p95") for s in sizes]
    if any(y is not None for y in ys):
        ax.plot(ns, ys, ":", marker="x", color="tab:green", label="link p95 without graph save")
    if len(ns) > 1:
        base = next((s.get(k) for s in sizes[:1] for k in ("timeline_ms_p50", "secom_ms_p50") if s.get(k)), 1.0)
        ax.plot(ns, [base * n / ns[0] for n in ns], ":", color="black", alpha=0.5, label="linear growth")
    ax.axhline(50, color="tab:red", alpha=0.3, lw=1)
    ax.axhline(100, color="tab:green", alpha=0.3, lw=1)
    ax.text(ns[0], 52, "50 ms target", fontsize=7, color="tab:red", alpha=0.7)
    ax.text(ns[0], 104, "100 ms target", fontsize=7, color="tab:green", alpha=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memories per user")
    ax.set_ylabel("ms per operation")
    ax.legend(fontsize=7, ncol=2)
    ax.grid(alpha=0.3, which="both")
    ax2.plot(ns, [s.get("peak_mb") for s in sizes], marker="o", color="tab:purple")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("memories per user")
    ax2.set_ylabel("peak resident memory (MB)")
    ax2.grid(alpha=0.3, which="both")
    return save_figure(plt, fig, title, path)


def plot_bars(labels: list[str], series: dict[str, list[float]], path: str | Path, title: str, ylabel: str) -> Path:
    """Grouped bars: one group per label, one bar per series."""
    return save_figure(matplotlib_pyplot(), bars_figure(labels, series, ylabel), title, path)
