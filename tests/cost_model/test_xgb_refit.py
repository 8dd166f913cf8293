"""``XGBModel(refit=False)``: one training, the early-stopped model kept at its best round.

The tune's retrainings use it (``autotune.sampling._ranker.REFIT``): the same held-out
early stopping as ``refit=True`` chooses the rounds, without the second training on all
rows.
"""

from __future__ import annotations

import numpy as np
import pytest

from cost_model import XGBModel
from cost_model._features import feature_names


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.random((n, len(feature_names()))).astype(np.float32) + 0.1
    y = np.exp(2.0 * x[:, 0] - x[:, 1] + 0.05 * rng.standard_normal(n))
    return x, y


def test_one_training_keeps_the_early_stopped_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    import xgboost as xgb

    calls: list[int] = []
    real = xgb.train

    def counting(*args: object, **kw: object) -> object:
        calls.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(xgb, "train", counting)
    x, y = _data(200)
    two, one = XGBModel(seed=0), XGBModel(seed=0, refit=False)
    two.fit(x, y)
    assert len(calls) == 2
    one.fit(x, y)
    assert len(calls) == 3
    # the same rounds chosen; the kept model stops there
    assert one._booster.num_boosted_rounds() == two._booster.num_boosted_rounds()
    assert one._booster.feature_names == two._booster.feature_names
    test_x, test_y = _data(100, seed=1)
    rho = np.corrcoef(np.argsort(np.argsort(one.predict(test_x))),
                      np.argsort(np.argsort(test_y)))[0, 1]
    assert rho > 0.8


def test_few_rows_train_once_on_all_of_them() -> None:
    x, y = _data(36)  # below 40 rows: no early stopping, all rounds on everything
    a, b = XGBModel(seed=0, refit=False), XGBModel(seed=0)
    a.fit(x, y)
    b.fit(x, y)
    assert np.allclose(a.predict(x), b.predict(x))
