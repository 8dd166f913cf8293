"""Choosing a cost model's training settings by cross-validation over networks.

The shipped model (``tools/train_pretrained.py``) is used on networks that were not in
its corpus, so its settings are chosen by how it ranks a network it has not seen:
every fold leaves out all rows of some networks (one zoo model, or one family of
models, on every target), trains on the rest and scores the rows left out. Each
left-out query group (a network on a target) is scored on its own, by the rank
quality that matters to a search that keeps the best few proposals, not by the
error of the predicted speeds:

* ``spearman_top``: Spearman's rank correlation over the group's fastest quarter
  (by measured speed; :func:`cost_model.metrics.spearman_top`): whether the model
  orders the schedules a search works among;
* ``recall10``: the share of the group's fastest 10 % among its best-scored 10 %
  (:func:`cost_model.metrics.top_k_recall`);
* ``spearman``: Spearman over the whole group.

A result is the mean over all left-out groups, and the roofline estimate
(:class:`cost_model.AnalyticalModel`) is scored on the same groups as the
reference a transferred model has to beat (a tune falls back on it).

Example:
    >>> folds = fold_labels(groups, {g: family_of[g] for g in set(groups)})
    >>> cross_validate(lambda: XGBModel(rounds=100), x, y, groups, folds)
    CVScore(spearman_top=0.41, recall10=0.52, spearman=0.88, groups=36)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cost_model._simple import AnalyticalModel
from cost_model.metrics import spearman, spearman_top, top_k_recall

__all__ = ["CVScore", "cross_validate", "fold_labels", "score_groups"]


@dataclass(frozen=True)
class CVScore:
    """Mean rank quality over the left-out query groups (see the module doc).

    Attributes:
        spearman_top: Mean Spearman over each group's fastest quarter.
        recall10: Mean top-10 % recall.
        spearman: Mean Spearman over each whole group.
        groups: How many groups were scored.
        worst_top: The lowest ``spearman_top`` of a group (the worst case a search meets).
    """

    spearman_top: float
    recall10: float
    spearman: float
    groups: int
    worst_top: float


def fold_labels(groups: np.ndarray, fold_of_group: Mapping[int, str]) -> np.ndarray:
    """The fold of each row: ``fold_of_group`` of its query group.

    Raises:
        KeyError: a group has no fold.
    """
    g = np.asarray(groups).ravel()
    return np.asarray([fold_of_group[int(v)] for v in g], dtype=object)


def score_groups(scores: np.ndarray, y: np.ndarray, groups: np.ndarray) -> CVScore:
    """The rank quality of ``scores`` against the measured speeds ``y``, per query group,
    averaged (groups of fewer than 8 rows are skipped: their quarter orders nothing)."""
    s, t, g = (np.asarray(v).ravel() for v in (scores, y, groups))
    tops, recalls, whole = [], [], []
    for gid in np.unique(g):
        m = g == gid
        if m.sum() < 8:
            continue
        tops.append(spearman_top(s[m], t[m], 0.25))
        recalls.append(top_k_recall(s[m], t[m], 0.1))
        whole.append(spearman(s[m], t[m]))
    if not tops:
        return CVScore(0.0, 0.0, 0.0, 0, 0.0)
    return CVScore(float(np.mean(tops)), float(np.mean(recalls)), float(np.mean(whole)),
                   len(tops), float(np.min(tops)))


def cross_validate(make_model: Callable[[], Any] | None, x: np.ndarray, y: np.ndarray,
                   groups: np.ndarray, folds: np.ndarray) -> CVScore:
    """Leave each fold out in turn: train ``make_model()`` on the other folds' rows (with
    their query groups), predict the fold's rows, then score every left-out group.

    Args:
        make_model: A fresh model with ``fit(x, y, groups)`` and ``predict(x)``; None
            scores the roofline estimate (:class:`AnalyticalModel`, nothing trained).
        x: Feature rows.
        y: Measured throughputs.
        groups: Query group per row (a network on a target).
        folds: Fold label per row (:func:`fold_labels`); every row of a group must be in
            the same fold.

    Raises:
        ValueError: fewer than two folds, or a group split across folds.
    """
    x = np.asarray(x, dtype=np.float64)
    y, groups, folds = (np.asarray(v).ravel() for v in (y, groups, folds))
    names = sorted({str(f) for f in folds})
    if len(names) < 2:
        raise ValueError(f"cross-validation needs at least two folds, got {len(names)}")
    for gid in np.unique(groups):
        if len({str(f) for f in folds[groups == gid]}) > 1:
            raise ValueError(f"query group {gid} is split across folds")
    scores = np.zeros(len(y))
    for name in names:
        out = np.asarray([str(f) == name for f in folds])
        if make_model is None:
            scores[out] = AnalyticalModel().predict(x[out])
            continue
        model = make_model()
        model.fit(x[~out], y[~out], groups[~out])
        scores[out] = np.asarray(model.predict(x[out]), dtype=np.float64)
    return score_groups(scores, y, groups)
