"""Working sets computed in C (``ws_compute`` in search_space/_cwalk.c) against their Python
definition, :func:`compiler.capacity.chunk_working_set`.

For every op set of schedules decoded from the small zoo models (a CNN with windowed
convolutions, a two-layer BERT with attention, DeepFM, Wide & Deep), every streamed
subset of its streamable inputs up to three, the output streamed out or kept, held or
not, and the chunk shapes samples per part in {1, 2, the batch} x cores per part in
{1, 2, the part's cores}, those with a windowed op's halo or attention's excess too
(their terms from :func:`search_space._cfoot.halo_values`, the profile walked in C from
the packed chain rows): the C entry equals the Python float exactly (``==``, the sums in
the same order).
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from compiler.capacity import _facts, chunk_working_set, cut_sides, in_compute_dtype
from compiler.target import Target
from search_space import _ccore, build_space
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2", "deepfm", "wide_and_deep"])
def test_c_working_sets_equal_the_python_definition(name: str, target: Target) -> None:
    from search_space import _cwalk  # type: ignore[attr-defined]

    space = build_space(small_graph(name), target)
    rng = np.random.default_rng(5)
    for _ in range(12):  # op sets of decoded schedules (the space keeps their facts)
        space.sample(rng)
    n = target.chip.cores_per_cluster
    compared = halo_shapes = 0
    for (batch, ops), info in list(space._infos.items()):
        mem = in_compute_dtype(space.graph_for(batch), target)
        names = tuple(t for t in info.inputs if t in info.streamable)
        if len(names) > _ccore._LIST_STREAMED:
            continue
        size = 4 << len(names)
        f = _facts(mem, ops)
        for spp in sorted({1, 2, batch} & set(range(1, batch + 1))):
            for cpp in (1, 2, n):
                table: list[float | None] = [None] * size
                ws = _ccore._ws_def(mem, info, names, spp, cpp, table)
                assert ws is not None and ws[7] is not None  # chain rows packed: all in C
                if (f.windowed and cut_sides(spp, cpp)) or (f.attention and cpp > 1):
                    assert ws[8] is not None
                    halo_shapes += 1
                for k in range(min(3, len(names)) + 1):
                    for sub in combinations(range(len(names)), k):
                        mask = sum(1 << b for b in sub)
                        for off in (0, 1):
                            for held in (0, 1):
                                i = (mask * 2 + off) * 2 + held
                                want = chunk_working_set(
                                    mem, ops, frozenset(names[b] for b in sub), bool(off),
                                    bool(held), spp, cpp)
                                got = _cwalk.working_set(ws, size, i)
                                assert got == want, (ops, sub, off, held, spp, cpp)
                                compared += 1
    assert compared > 200
    if name in ("tiny_cnn", "bert2"):
        assert halo_shapes > 0  # the halo / attention shapes are computed in C too


def test_bad_working_set_definitions_are_refused(target: Target) -> None:
    """A malformed definition is a ValueError, not a crash."""
    from search_space import _cwalk  # type: ignore[attr-defined]

    def prof(i: int) -> bytes:
        return bytes(16)

    good = ([None] * 4, prof, 1, 1, 8192, (2, 0), ())
    assert _cwalk.working_set(good, 4, 2) == 2.0 * 2  # zero profile: output buffers
    with pytest.raises(ValueError):
        _cwalk.working_set(good, 4, 4)  # outside the table
    with pytest.raises(ValueError):
        _cwalk.working_set(([None] * 4, prof, 1, 0, 8192, (2, 0), ()), 4, 0)  # no cores
    with pytest.raises(ValueError):
        _cwalk.working_set(([None] * 4, lambda i: bytes(5), 1, 1, 8192, (2, 0), ()), 4, 0)
    with pytest.raises(ValueError):
        _cwalk.working_set(([None] * 2, prof, 1, 1, 8192, (2, 0), ()), 4, 0)  # short profiles


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2", "deepfm"])
def test_compiled_fit_answers_as_the_python_one(name: str, target: Target) -> None:
    """``_ccore.fits_l1`` (the walk's tables, entries computed in C) gives the Python
    fit's answer for every op set of decoded schedules and every chunk shape."""
    from search_space._build import Decoding

    space = build_space(small_graph(name), target)
    rng = np.random.default_rng(6)
    for _ in range(8):
        space.sample(rng)
    asked = 0
    for (batch, ops), info in list(space._infos.items()):
        dec = Decoding(space, batch)
        for spp in space.divisors[batch]:
            for cpp in (1, 2, 4, dec.n):
                want = any(chunk_working_set(dec.mem, ops, s, off, False, spp, cpp) <= dec.l1
                           for s in (info.streamable, frozenset()) for off in (True, False))
                got = _ccore.fits_l1(dec, info, spp, cpp)
                if got is not None:
                    assert got == want, (ops, spp, cpp)
                    asked += 1
    assert asked > 20

