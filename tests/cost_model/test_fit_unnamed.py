"""XGBModel trains on unnamed columns (issue 20: a third of a tune's retraining was XGBoost
reading and comparing column names every round) and gets the trees of named training."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cost_model import XGBModel, feature_names


@pytest.fixture(scope="module")
def rows() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(3)
    n = len(feature_names())
    X = rng.random((90, n)) * rng.integers(1, 1000, size=n)
    y = np.exp(0.002 * X[:, 0] - 0.001 * X[:, 3] + rng.normal(0, 0.05, len(X)))
    return X, y


def _named_training(monkeypatch: pytest.MonkeyPatch, model: XGBModel) -> list[bool]:
    """Make every DMatrix of ``model``'s training carry the column names (the old way);
    returns a list that records, per DMatrix built, whether it had names."""
    import xgboost as xgb

    real = xgb.DMatrix
    seen: list[bool] = []

    class Named(real):  # type: ignore[misc,valid-type]
        def __init__(self, data: Any, *a: Any, **k: Any) -> None:
            k.setdefault("feature_names", model._names())
            seen.append(True)
            super().__init__(data, *a, **k)

    monkeypatch.setattr(xgb, "DMatrix", Named)
    monkeypatch.setattr(model, "_named", lambda b: b)
    return seen


@pytest.mark.parametrize("validation", [0.2, 0.0])
def test_unnamed_training_gives_the_named_trees(monkeypatch: pytest.MonkeyPatch, validation: float,
                                                rows: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = rows
    new = XGBModel(rounds=40, validation=validation)
    new.fit(X, y)
    old = XGBModel(rounds=40, validation=validation)
    with monkeypatch.context() as mp:
        seen = _named_training(mp, old)
        old.fit(X, y)
    assert seen  # the reference really trained on named columns
    assert new._booster.feature_names == old._booster.feature_names == new._names()
    assert new._booster.num_boosted_rounds() == old._booster.num_boosted_rounds()
    assert np.array_equal(new.predict(X), old.predict(X))
    assert new._booster.save_raw("json") == old._booster.save_raw("json")


def test_loaded_trees_train_on_unnamed_and_keep_their_names(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rows: tuple[np.ndarray, np.ndarray]
) -> None:
    X, y = rows
    m = XGBModel(rounds=20)
    m.fit(X[:60], y[:60])
    m.save(tmp_path / "m.json")
    new = XGBModel.load(tmp_path / "m.json", warm_rounds=6)
    new.update(X[60:], y[60:])
    old = XGBModel.load(tmp_path / "m.json", warm_rounds=6)
    with monkeypatch.context() as mp:
        _named_training(mp, old)
        old.update(X[60:], y[60:])
    assert new._base.feature_names == new._names()  # the loaded trees are not changed
    assert new._booster.feature_names == new._names()
    assert new._booster.num_boosted_rounds() == old._booster.num_boosted_rounds() > 20
    assert np.array_equal(new.predict(X), old.predict(X))
    with pytest.raises(ValueError, match="feature_names mismatch"):  # names still checked
        import xgboost as xgb

        wide = np.hstack([X[:2], X[:2, :1]])  # the trees' width (the prior's column)
        new._booster.predict(xgb.DMatrix(wide, feature_names=[f"c{i}" for i in range(
            wide.shape[1])]))
