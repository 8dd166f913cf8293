"""How well scores rank schedules: Spearman (overall and among the fastest), pairwise
accuracy, top-k recall.

Every function takes ``(scores, truth)``: a model's scores (higher = predicted
faster) and the measured throughputs (higher = faster) of the same schedules.

Example:
    >>> spearman(model.predict(X), y), pairwise_accuracy(model.predict(X), y)
    >>> top_k_recall(model.predict(X), y, 0.1)   # share of the true best 10% found
    >>> spearman_top(model.predict(X), y, 0.25)  # the order among the fastest quarter
"""

from __future__ import annotations

import numpy as np

__all__ = ["pairwise_accuracy", "spearman", "spearman_top", "top_k_recall"]


def _pair(scores: np.ndarray, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64).ravel()
    t = np.asarray(truth, dtype=np.float64).ravel()
    if len(s) != len(t):
        raise ValueError(f"{len(s)} scores but {len(t)} measurements")
    return s, t


def spearman(scores: np.ndarray, truth: np.ndarray) -> float:
    """Spearman rank correlation (ties share their mean rank); 0 when either side is constant."""
    s, t = _pair(scores, truth)
    if len(s) < 2:
        return 0.0
    from scipy.stats import rankdata  # here, not at import: scipy.stats costs ~0.5-0.9 s to
    # import, and every tune (and each of its workers) imports this package for its ranker

    rs, rt = rankdata(s), rankdata(t)
    rs -= rs.mean()
    rt -= rt.mean()
    den = np.sqrt((rs * rs).sum() * (rt * rt).sum())
    return float((rs * rt).sum() / den) if den > 0 else 0.0


def spearman_top(scores: np.ndarray, truth: np.ndarray, fraction: float = 0.25) -> float:
    """Spearman rank correlation among the truly fastest ``fraction`` of the schedules only.

    ``k = max(2, round(fraction * n))`` schedules of highest ``truth`` (ties by position);
    whether the scores order the schedules a search works among, where an overall
    correlation is dominated by the many slow ones. 0 with fewer than two schedules.
    """
    s, t = _pair(scores, truth)
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    if len(s) < 2:
        return 0.0
    k = min(len(s), max(2, round(fraction * len(s))))
    best = np.argsort(-t, kind="stable")[:k]
    return spearman(s[best], t[best])


def pairwise_accuracy(scores: np.ndarray, truth: np.ndarray, max_pairs: int = 200_000,
                      seed: int = 0) -> float:
    """Share of pairs with different measurements that the scores order the same way.

    A tie in the scores counts half. All pairs when there are at most
    ``max_pairs``, else that many drawn at random (seeded).
    """
    s, t = _pair(scores, truth)
    n = len(s)
    if n < 2:
        return 0.5
    if n * (n - 1) // 2 <= max_pairs:
        i, j = np.triu_indices(n, 1)
    else:
        rng = np.random.default_rng(seed)
        i, j = rng.integers(n, size=max_pairs), rng.integers(n, size=max_pairs)
    dt = np.sign(t[i] - t[j])
    keep = dt != 0
    if not keep.any():
        return 0.5
    ds = np.sign(s[i] - s[j])[keep]
    dt = dt[keep]
    return float(np.mean(np.where(ds == 0, 0.5, ds == dt)))


def top_k_recall(scores: np.ndarray, truth: np.ndarray, fraction: float = 0.1) -> float:
    """Share of the truly best ``fraction`` found among the best-scored ``fraction``.

    ``k = max(1, round(fraction * n))``; ties in the scores are broken by position.
    """
    s, t = _pair(scores, truth)
    if not 0 < fraction <= 1:
        raise ValueError(f"fraction must be in (0, 1], got {fraction}")
    n = len(s)
    if n == 0:
        return 0.0
    k = max(1, round(fraction * n))
    best = set(np.argsort(-t, kind="stable")[:k].tolist())
    picked = np.argsort(-s, kind="stable")[:k]
    return float(sum(1 for i in picked.tolist() if i in best) / k)
