"""A space pickles after it has decoded (its caches hold C state that does not pickle),
and the copy decodes as the original does."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from search_space import build_space
from tests.search_space.conftest import small_graph


@pytest.mark.parametrize("pure", [False, True])
@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_a_used_space_pickles_and_its_copy_decodes_alike(key: str, pure: bool, target,
                                                         monkeypatch) -> None:
    if pure:
        monkeypatch.setenv("GRAPHTUNE_PURE_PYTHON", "1")
    space = build_space(small_graph(key), target)
    rng = np.random.default_rng(3)
    parents = []
    for _ in range(60):  # fills the caches (compiled: the C analyses and classes)
        s = space.sample(rng)
        space.precheck(s)
        parents.append(s)
    for back in (pickle.loads(pickle.dumps(space)), copy.deepcopy(space)):
        assert [d.name for d in back.free] == [d.name for d in space.free]
        ra, rb = np.random.default_rng(7), np.random.default_rng(7)
        for _ in range(20):
            a, b = space.sample(ra), back.sample(rb)
            assert a.structural_key() == b.structural_key()
            assert space.precheck(a) == back.precheck(b)
            assert space.mutate(a, ra).structural_key() == back.mutate(b, rb).structural_key()
        # the original's schedules are foreign to the copy (encoded, as a new space does)
        fresh = build_space(small_graph(key), target)
        rf, rb = np.random.default_rng(9), np.random.default_rng(9)
        for p in parents[:20]:
            assert fresh.mutate(p, rf).structural_key() == back.mutate(p, rb).structural_key()
