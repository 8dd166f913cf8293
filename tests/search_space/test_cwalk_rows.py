"""The compiled walk's row entries (``index`` and ``walk_rows`` in search_space/_cwalk.c).

Decoding hands the C walk per-group and per-transfer rows and the order as step
references (search_space/_ccore.py, ``_step_rows``); ``index`` resolves the order and
``walk_rows`` makes each step's row from its group's or transfer's. Here both are checked
against what they replace, on the rows of real decodes: ``index`` against the same
resolution in Python (step references, the answers in walk order, each chunk's and
transfer's position, the graph outputs), ``walk_rows`` against ``walk`` over the
per-step tuples built from the same rows in Python (every output equal). The scope
parameters a compiled decode reports equal the Python walk's, and malformed rows are a
ValueError, not a crash. (The decodes themselves are compared with the Python decoder in
test_ccore.py.)
"""

from __future__ import annotations

import os
from array import array
from typing import Any

import numpy as np
import pytest

from compiler.target import Target
from search_space import _build, _ccore, _crows, build_space
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


class _Spy:
    """The compiled module, recording what ``index`` and ``walk_rows`` are given and return."""

    def __init__(self, mod: Any) -> None:
        self.mod, self.index_calls, self.walk_calls = mod, [], []  # type: ignore[var-annotated]

    def __getattr__(self, name: str) -> Any:
        return getattr(self.mod, name)

    def index(self, *args: Any) -> Any:
        out = self.mod.index(*args)
        self.index_calls.append((args, out))
        return out

    def walk_rows(self, *args: Any) -> Any:
        out = self.mod.walk_rows(*args)
        self.walk_calls.append((args, out))
        return out


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> _Spy:
    mod = _ccore._load()
    s = _Spy(mod)
    monkeypatch.setitem(_ccore._modules, "_cwalk", s)
    return s


def _ref_index(nodes: list[Any], gidx: dict[str, int], gsplit: list[int], tidx: dict[str, int],
               tprod: list[int], outs: list[Any]) -> tuple[Any, ...]:
    """What ``index`` returns, in Python."""
    refs: list[int] = []
    asks: list[int] = []
    seen: set[tuple[str, int]] = set()
    chunk_at = [[0] * s for s in gsplit]
    step_at: list[int | None] = [None] * len(tprod)
    for k, node in enumerate(nodes):
        if node[0] == "g":
            i = gidx[node[1]]
            refs += [i, node[2]]
            chunk_at[i][node[2]] = k
            if ("g", i) not in seen:
                seen.add(("g", i))
                asks.append(i)
        else:
            j = tidx[node[1]]
            refs += [-1 - j, 0]
            step_at[j] = k
            p = tprod[j]
            if p >= 0 and ("p", p) not in seen:
                seen.add(("p", p))
                asks.append(-1 - p)
    out_set = set(outs)
    return (array("i", refs).tobytes(), bytes(node in out_set for node in nodes) or b"\0",
            asks, chunk_at, step_at)


