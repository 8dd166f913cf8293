"""``Space._child``: a mutated or crossed-over child decoded again is the object decoded the
first time (the last ``RECENT_CHILDREN``), and it is the schedule a fresh decode makes
(issue 20: ~11 % of a tune's children are a vector decoded before)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.key_text import key_text
from compiler.target import Target
from search_space import _space, build_space
from tests.search_space.conftest import small_graph


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2"])
def test_a_child_decoded_again_is_the_first_object_and_equals_a_fresh_decode(
        target: Target, name: str) -> None:
    g = small_graph(name)
    space, ref = build_space(g, target), build_space(g, target)
    rng = np.random.default_rng(3)
    parents = [space.sample(rng) for _ in range(4)]
    children = []
    for k in range(60):
        a = parents[k % 4]
        children.append(space.mutate(a, rng) if k % 3 else
                        space.crossover(a, parents[(k + 1) % 4], rng))
    again = 0
    for s in children:
        vec = space.encode(s)
        got = space._child(vec.copy())
        assert got is s or key_text(got) == key_text(s)  # (an equal child of another vector)
        again += got is s
        fresh = ref.decode(vec)  # another space: no memo of its own yet for this vector
        assert key_text(got) == key_text(fresh)
        assert got.groups == fresh.groups and got.transfers == fresh.transfers
        assert got.order == fresh.order
        assert ref.precheck(fresh) == space.precheck(got)
    assert again >= len(children) // 2


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2"])
def test_each_vector_gets_its_own_schedule_repeats_included(target: Target, name: str) -> None:
    """Vectors one entry apart, each asked twice in a shuffled sequence: each answer is
    the fresh decode of exactly that vector."""
    g = small_graph(name)
    space, ref = build_space(g, target), build_space(g, target)
    rng = np.random.default_rng(11)
    base = space.sample_vectors(rng, 3)
    vecs = []
    for v in base:
        for _ in range(6):
            w = v.astype(np.int16)
            f = int(rng.integers(len(w)))
            w[f] = int(rng.integers(space.n_choices[f]))
            vecs.append(w)
    seq = [vecs[int(k)] for k in rng.permutation(2 * len(vecs)) % len(vecs)]
    for w in seq:
        assert key_text(space._child(w.copy())) == key_text(ref.decode(w))


def test_the_memo_is_bounded_oldest_first_and_keyed_by_the_vector(
        target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_space, "RECENT_CHILDREN", 3)
    space = build_space(small_graph("tiny_cnn"), target)
    rng = np.random.default_rng(0)
    vecs = space.sample_vectors(rng, 8)
    first = [space._child(v.astype(np.int16)) for v in vecs[:4]]
    assert len(space._children) == 3
    assert space._child(vecs[3].astype(np.int16)) is first[3]  # kept
    assert space._child(vecs[0].astype(np.int16)) is not first[0]  # forgotten, decoded again
    # another type's vector is decoded, not looked up (its bytes are not an int16 vector's)
    other = space._child(vecs[3].astype(np.int64))
    assert other is not first[3] and key_text(other) == key_text(first[3])


def test_a_copied_space_starts_without_the_memo(target: Target) -> None:
    import pickle

    space = build_space(small_graph("tiny_cnn"), target)
    rng = np.random.default_rng(1)
    s = space.sample(rng)
    space.mutate(s, rng)
    assert space._children
    assert pickle.loads(pickle.dumps(space))._children == {}
