"""The recall figures the evaluation tab shows and the benchmarks save (matplotlib, Agg backend: no
display needed)."""

from __future__ import annotations

from collections import defaultdict


def matplotlib_pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


STYLE = {
    "turn": ("tab:gray", "o"),
    "session": ("tab:brown", "s"),
    "secom": ("tab:blue", "^"),
    "secom-raw": ("tab:cyan", "v"),
    "theanine-topk": ("tab:orange", "D"),
    "theanine-timeline": ("tab:red", "P"),
}


def bars_figure(labels: list[str], series: dict[str, list[float]], ylabel: str, figsize=None, values: bool = True):
    """Grouped bars, one group per label and one bar per series; unsaved (`values`: each bar's value
    written on it)."""
    plt = matplotlib_pyplot()
    fig, ax = plt.subplots(figsize=figsize or (max(6, 1.3 * len(labels) * max(1, len(series)) / 2), 4.2))
    width = 0.8 / max(1, len(series))
    for i, (name, vals) in enumerate(series.items()):
        xs = [j + (i - (len(series) - 1) / 2) * width for j in range(len(labels))]
        bars = ax.bar(xs, vals, width, label=name)
        if values:
            ax.bar_label(bars, fmt="%g", fontsize=7)
    ax.set_xticks(range(len(labels)), labels, rotation=15, fontsize=8)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3, axis="y")
    return fig


def answers_figure(summary: list[dict], figsize=(9.0, 4.4)):
    """Token F1 of each strategy's answers, overall and per LoCoMo category (`bench answers`'s
    summary rows); unsaved."""
    from .scoring import CATEGORY_NAMES

    labels = ["all", *CATEGORY_NAMES.values()]
    series = {s["strategy"]: [s["f1"]] + [s["f1_by_category"].get(c, 0.0) for c in CATEGORY_NAMES] for s in summary}
    return bars_figure(labels, series, "token F1", figsize=figsize, values=False)


_DASH = {"bm25": "-", "dense": "--", "hybrid": ":"}


def strategy_figure(results: list[dict], title: str = "Evidence recall", figsize=(7.0, 5.2)):
    """Recall vs token budget in one panel, one line per strategy (method, summariser, retriever):
    colour by method, dashes by retriever; unsaved. The app's evaluation tab shows it."""
    plt = matplotlib_pyplot()
    lines: dict[str, list[tuple[int, float]]] = defaultdict(list)
    kind: dict[str, tuple[str, str]] = {}
    for r in results:
        if r["recall"] is None:
            continue
        label = r.get("strategy") or f"{r['method']} ({r['retriever']})"
        lines[label].append((r["budget"], r["recall"]))
        kind[label] = (r["method"], r["retriever"])
    fig, ax = plt.subplots(figsize=figsize)
    for label, pts in lines.items():
        pts.sort()
        method, retriever = kind[label]
        color, marker = STYLE.get(method, (None, "."))
        ax.plot(
            [b for b, _ in pts], [v for _, v in pts], _DASH.get(retriever, "-"), marker=marker, color=color, label=label
        )
    budgets = sorted({r["budget"] for r in results})
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets, [str(b) for b in budgets])
    ax.minorticks_off()
    ax.set_ylim(0, 1.02)
    ax.set_xlabel("context budget (tokens, cl100k)")
    ax.set_ylabel("evidence recall")
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, fontsize=7, frameon=False)
    fig.tight_layout()
    return fig
