"""The one-move neighbourhood (``search_space._neighbours``): exactly what ``Space.mutate`` reaches."""

from __future__ import annotations

from typing import Any

import numpy as np
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
