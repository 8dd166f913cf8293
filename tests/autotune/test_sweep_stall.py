"""The sweep's stall test (``autotune.whatif._budget.stalled``): a chunk that gained less than
``STALL_TOL`` of the best left it as it was, for the kicks (``later_options``) and the lending
(``lend_to``) alike (``bench/results/sweep.md``, twenty-third pass)."""

from __future__ import annotations

import dataclasses

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autotune.whatif._budget import (
    STALL_TOL,
    chunk_guided,
    chunk_size,
    later_options,
    lend_to,
    probe_size,
    stalled,
)

PER = 200


def _history(before: float, now: float, tail: int = 7) -> list[float | None]:
    """A probe at 1.05 x ``before``, a chunk that reached ``before``, then a chunk whose last
    ``tail`` records hold ``now``."""
    c = chunk_size(PER)
    h: list[float | None] = [before * 1.05] * probe_size(PER) + [before] * c
    return h + [before] * (c - tail) + [now] * tail


# ResNet-50 b16 seed 0, L1 384K / DDR 27: its third chunk moved the best by 1e-12 us
MISS = _history(9518.163398148146, 9518.163398148145)


def test_the_float_noise_gain_of_the_sweeps_miss_is_a_stall() -> None:
    """The 1e-12 us gain counts as none: the kick comes, and the chunk is lent to a twin
    below it; with no tolerance (the sweep before it) neither."""
    late = chunk_guided(PER)
    assert stalled(MISS, PER) and not stalled(MISS, PER, 0.0)
    assert later_options(late, MISS, PER, kick=4) == dataclasses.replace(late, polish_kick=4)
    twin = {"b": [9518.163398148146]}
    assert lend_to("a", MISS, ["b"], twin, PER) == "b"


def test_a_real_gain_is_not_a_stall() -> None:
    """Gains a measurement would show are gains: a tenth of a microsecond on ResNet-50's
    9,518 (1e-5 of it: ~100 cycles at 1 GHz), and the 9,518.2 -> 9,508.4 of a regrouping."""
    late = chunk_guided(PER)
    for now in (9518.063398148146, 9508.4):
        h = _history(9518.163398148146, now)
        assert not stalled(h, PER)
        assert later_options(late, h, PER, kick=4) is late
        assert lend_to("a", h, ["b"], {"b": [now]}, PER) is None


def test_the_tolerance_is_above_float_noise_and_below_a_cycle_of_the_smallest_best() -> None:
    """``STALL_TOL``'s size: far above the relative rounding of a sum of task latencies, and a
    gain it hides is at most two cycles (1 GHz) of MobileNetV2 b16's ~1,500 us bests."""
    assert STALL_TOL > 1e6 * 2.0 ** -52
    assert STALL_TOL * 1500.0 <= 2e-3  # us: two cycles of the STCP920's 1 GHz clock


@settings(max_examples=200, deadline=None)
@given(st.floats(100.0, 1e5), st.floats(0.0, 0.5), st.integers(1, chunk_size(PER)),
       st.integers(0, 2 * chunk_size(PER)))
@example(9518.163398148146, 1e-16, 7, 0)
@example(9518.163398148146, 1e-3, 7, 0)
def test_stalled_is_a_gain_below_the_tolerance(before: float, gain: float, tail: int,
                                               extra: int) -> None:
    """A chunk whose best fell by ``gain`` of it: stalled when the gain is under ``STALL_TOL``
    (away from its edge: half or twice it), never when it is over it; a longer history changes
    nothing but the window; a larger tolerance only adds stalls (monotone), and the tolerance
    0 is the old test (no gain at all)."""
    now = before * (1.0 - gain)
    h = [before * 2.0] * extra + _history(before, now, tail)
    if gain <= STALL_TOL / 2:
        assert stalled(h, PER)
    elif gain >= STALL_TOL * 2:
        assert not stalled(h, PER)
    assert stalled(h, PER, 0.0) == (now >= before)
    for tol in (0.0, STALL_TOL, 1e-4, 0.1):
        assert not stalled(h, PER, tol) or stalled(h, PER, 2 * tol + 1e-9)
    assert not stalled(h[:probe_size(PER) + chunk_size(PER) - 1], PER, 1.0)  # no chunk yet
