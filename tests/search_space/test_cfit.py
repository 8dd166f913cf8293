"""Pass 1's fit in C (``fit_c`` in search_space/_cshape.c): ``Decoding.fit``'s shape search.

On a miss of the op set's fit table and its ``shared`` cache, the compiled group loop runs
``Decoding.fit``'s search itself, asking ``Decoding.fits_l1`` only for a chunk shape whose
answer is not in the ``shared`` cache yet. Here ``_cshape.fit`` (the same C function for
one shape) and ``Decoding.fit`` (the reference) get the same inputs and the same answers
to "does it fit": the same result, the same shapes asked in the same order, the same cache
afterwards; a decode with the C loop never calls ``Decoding.fit``; hostile callbacks and
arguments are an exception in a child process, not a crash.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.target import Target
from search_space import _build, _cgroups, build_space
from search_space._dims import divisors
from tests.search_space._child import run_child
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    not _cgroups.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")

_BATCHES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 96, 2560)


class _Oracle:
    """``Decoding.fits_l1`` as both sides call it: the shared cache first, then a made-up
    answer kept there; the shapes computed (cache misses) logged in order."""

    def __init__(self, seed: int, share: int) -> None:
        self.seed, self.share, self.log = seed, share, []

    def answer(self, s: int, c: int) -> bool:
        return (s * 7919 + c * 104729 + self.seed) % 7 < self.share

    def __call__(self, info: Any, s: int, c: int) -> bool:
        key = ("fits", s, c)
        hit = info.shared.get(key)
        if hit is None:
            self.log.append((s, c))
            hit = info.shared[key] = self.answer(s, c)
        return bool(hit)


@settings(max_examples=400, deadline=None)
@given(batch=st.sampled_from(_BATCHES), n=st.sampled_from((1, 2, 4, 6, 8, 16)), data=st.data(),
       seed=st.integers(0, 1000), share=st.integers(0, 7))
def test_fit_equals_decoding_fit(batch: int, n: int, data: st.DataObject, seed: int, share: int) -> None:
    from search_space import _cshape  # type: ignore[attr-defined]

    divs = divisors(batch)
    spp = data.draw(st.sampled_from([0, *divs]), label="spp")
    cpp = data.draw(st.integers(1, n + 2), label="cpp")  # beyond the cluster too: n // c == 0
    parts = data.draw(st.integers(1, 2 * n), label="parts")
    # some answers already in the shared cache (True, False, or None: asked again)
    known = data.draw(st.dictionaries(st.tuples(st.sampled_from(divs), st.integers(1, n)),
                                      st.sampled_from([True, False, None]), max_size=6), label="known")
    out = {}
    for side in ("py", "c"):
        info = SimpleNamespace(shared={("fits", s, c): v for (s, c), v in known.items()})
        oracle = _Oracle(seed, share)
        if side == "py":
            dec = SimpleNamespace(n=n, batch=batch, divs=divs, fits_l1=oracle)
            got = _build.Decoding.fit(dec, info, spp, cpp, parts)  # type: ignore[arg-type]
        else:
            got = _cshape.fit(info, info.shared, oracle, tuple(divs), n, batch, spp, cpp, parts, "fit")
        out[side] = (got, oracle.log, info.shared)
    assert out["c"] == out["py"]
    assert type(out["c"][0]) is tuple and all(type(x) is int for x in out["c"][0])
    assert list(out["c"][2]) == list(out["py"][2])  # the cache filled in the same order


def test_decodes_never_call_the_python_fit(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the C loop, a fit-table miss runs fit_c (the shape search), not Decoding.fit;
    the same vectors decode to the same schedules as with Decoding.fit called."""
    vecs = []
    keys = {}
    for c_fit in (True, False):
        space = build_space(small_graph("bert2"), target)
        rng = np.random.default_rng(71)
        vecs = [*space.sample_vectors(rng, 20), *space.sample_vectors(rng, 20, uniform=True)]
        with monkeypatch.context() as m:
            calls = [0]
            real = _build.Decoding.fit

            def counted(self: Any, *a: Any, _real: Any = real, _calls: list[int] = calls) -> Any:
                _calls[0] += 1
                return _real(self, *a)

            m.setattr(_build.Decoding, "fit", counted)
            if c_fit:  # counted stands for the reference: the C loop runs its search
                m.setattr(_cgroups, "_REFERENCE", [counted])
            # else a fit patched on the class is another callable: called as it is
            keys[c_fit] = [repr(space.decode(v).structural_key()) for v in vecs]
            fits = sum(len(info.shared) for info in space._infos.values())
        assert (calls[0] == 0) == c_fit, calls
        assert fits > 0
    assert keys[True] == keys[False]



