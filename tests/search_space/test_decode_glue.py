"""The Python glue around the compiled decoder (issue 20, h103): what a sampled candidate no
longer pays for, checked against what it replaced.

* ``Space._remember``'s mark (:class:`search_space._space._Mark`): a sampled or mutated
  schedule keeps the recorder's table and a copy of its vector; the canonical vector and the
  sorted parameters read are made when first asked, equal to the eager ones (the vector with
  every entry not read 0, the parameters ascending), and ``precheck`` does not make them.
* ``sample_vectors`` draws in place: the same vectors as the formula it replaced.
* ``_cgroups._block_rows`` finds an op set's rows by its identity: the rows it would find
  through ``Decoding.info`` and the facts' caches, the same objects.
* The recorder's values through the array module (no ties) or numpy (ties): the same
  schedules either way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.key_text import key_text
from compiler.target import Target
from search_space import _cgroups, build_space
from search_space._build import Decoding
from search_space._ccore import tensor_codes
from search_space._dims import MODES
from search_space._space import SpaceOptions
from tests.search_space.conftest import recorded, small_graph

_SPACES: dict[Any, Any] = {}


def _space_of(key: str, ties: bool = False) -> Any:
    if (key, ties) not in _SPACES:
        _SPACES[key, ties] = build_space(small_graph(key), Target.default(),
                                         options=SpaceOptions(ties=ties))
    return _SPACES[key, ties]


def _eager(space: Any, vec: np.ndarray, read: list[int]) -> tuple[np.ndarray, list[int]]:
    """The canonical vector and parameters read as ``_decode_free`` made them before."""
    mask = np.zeros(space.dimension, dtype=bool)
    mask[read] = True
    canon = np.zeros(space.dimension, dtype=np.int16)
    np.copyto(canon, vec, casting="unsafe", where=mask)
    return canon, np.flatnonzero(mask).tolist()


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), key=st.sampled_from(["tiny_cnn", "bert2"]))
def test_the_mark_is_made_when_asked_and_equals_the_eager_one(seed: int, key: str) -> None:
    space = _space_of(key)
    vec = space.sample_vectors(np.random.default_rng(seed), 1)[0]
    with recorded() as seen:
        s = space._decode_marked(vec)
    want_canon, want_active = _eager(space, vec, seen[-1].read())
    vec[:] = 0  # the caller's vector changes: the mark kept its own copy
    assert space.precheck(s) is not None
    assert s._space_known._made is None  # precheck asks whether, not what
    canon, active = space._known(s)
    assert (canon == want_canon).all() and canon.dtype == np.int16
    assert list(active) == want_active and type(active) is tuple
    assert (space.encode(s) == want_canon).all()
    assert space._known(s)[0] is canon  # made once


def test_sample_and_a_mutated_child_leave_the_mark_unmade() -> None:
    space = _space_of("tiny_cnn")
    rng = np.random.default_rng(3)
    s = space.sample(rng)
    space.precheck(s)
    assert s._space_known._made is None
    child = space.mutate(s, rng)  # asks the parent's (made), not the child's
    assert s._space_known._made is not None
    if child is not s:
        assert child._space_known._made is None
        assert (space.encode(child) == space._decode_free(space.encode(child))[1]).all()


def _reference_vectors(space: Any, rng: np.random.Generator, count: int, uniform: bool) -> np.ndarray:
    """``sample_vectors`` as it was written before it drew in place."""
    vecs = (rng.random((count, len(space.free))) * space.n_choices).astype(np.int16)
    if not uniform and space.options.per_op and space._mode_free.size:
        k = space._mode_free.size
        ops = rng.random((count, k)) < space.options.per_op_prior
        other = (rng.random((count, k)) * (len(MODES) - 1)).astype(np.int16)
        vecs[:, space._mode_free] = np.where(ops, MODES.index("ops"), other)
    return vecs


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), key=st.sampled_from(["tiny_cnn", "bert2"]),
       count=st.integers(1, 5), uniform=st.booleans())
def test_sample_vectors_draws_what_the_formula_drew(seed: int, key: str, count: int,
                                                   uniform: bool) -> None:
    space = _space_of(key)
    got = space.sample_vectors(np.random.default_rng(seed), count, uniform)
    want = _reference_vectors(space, np.random.default_rng(seed), count, uniform)
    assert got.dtype == np.int16 and got.shape == want.shape
    assert (got == want).all()


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_block_rows_by_op_set_identity_are_the_rows_through_the_facts(key: str) -> None:
    if not _cgroups.available():
        pytest.skip("the compiled group loop is not built")
    space: Any = build_space(small_graph(key), Target.default())
    rng = np.random.default_rng(7)
    for _ in range(40):
        space.precheck(space.sample(rng))
    batch = space.batch
    per = space._cgroup_rows[batch]
    by_ops = space._cgroup_ops[batch]
    assert by_ops, "the op-set table was filled"
    dec = Decoding(space, batch)
    tabs = _cgroups._tables(space)
    assert tabs is not None
    samples, cpp, parts, _, _ = tabs
    fit_key = ("cfit", _cgroups._spp_of(space, batch, dec.divs, samples), cpp, parts)
    codes = tensor_codes(space)
    checked = 0
    for blk, rows in per.values():
        fresh = _cgroups._block_rows(dec, blk, codes, fit_key, {})  # through the facts
        assert len(rows) == len(fresh) == len(blk.parts)
        assert all(a is b for a, b in zip(rows, fresh))
        # and again through the op-set table just filled (the fast path)
        assert all(a is b for a, b in zip(_cgroups._block_rows(dec, blk, codes, fit_key, by_ops),
                                          fresh))
        checked += 1
    assert checked > 5


@pytest.mark.parametrize("ties", [False, True])
def test_the_recorder_values_through_either_path_decode_alike(ties: bool) -> None:
    space = _space_of("bert2", ties)
    assert space._rep_plain is (not ties)
    rng = np.random.default_rng(11)
    for vec in space.sample_vectors(rng, 10):
        a = space._decode_marked(vec)  # int16: the array module when there are no ties
        b = space._decode_marked(vec.astype(np.int64))  # numpy's gather and tolist
        assert key_text(a) == key_text(b)
        assert (space._known(a)[0] == space._known(b)[0]).all()
