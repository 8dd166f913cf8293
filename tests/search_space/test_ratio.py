"""Chunk shapes with the same working sets (search_space/_ratio.py): one answers for all.

:func:`shape_key` reduces (samples per part, cores per part) by their gcd when the op set
adds no halo or attention term there. The claim is checked against
:func:`compiler.capacity.chunk_working_set` itself, float for float, on the op sets of
decoded schedules of a small CNN (windowed convolutions) and a two-layer BERT (attention);
then that ``Decoding.fits_l1`` and the C walk's tables (``_ccore._work``) serve a shape
from its reduced shape's entry, and that their answers are the direct computation's.
"""

from __future__ import annotations

from math import gcd
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.capacity import _facts, chunk_working_set, cut_sides, in_compute_dtype
from compiler.target import Target
from search_space import _ccore, build_space
from search_space._build import Decoding
from search_space._ratio import shape_key
from tests.search_space.conftest import small_graph

_SETS: dict[str, list[tuple[Any, Any]]] = {}


def _op_sets(key: str) -> list[tuple[Any, Any]]:
    """(graph in compute dtype, GroupInfo) of the op sets 6 sampled schedules met."""
    if key not in _SETS:
        t = Target.default()
        space = build_space(small_graph(key), t)
        rng = np.random.default_rng(0)
        for _ in range(6):
            space.sample(rng)
        _SETS[key] = [(in_compute_dtype(space.graph_for(b), t), info)
                      for (b, _), info in sorted(space._infos.items(), key=lambda kv: kv[0])]
    return _SETS[key]


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(["tiny_cnn", "bert2"]), pick=st.integers(0, 10_000),
       spp=st.integers(1, 16), cpp=st.sampled_from([1, 2, 3, 4, 6, 8]),
       mask=st.integers(0, 255), off=st.booleans(), held=st.booleans())
def test_the_reduced_shape_has_the_same_working_set(key: str, pick: int, spp: int, cpp: int,
                                                    mask: int, off: bool, held: bool) -> None:
    mem, info = (sets := _op_sets(key))[pick % len(sets)]
    names = sorted(info.streamable)
    streamed = frozenset(n for b, n in enumerate(names) if mask >> b & 1)
    s, c = shape_key(mem, info, spp, cpp)
    assert s * cpp == c * spp and c <= cpp  # the same ratio, never larger
    assert chunk_working_set(mem, info.ops, streamed, off, held, s, c) == \
        chunk_working_set(mem, info.ops, streamed, off, held, spp, cpp)


def test_reduced_only_without_halo_or_attention() -> None:
    """Reduced exactly when the gcd is > 1 and neither term applies; both models have op
    sets of every kind (a windowed set cut inside a sample, an attention set on 2 cores)."""
    seen = set()
    for key in ("tiny_cnn", "bert2"):
        for mem, info in _op_sets(key):
            f = _facts(mem, info.ops)
            for spp, cpp in ((2, 2), (2, 4), (3, 6), (8, 8), (4, 2), (1, 1)):
                terms = bool((f.windowed and cut_sides(spp, cpp)) or (f.attention and cpp > 1))
                d = gcd(spp, cpp)
                want = (spp, cpp) if terms or d == 1 else (spp // d, cpp // d)
                assert shape_key(mem, info, spp, cpp) == want
                seen.add((terms, d > 1))
    assert seen == {(True, True), (False, True), (False, False)}


def _decoding(key: str) -> tuple[Any, Decoding]:
    t = Target.default()
    space = build_space(small_graph(key), t)
    rng = np.random.default_rng(1)
    space.sample(rng)
    return space, Decoding(space, space.batch)


def test_fits_l1_answers_a_shape_from_its_reduced_shape() -> None:
    """``Decoding.fits_l1`` finds a shape's answer under its reduced shape's key (a planted
    answer proves the look-up), keeps it under both keys, and, asked fresh for every shape,
    answers what the working sets say."""
    space, dec = _decoding("bert2")
    infos = [i for (_, _), i in space._infos.items()]
    plain = next(i for i in infos if shape_key(dec.mem, i, 4, 4) == (1, 1))
    plain.shared.pop(("fits", 4, 4), None)
    plain.shared[("fits", 1, 1)] = "planted"
    assert dec.fits_l1(plain, 4, 4) is True and plain.shared[("fits", 4, 4)] == "planted"
    space, dec = _decoding("bert2")
    l1 = dec.l1
    for info in [i for (_, _), i in space._infos.items()]:
        for spp, cpp in ((8, 8), (4, 4), (2, 2), (1, 1), (8, 4), (2, 1), (4, 8), (1, 2), (3, 3)):
            want = any(chunk_working_set(dec.mem, info.ops, s, o, False, spp, cpp) <= l1
                       for s in (info.streamable, frozenset()) for o in (True, False))
            assert dec.fits_l1(info, spp, cpp) == want, (info.ops, spp, cpp)
            s, c = shape_key(dec.mem, info, spp, cpp)
            assert info.shared[("fits", s, c)] == want


@pytest.mark.skipif(not _ccore.available(), reason="the compiled search core is not built")
def test_the_walk_tables_of_equal_shapes_are_one() -> None:
    """``_ccore._work`` gives a shape its reduced shape's entry (the same table object: what
    the C walk computes for one shape serves the other), and its own otherwise."""
    space, dec = _decoding("tiny_cnn")
    n = 0
    for info in [i for (_, _), i in space._infos.items()]:
        for spp, cpp in ((2, 2), (4, 2), (2, 4), (8, 8)):
            s, c = shape_key(dec.mem, info, spp, cpp)
            a, b = _ccore._work(dec, info, spp, cpp), _ccore._work(dec, info, s, c)
            assert a is b
            if (s, c) != (spp, cpp):
                n += 1
            else:
                assert a is not _ccore._work(dec, info, 1, 1)
    assert n > 0
