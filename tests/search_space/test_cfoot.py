"""The profile walk and halo terms in C (search_space/_cprofile.c) against their Python
definitions, :func:`compiler.footprint.group_profile` / :func:`compiler.footprint.chain_points`
and :func:`compiler.capacity.chunk_working_set`.

For every op set of schedules decoded from small zoo models and every streamed subset
of its streamable inputs up to three, the output streamed out or kept, held or not: the
C walk over :func:`search_space._cfoot.pack_rows`' rows gives the Python walk's unpruned
points (``chain_points``, in chain order) and its pruned profile (``group_profile``),
integer for integer. A hypothesis test drives chunk shapes (samples and cores per part)
of op sets with windowed convolutions and attention, where the working set adds halo
and attention terms, and compares the C working set with ``chunk_working_set``.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.capacity import _facts, chunk_working_set, cut_sides, in_compute_dtype
from compiler.footprint import chain_points, group_profile
from compiler.target import Target
from search_space import _ccore, build_space
from search_space._cfoot import pack_rows
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _op_sets(name: str, target: Target, n: int, seed: int) -> list[tuple[object, tuple[int, ...], object]]:
    space = build_space(small_graph(name), target)
    rng = np.random.default_rng(seed)
    for _ in range(n):  # op sets of decoded schedules (the space keeps their facts)
        space.sample(rng)
    return [(in_compute_dtype(space.graph_for(batch), target), ops, info)
            for (batch, ops), info in space._infos.items()]


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2", "deepfm", "wide_and_deep"])
def test_c_profile_walk_equals_the_python_walk(name: str, target: Target) -> None:
    from search_space import _cwalk  # type: ignore[attr-defined]

    compared = 0
    for mem, ops, info in _op_sets(name, target, 10, 3):
        names = tuple(t for t in info.inputs if t in info.streamable)
        packed = pack_rows(mem, ops, names)
        assert packed is not None
        for k in range(min(3, len(names)) + 1):
            for sub in combinations(range(len(names)), k):
                mask = sum(1 << b for b in sub)
                streamed = frozenset(names[b] for b in sub)
                for off in (False, True):
                    for held in (False, True):
                        raw, prof = _cwalk.profile(packed[0], mask, off, held)
                        want_raw = [(s, f) for s, f, _ in
                                    chain_points(mem, ops, streamed, off, held)]
                        assert raw == want_raw, (ops, sub, off, held)
                        assert prof == list(group_profile(mem, ops, streamed, off, held))
                        compared += 1
    assert compared > (4 if name == "wide_and_deep" else 100)  # W&D: two op sets


_HALO: dict[str, list[tuple[object, tuple[int, ...], object]]] = {}


def _halo_sets(name: str, target: Target) -> list[tuple[object, tuple[int, ...], object]]:
    """Op sets of decoded schedules whose working set can add a halo or attention term."""
    if name not in _HALO:
        _HALO[name] = [(mem, ops, info) for mem, ops, info in _op_sets(name, target, 8, 4)
                       if _facts(mem, ops).windowed or _facts(mem, ops).attention]
    return _HALO[name]


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(["tiny_cnn", "bert2"]), pick=st.integers(0, 10_000),
       spp=st.integers(1, 8), cpp=st.sampled_from([1, 2, 3, 4, 5, 8]),
       entry=st.integers(0, 1 << 12))
def test_c_halo_and_attention_terms_equal_the_python_working_set(
        name: str, pick: int, spp: int, cpp: int, entry: int) -> None:
    """Any chunk shape, any table entry: the C working set (profile walked in C, the halo
    and attention terms added per chain) is ``chunk_working_set``'s float exactly."""
    from search_space import _cwalk  # type: ignore[attr-defined]

    target = Target.default()
    sets = _halo_sets(name, target)
    assert sets  # tiny_cnn has windowed convolutions, bert2 attention
    mem, ops, info = sets[pick % len(sets)]
    names = tuple(t for t in info.inputs if t in info.streamable)  # type: ignore[attr-defined]
    size = 4 << len(names)
    ws = _ccore._ws_def(mem, info, names, spp, cpp, [None] * size)
    assert ws is not None and ws[7] is not None
    f = _facts(mem, ops)  # type: ignore[arg-type]
    assert (ws[8] is not None) == bool((f.windowed and cut_sides(spp, cpp))
                                       or (f.attention and cpp > 1))
    i = entry % size
    mask, off, held = i >> 2, bool(i >> 1 & 1), bool(i & 1)
    want = chunk_working_set(mem, ops, frozenset(t for b, t in enumerate(names) if mask >> b & 1),  # type: ignore[arg-type]
                             off, held, spp, cpp)
    assert _cwalk.working_set(ws, size, i) == want


def test_malformed_packs_are_refused() -> None:
    """A pack that does not hold what its header says is a ValueError, not a crash."""
    from array import array

    from search_space import _cwalk  # type: ignore[attr-defined]

    empty = array("q", [0, 0, 0]).tobytes()
    assert _cwalk.profile(empty, 0, False, False) == ([], [])
    huge = 1 << 62  # counts whose byte sizes overflow: refused before any multiplication
    for bad in ([0, 1, 0], [2, 0, 0, 0, 1], [0, 1, 0, 1, 2, 0, 0, 0, 0, 0, 5, 0, 0], [-1, 0, 0],
                [0, 1, 0, 0, 0, 0, 0, 0, 0, 0, huge, 0, 0], [huge, 0, 0]):
        with pytest.raises(ValueError):
            _cwalk.profile(array("q", bad).tobytes(), 0, False, False)
    with pytest.raises(ValueError):
        _cwalk.profile(b"1234567", 0, False, False)  # not int64s
    good = ([None] * 4, lambda i: bytes(16), 1, 1, 8192, (2, 0), (), empty, None)
    assert _cwalk.working_set(good, 4, 2) == 2.0 * 2  # no chains: the output's buffers
    halo_without_slots = (*good[:8], (array("d", [1.0]).tobytes(),) * 2)
    with pytest.raises(ValueError):
        _cwalk.working_set(halo_without_slots, 4, 0)
