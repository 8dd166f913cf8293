"""cost_model.metrics on hand-checked examples."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import spearmanr

from cost_model.metrics import pairwise_accuracy, spearman, top_k_recall


def test_spearman_extremes_and_scipy_agreement() -> None:
    t = np.array([1.0, 5.0, 2.0, 8.0, 3.0])
    assert spearman(t, t) == pytest.approx(1.0)
    assert spearman(-t, t) == pytest.approx(-1.0)
    assert spearman(np.exp(t), t) == pytest.approx(1.0)  # only the order counts
    rng = np.random.default_rng(0)
    s, u = rng.random(50), rng.random(50)
    s[:10] = 0.5  # ties
    assert spearman(s, u) == pytest.approx(spearmanr(s, u).statistic)
    assert spearman(np.ones(5), t) == 0.0


def test_pairwise_accuracy_counts_ordered_pairs() -> None:
    truth = np.array([1.0, 2.0, 3.0])
    assert pairwise_accuracy(np.array([10, 20, 30]), truth) == 1.0
    assert pairwise_accuracy(np.array([30, 20, 10]), truth) == 0.0
    # pairs (0,1) right, (0,2) right, (1,2) wrong
    assert pairwise_accuracy(np.array([1, 3, 2]), truth) == pytest.approx(2 / 3)
    # a tie in the scores counts half; ties in the truth are skipped
    assert pairwise_accuracy(np.array([1, 1, 2]), truth) == pytest.approx((0.5 + 1 + 1) / 3)
    assert pairwise_accuracy(np.array([1, 2, 3]), np.array([1.0, 1.0, 2.0])) == 1.0


def test_pairwise_accuracy_samples_large_sets() -> None:
    rng = np.random.default_rng(1)
    t = rng.random(3000)
    assert pairwise_accuracy(t, t, max_pairs=10_000) == 1.0
    assert 0.45 < pairwise_accuracy(rng.random(3000), t, max_pairs=10_000) < 0.55


def test_top_k_recall() -> None:
    truth = np.arange(20, dtype=float)  # the best 10% are indices 18, 19
    assert top_k_recall(truth, truth, 0.1) == 1.0
    assert top_k_recall(-truth, truth, 0.1) == 0.0
    s = truth.copy()
    s[18] = -1  # one of the two best is missed
    assert top_k_recall(s, truth, 0.1) == 0.5
    assert top_k_recall(np.array([3.0]), np.array([1.0]), 0.1) == 1.0  # k is at least 1
    with pytest.raises(ValueError):
        top_k_recall(truth, truth, 0.0)
    with pytest.raises(ValueError, match="scores"):
        spearman(truth, truth[:5])


def test_importing_the_package_leaves_scipy_stats_unloaded() -> None:
    """A tune and each of its workers import ``cost_model`` for the ranker; scipy.stats
    (~0.5-0.9 s to import) is loaded only when a Spearman is computed."""
    import subprocess
    import sys

    code = "import sys, cost_model, cost_model.metrics; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
