"""The review of h106 and h107 (2026-11-28): the walk's reads of a step's ints and the fit's
table, given what a caller's Python could do to them. In child processes: a regression is a
crash there, a failed test here."""

from __future__ import annotations

import pytest

from search_space import _ccore
from tests.search_space._child import run_child

pytestmark = pytest.mark.skipif(
    not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")

_STEPS = """
import numpy as np
from compiler.target import Target
from search_space import build_space, _ccore, _build
from tests.search_space.conftest import small_graph
from tests.search_space.test_cwalk_rows import _Spy, _tuple_steps
from tests.search_space._child import expect
mod = _ccore._load(); spy = _Spy(mod); _ccore._modules["_cwalk"] = spy
orig = _build.derive_compiled
def unpacked(dec):
    ok = orig(dec); dec.c_walk = None; return ok
_build.derive_compiled = unpacked
space = build_space(small_graph("tiny_cnn"), Target.default())
space.decode(space.sample_vectors(np.random.default_rng(6), 1)[0])
args, _ = spy.walk_calls[0]
cap, llb, nc = args[:3]
steps = _tuple_steps(args)
k = len(steps) - 1
r = list(steps[k][5])
def with_reads(reads):
    return [*steps[:k], (*steps[k][:5], reads, *steps[k][6:])]
"""

_INTS = _STEPS + """
# a read beyond an int was cut to its low 32 bits and walked as the real one
for bad in (-1, 2**32 + r[0], -(2**32) + r[0]):
    expect(ValueError, mod.walk, cap, llb, nc, with_reads([bad, *r[1:]]), True)
# an item whose __index__ clears the list being read
class Clears:
    def __init__(self): self.lst = None
    def __index__(self):
        self.lst.clear()
        return 0
e = Clears()
reads = [e] + [0] * 2000
e.lst = reads
expect(ValueError, mod.walk, cap, llb, nc, with_reads(reads), True)
print("ok")
"""

_FITS = """
from search_space import _ccore
from tests.search_space._child import expect
mod = _ccore._load()
class Clears:
    def __init__(self, t): self.t = t
    def __float__(self):
        self.t.clear()
        return 1e30
table = [None, None, None, None]
table[2] = Clears(table)
expect(TypeError, mod.fits, None, 4, 1.0, table)
print("ok")
"""


def test_a_step_s_reads_out_of_range_or_changing_are_refused() -> None:
    r = run_child(_INTS)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def test_the_fit_s_table_refuses_an_entry_that_is_not_a_float() -> None:
    r = run_child(_FITS)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])
