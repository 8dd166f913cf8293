"""The small interface every cost model implements.

A cost model scores feature rows (:func:`cost_model.features`) of candidate
schedules: **higher score = predicted faster**. Only the order of the scores
within one call is meaningful (a tuner measures the best-scored few); a model may
additionally document what its scores are (the regression XGBoost model's are
predicted log-throughputs).

Labels are measured throughputs (samples per second, > 0): what ``sim.measure``
and the tuning log record. Schedules that did not run have no throughput and are
not training data (the search space's pre-check keeps them from being ranked).

Example:
    >>> model = XGBModel()
    >>> model.fit(features(graph, measured, target), throughputs)
    >>> scores = model.predict(features(graph, proposals, target))
    >>> best = [proposals[i] for i in np.argsort(-scores)[:8]]
"""

from __future__ import annotations

import abc

import numpy as np

from compiler.errors import GraphtuneError

__all__ = ["CostModel", "CostModelError"]


class CostModelError(GraphtuneError):
    """A cost-model file cannot be used (unreadable, not XGBoost, not graphtune's, other features),
    or training data is malformed."""


class CostModel(abc.ABC):
    """Scores candidate schedules from their feature rows (see the module doc).

    Subclasses implement :meth:`fit` and :meth:`predict`; :meth:`update` adds
    measurements and, by default, refits on everything seen.
    """

    def __init__(self) -> None:
        self._X = np.zeros((0, 0))
        self._y = np.zeros(0)

    @property
    def n_samples(self) -> int:
        """Measurements this model has been given (fit plus updates)."""
        return len(self._y)

    @abc.abstractmethod
    def fit(self, X: np.ndarray, y: np.ndarray) -> None:
        """Train on feature rows ``X`` and measured throughputs ``y`` (replaces earlier data)."""

    @abc.abstractmethod
    def predict(self, X: np.ndarray) -> np.ndarray:
        """One score per row, higher = predicted faster."""

    def update(self, X: np.ndarray, y: np.ndarray) -> None:
        """Add measurements; the default refits on all data seen so far."""
        X, y = check_training_data(X, y)
        if self.n_samples:
            if X.shape[1] != self._X.shape[1]:
                raise CostModelError(
                    f"update has {X.shape[1]} feature columns, the model was fed {self._X.shape[1]}")
            X, y = np.vstack([self._X, X]), np.concatenate([self._y, y])
        self.fit(X, y)

    def _remember(self, X: np.ndarray, y: np.ndarray) -> None:
        self._X, self._y = X, y


def check_training_data(X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X, y)`` as float arrays, or :class:`CostModelError` saying what is wrong."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).ravel()
    if X.ndim != 2:
        raise CostModelError(f"features must be a 2-D array (one row per schedule), got {X.ndim}-D")
    if len(X) != len(y):
        raise CostModelError(f"{len(X)} feature rows but {len(y)} throughputs")
    if len(y) and (not np.all(np.isfinite(y)) or np.any(y <= 0)):
        raise CostModelError("throughputs must be finite and > 0 (leave out schedules that failed)")
    return X, y
