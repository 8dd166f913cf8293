"""Block partitions found in C (search_space/_cpart.c) against the Python functions
(:func:`search_space._structure.anchor_partition`, :func:`partition_is_valid`).

For every range of consecutive segments (up to 12 of them) of several models, under
each mode, the compiled ``partition`` gives the mode and the parts the Python search of
:func:`search_space._build.block_parts` finds (wholes and anchor partitions accepted and
rejected: every outcome occurs).
"""

from __future__ import annotations

import pytest

from compiler.target import Target
from search_space import _cblocks, build_space
from search_space._structure import anchor_partition, partition_is_valid
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    not _cblocks.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _python(space: object, lo: int, hi: int, mode: str) -> tuple[str, tuple[tuple[int, ...], ...]]:
    g = space.graph  # type: ignore[attr-defined]
    ops = tuple(range(lo, hi + 1))
    tries = {"whole": ("whole", "anchors"), "anchors": ("anchors", "whole"), "ops": ()}[mode]
    for m in tries:
        cand = [ops] if m == "whole" else anchor_partition(g, ops, space.structure.anchors)  # type: ignore[attr-defined]
        if partition_is_valid(g, cand):
            return m, tuple(cand)
    return "ops", tuple((i,) for i in ops)


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2", "deepfm", "wide_and_deep"])
def test_c_partitions_equal_the_python_ones(name: str, target: Target) -> None:
    space = build_space(small_graph(name), target)
    segs = space.structure.segments
    found: dict[str, int] = {}
    for a in range(len(segs)):
        for b in range(a, min(len(segs), a + 12)):
            lo, hi = segs[a][0], segs[b][1]
            for mode in _cblocks.MODES:
                got = _cblocks.partition(space, lo, hi, mode)
                want = _python(space, lo, hi, mode)
                assert got == want, (lo, hi, mode)
                found[want[0]] = found.get(want[0], 0) + 1
    # every outcome occurs: valid wholes, anchor partitions and the per-op fallback
    assert set(found) == {"whole", "anchors", "ops"}, found


def test_malformed_tables_are_refused(target: Target) -> None:
    from search_space import _cblocks as glue

    mod = glue.load_extension("_cpart")
    space = build_space(small_graph("deepfm"), target)
    tables = glue._tables(space)
    n = len(space.graph.ops)
    assert mod.partition(tables, 0, n - 1, 2)[0] == 2
    for lo, hi, mode in ((0, n, 0), (-1, 2, 0), (3, 2, 0), (0, 1, 3)):
        with pytest.raises(ValueError):
            mod.partition(tables, lo, hi, mode)
    with pytest.raises(ValueError):
        mod.partition(tables[:4], 0, 1, 0)
    with pytest.raises(ValueError):
        mod.partition((tables[0], tables[1] + b"\x00", *tables[2:]), 0, 1, 0)  # not int32
    odd = bytearray(tables[1] + b"\x00")
    with pytest.raises(ValueError):
        mod.partition((tables[0], odd, *tables[2:]), 0, 1, 0)
    odd.append(0)  # the refused table's buffer was released: it can be resized again
    broken = bytearray(tables[1])
    broken[:4] = (n + 5).to_bytes(4, "little")  # a producer out of range
    with pytest.raises(ValueError):
        mod.partition((tables[0], bytes(broken), *tables[2:]), 0, n - 1, 0)
    pp = memoryview(tables[0]).cast("i")
    i = next(i for i in range(n) if pp[i + 1] > pp[i])  # the first op an op produces for
    later = bytearray(tables[1])  # its first producer made itself: not topological
    later[4 * pp[i]:4 * pp[i] + 4] = i.to_bytes(4, "little")
    with pytest.raises(ValueError):
        mod.partition((tables[0], bytes(later), *tables[2:]), 0, n - 1, 0)
