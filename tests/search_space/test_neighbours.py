"""The one-move neighbourhood (``search_space._neighbours``): exactly what ``Space.mutate`` reaches."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.key_text import key_text as candidate_id
from compiler.target import Target
from search_space import build_space
from search_space._neighbours import neighbour_vectors
from tests.search_space.conftest import small_graph


def _schedule(space, seed: int, moves: int):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    s = space.sample(rng)
    for _ in range(moves):
        s = space.mutate(s, rng)
    return s


def _hood(space, s) -> tuple[set[str], list[tuple[str, np.ndarray]]]:  # type: ignore[no-untyped-def]
    vecs = neighbour_vectors(space, s)
    return {candidate_id(space.decode(v)) for _, v in vecs} - {candidate_id(s)}, vecs


def test_the_neighbourhood_is_every_child_mutate_reaches(target: Target) -> None:
    """On tiny_cnn, 3,000 draws of ``mutate`` reach exactly the neighbourhood's schedules
    (the draws cover it: each of its ~100 schedules is drawn about 30 times)."""
    space = build_space(small_graph("tiny_cnn"), target, 8)
    s = _schedule(space, 1, 0)
    hood, vecs = _hood(space, s)
    rng = np.random.default_rng(7)
    reached = {candidate_id(space.mutate(s, rng)) for _ in range(3000)} - {candidate_id(s)}
    assert reached == hood
    assert len(hood) > 50
    assert len({v.tobytes() for _, v in vecs}) == len(vecs)  # no vector twice
    assert {m for m, _ in vecs} >= {"split", "rebind", "scope", "reorder", "split_group"}


_SPACES: dict[str, Any] = {}


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["tiny_cnn", "deepfm"]), seed=st.integers(0, 2**16),
       moves=st.integers(0, 6))
def test_every_mutate_child_is_a_neighbour(target: Target, key: str, seed: int,
                                           moves: int) -> None:
    """Whatever the schedule (sampled, then mutated: one group, many, every scope), each
    child one ``mutate`` move makes is in its neighbourhood, by every move; the
    neighbourhood's vectors are valid vectors of the space, in the same order every time."""
    space = _SPACES.get(key)
    if space is None:
        g = small_graph(key)
        space = _SPACES[key] = build_space(g, target, g.batch)
    s = _schedule(space, seed, moves)
    hood, vecs = _hood(space, s)
    rng = np.random.default_rng(seed + 1)
    for move in ("boundary", "merge", "split_group", "split", "rebind", "scope", "reorder"):
        for _ in range(6):
            child = space.mutate(s, rng, move)
            cid = candidate_id(child)
            assert cid == candidate_id(s) or cid in hood, move
    for _, v in vecs:
        assert v.shape == (space.dimension,)
        assert np.all((v >= 0) & (v < space.n_choices))
    again = neighbour_vectors(space, space.decode(space.encode(s)))
    assert [(m, v.tobytes()) for m, v in again] == [(m, v.tobytes()) for m, v in vecs]


def _inherit_reference(space, child: np.ndarray, k: int, by_kind: dict[str, list[int]]) -> None:  # type: ignore[no-untyped-def]
    """``Space._inherit`` as first written (each parameter's record read)."""
    start = space.structure.segments[k + 1][0]
    seg = [int(space.rep[d]) for d in space._seg_dims[start]]
    for f in [*seg, int(space.rep[space.d_scope[start]])]:
        kind = space.free[f].kind
        src = [a for a in by_kind.get(kind, []) if space.free[a].at < start]
        if src and f not in by_kind.get(kind, ()):
            child[f] = child[max(src, key=lambda a: space.free[a].at)]


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "wide_and_deep"])
def test_inherit_equals_the_reference_at_every_cut_point(target: Target, key: str) -> None:
    """A new boundary at each cut point of mutated schedules: the parameters the new group
    takes are those the reference takes (the nearest before; the first of equals)."""
    space = build_space(small_graph(key), target, 8 if key != "wide_and_deep" else 2048)
    for seed in range(4):
        s = _schedule(space, seed, seed)
        vec, _, (by_kind, _) = space._by_kind(s)
        for k in range(len(space.structure.segments) - 1):
            got, want = vec.copy(), vec.copy()
            space._inherit(got, k, by_kind)
            _inherit_reference(space, want, k, by_kind)
            assert got.tolist() == want.tolist(), (key, seed, k)
