"""Fitting the embedding segmenter's parameters on labelled dialogues (DialSeg711, TIAGE)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from memory.secom.embedding_segmenter import (
    SegParams,
    _lexical_sets,
    _sigmoid,
    _smooth,
    depth_scores,
    gap_features,
    gap_similarities,
    select_boundaries,
)


def _logistic(X: np.ndarray, y: np.ndarray, l2: float, iters: int = 50) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression by Newton's method on standardised features.

    Returns weights and bias on the *raw* feature scale.
    """
    mu, sd = X.mean(axis=0), X.std(axis=0)
    sd = np.where(sd < 1e-9, 1.0, sd)
    Z = np.hstack([(X - mu) / sd, np.ones((len(X), 1))])
    w = np.zeros(Z.shape[1])
    reg = np.full(Z.shape[1], float(l2))
    reg[-1] = 0.0  # the bias is not penalised
    for _ in range(iters):
        pr = _sigmoid(Z @ w)
        grad = Z.T @ (pr - y) + reg * w
        hess = (Z * (pr * (1 - pr))[:, None]).T @ Z + np.diag(reg) + 1e-9 * np.eye(Z.shape[1])
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    wr = w[:-1] / sd
    return wr, float(w[-1] - (w[:-1] * mu / sd).sum())


DEFAULT_GRID: dict[str, list] = {
    # learned
    "l2": [0.1, 1.0, 10.0],
    "threshold": [round(0.1 + 0.025 * i, 3) for i in range(21)],  # 0.10 .. 0.60
    "min_len": [1, 2, 3],
    # texttiling
    "window": [1, 2, 3],
    "alpha": [1.0, 0.8],
    "smooth": [0, 1],
    "c": [-0.25, 0.0, 0.25, 0.5, 0.75, 1.0],
    "min_depth": [0.0, 0.05, 0.1],
}


def _hyps(dials, scores_thr, min_len: int, max_len: int = 0) -> list[list[int]]:
    out = []
    for d, (sc, thr) in zip(dials, scores_thr, strict=False):
        n = len(d.utterances)
        h = [0] * n
        for b in select_boundaries(sc, thr, n, min_len, max_len):
            h[b] = 1
        out.append(h)
    return out


@dataclass
class _Prepared:
    """The fitting dialogues with what every search reads: embeddings, word sets, reference boundaries."""

    dials: list
    embs: list[np.ndarray]
    lexs: list[list[set[str]]]
    refs: list[list[int]]


def _prepare(labelled_dialogues, embedder) -> _Prepared:
    dials = [d for d in labelled_dialogues if len(d.utterances) >= 2]
    if not dials:
        raise ValueError("no labelled dialogue with two or more units")
    all_emb = embedder.embed([u if (u or "").strip() else "." for d in dials for u in d.utterances])
    embs, lexs, pos = [], [], 0
    for d in dials:
        embs.append(all_emb[pos : pos + len(d.utterances)])
        lexs.append(_lexical_sets(d.utterances))
        pos += len(d.utterances)
    return _Prepared(dials, embs, lexs, [list(d.boundaries) for d in dials])


def _search_texttiling(data: _Prepared, grid: dict[str, list], say: Callable[[str], None]) -> tuple[SegParams, dict]:
    """Grid search of the TextTiling parameters on all dialogues."""
    from .seg_metrics import evaluate

    best: tuple[float, SegParams | None, dict] = (-1.0, None, {})
    for window, alpha, smooth in itertools.product(grid["window"], grid["alpha"], grid["smooth"]):
        base = SegParams(method="texttiling", window=window, alpha=alpha, smooth=smooth)
        depths = [
            depth_scores(_smooth(gap_similarities(d.utterances, e, window, alpha, lx), smooth))
            for d, e, lx in zip(data.dials, data.embs, data.lexs, strict=True)
        ]
        for c, md, ml in itertools.product(grid["c"], grid["min_depth"], grid["min_len"]):
            st = [(dep, max(float(dep.mean() + c * dep.std()), md)) for dep in depths]
            res = evaluate(data.refs, _hyps(data.dials, st, ml))
            if res["score"] > best[0]:
                best = (res["score"], SegParams(**{**base.to_dict(), "c": c, "min_depth": md, "min_len": ml}), res)
                say(
                    f"score {res['score']:.4f} with window={window} alpha={alpha} smooth={smooth} "
                    f"c={c} min_depth={md} min_len={ml}"
                )
    assert best[1] is not None
    return best[1], best[2]


def _search_learned(
    data: _Prepared, grid: dict[str, list], folds: int, seed: int, say: Callable[[str], None]
) -> tuple[SegParams, dict]:
    """Cross-validated search of (l2, threshold, min_len) for the logistic gap model; the winner's
    weights are refitted on every dialogue."""
    from .seg_metrics import evaluate

    n, k = len(data.dials), max(2, folds)
    feats = [gap_features(d.utterances, e, lx) for d, e, lx in zip(data.dials, data.embs, data.lexs, strict=True)]
    labels = [np.asarray(r[1:], dtype=np.float64) for r in data.refs]
    fold_of = np.empty(n, dtype=int)
    fold_of[np.random.default_rng(seed).permutation(n)] = np.arange(n) % k
    best: tuple[float, SegParams | None, dict] = (-1.0, None, {})
    for l2 in grid["l2"]:
        probs: list[np.ndarray] = [np.zeros(0)] * n
        for f in range(k):
            train = [i for i in range(n) if fold_of[i] != f]
            w, b = _logistic(np.vstack([feats[i] for i in train]), np.concatenate([labels[i] for i in train]), l2)
            for i in range(n):
                if fold_of[i] == f:
                    probs[i] = _sigmoid(feats[i] @ w + b)
        for thr, ml in itertools.product(grid["threshold"], grid["min_len"]):
            res = evaluate(data.refs, _hyps(data.dials, [(p, thr) for p in probs], ml))
            if res["score"] > best[0]:
                best = (res["score"], SegParams(l2=l2, threshold=thr, min_len=ml), res)
                say(f"cross-validated score {res['score']:.4f} with l2={l2} threshold={thr} min_len={ml}")
    p = best[1]
    assert p is not None
    w, b = _logistic(np.vstack(feats), np.concatenate(labels), p.l2)
    weights = tuple(round(float(x), 6) for x in w)
    params = SegParams(weights=weights, bias=round(b, 6), l2=p.l2, threshold=p.threshold, min_len=p.min_len)
    return params, dict(best[2], evaluation=f"{k}-fold cross-validation on the fitting dialogues")


def fit(
    labelled_dialogues,
    embedder,
    method: str = "learned",
    grid: dict[str, list] | None = None,
    folds: int = 5,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> tuple[SegParams, dict]:
    """Fit `SegParams` on labelled dialogues (objects with `.utterances` and 0/1 `.boundaries`).

    learned: for each L2 strength, logistic weights are fitted on all but one
    fold and the held-out fold is segmented at each (threshold, min_len); the
    combination with the best cross-validated Score wins and the weights are
    refitted on every dialogue. texttiling: a grid search of the TextTiling
    parameters on all dialogues. Returns the parameters and the evaluation
    (cross-validated for learned) at those parameters.
    """
    if method not in ("learned", "texttiling"):
        raise ValueError(f"method must be learned or texttiling, not {method!r}")
    grid = {**DEFAULT_GRID, **(grid or {})}
    say = progress or (lambda m: None)
    data = _prepare(labelled_dialogues, embedder)
    if method == "texttiling":
        return _search_texttiling(data, grid, say)
    return _search_learned(data, grid, folds, seed, say)
