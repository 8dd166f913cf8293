"""The breeding's run crossover (``autotune.sampling._breed.run_crossover``, issue 22).

Invariant: a child is its first parent with one run of consecutive segments taken whole
from the second: the segments whose parameters come from the second parent (and differ
from the first's) are consecutive, with no segment of the first parent's between them.
The space's uniform crossover breaks this (a test of it below shows the property can fail).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.sampling._breed import run_crossover
from search_space import Space, build_space
from tests.sim.conftest import zoo_graph

_SPACES: dict[str, Space] = {}


def _space() -> Space:
    if "r18" not in _SPACES:
        from compiler.target import Target

        _SPACES["r18"] = build_space(zoo_graph("resnet18", 8), Target.default())
    return _SPACES["r18"]


def _sources(space: Space, va: np.ndarray, vb: np.ndarray, vc: np.ndarray) -> dict[int, str]:
    """Per segment (unit >= 1) whose parents differ: "a", "b" or "mixed"."""
    unit = space._unit_of_free
    out: dict[int, str] = {}
    for k in range(1, space._n_units):
        d = (unit == k) & (va != vb) & (va != 0) & (vb != 0)
        if not d.any():
            continue
        from_a, from_b = bool((vc[d] == va[d]).all()), bool((vc[d] == vb[d]).all())
        out[k] = "a" if from_a else "b" if from_b else "mixed"
    return out


def _one_run(src: dict[int, str]) -> bool:
    bs = [k for k, s in src.items() if s == "b"]
    if not bs:
        return True
    return all(s == "b" for k, s in src.items() if min(bs) <= k <= max(bs))


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_run_crossover_takes_one_run_of_segments(seed: int) -> None:
    space = _space()
    rng = np.random.default_rng(seed)
    a, b = space.sample(rng), space.sample(rng)
    child = run_crossover(space, a, b, rng)
    va, vb, vc = space.encode(a), space.encode(b), space.encode(child)
    assert _one_run(_sources(space, va, vb, vc))
    assert ((vc == va) | (vc == vb) | (vc == 0)).mean() > 0.8


def test_uniform_crossover_is_not_one_run() -> None:
    """The property can fail: the space's own crossover mixes segments everywhere."""
    space = _space()
    rng = np.random.default_rng(1)
    broken = 0
    for _ in range(10):
        a, b = space.sample(rng), space.sample(rng)
        child = space.crossover(a, b, rng)
        broken += not _one_run(_sources(space, space.encode(a), space.encode(b),
                                        space.encode(child)))
    assert broken >= 5
