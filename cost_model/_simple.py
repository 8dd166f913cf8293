"""Two cost models without learning: random scores, and a roofline estimate from the features."""

from __future__ import annotations

import numpy as np

from cost_model._base import CostModel, check_training_data
from cost_model._features import FEATURES

__all__ = ["AnalyticalModel", "RandomModel", "analytical_cycles"]

_COL = {f.name: i for i, f in enumerate(FEATURES)}
# the resources a step competes for: the busiest core's compute, DDR, LLB, NoC, a DMA port
_ROOFLINE = ("compute_group_critical", "ddr_cycles", "llb_cycles", "noc_cycles",
             "port_max_cycles")


def analytical_cycles(X: np.ndarray) -> np.ndarray:
    """Roofline estimate of each schedule's latency, in reference times (see ``features``).

    The larger of two rooflines, plus the steps' fixed costs: the whole schedule at
    its slowest resource (compute on the critical cores, DDR, LLB, NoC, the busiest
    DMA port: each works in parallel with the others), and the groups one after
    another, each at its own bottleneck (``group_roofline_cycles``: a graph cut
    where one tensor crosses runs its groups mostly in sequence). Every step then
    pays its DMA setup and DDR latency once.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] < len(FEATURES):
        raise ValueError(f"expected feature rows with at least {len(FEATURES)} columns")
    whole = X[:, [_COL[n] for n in _ROOFLINE]].max(axis=1)
    est = np.maximum(whole, X[:, _COL["group_roofline_cycles"]]) + X[:, _COL["step_overhead_cycles"]]
    return np.maximum(est, 1e-12)


class RandomModel(CostModel):
    """Uniformly random scores (a seeded generator): the baseline every model must beat."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)

    def fit(self, X: np.ndarray, y: np.ndarray) -> None:
        """Remember the data (nothing to learn)."""
        self._remember(*check_training_data(X, y))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Random scores in [0, 1)."""
        return self.rng.random(len(X))


class AnalyticalModel(CostModel):
    """Roofline-style estimate from the features (:func:`analytical_cycles`); learns nothing.

    Scores are ``-log(estimated latency / reference time)``: the predicted
    log-throughput up to a per-network constant. Used for comparison and as the
    prior the XGBoost model corrects.
    """

    def fit(self, X: np.ndarray, y: np.ndarray) -> None:
        """Remember the data (the estimate has no parameters)."""
        self._remember(*check_training_data(X, y))

    def predict(self, X: np.ndarray) -> np.ndarray:
        """``-log`` of the roofline estimate: higher = faster."""
        return -np.log(analytical_cycles(X))
