"""cost_model.selection and metrics.spearman_top: folds leave whole networks out, each left-out
group is scored on its own, and the fastest quarter's order is what ``spearman_top`` reads."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import cost_model
from cost_model.metrics import spearman, spearman_top
from cost_model.selection import cross_validate, fold_labels, score_groups


def test_spearman_top_reads_only_the_fastest_quarter() -> None:
    truth = np.arange(1.0, 17.0)  # 16 schedules, the fastest quarter is 13..16
    scores = truth.copy()
    scores[12:] = truth[12:][::-1]  # the top four ordered backwards, the rest right
    assert spearman(scores, truth) > 0.95
    assert spearman_top(scores, truth, 0.25) == pytest.approx(-1.0)
    scores2 = truth.copy()
    scores2[:12] = scores2[:12][::-1]  # the slow ones backwards, the top four right
    assert spearman_top(scores2, truth, 0.25) == pytest.approx(1.0)
    assert spearman_top(np.zeros(1), np.ones(1)) == 0.0
    with pytest.raises(ValueError):
        spearman_top(scores, truth, 0.0)


@settings(max_examples=30, deadline=None)
# distinct hundredths, not any distinct floats: log(0.1) == log(0.10000000000000002), and a
# monotone map that makes a tie is not "only the order" (hypothesis found that draw)
@given(st.lists(st.integers(10, 100_000), min_size=2, max_size=40, unique=True),
       st.floats(0.05, 1.0))
@example([10, 11], 1.0)
def test_spearman_top_of_the_truth_is_one(values: list[int], fraction: float) -> None:
    t = np.asarray(values, dtype=np.float64) / 100.0
    assert spearman_top(t, t, fraction) == pytest.approx(1.0)
    assert spearman_top(np.log(t), t, fraction) == pytest.approx(1.0)  # only the order counts
    assert spearman_top(-t, t, fraction) == pytest.approx(-1.0)


class _Linear:
    """Least squares on the columns; remembers the groups it was trained on."""

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.w = np.zeros(0)

    def fit(self, x: np.ndarray, y: np.ndarray, groups: np.ndarray) -> None:
        self.seen = {int(g) for g in groups}
        self.w = np.linalg.lstsq(x, np.log(y), rcond=None)[0]

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x @ self.w)


def _data(flip: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Six groups of 40 rows; speed grows with column 0 (falls with it in group ``flip``)."""
    rng = np.random.default_rng(0)
    xs, ys, gs = [], [], []
    for g in range(6):
        x = rng.random((40, 3))
        sign = -1.0 if g == flip else 1.0
        xs.append(x)
        ys.append(np.exp(sign * 3.0 * x[:, 0]))
        gs.append(np.full(40, g))
    return np.vstack(xs), np.concatenate(ys), np.concatenate(gs)


def test_cross_validation_never_trains_on_the_left_out_networks() -> None:
    x, y, g = _data()
    folds = fold_labels(g, {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"})
    made: list[_Linear] = []

    def make() -> _Linear:
        made.append(_Linear())
        return made[-1]

    r = cross_validate(make, x, y, g, folds)
    assert [m.seen for m in made] == [{2, 3, 4, 5}, {0, 1, 4, 5}, {0, 1, 2, 3}]
    assert r.groups == 6 and r.spearman_top == pytest.approx(1.0)
    assert r.recall10 == pytest.approx(1.0)


def test_a_network_that_contradicts_the_others_scores_low() -> None:
    x, y, g = _data(flip=4)
    folds = fold_labels(g, {i: str(i) for i in range(6)})
    r = cross_validate(_Linear, x, y, g, folds)
    assert r.worst_top < -0.9  # group 4 is ordered backwards, the others right
    assert 0.5 < r.spearman_top <= 4 / 6 + 1e-9
    # column 0 itself: five groups exactly right, group 4 exactly backwards
    per = score_groups(x[:, 0], y, g)
    assert (per.spearman, per.worst_top) == (pytest.approx(4 / 6), pytest.approx(-1.0))


def test_folds_must_keep_groups_whole_and_be_at_least_two() -> None:
    x, y, g = _data()
    split = np.where(np.arange(len(g)) % 2 == 0, "a", "b")
    with pytest.raises(ValueError, match="split across folds"):
        cross_validate(_Linear, x, y, g, split)
    with pytest.raises(ValueError, match="two folds"):
        cross_validate(_Linear, x, y, g, np.full(len(g), "a"))
    with pytest.raises(KeyError):
        fold_labels(g, {0: "a"})


def test_the_roofline_and_a_real_xgb_model_are_scored_on_feature_rows() -> None:
    rng = np.random.default_rng(1)
    k = len(cost_model.feature_names())
    x = rng.random((160, k)) + 0.1
    truth = 1.0 / cost_model.analytical_cycles(x)  # the roofline is exact here
    g = np.repeat(np.arange(4), 40)
    folds = fold_labels(g, {0: "a", 1: "a", 2: "b", 3: "b"})
    roof = cross_validate(None, x, truth, g, folds)
    assert roof.spearman == pytest.approx(1.0) and roof.spearman_top == pytest.approx(1.0)

    def make() -> Any:
        return cost_model.XGBModel(rounds=5, validation=0.0, params={"nthread": 1})

    xgb = cross_validate(make, x, truth, g, folds)
    assert xgb.groups == 4 and -1.0 <= xgb.spearman_top <= 1.0
