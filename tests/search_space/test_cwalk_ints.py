"""The compiled walk's int reads (``as_long`` in search_space/_cutil.h, used by
search_space/_cwalk.c and _cdag.c).

An exact int of at most one 30-bit digit (CPython 3.11's layout) is read in place; any other
int (two digits or more, a subclass) goes through ``PyLong_AsLong``. Both ways must read
the same value: here the steps of real decodes (``walk_rows``' arguments, as
test_cwalk_rows.py records them) are walked as they are and again with other ints of the
same meaning: every tensor code moved up by 2**30 (two digits: the step's own code is read
by ``PyLong_AsLong``, its inputs' codes by ``as_long``) and every read an int subclass. The
walk is the same. A read of -1 (one digit, negative) is refused as out of range: read as -1,
not as 1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.target import Target
from search_space import _ccore, build_space
from tests.search_space.conftest import small_graph
from tests.search_space.test_cwalk_rows import _Spy, _tuple_steps, spied_walks, spy  # noqa: F401

pytestmark = pytest.mark.skipif(
    not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")

TWO_DIGITS = 1 << 30  # the least int CPython 3.11 stores in two 30-bit digits


class _Int(int):
    """An int subclass: never read in place."""


def _moved(steps: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """The steps with every tensor code moved up by TWO_DIGITS (a step's code is its 5th
    field, its inputs ((code, bit), ...) its 10th) and its reads (6th) as _Int."""
    out = []
    for s in steps:
        inputs = tuple((t + TWO_DIGITS, bit) for t, bit in s[9])
        out.append((*s[:4], s[4] + TWO_DIGITS, [_Int(r) for r in s[5]], s[6], s[7], s[8],
                    inputs, *s[10:]))
    return out


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_ints_read_either_way_walk_alike(key: str, target: Target,
                                         spy: _Spy) -> None:  # noqa: F811
    inputs = 0
    for cap, llb, nc, steps in spied_walks(spy, build_space(small_graph(key), target), 5, 12):
        inputs += sum(len(s[9]) for s in steps)
        out = spy.mod.walk(cap, llb, nc, steps, True)
        assert spy.mod.walk(cap, llb, nc, _moved(steps), True) == out
    assert inputs  # the inputs' codes were read


def test_a_negative_read_is_refused(target: Target, spy: _Spy) -> None:  # noqa: F811
    space = build_space(small_graph("tiny_cnn"), target)
    space.decode(space.sample_vectors(np.random.default_rng(6), 1)[0])
    args, _ = spy.walk_calls[0]
    cap, llb, nc = args[:3]
    steps = _tuple_steps(args)
    assert len(steps) > 2
    k = len(steps) - 1
    for bad in (-1, _Int(-1)):
        broken = [*steps[:k], (*steps[k][:5], [bad], *steps[k][6:])]
        with pytest.raises(ValueError, match="read out of range"):
            spy.mod.walk(cap, llb, nc, broken, True)
