"""The guided sampler's view of a cost model: featurise, fit, predict (higher = faster).

:func:`default_ranker` uses the ``cost_model`` package (``cost_model.features``
and ``cost_model.XGBModel``) when it provides them; until then it uses
:class:`EncodingXGB`, an XGBoost regressor on the search space's own encoding.
Tests pass any object with the same three methods.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from search_space import Space

__all__ = ["FIT_PARAMS", "REFIT", "CostModelRanker", "EncodingXGB", "Ranker", "default_ranker"]

log = logging.getLogger("autotune.tune")

FIT_PARAMS: dict[str, Any] = {"nthread": 1, "max_bin": 32}
"""XGBoost parameters of the models a tune retrains (on top of ``cost_model.XGBModel``'s).

One thread (see ``XGBModel``). ``max_bin`` 32 instead of XGBoost's 256: a tune trains on
at most a few thousand rows, and with ``hist`` trees the split search costs in proportion
to the bins per feature at every node, not to the rows: on a 2-worker tune's own
measurements (ResNet-50 b16 and BERT-base s128 b8, 1,000 each; trained on the first
n = 64, 128, ..., 960, ranking the next 128, three seeds) a fit took 3.8x (ResNet-50) and
2.5x (BERT-base) less CPU, with the same ranking: Spearman 0.956 / 0.948 against 0.958 /
0.952, pairs ordered right 0.936 / 0.939 against 0.937 / 0.940 (issue 20,
``bench/results/space_ccore.md``)."""


REFIT = False
"""``cost_model.XGBModel(refit=...)`` of the models a tune retrains: False keeps the
early-stopped model (trained on 80 % of the rows, cut at its best round) instead of
training a second time on all of them with that many rounds: one training instead of two
(issue 20: retraining was 2.5-4.9 ms of CPU per measurement in 2-worker tunes)."""


class Ranker(Protocol):
    """What the guided sampler needs from a cost model.

    Attributes:
        label: What ranks now, for records (``"xgb/n=64"``, ``"analytical"``); ``""``
            while predictions are random (the sampler then searches near the best
            measured schedules instead).
    """

    label: str

    def features(self, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        """One row per schedule."""
        ...

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        """(Re)train on all data so far; ``y`` is the speed (> 0, higher = faster)."""
        ...

    def predict(self, x: np.ndarray) -> np.ndarray:
        """A score per row, higher = predicted faster."""
        ...


# A ranker may also have ``snapshot() -> autotune.sampling._breed.Scorer``: a picklable copy of the
# model as it is now, so breeding can run on the measurer workers. Without it, the guided
# sampler breeds in the driver's process.


class EncodingXGB:
    """XGBoost regression of ``log(y)`` on the space's encoding (categorical choice indices).

    Random scores until ``min_samples`` measurements exist (cold start).
    """

    name = "xgb-enc"

    def __init__(self, space: Space, seed: int | None = None, min_samples: int = 16) -> None:
        self._space = space
        self._seed = 0 if seed is None else seed
        self._rng = np.random.default_rng(seed)
        self._min = min_samples
        self._booster: Any = None
        self.label = ""

    def features(self, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        return self._space.encode_many(list(schedules)).astype(np.float32)

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        if len(y) < self._min:
            return
        import xgboost as xgb

        logy = np.log(y)
        dtrain = xgb.DMatrix(x, label=logy - float(np.mean(logy)), nthread=1)
        params = {"max_depth": 6, "eta": 0.2, "subsample": 0.8, "colsample_bytree": 0.8,
                  "min_child_weight": 1, "nthread": 1, "seed": self._seed,
                  "objective": "reg:squarederror", "verbosity": 0}
        self._booster = xgb.train(params, dtrain, num_boost_round=100)
        self.label = f"{self.name}/n={len(y)}"

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self._booster is None:
            return self._rng.random(len(x))
        import xgboost as xgb

        return np.asarray(self._booster.predict(xgb.DMatrix(x, nthread=1)), dtype=np.float64)

    def snapshot(self) -> _EncodingScorer:
        """The model as it is now, picklable (see :class:`autotune.sampling._breed.Scorer`)."""
        return _EncodingScorer(self._booster, self.label)


class _EncodingScorer:
    """:class:`EncodingXGB`'s trees on a worker (random scores before it has any)."""

    def __init__(self, booster: Any, label: str) -> None:
        self._booster = booster
        self.label = label

    def features(self, space: Space, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        return space.encode_many(list(schedules)).astype(np.float32)

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self._booster is None:
            return np.random.default_rng().random(len(x))
        import xgboost as xgb

        return np.asarray(self._booster.predict(xgb.DMatrix(x, nthread=1)), dtype=np.float64)


class CostModelRanker:
    """``cost_model.features`` + ``cost_model.XGBModel`` behind the :class:`Ranker` calls.

    The guided sampler decides when to retrain (on a geometric schedule); each
    retraining fits a fresh model on one thread (:data:`FIT_PARAMS`) and swaps it in when
    done. Until it has trees
    (its cold start), ``cost_model.AnalyticalModel`` ranks: the roofline estimate the
    trees later correct, rather than the random scores of a cold XGBoost model.
    """

    name = "xgb"

    def __init__(self, graph: Graph, target: Target, seed: int | None = None) -> None:
        import cost_model

        self._graph = graph
        self._target = target
        self._features = cost_model.features  # type: ignore[attr-defined,unused-ignore]
        self._model_cls = cost_model.XGBModel  # type: ignore[attr-defined,unused-ignore]
        self._seed = 0 if seed is None else seed
        self._model = self._new_model()
        self._prior = cost_model.AnalyticalModel()  # type: ignore[attr-defined,unused-ignore]
        self.label = "analytical"

    def _new_model(self) -> Any:
        return self._model_cls(seed=self._seed, params=dict(FIT_PARAMS), refit=REFIT)

    def features(self, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        return np.asarray(self._features(self._graph, list(schedules), self._target))

    def fit(self, x: np.ndarray, y: np.ndarray) -> None:
        """Train a new model on all of ``x, y``, then put it in place of the old one.

        The old model answers :meth:`predict` until the new one is ready, so the
        guided sampler may call this on a thread (``GuidedOptions.background_fit``).
        """
        model = self._new_model()
        model.fit(x, y)
        self._model = model
        if model.trained:
            self.label = f"{self.name}/n={model.n_samples}"

    def predict(self, x: np.ndarray) -> np.ndarray:
        model = self._model if self._model.trained else self._prior
        return np.asarray(model.predict(x), dtype=np.float64)

    def snapshot(self) -> _CostModelScorer:
        """The model as it is now, picklable (see :class:`autotune.sampling._breed.Scorer`).

        A retraining replaces the model object rather than changing it, so the snapshot
        stays as it was taken.
        """
        model = self._model if self._model.trained else self._prior
        return _CostModelScorer(model, self.label)


class _CostModelScorer:
    """A ``cost_model`` model on a worker: features of the worker's copy of the graph."""

    def __init__(self, model: Any, label: str) -> None:
        self._model = model
        self.label = label

    def features(self, space: Space, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        import cost_model

        rows = cost_model.features(space.graph, list(schedules), space.target)  # type: ignore[attr-defined,unused-ignore]
        return np.asarray(rows, dtype=np.float32)

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(self._model.predict(x), dtype=np.float64)


def default_ranker(space: Space, graph: Graph, target: Target, seed: int | None) -> Ranker:
    """The cost model of the ``cost_model`` package if it has one, else :class:`EncodingXGB`."""
    try:
        import cost_model
    except ImportError:  # pragma: no cover - the package ships with graphtune
        cost_model = None  # type: ignore[assignment]
    if cost_model is not None and hasattr(cost_model, "XGBModel") and hasattr(cost_model, "features"):
        import xgboost  # noqa: F401 - now, not on the first retraining's thread in the run
        return CostModelRanker(graph, target, seed)
    return EncodingXGB(space, seed)
