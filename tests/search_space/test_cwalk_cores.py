"""The compiled walk's two ways over a step's cores (search_space/_cwalk.c).

In a cluster of at most 64 cores the walk reads each step's cores as the bits of one word
(``Step.cmask``: the look-ahead's overlap test, its per-core maximum, the future rows,
release and allocate); in a larger cluster it loops over the cores. Both must walk alike:
here the steps of real decodes (``walk_rows``' arguments, as test_cwalk_rows.py records
them) are walked in their own cluster, then in a cluster of 100 cores with every core moved
up by an offset (0: the same cores; 60: cores on both sides of 64); every output is the
same, its cores moved by the same offset. The moved steps' pieces are new tuples each, so a
transfer whose dst chunks share one binding (its cores read once, ``step_pieces``) is also
compared with the same cores read for every piece; and once more with fixed bytes on every
result (rare in real decodes: a step's bytes per core add them over the mask's bits or over
every core). (The 64-core way is compared with the Python decoder in test_ccore.py.)
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from compiler.target import Target
from search_space import _ccore, build_space
from tests.search_space.conftest import small_graph
from tests.search_space.test_cwalk_rows import _Spy, _tuple_steps, spied_walks, spy  # noqa: F401

pytestmark = pytest.mark.skipif(
    not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")

WIDE = 100  # cores in the larger cluster: the per-core loops


def _moved_pieces(pieces: Any, off: int) -> tuple[Any, ...]:
    return tuple((first, spp, tuple(tuple(c + off for c in part) for part in parts))
                 for first, spp, parts in pieces)


def _moved_steps(steps: list[tuple[Any, ...]], off: int) -> list[tuple[Any, ...]]:
    """The steps with every core moved up by off (a step's pieces are its 7th field)."""
    return [(*s[:6], _moved_pieces(s[6], off), *s[7:]) for s in steps]


def _moved_out(out: Any, nc: int, off: int) -> Any:
    """What the walk in the larger cluster returns when the smaller one returned out."""
    if out is None:
        return None
    scopes, masks, helds, (count, cores, vals), peaks, peak_llb, *rest = out
    c = array("i")
    c.frombytes(cores)
    moved = array("i", [x + off for x in c]).tobytes() if len(c) else cores
    wide_peaks = [0.0] * WIDE
    wide_peaks[off:off + nc] = peaks
    if rest:  # the first overflow: its core (-1: the LLB) moves too
        at, llb, core, *more = rest
        rest = [at, llb, core + off if core >= 0 else core, *more]
    return (scopes, masks, helds, (count, moved, vals), wide_peaks, peak_llb, *rest)


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm"])
def test_a_wide_cluster_walks_as_the_bit_masks_do(key: str, target: Target,
                                                   spy: _Spy) -> None:  # noqa: F811
    walked = 0
    for cap, llb, nc, steps in spied_walks(spy, build_space(small_graph(key), target), 11, 20):
        assert nc <= 64  # the bit masks' way in the target's own cluster
        out = spy.mod.walk(cap, llb, nc, steps, True)
        for off in (0, 60):
            wide = spy.mod.walk(cap, llb, WIDE, _moved_steps(steps, off), True)
            assert wide == _moved_out(out, nc, off)
        walked += out is not None
    assert walked


def test_tight_capacities_walk_alike_in_a_wide_cluster(target: Target,
                                                       spy: _Spy) -> None:  # noqa: F811
    """With L1 a tenth of the target's, most steps ask for L1 and are refused by the
    look-ahead or overflow: the overlap test and its maximum decide them."""
    seen = set()
    for cap, llb, nc, steps in spied_walks(spy, build_space(small_graph("bert2"), target), 12, 12):
        for share in (0.1, 0.3):
            out = spy.mod.walk(cap * share, llb, nc, steps, True)
            seen.add(len(out) if out else 0)
            for off in (0, 60):
                wide = spy.mod.walk(cap * share, llb, WIDE, _moved_steps(steps, off), True)
                assert wide == _moved_out(out, nc, off)
    assert 14 in seen  # some walks overflowed (and explained it)


def test_fixed_bytes_walk_alike_in_a_wide_cluster(target: Target,
                                                  spy: _Spy) -> None:  # noqa: F811
    """Every result given fixed (unbatched) bytes, which the decodes of these models rarely
    have: a step's bytes per core (``step_pieces``: over the mask's bits, or over every core
    in a wide cluster) add them where the step has a piece, and the walks still agree."""
    outs = set()
    for cap, llb, nc, plain_steps in spied_walks(spy, build_space(small_graph("bert2"), target),
                                                 13, 8):
        steps = [(*s[:8], s[8] + 3000 + 7 * k, *s[9:]) for k, s in enumerate(plain_steps)]
        plain = spy.mod.walk(cap, llb, nc, plain_steps, True)
        out = spy.mod.walk(cap, llb, nc, steps, True)
        outs.add(out == plain)
        for off in (0, 60):
            wide = spy.mod.walk(cap, llb, WIDE, _moved_steps(steps, off), True)
            assert wide == _moved_out(out, nc, off)
    assert False in outs  # the fixed bytes changed some walks
