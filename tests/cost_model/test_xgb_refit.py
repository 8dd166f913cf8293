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
    from cost_model import _xgb

    calls: list[int] = []
    real = _xgb.train  # cost_model._boost.train: xgboost.train's booster (test_boost)

    def counting(*args: object, **kw: object) -> object:
        calls.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_xgb, "train", counting)
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


def test_one_training_on_a_base_keeps_the_base_rounds(tmp_path: object) -> None:
    """On a loaded model (a shipped or transferred base) the early-stopped booster holds the
    base's rounds and then the chosen ones (a slice from the base's end dropped them)."""
    from pathlib import Path

    x, y = _data(200)
    base = XGBModel(seed=0)
    base.fit(x, y)
    path = Path(str(tmp_path)) / "base.json"
    base.save(path)
    done = base._booster.num_boosted_rounds()
    more_x, more_y = _data(120, seed=2)
    two = XGBModel.load(path, seed=0)
    one = XGBModel.load(path, seed=0, refit=False)
    two.fit(more_x, more_y)
    one.fit(more_x, more_y)
    assert one._booster.num_boosted_rounds() == two._booster.num_boosted_rounds() > done
    test_x, test_y = _data(100, seed=1)
    rho = np.corrcoef(np.argsort(np.argsort(one.predict(test_x))),
                      np.argsort(np.argsort(test_y)))[0, 1]
    assert rho > 0.8



def test_the_held_out_rows_change_with_the_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """Which rows early stopping holds out depends on the number of rows: with the seed
    alone every retraining of a tune held out the same rows (one random sequence's prefix),
    which a model kept without a refit then never saw."""
    real = np.random.default_rng
    held: list[np.ndarray] = []

    class Spy:
        def __init__(self, seed: object) -> None:
            self._rng = real(seed)  # type: ignore[arg-type]

        def random(self, n: object) -> np.ndarray:
            out = self._rng.random(n)  # type: ignore[arg-type]
            if isinstance(n, int):  # the held-out draw (not the test's data)
                held.append(out < 0.2)
            return out

        def __getattr__(self, name: str) -> object:
            return getattr(self._rng, name)

    def spy(seed: object = None) -> Spy:
        return Spy(seed)

    monkeypatch.setattr(np.random, "default_rng", spy)
    x, y = _data(400)
    for n in (100, 101):
        XGBModel(seed=0, refit=False).fit(x[:n], y[:n])
    assert len(held) == 2 and len(held[0]) == 100 and len(held[1]) == 101
    assert (held[0] != held[1][:100]).any()  # the same prefix before


@pytest.mark.parametrize("objective", ["regression", "rank"])
def test_predict_gives_the_margins_of_a_dmatrix_prediction(objective: str) -> None:
    """``XGBModel.predict`` predicts in place (no DMatrix): the same scores, bit for bit, as
    the booster's prediction on a DMatrix with the model's column names (what it did)."""
    import xgboost as xgb

    rng = np.random.default_rng(3)
    model = XGBModel(objective=objective, refit=False)
    n = len(model.feature_names)
    x = rng.random((120, n))
    model.fit(x, rng.random(120) + 0.5, None if objective == "regression"
              else np.repeat(np.arange(4), 30))
    q = rng.random((37, n))
    q[3, 5] = np.nan  # a missing value goes down the trees' default branch either way
    prior = model._prior(q)
    d = xgb.DMatrix(model._design(q, prior), feature_names=model._names(), nthread=1)
    want = np.asarray(model._booster.predict(d, output_margin=True)) + prior
    assert np.array_equal(model.predict(q), want, equal_nan=True)


def test_the_kept_model_is_trained_without_a_matrix_of_all_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``refit=False`` trains on the held-in rows only: no DMatrix of all of them is built
    (issue 20: a tune's retrainings built one for nothing), and the trees are those the
    label read back from such a matrix gave (its float32 label)."""
    import xgboost as xgb

    from cost_model import _xgb

    x, y = _data(200)
    model = XGBModel(seed=0, refit=False)
    # the reference: the early-stopped trees from the whole matrix's label, as before
    design = model._design(x.astype(np.float64), model._prior(x))
    whole = xgb.DMatrix(design, nthread=1)
    whole.set_label(_xgb._centred(np.log(y) - model._prior(x), np.zeros(len(y), dtype=np.int64)))
    _, want = model._rounds_that_generalise(design, whole.get_label(), model.rounds, None)
    real = xgb.DMatrix
    rows: list[int] = []

    class Counted(real):  # type: ignore[misc,valid-type]
        def __init__(self, data: np.ndarray, *a: object, **k: object) -> None:
            rows.append(len(data))
            super().__init__(data, *a, **k)

    monkeypatch.setattr(xgb, "DMatrix", Counted)
    model.fit(x, y)
    assert rows and 200 not in rows and sum(rows) == 200  # held in + held out
    assert model._booster.save_raw("json") == model._named(want).save_raw("json")
    # with refit the whole matrix is built (and trained on)
    rows.clear()
    XGBModel(seed=0).fit(x, y)
    assert 200 in rows
