"""A fit's working sets in one C call, and a walk table made in C from an op set's kept parts.

``_cwalk.fits(ws, n_work, l1, table)`` is :func:`search_space._ccore.fits_l1`'s loop over
a chunk shape's four least working sets (the streamable inputs streamed, then not; the
output streamed out, then kept; not held) in one call: here it equals the loop over
``working_set`` it replaced, with and without a table, and keeps what it computed in the
table (the values ``working_set`` gives).

``group_rows`` given the space's shape tables makes a group's missing walk table
(``("ctab", spp, cpp)``) in C from the op set's kept parts (``"cops"``, ``"cwork"``) and
the shape's shared table (``("wtab", spp, cpp)``), as :func:`search_space._ccore._work`
makes it: here the tables equal ``_work``'s, element by element the same objects, and no
``_crow`` callback is made for them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.target import Target
from search_space import _build, _ccore, build_space
from search_space._space import _Recorder
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    _ccore._glue() is None or not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _decode(space: Any, vec: np.ndarray) -> Any:
    rec = _Recorder(vec[space.rep].tolist(), space._rep_list)
    dec = _build.decode_groups(space, rec)
    _build.walk_scopes(dec, rec)
    return dec


def _loop(mod: Any, ws: Any, n: int, l1: float, table: list[Any]) -> bool:
    """fits_l1's loop before ``fits``: working_set per entry, kept in the table."""
    full = (1 << n) - 1
    for mask in (full, 0):
        for off in (1, 0):
            i = (mask * 2 + off) * 2
            v = table[i]
            if v is None:
                v = table[i] = mod.working_set(ws, len(table), i)
            if v <= l1:
                return True
    return False


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_fits_is_the_working_set_loop(key: str) -> None:
    mod = _ccore._load()
    space = build_space(small_graph(key), Target.default())
    rng = np.random.default_rng(3)
    answers = set()
    n_cases = 0
    for vec in space.sample_vectors(rng, 4):
        dec = _decode(space, vec)
        for gr in dec.groups:
            info = gr.info
            n = len(info.streamable)
            if n > _ccore._FIT_STREAMED:
                continue
            for spp, cpp in {(gr.samples // gr.parts, gr.cores // gr.parts), (1, 1), (8, 1), (1, 8)}:
                hit = _ccore._work(dec, info, spp, cpp)
                ws = hit[8]
                if ws is None or len(hit[0]) != n:
                    continue
                size = 4 << n
                # l1 around the entries, so that each of the four can be the first that fits
                probe = [mod.working_set(ws, size, (m * 2 + o) * 2)
                         for m in ((1 << n) - 1, 0) for o in (1, 0)]
                for l1 in {*probe, min(probe) - 1.0, float(dec.l1)}:
                    want_table: list[Any] = [None] * size
                    want = _loop(mod, ws, n, l1, want_table)
                    got_table: list[Any] = [None] * size
                    assert mod.fits(ws, size, l1, got_table) is want
                    assert got_table == want_table  # the same entries computed and kept
                    assert mod.fits(ws, size, l1, None) is want  # no table
                    assert mod.fits(ws, size, l1, want_table) is want  # read from the table
                    answers.add(want)
                    n_cases += 1
    assert n_cases > 50 and answers == {True, False}


def test_fits_refuses_bad_arguments() -> None:
    mod = _ccore._load()
    with pytest.raises(ValueError, match="4 << streamable"):
        mod.fits((), 6, 1.0, None)
    with pytest.raises(ValueError, match="a list of n_work"):
        mod.fits((), 8, 1.0, [None] * 4)
    with pytest.raises(ValueError):
        mod.fits((), 8, 1.0, None)  # not a ws definition


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_walk_tables_from_kept_parts_are_works(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(small_graph(key), Target.default())
    rng = np.random.default_rng(29)
    made = 0
    for vec in space.sample_vectors(rng, 6):
        dec = _decode(space, vec)
        # each group's shape rows and walk tables dropped (its kept parts and the shared
        # tables stay), in the op set's cache and in the space's shape tables
        want = {}
        for gr in dec.groups:
            cache = gr.info.cache
            for k in [k for k in cache if type(k) is tuple and k[0] in ("crow", "ctab")]:
                del cache[k]
        space._cshapes.clear()
        tiled = {id(gr.info) for gr in dec.groups if "tiles" in gr.info.cache}
        calls: list[Any] = []
        crow = _ccore._crow

        def counted(*a: Any, _crow: Any = crow, _calls: list[Any] = calls) -> Any:
            _calls.append(a)
            return _crow(*a)

        monkeypatch.setattr(_ccore, "_crow", counted)
        _ccore._group_rows(dec, space)
        monkeypatch.setattr(_ccore, "_crow", crow)
        for gr in dec.groups:
            info = gr.info
            spp, cpp = gr.samples // gr.parts, gr.cores // gr.parts
            got = info.cache.get(("ctab", spp, cpp))
            if got is None:
                continue
            made += 1
            want[id(info), spp, cpp] = got
            own, shared = info.cache["cwork"], info.shared[("wtab", spp, cpp)]
            ref = (own[0], shared[0], *own[1:], shared[1], shared[2])  # _work's tuple
            assert len(got) == len(ref) == 9
            assert all(a is b for a, b in zip(got, ref))
            assert space._cshapes[(info.cache["cops"], spp, cpp)] is got  # kept as _work keeps it
            del info.cache[("ctab", spp, cpp)]
            assert _ccore._work(dec, info, spp, cpp) is got  # _work finds the same table
        # rows of groups whose op set had its LLB tiles: no callback made them
        assert tiled and not [a for a in calls if id(a[2]) in tiled]
    assert made > 10


def _caches(space: Any) -> dict[Any, Any]:
    """Every op set's fit answers and walk tables, by (batch, op set) and key, as values."""
    out: dict[Any, Any] = {}
    for (batch, ops), info in space._infos.items():
        for where, d in (("shared", info.shared), ("cache", info.cache)):
            for k, v in d.items():
                if type(k) is tuple and k[0] in ("fits", "wtab", "ctab"):
                    out[batch, ops, where, k] = _plain(v)
    return out


def _plain(v: Any) -> Any:
    """A cache value compared by value: a filler as its function and arguments."""
    if isinstance(v, tuple):
        return tuple(_plain(x) for x in v)
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if hasattr(v, "func") and hasattr(v, "args"):  # functools.partial
        return (v.func, *(_plain(x) for x in v.args))
    if isinstance(v, _ccore._Profiler):  # the op set's profiler: its op set, names and table
        return ("profiler", v.ops, v.names, _plain(v.table))
    return v


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm"])
def test_a_fit_miss_in_c_leaves_the_caches_pythons_leave(key: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoding.fits_l1's miss made in C (fits_fast in _cshape.c) gives the same answers and
    leaves the same walk tables (values, fillers' arguments) as the Python path, decode by
    decode from a fresh space; fewer Python calls when it runs."""
    from search_space import _cgroups

    vecs = build_space(small_graph(key), Target.default()).sample_vectors(np.random.default_rng(41), 10)
    seen = {}
    for fast in (True, False):
        space = build_space(small_graph(key), Target.default())
        calls = [0]
        compiled = _build.fits_compiled

        def counted(*a: Any, _c: Any = compiled, _n: list[int] = calls) -> Any:
            _n[0] += 1
            return _c(*a)

        with monkeypatch.context() as m:
            m.setattr(_build, "fits_compiled", counted)
            if not fast:  # fits_l1 not the reference: asked as it is (the Python path)
                m.setattr(_cgroups, "_REFERENCE", [_cgroups._REFERENCE[0], None])
            per = []
            for vec in vecs:
                s = space.decode(vec)
                per.append((s.key() if hasattr(s, "key") else str(s), _caches(space)))
        seen[fast] = (per, calls[0])
    (fast_per, fast_calls), (py_per, py_calls) = seen[True], seen[False]
    assert len(fast_per) == len(py_per)
    for (ka, ca), (kb, cb) in zip(fast_per, py_per):
        assert ka == kb
        assert ca.keys() == cb.keys()
        for k in ca:
            assert ca[k] == cb[k], k
    assert fast_calls < py_calls  # the C path answered some misses itself
