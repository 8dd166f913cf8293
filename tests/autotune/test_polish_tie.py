"""The polish's tie tolerance (``autotune.sampling._polish.beats``, ``STALL_TOL``): with it a
measurement is the polish's new best only when it beats the best by more than ``STALL_TOL``
of it, so a float tie does not reset ``since_best`` and the kick round comes
(``bench/results/sweep.md``, twenty-third and twenty-fourth passes: ResNet-50 b16 seed 0's
L1 384K / DDR 27 took a 1e-12 gain for a new best and no kick came in its kicked chunk).
An option (``GuidedOptions.polish_tol``), off in ``tune`` (its committed logs stand) and in
the sweep (with it the sweep did no better)."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.sampling._guided import GuidedOptions, GuidedSampler
from autotune.sampling._polish import STALL_TOL, PolishState, beats, deep_key
from autotune.whatif import _budget
from autotune.whatif._budget import chunk_guided
from tests.autotune.test_tune_units import FakeRanker, tiny_space  # noqa: F401 - a fixture

BEST_US = 9518.163398148146  # the miss's best, and its 1e-12 "gain"
TIE_US = 9518.163398148145


def test_a_tie_is_not_a_new_best_and_a_real_gain_is() -> None:
    assert not beats(1 / TIE_US, 1 / BEST_US)
    assert beats(1 / TIE_US, 1 / BEST_US, 0.0)  # tune's: any gain
    assert beats(1 / 9518.0634, 1 / BEST_US)  # 0.1 us: ~1e-5 of it
    assert beats(1 / 9508.4, 1 / BEST_US)
    assert not beats(1 / BEST_US, 1 / BEST_US, 0.0) and not beats(1 / 9600.0, 1 / BEST_US)
    assert beats(1e-9, -np.inf) and not beats(-np.inf, -np.inf)


@settings(max_examples=200, deadline=None)
@given(st.floats(1e-4, 1e4), st.floats(-1e-3, 1e-3))
def test_beats_is_a_relative_margin(best: float, gain: float) -> None:
    y = best * (1 + gain)
    if gain <= STALL_TOL / 2:
        assert not beats(y, best)
    elif gain >= STALL_TOL * 2:
        assert beats(y, best)
    assert beats(y, best, 0.0) == (y > best)


def _polished(tol: float) -> PolishState:
    """A chunk's polish state (ResNet-50 seed 0's: after 25, rings of 6 and 18, kicks of 4)
    whose best was measured and both of whose rings are done."""
    p = PolishState(after=25, limit=6, window=32, kick=4, deep=18, tol=tol)
    p.measured("best", 1 / BEST_US)
    for ring in ("best", deep_key("best")):
        p.back(ring, proposed=0, size=1, window=1)
    return p


def test_after_a_tie_the_kick_round_comes() -> None:
    """The miss's kicked chunk: the best polished, then a tie 7 measurements on. With the
    tolerance the tie counts toward ``after`` and the kick round is due after 25; with none
    (the twenty-third pass) the tie is a new best whose polish waits 25 more measurements,
    and the chunk ended first."""
    for tol, kicked in ((STALL_TOL, True), (0.0, False)):
        p = _polished(tol)
        for k in range(24):
            p.measured(f"c{k}", 1 / TIE_US if k == 6 else 1 / 9600.0)
        assert p.due() == ("", "")
        p.measured("c24", 1 / 9600.0)
        assert (p.best, p.since_best) == (("best", 25) if kicked else ("c6", 18))
        assert p.due() == (("best", "kick") if kicked else ("", ""))


def test_a_real_gain_resets_the_count_and_is_polished() -> None:
    p = _polished(STALL_TOL)
    for k in range(10):
        p.measured(f"c{k}", 1 / 9600.0)
    p.measured("better", 1 / 9518.0634)
    assert (p.best, p.since_best) == ("better", 0)
    for k in range(25):
        p.measured(f"d{k}", 1 / 9600.0)
    assert p.due() == ("better", "polish")


def test_an_option_tune_and_the_sweep_leave_off(tiny_space: Any) -> None:  # noqa: F811
    """0 in ``tune`` and, measured no better (twenty-fourth pass), in a sweep's chunks;
    ``STALL_TOL`` when asked; the sampler's polish takes it."""
    assert GuidedOptions().polish_tol == 0.0 == chunk_guided(200).polish_tol
    assert _budget.STALL_TOL is STALL_TOL  # one constant: the stall test asks the same
    for o in (GuidedOptions(), GuidedOptions(polish_tol=STALL_TOL)):
        s = GuidedSampler(space=tiny_space, ranker=FakeRanker(tiny_space), options=o)
        assert s.polish.tol == o.polish_tol