def test_a_fit_overridden_in_a_subclass_is_called(target: Target) -> None:
    """The C search stands in only for the reference ``Decoding.fit``: a subclass's own
    fit decides its groups (the guard compared the bound method with its own class's)."""
    space = build_space(small_graph("bert2"), target)
    vecs = space.sample_vectors(np.random.default_rng(72), 10)
    calls = [0]

    class Mine(_build.Decoding):  # type: ignore[misc, valid-type]
        def fit(self, info: Any, spp: int, cpp: int, parts: int) -> tuple[int, int, int]:
            calls[0] += 1
            return _build.REFERENCE_FIT(self, info, spp, cpp, parts)  # type: ignore[no-any-return]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(_build, "Decoding", Mine)
        for v in vecs:
            space.decode(v)
    assert calls[0] > 0


def test_a_batch_with_more_divisors_than_fit_c_takes(target: Target,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """10,080 has 72 divisors, past fit_c's 64: the decode calls ``Decoding.fit`` (it raised
    a ValueError where the Python decoder decoded), and equals the Python loop's."""
    from onnx import helper

    from tests.search_space.conftest import onnx_model

    batch = 10080
    assert len(divisors(batch)) > _cgroups.FIT_DIVS
    nodes = [helper.make_node("Relu", ["x"], ["r0"]), helper.make_node("Add", ["r0", "one"], ["a0"]),
             helper.make_node("Relu", ["a0"], ["y"])]
    g = onnx_model(nodes, {"x": [batch, 64]}, {"y": [batch, 64]}, {"one": 1.0}, "m")
    vecs = build_space(g, target).sample_vectors(np.random.default_rng(73), 8)
    keys = {}
    for compiled in (True, False):
        space = build_space(g, target)
        with monkeypatch.context() as m:
            if not compiled:
                m.setattr(_build, "groups_compiled", lambda *_: False)
            keys[compiled] = [repr(space.decode(v).structural_key()) for v in vecs]
    assert keys[True] == keys[False]


_HOSTILE = r'''
import sys
sys.path.insert(0, ".")
from types import SimpleNamespace
from search_space import _cshape as m

from tests.search_space._child import expect

info = SimpleNamespace(shared={})
F = lambda fits, divs=(1, 2, 4, 8), n=8, batch=8, spp=2, cpp=1, parts=1, sh=None: m.fit(
    info, info.shared if sh is None else sh, fits, divs, n, batch, spp, cpp, parts, "fit")
no = lambda i, s, c: False
assert F(no) == (2, 1, 1) and info.shared[("fit", 2, 1, 1)] == (2, 1, 1)
expect(ZeroDivisionError, F, lambda i, s, c: 1 // 0)
class Bad:
    def __bool__(self):
        raise RuntimeError("no truth")
expect(RuntimeError, F, lambda i, s, c: Bad())
expect(ValueError, F, no, (1, 3))                 # not a divisor
expect(ValueError, F, no, (2, 1))                 # not ascending
expect(ValueError, F, no, ())
expect(ValueError, F, no, tuple(range(1, 70)))
expect(ValueError, F, no, (1, 2, 4, 8), 0)        # no cores
expect(ValueError, F, no, (1, 2, 4, 8), 8, 0)     # no batch
expect(ValueError, F, no, (1, 2, 4, 8), 8, 8, 9)  # spp past the batch
expect(ValueError, F, no, (1, 2, 4, 8), 8, 8, 2, 0)
expect(ValueError, F, no, (1, 2, 4, 8), 8, 8, 2, 1, 0)
expect(ValueError, F, 5)                      # not callable
expect(TypeError, F, no, [1, 2])
expect(TypeError, F, no, (1, "2"))
expect(TypeError, m.fit, info, [], no, (1,), 8, 1, 0, 1, 1, "fit")
# a callback that clears and replaces the cache it is kept in: no use after free
sh = {("fits", 8, 1): None}
def evil(i, s, c):
    sh.clear()
    info.shared = {}
    return False
assert F(evil, sh=sh) == (2, 1, 1) and sh[("fit", 2, 1, 1)] == (2, 1, 1)  # nothing fits: the first
# groups(): the C fit's arguments checked
G = type("G", (), {"__slots__": ()})
def gcall(fits, divs):
    base = ("g0", 0, object(), {}, 1, 0, (), "t0")
    return m.groups([0] * 12, list(range(12)), bytearray(12), [((base, 0, 0),)], 4, 8, 2, (1, 2, 4, 8), True,
                    (1, 2), (1, 2), ((0, 1), None), (0, 1), lambda *a: 1 // 0, lambda p, r: p,
                    lambda perm, cores, parts, split, spread: tuple(((0,),) for _ in range(split)),
                    {}, G, "fit", fits, divs)
expect(ValueError, gcall, 5, (1, 2, 4, 8))
expect(ValueError, gcall, no, (1, 3))
expect(TypeError, gcall, no, [1, 2])
class Mine(Exception):
    pass
def own(i, s, c):
    raise Mine  # not the fit's ZeroDivisionError: shows that groups() called fits
expect(Mine, gcall, own, (1, 2, 4, 8))
print("ok")
'''


def test_hostile_fits_are_refused_without_a_crash() -> None:
    r = run_child(_HOSTILE)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout[-500:],
                                                            r.stderr[-2000:])
