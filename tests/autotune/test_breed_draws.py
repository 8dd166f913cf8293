"""Evolution draws its parents as ``Generator.choice(n, p=weights)`` does: the same index
and the same use of the generator, with the cumulative sum made once per generation
(``autotune.sampling._breed._cdf``, ``_draw``), so a seeded round breeds the same children."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.sampling._breed import _cdf, _draw


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 200), seed=st.integers(0, 2**32 - 1), draws=st.integers(1, 40),
       kind=st.sampled_from(["ranks", "random", "spiky"]))
def test_a_draw_is_the_index_and_the_randomness_choice_would_use(n: int, seed: int, draws: int,
                                                                 kind: str) -> None:
    r = np.random.default_rng(seed)
    if kind == "ranks":  # what evolution weighs its population by
        scores = r.normal(size=n)
        ranks = np.empty(n)
        ranks[np.argsort(-scores, kind="stable")] = np.arange(n)
        w = 1.0 / (ranks + 4.0)
    elif kind == "random":
        w = r.random(n) + 1e-9
    else:  # most of the weight on one candidate, some at zero
        w = np.where(r.random(n) < 0.3, 0.0, 1e-6)
        w[int(r.integers(n))] = 1.0
    w = w / w.sum()
    a, b = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
    cdf = _cdf(w)
    assert [int(a.choice(n, p=w)) for _ in range(draws)] == [_draw(cdf, b) for _ in range(draws)]
    assert a.random() == b.random()  # the generators are in the same state
