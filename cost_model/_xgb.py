"""``XGBModel``: gradient-boosted trees on schedule features, trained online from measurements.

Two objectives (``objective=``):

* ``"rank"``: XGBoost's pairwise ranking loss (``rank:pairwise``) on the measured
  throughputs: it learns which of two schedules is faster, the question a tuner
  asks when it keeps the best few of thousands of proposals;
* ``"regression"``: log-throughput, with absolute error (``loss="absolute"``, the
  default) or squared error (``loss="squared"``).

Both start from the roofline prior (:class:`~cost_model.AnalyticalModel`) and
learn its errors: the prior is the trees' base margin (ranking) or is subtracted
from the label (regression), so a few hundred measurements only have to correct
it; the prior's score is also an input column (``prior.analytical``), so a
correction can depend on how fast the prior thinks a schedule is.
``prior=None`` learns from the features alone. Labels of each query group
(one network, or one tuning task) are centred on their mean: only the order
within a group matters, so networks of very different speeds train one model.

Why the default ranks best (``bench/cost_model.py``, section ``objectives``): the
prior's errors are heavy-tailed. In log-throughput, on the bench's uniform samples,
the worst 5% of schedules carry 56% of the prior's squared error on BERT-base (40%
ResNet-50, 42% DeepFM) while the median error is 0.07 (0.11, 0.13). Squared error
spends the trees on that tail and adds small, noisy corrections elsewhere, which
reorder schedules the prior already ranked right; near the top (the neighbourhood
of good schedules, where the tuner works) that cost squared-error regression its
lead over the prior on BERT-base (neighbourhood Spearman 0.994 vs the prior's
0.995 at 256 measurements, against 0.996 with absolute error). Absolute error fits
the median correction and is not pulled by the tail. Pairwise ranking on the same
prior learns orders among the many pairs of slow uniform samples and ranks the
neighbourhood worst of the three (0.988 on BERT-base, 0.919 on ResNet-50 against
0.955 with absolute error).

That holds for a model trained on the network it ranks. **Across networks** it is the
other way round: the shipped pre-trained model ranks networks it never saw, and there,
scored by leaving each corpus network out (``cost_model.selection``), the absolute-error
regression orders each network's fastest quarter worse than the prior alone (Spearman
0.705 / 0.627 leaving a model / a family out, the prior 0.765) while pairwise ranking with
trees of depth 2 orders it better (0.822 / 0.819): the regression's corrections are
network-specific, the ranking's shallow ones transfer. ``tools/train_pretrained.py``
trains the shipped model so (``rank-d2``; ``bench/results/sweep.md``, sixth pass).

Until ``min_samples`` measurements exist the model predicts random scores (cold
start, as Ansor's). :meth:`update` adds measurements and retrains once the data
has grown by ``retrain_growth`` since the last training.

Files: :meth:`save` writes XGBoost's own JSON (``.json``) or UBJSON (any other
name) with graphtune's metadata as booster attributes (format version,
objective, loss, prior, prior column, feature names); :meth:`load` refuses a file that is not an
XGBoost model, not a graphtune cost model, or was trained on other features,
with one :class:`CostModelError` line. A loaded model predicts with its trees;
training it further (``fit``/``update``) continues boosting from them
(``warm_start``), which is how a pre-trained model shipped with graphtune
adapts to a new network.

Example:
    >>> m = XGBModel()                     # objective="regression"
    >>> m.update(features(graph, batch1, target), throughputs1)
    >>> m.save("cost.json"); XGBModel.load("cost.json").predict(X)
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from cost_model._base import CostModel, CostModelError, check_training_data
from cost_model._boost import train
from cost_model._features import feature_names
from cost_model._simple import AnalyticalModel

__all__ = ["XGBModel"]

FORMAT_VERSION = 1
_KIND = "graphtune.cost_model.XGBModel"
PRIOR_COLUMN = "prior.analytical"  # the trees' extra input column: AnalyticalModel's score
OBJECTIVES = {"rank": "rank:pairwise", "regression": "reg:absoluteerror"}
LOSSES = {"absolute": "reg:absoluteerror", "squared": "reg:squarederror"}


class XGBModel(CostModel):
    """XGBoost cost model (see the module doc).

    Args:
        objective: ``"regression"`` (log-throughput, the default: it ranks best, see the
            module doc) or ``"rank"`` (pairwise ranking).
        loss: Regression only: ``"absolute"`` (default) or ``"squared"`` error.
        prior: ``"analytical"`` (learn the roofline estimate's errors) or None.
        prior_column: Also give the trees the prior's score as a column (with a prior).
        min_samples: Measurements needed before the trees replace random scores.
        retrain_growth: :meth:`update` retrains once the data grew by this fraction
            since the last training (always below ``min_samples``).
        rounds: Boosting rounds of a training from scratch (default 300; 100 for ``"rank"``).
        warm_rounds: Boosting rounds added to loaded trees (``warm_start``).
        params: Extra XGBoost parameters (override the defaults).
        seed: Seeds XGBoost's sampling and the cold-start scores.
        features: Names of the columns it is fed (default :func:`cost_model.feature_names`;
            with the search space's encoding appended, ``feature_names(space)``).
        validation: Regression only: this share of the data (from 40 measurements on)
            is held out to pick the number of rounds (early stopping); the model is then
            trained on everything with that many rounds (with ``refit``). Which rows are
            held out depends on the seed and the number of rows. 0 turns it off.
        refit: With ``validation``: train the final model on everything with the rounds
            early stopping chose (True, two trainings), or keep the early-stopped model
            itself, cut at its best round (False: one training on the rest of the data,
            about half the CPU; what a tune's frequent retrainings use,
            ``autotune.sampling._ranker``).
    """

    def __init__(self, objective: str = "regression", prior: str | None = "analytical",
                 min_samples: int = 32, retrain_growth: float = 0.1, rounds: int | None = None,
                 warm_rounds: int = 100, params: dict[str, Any] | None = None,
                 seed: int = 0, features: list[str] | None = None,
                 validation: float = 0.2, prior_column: bool = True,
                 loss: str = "absolute", refit: bool = True) -> None:
        super().__init__()
        self.feature_names = list(features) if features is not None else feature_names()
        if objective not in OBJECTIVES:
            raise CostModelError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        if prior not in (None, "analytical"):
            raise CostModelError(f"prior must be 'analytical' or None, got {prior!r}")
        self.objective = objective
        self.prior = prior
        if loss not in LOSSES:
            raise CostModelError(f"loss must be one of {', '.join(LOSSES)}, got {loss!r}")
        self.prior_column = prior_column and prior is not None
        self.loss = loss
        self.min_samples = min_samples
        self.retrain_growth = retrain_growth
        self.rounds = rounds if rounds is not None else (100 if objective == "rank" else 300)
        self.warm_rounds = warm_rounds
        self.seed = seed
        self.validation = validation
        self.refit = refit
        self.params: dict[str, Any] = {
            "objective": OBJECTIVES[objective] if objective == "rank" else LOSSES[loss],
            "eta": 0.1,
            "max_depth": 6,
            "min_child_weight": 1.0,
            "subsample": 0.8,
            "colsample_bytree": 0.8,
            "seed": seed,
            # one thread: the data are small, and with more threads than free cores XGBoost's
            # OpenMP workers spin (measured: 10x slower on a loaded 2-core machine)
            "nthread": 1,
            "verbosity": 0,
        }
        if objective == "rank":
            # more pairs per sample and a smaller step: with the defaults the pairwise margins
            # grow round after round and ranking near the top gets worse (bench/cost_model.py)
            self.params.update({"lambdarank_pair_method": "mean",
                                "lambdarank_num_pair_per_sample": 32, "eta": 0.05})
        self.params.update(params or {})
        self.rng = np.random.default_rng(seed)
        self._booster: Any = None  # trees trained here
        self._base: Any = None  # trees loaded from a file (warm start)
        self._groups = np.zeros(0, dtype=np.int64)
        self._trained_on = 0

    # ---- training ------------------------------------------------------------------------------
    def fit(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> None:
        """Train on ``X`` and throughputs ``y`` (replaces earlier data).

        Args:
            X: Feature rows (:func:`cost_model.features`).
            y: Measured throughputs (> 0).
            groups: Query group per row (e.g. the network): only orders within a group
                are learnt. Default: one group.
        """
        X, y = self._check(X, y)
        g = np.zeros(len(y), dtype=np.int64) if groups is None else np.asarray(groups).ravel()
        if len(g) != len(y):
            raise CostModelError(f"{len(y)} throughputs but {len(g)} group ids")
        self._remember(X, y)
        self._groups = g
        self._train()

    def update(self, X: np.ndarray, y: np.ndarray, groups: np.ndarray | None = None) -> None:
        """Add measurements; retrain when the data grew by ``retrain_growth`` (or is small)."""
        X, y = self._check(X, y)
        g = np.zeros(len(y), dtype=np.int64) if groups is None else np.asarray(groups).ravel()
        if len(g) != len(y):
            raise CostModelError(f"{len(y)} throughputs but {len(g)} group ids")
        if self.n_samples:
            X, y = np.vstack([self._X, X]), np.concatenate([self._y, y])
            g = np.concatenate([self._groups, g])
        self._remember(X, y)
        self._groups = g
        due = self.n_samples >= (1.0 + self.retrain_growth) * self._trained_on
        if self._trained_on < self.min_samples or due:
            self._train()

    def _check(self, X: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        X, y = check_training_data(X, y)
        if X.shape[1] != len(self.feature_names):
            raise CostModelError(
                f"got {X.shape[1]} feature columns, the model uses {len(self.feature_names)}")
        return X, y

    def _train(self) -> None:
        import xgboost as xgb

        n = self.n_samples
        if n < self.min_samples and self._base is None:
            self._booster, self._trained_on = None, n
            return
        order = np.argsort(self._groups, kind="stable")  # ranking wants each query contiguous
        X, y, g = self._X[order], self._y[order], self._groups[order]
        prior = self._prior(X)
        design = self._design(X, prior)
        base = _unnamed(self._base.copy()) if self._base is not None else None
        rounds = self.warm_rounds if base is not None else self.rounds
        booster = None
        if self.objective == "regression" and self.validation and n >= 40:
            # (the label as the DMatrix below holds it: float32)
            label = _centred(np.log(y) - prior, g).astype(np.float32)
            rounds, booster = self._rounds_that_generalise(design, label, rounds, base)
        if booster is None or self.refit:
            # The matrix of all rows only when it is trained on: a tune keeps the
            # early-stopped model (refit=False), so its retrainings built it for nothing
            # (issue 20). One thread here too: building a DMatrix with OpenMP's default
            # threads costs ~12 ms (wall) on a 2-core machine against 0.9 ms with one,
            # whatever its size. No column names while training: XGBoost's Python layer
            # reads them back from C and compares them on every boosting round and every
            # evaluation (about a third of a tune's retraining, issue 20); the trees get the
            # names when trained (_named).
            d = xgb.DMatrix(design, nthread=1)
            if self.objective == "rank":
                d.set_label(np.log(y))
                d.set_base_margin(prior)
                _, counts = np.unique(g, return_counts=True)
                d.set_group(counts)
            else:
                d.set_label(_centred(np.log(y) - prior, g))
            booster = train(self.params, d, rounds, base=base)
        self._booster = self._named(booster)
        self._trained_on = n

    def _rounds_that_generalise(self, X: np.ndarray, label: np.ndarray, rounds: int,
                                base: Any) -> tuple[int, Any]:
        """Boosting rounds before a held-out share of the data stops improving (early
        stopping), and the model trained so, cut at its best round (None: nothing held out).

        The trees correct the prior; where the prior already ranks well they soon fit
        noise, and fewer rounds keep them from spoiling it.
        """
        import xgboost as xgb

        # seeded by the rows too: with the seed alone every retraining of a tune held out
        # the same rows (the same prefix of one random sequence), so without a refit about a
        # fifth of the measurements, some of the fastest among them, were never trained on
        rng = np.random.default_rng([self.seed, len(label)])
        held = rng.random(len(label)) < self.validation
        if held.all() or not held.any():
            return rounds, None
        dtr = xgb.DMatrix(X[~held], label=label[~held], nthread=1)  # unnamed: see _train
        dva = xgb.DMatrix(X[held], label=label[held], nthread=1)
        # cost_model._boost.train: xgboost.train's booster without its per-round Python
        # from scratch, not reset: only its slice is kept (cost_model._boost.train; on a
        # base the unreset booster's slice is not the reset one's)
        b = train(self.params, dtr, rounds, held=dva, early_stopping_rounds=30, base=base,
                  reset=base is not None)
        done = base.num_boosted_rounds() if base is not None else 0
        best = int(b.best_iteration) + 1
        return max(1, best - done), (b[:best] if best > done else None)

    def _named(self, booster: Any) -> Any:
        """``booster`` with this model's column names (trained without them: see _train)."""
        booster.feature_names = self._names()
        return booster

    def _names(self) -> list[str]:
        return [*self.feature_names, PRIOR_COLUMN] if self.prior_column else self.feature_names

    def _design(self, X: np.ndarray, prior: np.ndarray) -> np.ndarray:
        """The trees' input: the features, then the prior's score when ``prior_column``."""
        return np.hstack([X, prior[:, None]]) if self.prior_column else X

    def _prior(self, X: np.ndarray) -> np.ndarray:
        if self.prior is None:
            return np.zeros(len(X))
        return AnalyticalModel().predict(X)

    # ---- prediction ----------------------------------------------------------------------------
    @property
    def trained(self) -> bool:
        """Whether trees score (False: the random cold start)."""
        return self._booster is not None or self._base is not None

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Scores, higher = predicted faster.

        Ranking: the pairwise model's margin (prior included); regression: the
        predicted log-throughput up to a constant (labels are centred on their
        group's mean). Random in
        [0, 1) during the cold start.
        """
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise CostModelError(f"features must be a 2-D array, got {X.ndim}-D")
        booster = self._booster if self._booster is not None else self._base
        if booster is None:
            return self.rng.random(len(X))
        if X.shape[1] != len(self.feature_names):
            raise CostModelError(
                f"got {X.shape[1]} feature columns, the model uses {len(self.feature_names)}")
        prior = self._prior(X)
        # in place, without a DMatrix (the same margins: 0.22 against 0.44-0.53 ms for 48 rows
        # of gpt1's columns, most of it the DMatrix and its column names checked); the
        # booster's one thread (a DMatrix with OpenMP's default threads cost ~12 ms wall on
        # a 2-core machine)
        return np.asarray(booster.inplace_predict(self._design(X, prior),
                                                  predict_type="margin")) + prior

    # ---- files ---------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trees in XGBoost's format (``.json``: JSON, else UBJSON), atomically.

        Raises:
            CostModelError: the model has no trees yet (cold start), or the file
                cannot be written.
        """
        booster = self._booster if self._booster is not None else self._base
        if booster is None:
            raise CostModelError(
                f"nothing to save: the model has {self.n_samples} measurements, fewer than "
                f"min_samples={self.min_samples}")
        booster.set_attr(graphtune=_KIND, graphtune_format=str(FORMAT_VERSION),
                         objective=self.objective, prior=self.prior or "none",
                         features=json.dumps(self.feature_names),
                         prior_column="1" if self.prior_column else "0", loss=self.loss,
                         n_samples=str(self.n_samples))
        p = Path(path)
        suffix = ".json" if p.suffix == ".json" else ".ubj"
        try:
            fd, tmp = tempfile.mkstemp(dir=p.parent.resolve(), prefix=".costmodel-", suffix=suffix)
            os.close(fd)
            booster.save_model(tmp)
            os.replace(tmp, p)
        except OSError as exc:
            raise CostModelError(f"cannot write cost model {p}: {exc.strerror}") from None

    @classmethod
    def load(cls, path: str | os.PathLike[str], **kwargs: Any) -> XGBModel:
        """Read a model written by :meth:`save` (XGBoost JSON or UBJSON).

        Keyword arguments configure further training (``min_samples``, ``rounds``...).

        Raises:
            CostModelError: unreadable, not an XGBoost model, not a graphtune cost
                model, a newer format, or features other than this graphtune's.
        """
        import xgboost as xgb

        p = Path(path)
        if not p.is_file():
            raise CostModelError(f"cost model file {p} does not exist")
        try:
            booster = xgb.Booster(model_file=str(p))
        except xgb.core.XGBoostError:
            raise CostModelError(
                f"{p} is not an XGBoost model file (corrupt, truncated or another format)") from None
        if booster.attr("graphtune") != _KIND:
            raise CostModelError(f"{p} is an XGBoost model but not a graphtune cost model")
        version = booster.attr("graphtune_format") or "?"
        if not version.isdigit() or int(version) > FORMAT_VERSION:
            raise CostModelError(
                f"{p} has cost-model format {version}, newer than this graphtune's "
                f"({FORMAT_VERSION}): upgrade graphtune")
        try:
            names = json.loads(booster.attr("features") or "")
        except json.JSONDecodeError:
            names = None
        base = feature_names()
        if not isinstance(names, list) or names[: len(base)] != base:
            raise CostModelError(
                f"{p} was trained on other features than this graphtune computes: retrain it")
        objective = booster.attr("objective") or ""
        prior = booster.attr("prior")
        if objective not in OBJECTIVES or prior not in ("analytical", "none"):
            raise CostModelError(f"{p}: unknown objective {objective!r} or prior {prior!r}")
        kwargs.setdefault("prior_column", booster.attr("prior_column") == "1")
        kwargs.setdefault("loss", booster.attr("loss") or "squared")
        model = cls(objective=objective, prior=None if prior == "none" else prior,
                    features=names, **kwargs)
        model._base = booster
        return model


def _centred(v: np.ndarray, groups: np.ndarray) -> np.ndarray:
    out = v.astype(np.float64).copy()
    for g in np.unique(groups):
        m = groups == g
        out[m] -= out[m].mean()
    return out


def _unnamed(booster: Any) -> Any:
    """``booster`` without column names, to go on training on unnamed data (see
    ``XGBModel._train``); the names are put back when it is done."""
    booster.feature_names = None
    booster.feature_types = None
    return booster
