"""``cdag_rows`` (search_space/_cshape.c): :func:`search_space._cderive.derive`'s loop over
the groups in C. Per group its chunk-DAG row from its op set's cache (``("cdag", name,
split)``; ``_group_row`` on a miss) with the group's bindings, and its result's code: the
same rows (the same objects) as the Python loop, the miss callback asked exactly for the
groups whose row is missing, and hostile groups, caches and callbacks in a child process
(an error, not a crash).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.target import Target
from search_space import _build, _ccore, _cderive, build_space
from search_space._space import _Recorder
from tests.search_space._child import run_child
from tests.search_space.conftest import small_graph


def _glue() -> Any:
    return getattr(_ccore.load_extension("_cshape"), "cdag_rows", None)


pytestmark = pytest.mark.skipif(
    _glue() is None,
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _python_rows(dec: Any, codes: dict[str, int]) -> tuple[list[Any], list[int]]:
    """The Python loop (the reference)."""
    rows, gout = [], []
    for gr in dec.groups:
        h = gr.info.cache.get(("cdag", gr.name, gr.split))
        if h is None:
            h = _cderive._group_row(dec, gr, codes)
        rows.append((h[0], h[1], h[2], h[3], gr.binds))
        gout.append(h[4])
    return rows, gout


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm"])
def test_rows_equal_the_python_loop(key: str, target: Target) -> None:
    space = build_space(small_graph(key), target)
    codes = _ccore.tensor_codes(space)
    rng = np.random.default_rng(29)
    glue = _glue()
    asked = 0
    for i, vec in enumerate([*space.sample_vectors(rng, 8), *space.sample_vectors(rng, 8, True)]):
        rec = _Recorder(vec[space.rep].tolist(), space._rep_list)
        dec = _build.decode_groups(space, rec)
        dropped = set()
        if i % 2:  # some rows missing: made by the callback, once per missing (name, split)
            for gr in dec.groups[::3]:
                if gr.info.cache.pop(("cdag", gr.name, gr.split), None) is not None:
                    dropped.add((id(gr.info), gr.name, gr.split))
        calls: list[Any] = []

        def miss(gr: Any, _calls: list[Any] = calls, _dec: Any = dec) -> Any:
            _calls.append((id(gr.info), gr.name, gr.split))
            return _cderive._group_row(_dec, gr, codes)

        rows, gout = glue(dec.groups, miss)
        assert set(calls) == dropped and len(calls) == len(dropped)
        asked += len(calls)
        want_rows, want_gout = _python_rows(dec, codes)
        assert rows == want_rows and gout == want_gout
        assert type(rows) is list and type(gout) is list
        for a, b in zip(rows, want_rows, strict=True):  # the same objects
            assert all(x is y for x, y in zip(a, b, strict=True))
    assert asked


_HOSTILE = r'''
import sys
sys.path.insert(0, ".")
from search_space import _ccore
from tests.search_space._child import expect
f = _ccore.load_extension("_cshape").cdag_rows

class Info:
    def __init__(self, cache=None):
        self.cache = {} if cache is None else cache
class GR:
    def __init__(self, name="g0", split=2, info=None):
        self.name, self.split, self.binds = name, split, ((0,), (1,))
        self.info = info or Info()
good = (("n",), (1, 2, 3), (4,), (0, 1), 7)
ok = lambda gr: good
rows, gout = f([GR(), GR("g1")], ok)
assert rows == [(("n",), (1, 2, 3), (4,), (0, 1), ((0,), (1,)))] * 2 and gout == [7, 7]
g = GR(); g.info.cache[("cdag", "g0", 2)] = good
assert f([g], lambda gr: 1 // 0)[1] == [7]                   # a hit: no callback
assert f([], ok) == ([], [])
g = GR(); g.info.cache[("cdag", "g0", 2)] = None             # a cached None: missing, as the
assert f([g], ok)[1] == [7]                                  # Python loop's .get() is None reads it
expect(ValueError, f, [GR()], lambda gr: good[:4])           # not a tuple of 5
expect(ValueError, f, [GR()], lambda gr: list(good))
expect(ValueError, f, [GR()], lambda gr: None)
expect(ZeroDivisionError, f, [GR()], lambda gr: 1 // 0)
expect(ValueError, f, [GR(split=0)], ok)                     # a split below 1
expect(TypeError, f, [GR(split="2")], ok)
expect(TypeError, f, [GR(info=Info(cache=[]))], ok)          # the cache not a dict
expect(AttributeError, f, [GR(info=object())], ok)
g = GR(); del g.binds
expect(AttributeError, f, [g], ok)
expect(TypeError, f, 5, ok)                                  # not a sequence
expect(TypeError, f, [GR()], 5)                              # not callable
expect(TypeError, f, [GR()])
# a callback that clears the groups (a snapshot is read) or the cache being read
gl = [GR(str(i)) for i in range(40)]
def evil(gr):
    gl.clear()
    gr.info.cache.clear()
    return good
assert len(f(gl, evil)[0]) == 40
class Key(str):
    def __hash__(self):
        return str.__hash__(self)
    def __eq__(self, other):
        cache.clear()
        return str.__eq__(self, other)
cache = {}
cache[("cdag", Key("g0"), 2)] = good
r = f([GR(info=Info(cache))], ok)
assert r[1] == [7]
# groups with slots, a slot never set
class GS:
    __slots__ = ("name", "split", "binds", "info")
gs = GS(); gs.name, gs.split, gs.binds, gs.info = "g0", 1, ((0,),), Info()
assert f([gs], ok)[1] == [7]
gs2 = GS(); gs2.name, gs2.split, gs2.info = "g1", 1, Info()
expect(AttributeError, f, [gs, gs2], ok)
print("ok")
'''


def test_hostile_inputs_in_a_child_process() -> None:
    r = run_child(_HOSTILE)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def test_derive_goes_through_the_compiled_loop(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """``_cderive.derive`` calls ``cdag_rows`` (a missing attribute would fall back silently)."""
    mod = _ccore.load_extension("_cshape")
    calls: list[int] = []
    real = mod.cdag_rows

    def counted(*a: Any) -> Any:
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(mod, "cdag_rows", counted)
    space = build_space(small_graph("tiny_cnn"), target)
    space.sample(np.random.default_rng(3))
    assert calls
