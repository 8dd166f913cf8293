"""``group_rows`` (search_space/_cshape.c) makes a missing shape row from the op set's cache.

A group's shape row (``info.cache[("crow", samples, cores, parts, split)]``) missing from
its op set's cache used to be made by calling back :func:`search_space._ccore._crow` (three
Python frames: ``_crow``, ``_shape_row``, ``_work``) even when ``_work`` only found the chunk
shape's walk table (``("ctab", spp, cpp)``) and the LLB tiles there: BERT-large s128 b8 met
~11 such rows per candidate, ResNet-50 b16 ~5. With the decode's batch, ``group_rows`` makes
that row in C (``crow_from_cache``) and keeps it as ``_crow`` does. Here: the rows equal the
Python loop's (the same objects), no ``_crow`` call when every walk table is there, the
callback still made when one is missing, and hostile caches in a child process.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.target import Target
from search_space import _build, _ccore, build_space
from search_space._space import _Recorder
from tests.search_space._child import run_child
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    _ccore._glue() is None,
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _decode(space: Any, vec: np.ndarray) -> Any:
    rec = _Recorder(vec[space.rep].tolist(), space._rep_list)
    dec = _build.decode_groups(space, rec)
    _build.walk_scopes(dec, rec)  # the op sets' shape rows and walk tables made
    return dec


def _drop_rows(dec: Any) -> int:
    """Remove every group's shape rows from its op set's cache (the walk tables stay)."""
    n = 0
    for gr in dec.groups:
        for k in [k for k in gr.info.cache if type(k) is tuple and k[0] == "crow"]:
            del gr.info.cache[k]
            n += 1
    return n


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm"])
def test_rows_from_the_walk_tables_equal_the_python_loop(key: str, target: Target,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(small_graph(key), target)
    rng = np.random.default_rng(17)
    made = 0
    for vec in [*space.sample_vectors(rng, 8), *space.sample_vectors(rng, 8, uniform=True)]:
        dec = _decode(space, vec)
        py = None
        for glue in (False, True):
            made += _drop_rows(dec)
            calls: list[Any] = []
            crow = _ccore._crow

            def counted(*a: Any, _crow: Any = crow, _calls: list[Any] = calls) -> Any:
                _calls.append(a)
                return _crow(*a)

            with monkeypatch.context() as m:
                m.setattr(_ccore, "_crow", counted)
                if not glue:
                    m.setattr(_ccore, "_glue", lambda: None)
                out = _ccore._group_rows(dec, space)
            if not glue:
                py = out
                continue
            assert not calls  # every walk table was there: no callback
            assert py is not None and out[0] == py[0] and out[2:] == py[2:]
            assert out[1] == py[1]
            for rc, rp in zip(out[1], py[1], strict=True):  # the same objects (shared values),
                # but samples per chunk (row[9]: an int made by each side, equal above)
                assert all(a is b for k, (a, b) in enumerate(zip(rc, rp, strict=True)) if k != 9)
            for gr in dec.groups:  # kept in the cache as _crow keeps it
                assert ("crow", gr.samples, gr.cores, gr.parts, gr.split) in gr.info.cache
    assert made


def test_a_missing_walk_table_calls_back(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the walk table (or the tiles) the row is ``_crow``'s, as before."""
    space = build_space(small_graph("bert2"), target)
    dec = _decode(space, space.sample_vectors(np.random.default_rng(3), 1)[0])
    want = _ccore._group_rows(dec, space)
    _drop_rows(dec)
    first = dec.groups[0].info
    for k in [k for k in first.cache if type(k) is tuple and k[0] == "ctab"]:
        del first.cache[k]
    del first.cache["cwork"]  # nor the op set's kept parts (else made in C: test_fit_tables.py)
    calls: list[Any] = []
    crow = _ccore._crow
    monkeypatch.setattr(_ccore, "_crow", lambda *a: calls.append(a) or crow(*a))
    got = _ccore._group_rows(dec, space)
    assert calls and all(a[2] is first for a in calls)
    assert got[1] == want[1] and got[2:] == want[2:]


_HOSTILE = r'''
import sys
sys.path.insert(0, ".")
from search_space import _ccore
from tests.search_space._child import expect
m = _ccore._glue()
assert m is not None

class Info:
    def __init__(self, cache):
        self.cache = cache
class GR:
    def __init__(self, cache, split=1):
        self.name, self.samples, self.cores, self.parts, self.split = "a", 4, 2, 2, split
        self.scope_at, self.slot, self.binds, self.info = 0, 0, ((0,),), Info(cache)
called = []
def row(*a):
    called.append(a)
    return (((1,), 0), ("x",), 0.0, False)
R = lambda gs, batch=8: m.group_rows(gs, (7,), {0: 3}, row, batch)
tab = (("n",), [None] * 4, (), 1, 2, 3, 4, "fill", "ws")
# the row made from the walk table: (allowed, code, sb, fb, inputs, table, fill, tiles, ws, batch // split)
c = {("ctab", 2, 1): tab, "tiles": 5.0}
out = R([GR(c, split=4)])
assert not called and out[1] == [(1, 2, 3, 4, (), tab[1], "fill", 5.0, "ws", 2, ((0,),))], out[1]
assert c[("crow", 4, 2, 2, 4)] == ((1, 2, 3, 4, (), tab[1], "fill", 5.0, "ws", 2), ("n",), 5.0, False)
assert out[2] == [("n",)] and out[3] == [5.0]
# no batch (0, or not given): the callback, as before
for gs in ([GR({("ctab", 2, 1): tab, "tiles": 5.0})],):
    R(gs, 0)
    assert len(called) == 1
    m.group_rows([GR({("ctab", 2, 1): tab, "tiles": 5.0})], (7,), {0: 3}, row)
    assert len(called) == 2
# a table not a tuple of 9, or no tiles: the callback
for bad in (tab[:8], tab + (0,), list(tab), None, 3):
    called.clear()
    R([GR({("ctab", 2, 1): bad, "tiles": 5.0})])
    assert len(called) == 1
called.clear()
R([GR({("ctab", 2, 1): tab})])
assert len(called) == 1
called.clear()
R([GR({("ctab", 2, 1): tab, "tiles": None})])  # None tiles: missing, as _shape_row reads them
assert len(called) == 1
expect(ValueError, R, [GR(dict(c))], -1)       # a negative batch
expect(TypeError, R, [GR(dict(c))], "8")       # not an int
expect(OverflowError, R, [GR(dict(c))], 2**80)
# a cache key whose __eq__ or __hash__ clears the cache while it is read: no use after free
class Evil:
    def __init__(self, cache):
        self.cache = cache
    def __hash__(self):
        return hash(("ctab", 2, 1))
    def __eq__(self, other):
        self.cache.clear()
        return False
for _ in range(20):
    cache = {"tiles": 5.0}
    cache[Evil(cache)] = tab
    cache[("ctab", 2, 1)] = tab
    R([GR(cache)])
class Boom:
    def __hash__(self):
        return hash("tiles")
    def __eq__(self, other):
        raise KeyError("boom")
cache = {("ctab", 2, 1): tab, Boom(): 1}
expect(KeyError, R, [GR(cache)])               # an error in a look-up is raised
print("ok")
'''


def test_hostile_caches_in_a_child_process() -> None:
    r = run_child(_HOSTILE)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])