def _tuple_steps(args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """The per-step tuples ``walk`` reads, built in Python from ``walk_rows``' arguments."""
    _, _, _, refs, is_out, reads, grows, gwants, trows, tprod, pwants, *_ = args
    r = array("i")
    r.frombytes(refs)
    steps: list[tuple[Any, ...]] = []
    for k in range(len(reads)):
        ref, chunk = r[2 * k], r[2 * k + 1]
        if ref >= 0:
            allowed, code, sb, fb, inputs, work, fill, tiles, ws, samples, binds = grows[ref]
            parts = binds[chunk]
            steps.append((0, gwants[ref][chunk], allowed, 2, code, reads[k],
                          ((chunk * samples, samples // len(parts), parts),), sb, fb, inputs, work,
                          bool(is_out[k]), fill, tiles, ws))
        else:
            pieces, init, code, sb, fb = trows[-1 - ref]
            p = tprod[-1 - ref]
            kind, want = (2, 2) if p < 0 else (1, pwants[p])
            steps.append((kind, want, 7, init, code, reads[k], pieces, sb, fb, (), [],
                          bool(is_out[k]), None, 0.0))
    return steps


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm"])
def test_rows_walk_as_the_per_step_tuples_do(key: str, target: Target, spy: _Spy) -> None:
    space = build_space(small_graph(key), target)
    rng = np.random.default_rng(5)
    for v in space.sample_vectors(rng, 20):
        space.decode(v)
    assert spy.index_calls and spy.walk_calls
    for args, out in spy.index_calls:
        nodes, gidx, gsplit, tidx, tprod, outs = args
        assert out == _ref_index(nodes, gidx, gsplit, tidx, tprod, outs)
    for args, out in spy.walk_calls:
        cap, llb, nc = args[:3]
        assert spy.mod.walk(cap, llb, nc, _tuple_steps(args), True) == out


def test_scope_parameters_equal_the_python_walks(target: Target) -> None:
    """What a compiled decode reports as each step's scope parameter (looked up from the
    rows, :class:`search_space._crows._ScopeDims`) is the Python walk's dict."""
    graph = small_graph("bert2")
    c_space, py_space = build_space(graph, target), build_space(graph, target)
    rng = np.random.default_rng(8)
    for v in c_space.sample_vectors(rng, 12):
        values = v[c_space.rep].tolist()
        _, dims = _build.decode_with(c_space, values.__getitem__)
        old = os.environ.get("GRAPHTUNE_PURE_PYTHON")
        os.environ["GRAPHTUNE_PURE_PYTHON"] = "1"
        try:
            _, want = _build.decode_with(py_space, values.__getitem__)
        finally:
            if old is None:
                os.environ.pop("GRAPHTUNE_PURE_PYTHON")
            else:
                os.environ["GRAPHTUNE_PURE_PYTHON"] = old
        assert isinstance(dims, _crows._ScopeDims)
        assert dict(dims) == want and len(dims) == len(want)
        for node in want:
            assert node in dims and dims.get(node) == want[node]
        assert dims.get(("g", "no such group", 0)) is None
        assert dims.get(("t", "no such transfer", 0)) is None
        for node in want:  # a node the walk has not: another chunk field, another kind
            assert (node[0], node[1], node[2] + 1_000_000) not in dims
            assert ("x", node[1], node[2]) not in dims


def test_bad_rows_are_refused() -> None:
    """``index`` and ``walk_rows`` check what they are given: a ValueError, not a crash."""
    from search_space import _cwalk  # type: ignore[attr-defined]

    def fill(i: int) -> float:
        return 1.0

    grow = (7, 0, 4, 0, (), [None] * 4, fill, 0.0, None, 2, (((0,),), ((1,),)))
    trow = (((0, 1, ((2,),)),), 2, 1, 4, 0)
    one = array("i", [0, 0]).tobytes()

    def walk(refs: bytes = one, reads: list[list[int]] | None = None,
             grows: list[Any] | None = None, wants: list[Any] | None = None,
             trows: list[Any] | None = None, tprod: list[int] | None = None,
             pwants: list[Any] | None = None) -> Any:
        reads = [[]] if reads is None else reads
        return _cwalk.walk_rows(1e6, 1e7, 8, refs, b"\0" * max(1, len(refs) // 8), reads,
                                [grow] if grows is None else grows,
                                [(0, 0)] if wants is None else wants,
                                [trow] if trows is None else trows,
                                [0] if tprod is None else tprod,
                                [3] if pwants is None else pwants, True)

    assert walk() is not None  # a well-formed row walks
    two = array("i", [0, 1, -1, 0]).tobytes()
    assert walk(two, [[], [0]]) is not None
    bad = [
        dict(refs=array("i", [1, 0]).tobytes()),  # a group that does not exist
        dict(refs=array("i", [0, 2]).tobytes()),  # a chunk the group does not have
        dict(refs=array("i", [-2, 0]).tobytes()),  # a transfer that does not exist
        dict(refs=one[:-1]),  # not two int32 per step
        dict(reads=[[3]]),  # reads a step that does not exist
        dict(reads=[[], []]),  # reads and refs disagree on the steps
        dict(refs=array("i", [0, 1]).tobytes(), wants=[(0,)]),  # no scope for chunk 1
        dict(wants=[(5, 0)]),  # a scope code out of range
        dict(grows=[(*grow[:2], -4, *grow[3:])]),  # negative sizes
        dict(grows=[(*grow[:10], (((9,),), ((1,),)))]),  # a core outside the cluster
        dict(grows=[(*grow[:4], ((0, 0),), *grow[5:])]),  # streamable, no table rows
        dict(grows=[(*grow[:4], ((0, 99),), *grow[5:])]),  # a streamable bit out of range
        dict(grows=[grow[:9]]),  # a short row
        dict(refs=two, reads=[[], [0]], tprod=[4]),  # a producer that does not exist
        dict(refs=two, reads=[[], [0]], pwants=[7]),  # a transfer scope out of range
        dict(refs=two, reads=[[], [0]], trows=[(trow[0], 5, 1, 4, 0)]),  # initial scope
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            walk(**kw)  # type: ignore[arg-type]
    nodes = [("g", "g0", 0), ("t", "x", 0)]
    assert _cwalk.index(nodes, {"g0": 0}, [1], {"x": 0}, [0], [("t", "x", 0)])[1] == b"\0\1"
    wrong: list[tuple[Any, ...]] = [
        ([("g", "nope", 0)], {"g0": 0}, [1], {}, [], []),  # a group the decode does not have
        ([("g", "g0", 3)], {"g0": 0}, [1], {}, [], []),  # a chunk it does not have
        ([("t", "x", 0)], {}, [], {"x": 0}, [2], []),  # a producer that does not exist
        ([("q", "g0", 0)], {"g0": 0}, [1], {}, [], []),  # not a step
    ]
    for args in wrong:
        with pytest.raises(ValueError):
            _cwalk.index(*args)


def test_a_large_walk_and_reused_memory() -> None:
    """A walk larger than the first arena block chains blocks; a walk after it (on the
    kept block, whatever it held) returns what it returned before."""
    from search_space import _cwalk  # type: ignore[attr-defined]

    def fill(i: int) -> float:
        return 1000.0

    def chain(n: int) -> list[tuple[Any, ...]]:
        return [(0, k % 3, 7, 2, k, [k - 1] if k else [], ((0, 2, ((k % 8,), ((k + 1) % 8,))),),
                 64, 8, ((k - 1, 0),) if k else (), [None] * 8, k == n - 1, fill, 0.0)
                for k in range(n)]

    small = _cwalk.walk(1e6, 1e7, 8, chain(40), True)
    big = _cwalk.walk(1e6, 1e7, 8, chain(6000), True)
    assert len(big[0]) == 6000 and big[0][:40] != [] and max(big[4]) > 0
    assert _cwalk.walk(1e6, 1e7, 8, chain(40), True) == small


_HOSTILE = r'''
import sys
from search_space import _cwalk
nc = 65536
parts = (tuple(range(nc)),) * 65536  # 2**32 cores in all: an int count wraps to 0
step = (2, 2, 7, 2, 0, [], ((0, 1, parts),), 1, 0, (), [], False, None, 0.0)
for call in (lambda: _cwalk.walk(1e6, 1e9, nc, [step]),
             lambda: _cwalk.walk_rows(1e6, 1e7, nc, bytes(8), b"\0", [[]],
                                      [(7, 0, 4, 0, (), [None] * 4, lambda i: 1.0, 0.0, None,
                                        65536, (parts,))], [(0,)], [], [], [], True)):
    try:
        call()
        sys.exit("accepted")
    except ValueError as e:
        assert "too many cores" in str(e), e
pieces = []
class Evil:
    def __index__(self):
        pieces.clear()  # frees the piece tuples a borrowed view would still point at
        return 0
pieces += [(0, 1, ((0,),)), (Evil(), 1, ((1,),)), (0, 1, ((2,),))]
_cwalk.walk(1e6, 1e9, 8, [(2, 2, 7, 2, 0, [], pieces, 1, 0, (), [], False, None, 0.0)])
print("ok")
'''


def test_hostile_rows_are_refused_without_a_crash() -> None:
    """The review's inputs (2026-11-27): a binding of 65,536 parts of 65,536 cores (an int
    count of the cores wrapped to 0 and the walk wrote past its buffer) and a pieces list
    an item's ``__index__`` clears while it is read. In a child process: a regression is a
    segfault there, a failed test here."""
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-c", _HOSTILE], capture_output=True, text=True,
                       timeout=120, cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])
