"""A new block's rows of known op sets found in C (``block_rows`` in ``_cshape.c``).

:func:`search_space._cgroups.decode_groups` asks ``block_rows`` first for a block it has
not met: when every part's op set is known (its rows by slot kept under the op set's
identity), the rows are found there in one call; else :func:`_cgroups._block_rows` (the
reference) makes them. Here: for every block of sampled decodes the C rows are the very
objects the Python loop returns, a block with an unknown op set or slot gives None, and
malformed arguments are refused.
"""

from __future__ import annotations

from typing import Any

import pytest

from compiler.target import Target
from search_space import _ccore, _cgroups, build_space
from tests.search_space.conftest import group_decodes, small_graph

pytestmark = pytest.mark.skipif(
    not _cgroups.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_block_rows_are_the_loops_rows(key: str) -> None:
    mod = _ccore.load_extension("_cshape")
    space = build_space(small_graph(key), Target.default())
    found = 0
    for _, dec in group_decodes(space, 5, 8):
        by_ops = space._cgroup_ops[dec.batch]
        codes = _ccore.tensor_codes(space)
        samples, cpp, parts, *_ = _cgroups._tables(space)
        spp = _cgroups._spp_of(space, dec.batch, dec.divs, samples)
        for blk, _rows in space._cgroup_rows[dec.batch].values():
            got = mod.block_rows(blk.parts, blk.slots, by_ops)
            want = _cgroups._block_rows(dec, blk, codes, ("cfit", spp, cpp, parts), by_ops)
            assert got is not None  # every op set of a decoded block is known
            assert len(got) == len(want) and all(a is b for a, b in zip(got, want))
            found += 1
            # an unknown slot, an op set never met: None (the Python loop decides)
            assert mod.block_rows(blk.parts, tuple(-1 for _ in blk.slots), by_ops) is None
            assert mod.block_rows(tuple((*p, 10**6) for p in blk.parts), blk.slots, by_ops) is None
    assert found > 5


def test_block_rows_refuses_malformed_arguments() -> None:
    mod = _ccore.load_extension("_cshape")
    ops = (1, 2)
    by_ops: dict[Any, Any] = {id(ops): (ops, {3: "row"})}
    assert mod.block_rows((ops,), (3,), by_ops) == ("row",)
    with pytest.raises(ValueError, match="a slot per part"):
        mod.block_rows((ops,), (3, 4), by_ops)
    with pytest.raises(TypeError):
        mod.block_rows([ops], (3,), by_ops)
    # an entry that is not (the op set, rows by slot): None, not a crash
    for bad in ((ops,), (ops, [1]), (tuple([1, 2]), {3: "row"}), "x"):  # another tuple equal to ops
        assert mod.block_rows((ops,), (3,), {id(ops): bad}) is None
