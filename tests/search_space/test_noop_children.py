"""``Space.mutate``'s no-op children (``_Mark.noops``): a child vector that decoded to its
parent is remembered by the parent's mark and, drawn again, skipped without decoding. The
children, their order and the randomness used are those of a parent that remembers none,
every remembered child decodes to its parent, and the memo is bounded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.key_text import key_text
from compiler.target import Target
from search_space import _space, build_space
from tests.search_space.conftest import mutate_twins, small_graph, small_space

_OTHER: dict[str, Any] = {}  # another space of each model
_MOVES = ("boundary", "merge", "split_group", "split", "rebind", "scope", "reorder", None)



@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["tiny_cnn", "deepfm", "bert2"]), seed=st.integers(0, 2**16),
       move=st.sampled_from(_MOVES))
def test_a_parent_mutates_alike_with_and_without_its_noops(target: Target, key: str, seed: int,
                                                           move: str | None) -> None:
    """Two decodes of one vector, one remembering its no-op children and one made to forget
    them before every move, give the same 40 children and leave the randomness in the same
    state; the decodes the first spares are those whose vector it remembered."""
    space = small_space(target, key)
    kept = mutate_twins(target, key, seed, 40, "noops", move)
    parent = key_text(kept)
    for raw in kept._space_known.noops or ():  # each one decodes to the parent
        assert key_text(space.decode(np.frombuffer(raw, dtype=np.int16))) == parent


def test_a_reorder_heavy_parent_spares_decodes(target: Target) -> None:
    """bert2's reorder moves mostly give the parent back: a parent remembering its no-op
    children decodes fewer children than one made to forget them (the same moves), and
    holds at most ``NOOP_CHILDREN`` vectors."""
    space = small_space(target, "bert2")
    decodes = {True: 0, False: 0}
    real = space._decode_marked
    for keep in (True, False):
        rng = np.random.default_rng(3)

        def counted(vec: np.ndarray, keep: bool = keep) -> Any:
            decodes[keep] += 1
            return real(vec)

        space._decode_marked = counted
        try:
            for seed in range(4):
                parent = space.decode(space.encode(space.sample(np.random.default_rng(seed))))
                for _ in range(25):
                    if not keep:
                        parent._space_known.noops = None
                    space.mutate(parent, rng, "reorder")
                noops = parent._space_known.noops
                assert noops is None or len(noops) <= _space.NOOP_CHILDREN
        finally:
            del space._decode_marked
    assert decodes[True] < decodes[False]


def test_the_memo_is_bounded(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """With room for one no-op child, a parent remembers one."""
    monkeypatch.setattr(_space, "NOOP_CHILDREN", 1)
    space = small_space(target, "bert2")
    rng = np.random.default_rng(5)
    for seed in range(4):
        parent = space.sample(np.random.default_rng(seed))
        for _ in range(30):
            space.mutate(parent, rng, "reorder")
        assert len(parent._space_known.noops or ()) <= 1


def test_another_space_s_schedule_keeps_nothing(target: Target) -> None:
    """A schedule decoded by another space (a copy) gets no memo from this one."""
    space = small_space(target, "bert2")
    other = build_space(small_graph("bert2"), target, small_graph("bert2").batch)
    parent = other.sample(np.random.default_rng(0))
    rng = np.random.default_rng(1)
    for _ in range(20):
        space.mutate(parent, rng, "reorder")
    assert parent._space_known.noops is None


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(key=st.sampled_from(["tiny_cnn", "deepfm", "bert2"]), seed=st.integers(0, 2**16),
       same=st.booleans())
def test_a_crossover_that_is_a_parent_is_that_parent(target: Target, key: str, seed: int,
                                                     same: bool) -> None:
    """A crossover child is the decode of its vector, with the randomness the definition
    uses; a child that is a parent's vector (the same parent twice, or one move apart) is
    that parent object, and a parent another space decoded is never returned."""
    space = small_space(target, key)
    rng = np.random.default_rng(seed)
    a = space.sample(rng)
    b = a if same else space.mutate(a, rng)
    returned = 0
    for _ in range(12):
        want_rng = np.random.default_rng(rng.bit_generator.state["state"]["state"] % 2**32)
        got_rng = np.random.default_rng(rng.bit_generator.state["state"]["state"] % 2**32)
        va, vb = space.encode(a), space.encode(b)
        take_a = want_rng.random(space._n_units) < 0.5
        child = np.where(take_a[space._unit_of_free], va, vb).astype(np.int16)
        got = space.crossover(a, b, got_rng)
        assert key_text(got) == key_text(space.decode(child))
        assert want_rng.bit_generator.state == got_rng.bit_generator.state
        returned += got is a or got is b
        rng.random()
    if same:
        assert returned == 12
    other = _OTHER.get(key)
    if other is None:
        other = _OTHER[key] = build_space(small_graph(key), target, small_graph(key).batch)
    copy = other.decode(space.encode(a))
    got = space.crossover(copy, copy, np.random.default_rng(seed))
    assert got is not copy and key_text(got) == key_text(a)
