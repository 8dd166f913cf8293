"""A decode's answers read from the vector's bytes (issue 20).

``Space._decode_marked`` hands its recorder the int16 vector as a ``memoryview`` (not a list
of ~2,000 ints made per decode); the compiled readers (``_cshape.groups`` and ``wants``,
``_cdag.blocks``) take the bytes under it (:func:`search_space._cglue.c_values`) and read
them in place, the Python ones index the view. Here: ``c_values`` passes only a whole int16
view's bytes; each compiled reader answers, records and fails alike from the bytes and from
the list (the reference); whole decodes through ``_decode_marked`` take the compiled path and
equal the list's and the pure Python decoder's.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from compiler.key_text import key_text
from compiler.target import Target
from search_space import _build, _ccore, _cderive, _cglue, _cgroups, build_space
from search_space._space import _Recorder
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    _ccore._glue() is None,
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def _vectors(key: str, target: Target, n: int, seed: int) -> tuple[Any, list[np.ndarray]]:
    space = build_space(small_graph(key), target)
    rng = np.random.default_rng(seed)
    vecs = [*space.sample_vectors(rng, n), *space.sample_vectors(rng, n, uniform=True)]
    return space, [np.asarray(v, dtype=np.int16) for v in vecs]


def _view(vec: np.ndarray) -> memoryview:
    return memoryview(vec.tobytes()).cast("h")


def test_c_values_takes_a_whole_int16_view_only() -> None:
    vec = np.array([3, 0, 1, 2], dtype=np.int16)
    lst = vec.tolist()
    assert _cglue.c_values(lst) is lst
    mv = _view(vec)
    raw = _cglue.c_values(mv)
    assert type(raw) is bytes and raw == vec.tobytes() and raw is mv.obj
    assert _cglue.c_values(mv[1:]) is None  # a part of the bytes: not what C would read
    assert _cglue.c_values(memoryview(vec.tobytes())) is None  # bytes, not int16
    assert _cglue.c_values(memoryview(bytearray(vec.tobytes())).cast("h")) is None  # mutable
    assert _cglue.c_values(memoryview(vec)) is None  # numpy's buffer, not bytes
    assert _cglue.c_values(vec) is None and _cglue.c_values(tuple(lst)) is None


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_compiled_readers_read_the_bytes_as_the_list(key: str, target: Target) -> None:
    space, vecs = _vectors(key, target, 10, 7)
    glue = _ccore._glue()
    for vec in vecs:
        full = vec[space.rep].tolist() if not space._rep_plain else vec.tolist()
        view = _view(vec) if space._rep_plain else _view(vec[space.rep].astype(np.int16))
        by_list, by_view = _Recorder(full, space._rep_list), _Recorder(view, space._rep_list)
        # the blocks (_cdag.blocks)
        lens = [b - a + 1 for a, b in space.structure.segments]
        below = _build.CUT_BELOW[_build.GRANULARITIES[full[space.d_gran]]] if space.d_gran >= 0 else 0
        want = _cderive.blocks(space, by_list, lens, below)
        got = _cderive.blocks(space, by_view, lens, below)
        assert want is not None and got == want
        assert by_view.active == by_list.active and any(by_list.active)
        # the groups (_cshape.groups), then the scope answers (_cshape.wants)
        dec_l, dec_v = _build.decode_groups(space, by_list), _build.decode_groups(space, by_view)
        assert dec_v.flat == dec_l.flat and dec_v.topo == dec_l.topo
        assert by_view.active == by_list.active
        rows = _ccore._step_rows(dec_l, space, _ccore._load())
        if rows is None:
            continue
        sr = rows[0]
        parts_l, parts_v = _cglue.reader_parts(by_list), _cglue.reader_parts(by_view)
        assert type(parts_v) is tuple and type(parts_v[0]) is bytes
        scope_free = sorted({space._rep_list[d] for d in (*sr.gd, *sr.pd)})
        for over in (None, {f: 0 for f in scope_free[:2]}):
            answers = []
            for parts, rec in ((parts_l, by_list), (parts_v, by_view)):
                if over is not None:
                    parts = _cglue.reader_parts(_build._overridden(space, rec, over))
                answers.append(glue.wants(sr.asks, sr.gd, sr.pd, dec_l.groups, parts,
                                          _cglue.CHUNK_CODES,
                                          lambda p, s, w: _cglue.chunk_codes(_build.chunk_scopes, p, s, w),
                                          len(_cglue.SCOPE_POLICIES), _cglue.XSCOPE_CODES))
            assert answers[0] == answers[1]
        assert by_view.active == by_list.active


def test_bytes_out_of_range_and_short_fail_as_the_list(target: Target) -> None:
    space, vecs = _vectors("tiny_cnn", target, 2, 3)
    glue = _ccore._glue()
    vec = vecs[0]
    dec = _build.decode_groups(space, _Recorder(vec.tolist(), space._rep_list))
    sr = _ccore._step_rows(dec, space, _ccore._load())[0]
    d = sr.gd[0]
    errors = []
    for bad in (vec.tolist(), _view(vec)):
        bad = list(bad) if type(bad) is list else bad
        if type(bad) is list:
            bad[d] = 999
        else:
            arr = vec.copy()
            arr[d] = 999
            bad = _view(arr)
        parts = _cglue.reader_parts(_Recorder(bad, space._rep_list))
        with pytest.raises(ValueError) as exc:
            glue.wants(sr.asks, sr.gd, sr.pd, dec.groups, parts, _cglue.CHUNK_CODES,
                       lambda p, s, w: _cglue.chunk_codes(_build.chunk_scopes, p, s, w),
                       len(_cglue.SCOPE_POLICIES), _cglue.XSCOPE_CODES)
        errors.append(str(exc.value))
    assert errors[0] == errors[1] == "an answer out of range"
    # a vector shorter than the parameters read: a bad parameter, as a short list
    short = _Recorder(_view(vec[: max(sr.gd) // 2]), space._rep_list)
    with pytest.raises(ValueError, match="bad parameter"):
        glue.wants(sr.asks, sr.gd, sr.pd, dec.groups, _cglue.reader_parts(short), _cglue.CHUNK_CODES,
                   lambda p, s, w: _cglue.chunk_codes(_build.chunk_scopes, p, s, w),
                   len(_cglue.SCOPE_POLICIES), _cglue.XSCOPE_CODES)


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_decodes_take_the_compiled_path_and_equal_python(key: str, target: Target,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    space, vecs = _vectors(key, target, 6, 11)
    assert space._rep_plain  # the view's path (every parameter free)
    c0, d0 = _cgroups.STATS["c"], _cderive.STATS["c"]
    compiled = [space._decode_marked(v) for v in vecs]
    assert _cgroups.STATS["c"] - c0 == len(vecs)  # the groups read in C from the bytes
    assert _cderive.STATS["c"] - d0 == len(vecs)
    by_list = [space._decode(_Recorder(v.tolist(), space._rep_list)) for v in vecs]
    assert [key_text(s) for s in compiled] == [key_text(s) for s in by_list]
    monkeypatch.setenv("GRAPHTUNE_PURE_PYTHON", "1")
    pure = [space._decode_marked(v) for v in vecs]  # the Python readers index the view
    assert [key_text(s) for s in pure] == [key_text(s) for s in compiled]
    assert [s._space_known.known()[1] for s in pure] == [s._space_known.known()[1] for s in compiled]


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_a_short_vector_fails_alike_from_the_bytes_and_the_list(key: str, target: Target) -> None:
    """Every prefix of a vector (down to 3 parameters) decodes its groups alike, or fails
    with the same message, from the list and from the bytes: ``_cshape.groups`` bounds a
    group's slot parameter by the values' length in parameters, not in bytes (a review
    found it read the bytes' length: a vector cut short decoded from the bytes)."""
    space, vecs = _vectors(key, target, 1, 0)
    vec = vecs[0]
    for cut in range(len(vec), 2, -1):
        results = []
        for values in (vec[:cut].tolist(), _view(vec[:cut])):
            try:
                dec = _build.decode_groups(space, _Recorder(values, space._rep_list))
                results.append(("ok", dec.flat, dec.topo))
            except ValueError as exc:
                results.append(("error", str(exc), None))
        assert results[0] == results[1], cut
