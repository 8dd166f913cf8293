"""The CostModel contract (every implementation), XGBModel's training rules, files and errors."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from compiler.errors import GraphtuneError
from compiler.graph import Graph
from compiler.schedule import GraphSchedule
from compiler.target import Target
from cost_model import (
    AnalyticalModel,
    CostModel,
    CostModelError,
    RandomModel,
    XGBModel,
    feature_names,
    features,
)
from cost_model.metrics import spearman, top_k_recall

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def data(tiny: Graph, target: Target, tiny_measured: tuple[list[GraphSchedule], np.ndarray]
         ) -> tuple[np.ndarray, np.ndarray]:
    schedules, y = tiny_measured
    assert len(y) >= 120
    return features(tiny, schedules, target), y


MODELS: dict[str, Callable[[], CostModel]] = {
    "xgb-rank": lambda: XGBModel(objective="rank", rounds=60),
    "xgb-regression": lambda: XGBModel(objective="regression", rounds=60),
    "random": lambda: RandomModel(seed=3),
    "analytical": AnalyticalModel,
}


@pytest.mark.parametrize("make", MODELS.values(), ids=list(MODELS))
class TestCostModelContract:
    def test_fit_predict_update(self, make: Callable[[], CostModel],
                                data: tuple[np.ndarray, np.ndarray]) -> None:
        X, y = data
        m = make()
        m.fit(X[:60], y[:60])
        assert m.n_samples == 60
        s = m.predict(X[60:])
        assert s.shape == (len(X) - 60,) and np.all(np.isfinite(s))
        m.update(X[60:80], y[60:80])
        assert m.n_samples == 80
        assert m.predict(X[:0]).shape == (0,)

    def test_bad_training_data_is_one_clear_error(self, make: Callable[[], CostModel],
                                                   data: tuple[np.ndarray, np.ndarray]) -> None:
        X, y = data
        m = make()
        for bad_X, bad_y, words in ((X[:5], y[:4], "5 feature rows but 4"),
                                    (X[:5], -y[:5], "> 0"),
                                    (X[0], y[:1], "2-D")):
            with pytest.raises(CostModelError, match=words) as info:
                m.fit(bad_X, bad_y)
            assert "\n" not in str(info.value)
            assert isinstance(info.value, GraphtuneError)


def test_models_rank_held_out_tiny_cnn(data: tuple[np.ndarray, np.ndarray]) -> None:
    """On held-out tiny-CNN schedules the learnt model ranks far better than random."""
    X, y = data
    tr, te = slice(0, 80), slice(80, None)
    xgb = XGBModel(rounds=100)
    xgb.fit(X[tr], y[tr])
    sp_xgb = spearman(xgb.predict(X[te]), y[te])
    sp_rand = spearman(RandomModel(seed=1).predict(X[te]), y[te])
    sp_ana = spearman(AnalyticalModel().predict(X[te]), y[te])
    assert sp_xgb > 0.85, sp_xgb
    assert sp_ana > 0.5, sp_ana
    assert abs(sp_rand) < 0.35, sp_rand
    assert top_k_recall(xgb.predict(X[te]), y[te], 0.2) >= 0.5


def test_cold_start_is_random_until_min_samples(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    m = XGBModel(min_samples=32, rounds=30)
    m.update(X[:20], y[:20])
    assert not m.trained
    a, b = m.predict(X), m.predict(X)
    assert not np.array_equal(a, b) and np.all((a >= 0) & (a < 1))
    m.update(X[20:40], y[20:40])
    assert m.trained
    assert np.array_equal(m.predict(X), m.predict(X))


def test_update_retrains_when_the_data_grew_enough(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    m = XGBModel(min_samples=10, retrain_growth=0.5, rounds=20)
    m.update(X[:40], y[:40])
    first = m.predict(X)
    m.update(X[40:50], y[40:50])  # 50 < 1.5 * 40: kept
    assert np.array_equal(m.predict(X), first)
    m.update(X[50:60], y[50:60])  # 60 >= 60: retrained on everything
    assert not np.array_equal(m.predict(X), first)
    assert m.n_samples == 60


def test_wrong_column_count(data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    m = XGBModel(rounds=10)
    m.fit(X[:40], y[:40])
    with pytest.raises(CostModelError, match="feature columns"):
        m.predict(X[:, :-1])
    with pytest.raises(CostModelError, match="feature columns"):
        m.update(X[:5, :-1], y[:5])


@pytest.mark.parametrize("suffix", [".json", ".ubj"])
def test_save_load_identical_in_a_fresh_process(tmp_path: Path, suffix: str,
                                                data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    m = XGBModel(rounds=50)
    m.fit(X[:80], y[:80])
    path = tmp_path / f"model{suffix}"
    m.save(path)
    head = path.read_bytes()[:1]
    assert head == b"{"  # JSON and UBJSON objects both open with '{'
    if suffix == ".json":
        assert json.loads(path.read_text())["learner"]["attributes"]["graphtune"]
    np.save(tmp_path / "X.npy", X)
    code = ("import sys, numpy as np; from cost_model import XGBModel; "
            f"m = XGBModel.load({str(path)!r}); "
            f"np.save({str(tmp_path / 'p.npy')!r}, m.predict(np.load({str(tmp_path / 'X.npy')!r})))")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT,
                   env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert np.array_equal(np.load(tmp_path / "p.npy"), m.predict(X))
    loaded = XGBModel.load(path)
    assert loaded.objective == m.objective and loaded.prior == m.prior
    assert np.array_equal(loaded.predict(X), m.predict(X))


@pytest.mark.parametrize("loss, column", [("squared", False), ("absolute", True)])
def test_loss_and_prior_column_travel_with_the_model(tmp_path: Path, loss: str, column: bool,
                                                     data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    m = XGBModel(rounds=20, loss=loss, prior_column=column)
    m.fit(X[:80], y[:80])
    assert m.params["objective"] == f"reg:{loss}error"
    m.save(tmp_path / "m.ubj")
    loaded = XGBModel.load(tmp_path / "m.ubj")
    assert (loaded.loss, loaded.prior_column) == (loss, column)
    assert np.array_equal(loaded.predict(X), m.predict(X))
    with pytest.raises(CostModelError, match="loss must be"):
        XGBModel(loss="huber")


def test_loaded_model_trains_on_from_its_trees(tmp_path: Path,
                                               data: tuple[np.ndarray, np.ndarray]) -> None:
    X, y = data
    m = XGBModel(rounds=30)
    m.fit(X[:60], y[:60])
    m.save(tmp_path / "m.json")
    warm = XGBModel.load(tmp_path / "m.json", warm_rounds=5, min_samples=100)
    assert warm.trained  # the loaded trees score from the first call
    loaded = m._booster.num_boosted_rounds()
    warm.update(X[60:70], y[60:70])  # below min_samples: still trains on top of the loaded trees
    # up to warm_rounds more (early stopping on the held-out share may take fewer: how
    # many depends on the data, i.e. on the schedules the space samples)
    assert loaded < warm._booster.num_boosted_rounds() <= loaded + 5


def test_bad_files_are_one_clear_error(tmp_path: Path, data: tuple[np.ndarray, np.ndarray]) -> None:
    import xgboost as xgb

    X, y = data
    m = XGBModel(rounds=10)
    m.fit(X[:60], y[:60])
    good = tmp_path / "good.json"
    m.save(good)
    text = good.read_text()
    cases: dict[str, tuple[Path, str]] = {}
    p = tmp_path / "truncated.json"
    p.write_text(text[: len(text) // 2])
    cases["truncated"] = (p, "not an XGBoost model file")
    p = tmp_path / "garbage.ubj"
    p.write_bytes(bytes(range(256)) * 4)
    cases["binary garbage"] = (p, "not an XGBoost model file")
    p = tmp_path / "other.json"
    p.write_text('{"kind": "graphtune.GraphSchedule", "v": 1}')
    cases["other JSON"] = (p, "not an XGBoost model file")
    foreign = xgb.train({"verbosity": 0}, xgb.DMatrix(X[:20], label=y[:20]), 3)
    p = tmp_path / "foreign.json"
    foreign.save_model(str(p))
    cases["foreign XGBoost model"] = (p, "not a graphtune cost model")
    other = json.loads(text)
    other["learner"]["attributes"]["features"] = json.dumps(["a", "b"])
    p = tmp_path / "features.json"
    p.write_text(json.dumps(other))
    cases["other features"] = (p, "other features")
    newer = json.loads(text)
    newer["learner"]["attributes"]["graphtune_format"] = "99"
    p = tmp_path / "newer.json"
    p.write_text(json.dumps(newer))
    cases["newer format"] = (p, "upgrade graphtune")
    cases["missing"] = (tmp_path / "nope.json", "does not exist")
    for what, (path, words) in cases.items():
        with pytest.raises(CostModelError, match=words) as info:
            XGBModel.load(path)
        msg = str(info.value)
        assert "\n" not in msg and len(msg) < 200, (what, msg)
    with pytest.raises(CostModelError, match="nothing to save"):
        XGBModel().save(tmp_path / "cold.json")


def test_feature_names_travel_with_the_model(tmp_path: Path, data: tuple[np.ndarray, np.ndarray]
                                             ) -> None:
    """Extra columns (the search space's encoding) are named, saved and checked."""
    X, y = data
    extra = np.random.default_rng(0).integers(0, 3, size=(len(X), 2)).astype(float)
    names = [*feature_names(), "space:a", "space:b"]
    m = XGBModel(rounds=10, features=names)
    m.fit(np.hstack([X, extra])[:60], y[:60])
    m.save(tmp_path / "m.ubj")
    back = XGBModel.load(tmp_path / "m.ubj")
    assert back.feature_names == names
    assert np.array_equal(back.predict(np.hstack([X, extra])), m.predict(np.hstack([X, extra])))
