"""What ``Space.mutate`` reads of a parent, made once per decoded schedule
(``Space._by_kind``, kept in the schedule's mark) and the space's ``cut_free``: the same
children as reading them afresh, and never changed by a move. A projection's parameters
from the space's name and choice lists: the definition's."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.target import Target
from tests.search_space.conftest import mutate_twins, small_space


def _fresh(space: Any, s: Any) -> dict[str, list[int]]:
    """The parameters ``s`` reads, by kind, as the definition says (no memo)."""
    _, active = space._known(s)
    out: dict[str, list[int]] = {}
    for f in active:
        out.setdefault(space.free[f].kind, []).append(f)
    return out


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["tiny_cnn", "deepfm", "bert2"]), seed=st.integers(0, 2**16),
       moves=st.integers(0, 5))
def test_the_kept_kinds_are_the_definition_and_a_move_leaves_them(target: Target, key: str,
                                                                  seed: int, moves: int) -> None:
    """A decoded schedule's parameters by kind (kept in its mark) are those its reads
    define, the cut array is their cut list, a second read is the kept one, and after 40
    moves of every kind from it they are still the definition (a move never changes the
    shared lists)."""
    space = small_space(target, key)
    rng = np.random.default_rng(seed)
    s = space.sample(rng)
    for _ in range(moves):
        s = space.mutate(s, rng)
    _, _, (by_kind, cuts) = space._by_kind(s)
    want = _fresh(space, s)
    assert by_kind == want
    assert cuts.tolist() == want.get("cut", [])
    assert space._by_kind(s)[2] is s._space_known.kinds  # kept, not made again
    for k in range(40):
        space.mutate(s, rng, move=("boundary", "merge", "split_group", "split", "rebind",
                                   "scope", "reorder")[k % 7])
    assert space._by_kind(s)[2][0] == want
    assert s._space_known.kinds[1].tolist() == want.get("cut", [])
    assert space.cut_free == {int(space.rep[d]): k for k, d in enumerate(space.d_cut)}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["tiny_cnn", "deepfm", "bert2"]), seed=st.integers(0, 2**16))
def test_a_parent_mutates_alike_with_and_without_its_kept_kinds(target: Target, key: str,
                                                                seed: int) -> None:
    """Two decodes of one vector, one keeping its kinds after its first move and one made
    to read them afresh before every move, give the same 30 children with the same
    randomness (:func:`mutate_twins`)."""
    kept = mutate_twins(target, key, seed, 30, "kinds")
    assert kept._space_known.kinds is not None


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["tiny_cnn", "deepfm", "bert2"]), seed=st.integers(0, 2**16))
def test_a_projection_s_parameters_are_the_definition(target: Target, key: str, seed: int) -> None:
    """``project`` and ``params_of`` name each parameter read with its choice's value
    (from the space's name and choice lists), in the order read, as the definition does."""
    space = small_space(target, key)
    rng = np.random.default_rng(seed)
    s = space.mutate(space.sample(rng), rng)
    canon, active = space._known(s)
    want = {space.free[f].name: space.free[f].choices[int(canon[f])] for f in active}
    got = space.project(s).params
    assert list(got.items()) == list(want.items())
    assert all(type(a) is type(b) for a, b in zip(got.values(), want.values()))
    assert list(space.params_of(canon).items()) == list(want.items())
