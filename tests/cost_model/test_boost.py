"""``cost_model._boost.train``: the booster ``xgboost.train`` returns, byte for byte.

The tune's retrainings go through it (``XGBModel``); it makes the same C calls without
``xgboost.train``'s per-round Python, so every case below compares the raw bytes of the
two boosters (trees, their attributes, ``best_iteration`` / ``best_score``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from cost_model._boost import train


def _d(n: int, cols: int, seed: int, label: str = "reg") -> tuple[Any, Any]:
    import xgboost as xgb

    rng = np.random.default_rng(seed)
    x = rng.random((n, cols))
    y = 2.0 * x[:, 0] - x[:, 1] + 0.3 * rng.standard_normal(n)
    if label == "bin":
        y = (y > np.median(y)).astype(float)
    held = rng.random(n) < 0.2
    return (xgb.DMatrix(x[~held], label=y[~held], nthread=1),
            xgb.DMatrix(x[held], label=y[held], nthread=1))


def _raw(booster: Any) -> bytes:
    return bytes(booster.save_raw("ubj"))


_BASE = {"eta": 0.1, "max_depth": 6, "subsample": 0.8, "colsample_bytree": 0.8, "seed": 0,
         "nthread": 1, "verbosity": 0, "max_bin": 32}


@pytest.mark.parametrize(("objective", "label", "rounds", "patience", "n"), [
    ("reg:absoluteerror", "reg", 300, 30, 240),  # a tune's retraining: stops early
    ("reg:absoluteerror", "reg", 40, 30, 120),  # runs out of rounds first
    ("reg:squarederror", "reg", 200, 5, 300),  # stops soon
    ("binary:logistic", "bin", 100, 10, 200),  # logloss: minimised
])
def test_held_out_early_stopping_gives_the_same_booster(objective: str, label: str,
                                                        rounds: int, patience: int,
                                                        n: int) -> None:
    import xgboost as xgb

    dtr, dva = _d(n, 12, n, label)
    params = {**_BASE, "objective": objective}
    want = xgb.train(params, dtr, rounds, evals=[(dva, "held")],
                     early_stopping_rounds=patience, verbose_eval=False)
    got = train(params, dtr, rounds, held=dva, early_stopping_rounds=patience)
    assert got.num_boosted_rounds() == want.num_boosted_rounds()
    assert got.best_iteration == want.best_iteration
    assert _raw(got) == _raw(want)


def test_a_score_that_only_ties_stops_after_the_patience() -> None:
    import xgboost as xgb

    dtr, dva = _d(200, 6, 11)
    params = {**_BASE, "objective": "reg:squarederror", "min_child_weight": 1e9}  # no split
    want = xgb.train(params, dtr, 100, evals=[(dva, "held")], early_stopping_rounds=4,
                     verbose_eval=False)
    got = train(params, dtr, 100, held=dva, early_stopping_rounds=4)
    assert want.num_boosted_rounds() < 100
    assert _raw(got) == _raw(want)


def test_a_maximised_metric_stops_as_xgboost_does() -> None:
    import xgboost as xgb

    dtr, dva = _d(300, 8, 5, "bin")
    params = {**_BASE, "objective": "binary:logistic", "eval_metric": ["logloss", "auc"]}
    want = xgb.train(params, dtr, 200, evals=[(dva, "held")], early_stopping_rounds=8,
                     verbose_eval=False)
    got = train(params, dtr, 200, held=dva, early_stopping_rounds=8)
    assert want.num_boosted_rounds() < 200  # the case stops early (on auc, the last metric)
    assert _raw(got) == _raw(want)


def test_no_held_out_set_and_a_base_to_continue() -> None:
    import xgboost as xgb

    dtr, dva = _d(200, 10, 7)
    params = {**_BASE, "objective": "reg:absoluteerror"}
    assert _raw(train(params, dtr, 50)) == _raw(xgb.train(params, dtr, 50))
    # no row or column sampling on a base: XGBoost's own random state is not reset when it
    # continues a model (two xgboost.train calls from one base give two boosters)
    params = {**params, "subsample": 1.0, "colsample_bytree": 1.0}
    base = xgb.train(params, dtr, 20)
    want = xgb.train(params, dva, 60, evals=[(dtr, "held")], early_stopping_rounds=5,
                     verbose_eval=False, xgb_model=base.copy())
    got = train(params, dva, 60, held=dtr, early_stopping_rounds=5, base=base.copy())
    assert got.best_iteration == want.best_iteration  # counted from the base's rounds
    assert _raw(got) == _raw(want)


def test_without_xgboost_internals_it_is_xgboost_train(monkeypatch: pytest.MonkeyPatch) -> None:
    dtr, dva = _d(150, 6, 9)
    params = {**_BASE, "objective": "reg:squarederror"}
    want = _raw(train(params, dtr, 80, held=dva, early_stopping_rounds=5))
    from cost_model import _boost

    monkeypatch.setattr(_boost, "_internals", lambda: None)
    assert _raw(train(params, dtr, 80, held=dva, early_stopping_rounds=5)) == want


def test_an_unreset_booster_slices_to_the_reset_ones_slice() -> None:
    """``reset=False`` (XGBModel's early stopping keeps only a slice): the slice is the
    reset booster's slice in every form a tune uses (JSON, UBJSON, pickle, configuration,
    margins), trained from scratch (on a base it is not: XGBModel resets there); and the
    booster really is left unreset."""
    import pickle

    import xgboost as xgb

    dtr, dva = _d(260, 10, 4)
    params = {**_BASE, "objective": "reg:absoluteerror"}
    forms = []
    for reset in (True, False):
        b = train(params, dtr, 300, held=dva, early_stopping_rounds=30, reset=reset)
        best = int(b.best_iteration) + 1
        assert best < b.num_boosted_rounds()  # stopped early: a real slice
        s = b[:best]
        forms.append((bytes(s.save_raw("json")), _raw(s), pickle.dumps(s), s.save_config(),
                      s.inplace_predict(np.ones((3, 10)), predict_type="margin").tobytes()))
    assert forms[0] == forms[1]
    calls: list[int] = []
    real = xgb.Booster.reset

    def counted(self: Any) -> Any:
        calls.append(1)
        return real(self)

    try:
        xgb.Booster.reset = counted  # type: ignore[method-assign]
        train(params, dtr, 5, reset=False)
        assert not calls
        train(params, dtr, 5)
        assert calls
    finally:
        xgb.Booster.reset = real  # type: ignore[method-assign]


def test_xgb_model_slices_an_unreset_booster(monkeypatch: pytest.MonkeyPatch,
                                            tmp_path: Any) -> None:
    """XGBModel's early stopping (refit=False, a tune's) trains without the reset: its
    early-stopped booster is only sliced. Not on a loaded base (there the slices differ)."""
    from cost_model import XGBModel, _xgb
    from cost_model._features import feature_names

    seen: list[bool] = []
    real = _xgb.train

    def spy(*a: Any, **k: Any) -> Any:
        seen.append(k.get("reset", True))
        return real(*a, **k)

    monkeypatch.setattr(_xgb, "train", spy)
    rng = np.random.default_rng(0)
    x = rng.random((120, len(feature_names()))) + 0.1
    y = np.exp(x[:, 0])
    model = XGBModel(seed=0, refit=False)
    model.fit(x, y)
    assert seen == [False]
    model.save(tmp_path / "m.json")
    seen.clear()
    XGBModel.load(tmp_path / "m.json", refit=False).fit(x, y)
    assert seen == [True]
