"""What a kept, pre-checked candidate holds for the garbage collector (issue 20).

A generation-0 collection walks every young tracked object still alive; a tune holds its
candidates a while (a batch, the breeding parents), so each one's decoder state is walked.
The decoded schedule keeps its state compact (``search_space._lazy.Decoded``: one flat tuple
of shared values, the scopes and positions as bytes; its memo and its space's vector inside
it): a bounded handful of tracked objects, whatever the number of groups and steps (before:
three or more per group and a list per group's positions, ~120 on ResNet-50, ~570 on
BERT-large; bert2 here ~100).
"""

from __future__ import annotations

import gc
import json

import numpy as np
import pytest

from bench.space import kept_objects
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from search_space._ccore import available
from tests.search_space.conftest import small_graph

# tracked objects per kept candidate (measured: 29.4 on bert2; 26.6-29.5 on ResNet-50,
# 27.2-29.7 on BERT-large)
BOUND = 32


def test_a_prechecked_compiled_candidate_keeps_a_bounded_handful_of_objects(target: Target) -> None:
    """(The Python decoder's candidates keep more, ~175 here: the chunk DAG and the memory
    plan it remembers beside them are objects, not packed rows.)"""
    if not available():
        pytest.skip("the compiled decoder is not built")
    space = build_space(small_graph("bert2"), target)
    rng = np.random.default_rng(5)
    for _ in range(30):  # the caches warm
        space.precheck(space.sample(rng))
    kept, _ = kept_objects(space, rng, 20)
    assert 0 < kept <= BOUND, f"{kept} tracked objects per kept candidate"
    assert not gc.isenabled() or gc.get_freeze_count() == 0  # kept_objects unfroze


def test_a_kept_candidate_still_reads_as_before(target: Target,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The compact state builds the same codes, identity text, objects and memory plan as
    the Python decoder's fresh decode of the same vector (the reference: a slip in the
    compiled flat tuple or the packed positions shows here; read after a collection, the
    candidate kept), and a third space projects both to the same vector."""
    space = build_space(small_graph("bert2"), target)
    rng = np.random.default_rng(6)
    vecs = space.sample_vectors(rng, 6)
    kept = [space.decode(v) for v in vecs]
    verdicts = [space.precheck(s) for s in kept]
    gc.collect()
    monkeypatch.setenv("GRAPHTUNE_PURE_PYTHON", "1")
    ref, other = (build_space(small_graph("bert2"), target) for _ in range(2))
    for v, s, verdict in zip(vecs, kept, verdicts):
        fresh = ref.decode(v)
        assert repr(fresh.structural_key()) == repr(s.structural_key())
        assert fresh.groups == s.groups and fresh.order == s.order and fresh == s
        assert fresh.transfers == s.transfers
        assert ref.precheck(fresh) == verdict
        got, want = other.project(s), other.project(fresh)  # known to neither: projected
        assert got.vector is not None and np.array_equal(got.vector, want.vector)


def test_a_decoded_schedule_is_known_to_its_own_space_only(target: Target) -> None:
    """``Space._remember`` marks a decoded schedule with its space's token (not a weak
    reference and a callback per candidate in a table of the space's, as before): its
    space encodes it from the mark, a copy is not known, another space of the same graph
    projects it (to a vector of the same schedule); the mark does not keep the space
    alive."""
    import weakref

    a, b = (build_space(small_graph("tiny_cnn"), target) for _ in range(2))
    rng = np.random.default_rng(7)
    s = a.sample(rng)
    assert a._known(s) is not None and b._known(s) is None
    assert a._known(GraphSchedule.from_json(json.loads(s.dumps()))) is None  # a copy is not
    assert np.array_equal(a.encode(s), a._known(s)[0])  # type: ignore[index]
    assert b.decode(b.encode(s)).structural_key() == s.structural_key()
    gone = weakref.ref(a)
    del a
    gc.collect()
    assert gone() is None and s._space_known is not None
