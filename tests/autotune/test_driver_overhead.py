"""The driver's per-trial costs outside the decoder (issue 20): what each cut keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from optuna.distributions import CategoricalDistribution

from tests.autotune.test_tune_units import tiny_space  # noqa: F401 - a fixture


class _Counted(CategoricalDistribution):
    """A categorical distribution that counts the hashes and comparisons of its value."""

    compared = 0

    def __eq__(self, other: object) -> bool:
        type(self).compared += 1
        return super().__eq__(other)

    def __hash__(self) -> int:
        type(self).compared += 1
        return super().__hash__()


def test_the_journal_converts_a_distribution_object_it_saw_without_comparing_values(
        tmp_path: Path) -> None:
    """Optuna's journal turns every parameter's distribution of every new trial into
    JSON; the memo finds the driver's own distribution objects by identity (no hash or
    ``==`` over their choices: each walks the whole tuple) and gives the same text as Optuna's function."""
    from optuna.distributions import distribution_to_json as optuna_to_json
    from optuna.storages.journal import _storage

    from autotune.running._journal import open_storage

    open_storage(None, str(tmp_path / "t.jsonl")).close()  # installs the memo
    to_json = _storage.distribution_to_json
    d = _Counted(list(range(40)))
    first = to_json(d)
    assert first == optuna_to_json(d)
    _Counted.compared = 0
    for _ in range(100):
        assert to_json(d) is first
    assert _Counted.compared == 0
    other = CategoricalDistribution(list(range(40)))  # equal value, another object
    assert to_json(other) == optuna_to_json(other)
    changed = CategoricalDistribution([*range(39), 99])
    assert to_json(changed) == optuna_to_json(changed) != first


def test_breeding_is_budgeted_per_delivered_proposal(tiny_space: Any) -> None:  # noqa: F811
    """A request that delivers half of what it asked for costs twice as much per
    measurement: the effort is that of a decode twice as slow (more proposals asked,
    then fewer generations), and the delivered share is learnt from what comes back."""
    import numpy as np

    from autotune.sampling._breed import Bred, Pick
    from autotune.sampling._guided import GuidedOptions, GuidedSampler

    def sampler(c: float, delivered: float) -> GuidedSampler:
        s = GuidedSampler.__new__(GuidedSampler)
        s.options = GuidedOptions(breed_budget=1.0)
        s._measure_s, s._child_s, s.delivered = 0.002, c, delivered
        return s

    for c in (0.0001, 0.0004, 0.001, 0.004):
        assert sampler(c, 0.5)._effort(8, 48, 8) == sampler(2 * c, 1.0)._effort(8, 48, 8)
    assert sampler(0.001, 0.5)._effort(8, 48, 8)[0] > sampler(0.001, 1.0)._effort(8, 48, 8)[0]

    s = GuidedSampler(space=tiny_space, ranker=_NoRanker(), seed=0,
                      options=GuidedOptions(breed_budget=1.0))
    picks = []
    rng = np.random.default_rng(0)
    for _ in range(4):
        sched = tiny_space.sample(rng)
        proj = tiny_space.project(sched)
        picks.append(Pick(f"c{len(picks)}", proj.vector, dict(proj.params), sched,
                          np.zeros(1, dtype=np.float32), "", 0.0, False))
    s.breeding = 1
    assert s.bred(Bred(tuple(picks), 4, 0.0, 40, 0.1, asked=8)) == 4
    assert s.delivered == pytest.approx(0.875)  # running mean: 1.0 -> 0.5 at weight 0.25
    s.breeding = 1
    assert s.bred(Bred(tuple(picks), 4, 0.0, 40, 0.1, asked=4)) == 0  # all seen already
    assert s.delivered == pytest.approx(0.875 * 0.75)


class _NoRanker:
    label = ""

    def features(self, schedules: Any) -> Any:
        raise AssertionError("not used")

    def fit(self, x: Any, y: Any) -> None:
        raise AssertionError("not used")

    def predict(self, x: Any) -> Any:
        raise AssertionError("not used")
