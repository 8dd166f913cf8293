"""``bench/sweep.py --held-out``'s statistic: a run that never gets within 2 % counts one past
its budget, and the verdict is the shipped model's mean strictly below the cold mean."""

from __future__ import annotations

import pytest

from bench.sweep import reach_statistic


def test_never_counts_one_past_the_budget() -> None:
    assert reach_statistic([None, None], 150) == (151.0, 151.0)
    assert reach_statistic([10, None, 30, 50], 150) == (pytest.approx(60.25), 40.0)
    assert reach_statistic([1], 80) == (1.0, 1.0)
    assert reach_statistic([], 80) == (81.0, 81.0)
