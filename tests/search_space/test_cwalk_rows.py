"""The compiled walk's row entries (``index`` and ``walk_rows`` in search_space/_cwalk.c, and
the step references and packed transfer rows ``_cdag.derive`` makes for it).

Decoding hands the C walk per-group and per-transfer rows and the order as step
references (search_space/_ccore.py, ``_step_rows``); ``index`` resolves the order and
``walk_rows`` makes each step's row from its group's or transfer's. Here both are checked
against what they replace, on the rows of real decodes: ``index`` against the same
resolution in Python (step references, the answers in walk order, each chunk's and
transfer's position, the graph outputs), ``walk_rows`` against ``walk`` over the
per-step tuples built from the same rows in Python (every output equal). The scope
parameters a compiled decode reports equal the Python walk's, and malformed rows are a
ValueError, not a crash. What ``_cdag.derive`` computes for the walk (``walk_index``: the
references, outputs, answers, positions, producers and packed transfer rows the C walk
makes each transfer's step from, ``packed_step``) equals the rows path on the same decodes
and walks the same. (The decodes themselves are compared with the Python decoder in
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
from search_space._crows import unpack_reads
from tests.search_space._child import run_child
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
    """The spied module, on the rows path that calls ``index`` and hands the C walk each
    transfer's row (decodes drop what ``_cdag.derive`` packed for the walk)."""
    mod = _ccore._load()
    s = _Spy(mod)
    monkeypatch.setitem(_ccore._modules, "_cwalk", s)
    original = _build.derive_compiled

    def unpacked(dec: Any) -> bool:
        ok = original(dec)
        dec.c_walk = None
        return ok

    monkeypatch.setattr(_build, "derive_compiled", unpacked)
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
    if isinstance(reads, bytes):  # packed by _cdag.derive
        reads = unpack_reads(reads)
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


def spied_walks(spy: _Spy, space: Any, seed: int, n: int
                ) -> list[tuple[float, float, int, list[tuple[Any, ...]]]]:
    """``space`` decodes ``n`` vectors drawn with ``seed``; the walks the spy saw, as
    (L1 capacity, LLB capacity, cores, the per-step tuples ``walk`` reads)."""
    for v in space.sample_vectors(np.random.default_rng(seed), n):
        space.decode(v)
    assert spy.walk_calls
    return [(*args[:3], _tuple_steps(args)) for args, _ in spy.walk_calls]


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
        if len(args) > 16 and args[16]:  # kept: (the walk, the handle when it overflowed)
            out, kept = out
            assert (kept is not None) == (len(out) > 6)
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
grows = []
class EvilCore:
    def __index__(self):
        grows.clear()  # frees the binding walk_rows borrowed from this list (review of h102)
        return 0
binding = ((EvilCore(), EvilCore()), (EvilCore(), EvilCore()))
grows.append((7, 0, 4, 0, (), [None] * 4, lambda i: 1.0, 0.0, None, 4, (binding,)))
try:
    _cwalk.walk_rows(1e9, 1e9, 2, bytes(8), b"\0", [[]], grows, [(3,)], [], [], [], True)
    sys.exit("accepted")
except ValueError as e:
    assert "core: an int" in str(e), e
print("ok")
'''


def test_hostile_rows_are_refused_without_a_crash() -> None:
    """The review's inputs (2026-11-27): a binding of 65,536 parts of 65,536 cores (an int
    count of the cores wrapped to 0 and the walk wrote past its buffer) and a pieces list
    an item's ``__index__`` clears while it is read; a core whose ``__index__`` clears the
    group rows ``walk_rows`` reads its binding from (the review of h102). In a child
    process: a regression is a segfault there, a failed test here."""

    r = run_child(_HOSTILE)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


_STEP_FIELDS = ("asks", "gd", "gidx", "is_out", "nodes", "pd", "reads", "refs", "tidx", "tprod")


def _set_up(key: str, target: Target, seed: int) -> tuple[Any, Any, np.random.Generator,
                                                          tuple[float, float, int]]:
    """A small model's space, the compiled walk, a generator and the target's capacities
    (L1 and LLB bytes, cores per cluster)."""
    return (build_space(small_graph(key), target), _ccore._load(), np.random.default_rng(seed),
            (float(target.l1.data_bytes), float(target.llb.bytes), target.chip.cores_per_cluster))


def _rows(dec: Any, space: Any, mod: Any) -> tuple[Any, ...]:
    """``_step_rows`` of a decode that has no group too wide for the C walk."""
    out = _ccore._step_rows(dec, space, mod)
    assert out is not None
    return out


def _both_ways(dec: Any, space: Any, mod: Any) -> tuple[Any, Any, Any, Any]:
    """A Decoding's step rows from derive()'s packed rows and, the packed rows dropped, from
    the rows path (``index`` and a row per transfer)."""
    packed, at = _rows(dec, space, mod)
    walk, dec.c_walk = dec.c_walk, None
    try:
        rows, at2 = _rows(dec, space, mod)
    finally:
        dec.c_walk = walk
    return packed, at, rows, at2


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm"])
def test_packed_transfers_walk_as_their_rows(key: str, target: Target) -> None:
    """Per decode (each order and look-ahead the vectors draw): the references, outputs,
    answers, positions and producers ``_cdag.derive`` computes equal ``index``'s and the
    Python glue's, and the walk from the packed transfer rows returns what the walk from
    the rows returns, under random scope answers at the target's capacities and at a tenth
    of them (overflows: the first one's explanation compared too)."""
    space, mod, rng, (l1, llb, nc) = _set_up(key, target, 11)
    walks = overflows = 0
    for v in space.sample_vectors(rng, 16):
        values = v[space.rep].tolist()
        dec = _build.decode_groups(space, values.__getitem__)
        assert dec.c_walk is not None
        packed, at, rows, at2 = _both_ways(dec, space, mod)
        assert at == at2
        for f in _STEP_FIELDS:
            assert getattr(packed, f) == getattr(rows, f), f
        assert packed.trows == [] and len(packed.tpack) == 4 and rows.tpack == (None, None, 0, None)
        assert len(rows.trows) == len(dec.transfers) == len(packed.tprod)
        for scale in (1.0, 0.1):
            gw = [tuple(int(x) for x in rng.integers(0, 4, gr.split)) for gr in dec.groups]
            pw = [int(x) for x in rng.integers(0, 4, len(dec.groups))]
            a = mod.walk_rows(l1 * scale, llb * scale, nc, rows.refs, rows.is_out, rows.reads,
                              rows.grows, gw, rows.trows, rows.tprod, pw, True)
            b = mod.walk_rows(l1 * scale, llb * scale, nc, packed.refs, packed.is_out,
                              packed.reads, packed.grows, gw, [], packed.tprod, pw, True,
                              *packed.tpack)
            assert a == b
            walks += 1
            overflows += len(a) > 6
    assert walks == 32 and overflows > 0  # the explanation of an overflow compared too


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_packed_reads_walk_as_their_lists(key: str, target: Target) -> None:
    """The reads ``_cdag.derive`` packs (``dec.c_reads``: bytes) walk as the same reads as
    lists do, at the target's capacities and at a tenth of them; a packed table that is
    short, long, negative or reads a step out of range is refused (a ValueError)."""
    space, mod, rng, (l1, llb, nc) = _set_up(key, target, 12)
    walks = 0
    for v in space.sample_vectors(rng, 8):
        values = v[space.rep].tolist()
        dec = _build.decode_groups(space, values.__getitem__)
        sr, _ = _rows(dec, space, mod)
        assert isinstance(sr.reads, bytes)
        lists = unpack_reads(sr.reads)
        assert len(lists) == len(sr.nodes) and any(lists)
        for scale in (1.0, 0.1):
            gw = [tuple(int(x) for x in rng.integers(0, 4, gr.split)) for gr in dec.groups]
            pw = [int(x) for x in rng.integers(0, 4, len(dec.groups))]
            args = (l1 * scale, llb * scale, nc, sr.refs, sr.is_out)
            rest = (sr.grows, gw, [], sr.tprod, pw, True, *sr.tpack)
            a = mod.walk_rows(*args, sr.reads, *rest)
            assert a == mod.walk_rows(*args, lists, *rest)
            walks += 1
        ints = array("i", sr.reads).tolist()
        shifted = [ints[0], 1, len(lists), *ints[3:]] if ints[1] == 0 else \
            [ints[0], ints[1], len(lists), *ints[3:]]  # a read past the steps
        for bad in (ints[:-1], [*ints, 0], [ints[0] + 1, *ints[1:]], [-1, *ints[1:]],
                    [ints[0], -1, *ints[2:]], shifted):
            with pytest.raises(ValueError):
                mod.walk_rows(*args, array("i", bad).tobytes(), *rest)
        with pytest.raises(ValueError):
            mod.walk_rows(*args, sr.reads[:-1], *rest)  # not whole int32
        with pytest.raises(TypeError):
            mod.walk_rows(*args, tuple(lists), *rest)
    assert walks == 16


def test_bad_packed_rows_are_refused() -> None:
    """``walk_rows`` checks the packed transfer rows and ``derive`` the result codes it is
    given: a ValueError, not a crash."""
    from search_space import _cwalk  # type: ignore[attr-defined]

    def fill(i: int) -> float:
        return 1.0

    grow = (7, 0, 4, 0, (), [None] * 4, fill, 0.0, None, 2, (((0,),), ((1,),)))
    two = array("i", [0, 0, -1, 0]).tobytes()
    sizes = array("q", [4, 0, 8, 0]).tobytes()

    def walk(tp: tuple[int, ...] = (1, 2, 0, 2, 0, 1), sz: Any = sizes, batch: int = 4,
             ring: Any = ((0,),), tprod: list[int] | None = None) -> Any:
        return _cwalk.walk_rows(1e6, 1e7, 8, two, b"\0\1", [[], [0]], [grow], [(0, 0)], [],
                                [0] if tprod is None else tprod, [3], True,
                                array("i", tp).tobytes(), sz, batch, ring)

    ok = walk()
    assert ok is not None and len(ok[0]) == 2
    assert walk(tp=(1, 2, 0, 2, -1, 0)) is not None  # on the ring
    bad: list[dict[str, Any]] = [
        dict(tp=(2, 2, 0, 2, 0, 1)),  # a tensor code past the sizes
        dict(tp=(-1, 2, 0, 2, 0, 1)),  # a negative tensor code
        dict(tp=(1, 0, 0, 2, 0, 1)),  # no dst factor
        dict(tp=(1, 2, 0, 0, 0, 1)),  # no dst chunks
        dict(tp=(1, 2, -1, 2, 0, 1)),  # a negative first chunk
        dict(tp=(1, 2, 0, 1 << 20, 0, 1)),  # too many chunks
        dict(tp=(1, 1, 2**31 - 2, 2, 0, 1), batch=2**62),  # the first samples overflow
        dict(tp=(1, 2, 0, 2, 1, 0)),  # a binding group that does not exist
        dict(tp=(1, 2, 0, 2, -2, 0)),  # neither a group nor the ring
        dict(tp=(1, 2, 0, 2, 0, 2)),  # a binding chunk the group does not have
        dict(tp=(1, 2, 0, 2, 0, 1, 0)),  # not whole rows
        dict(sz=sizes[:-1]),  # not whole size pairs
        dict(sz=array("q", [4, 0, -8, 0]).tobytes()),  # negative sizes
        dict(ring=(), tp=(1, 2, 0, 2, -1, 0)),  # an empty ring
        dict(ring=((99,),), tp=(1, 2, 0, 2, -1, 0)),  # a ring core outside the cluster
        dict(batch=0),  # no batch
        dict(tprod=[3]),  # a producer that does not exist
        dict(tprod=[0, 0]),  # a producer per transfer, not as many rows
    ]
    for kw in bad:
        with pytest.raises(ValueError):
            walk(**kw)
    from compiler.schedule import Placement, Transfer
    from search_space import _cdag  # type: ignore[attr-defined]

    g0, g1 = ("g", "g0", 0), ("g", "g0", 1)
    rows = [((g0, g1), (0, 1, -1), (1,), (0,), (((0,),), ((1,),)))]
    for gout in ([5], [0, 1], ["1"], (1,)):  # a code out of range, one per group, ints, a list
        with pytest.raises(ValueError):
            _cdag.derive(rows, 1, 2, (1, 1, 0), 0, 0, [], [[], []], {}, ((0,),), Transfer, {},
                         Placement, ["x", "y"], gout)
    out = _cdag.derive(rows, 1, 2, (1, 1, 0), 0, 0, [], [[], []], {}, ((0,),), Transfer, {},
                       Placement, ["x", "y"], [1])
    refs, is_out, asks, chunk_at, step_at, tprod, tpack = out[5]
    # split_0 (x into the two chunks), g0[0], g0[1], concat_0 (y back, a graph output)
    assert [n[1] for n in out[3]] == ["split_0", "g0", "g0", "concat_0"]
    assert array("i", refs).tolist() == [-2, 0, 0, 0, 0, 1, -1, 0] and is_out == b"\0\0\0\1"
    # the positions packed (int32): group offsets then g0's chunks at 1 and 2; per transfer
    assert asks == [0] and array("i", chunk_at).tolist() == [2, 4, 1, 2] and tprod == [-1, -1]
    assert array("i", step_at).tolist() == [3, 0]
    assert array("i", tpack).tolist() == [1, 1, 0, 1, 0, 0, 0, 2, 0, 2, 0, 0]


_HOSTILE_PACKED = r"""
from array import array
from search_space import _cwalk
grow = (7, 0, 4, 0, (), [None] * 4, lambda i: 1.0, 0.0, None, 2, (((0,),),))
two = array("i", [0, 0, -1, 0]).tobytes()
def walk(tp, sz, batch=4, nc=8, ring=((0,),)):
    return _cwalk.walk_rows(1e6, 1e7, nc, two, b"\0\1", [[], [0]], [grow], [(0,)], [], [0], [3],
                            True, array("i", tp).tobytes(), sz, batch, ring)
sizes = array("q", [4, 0, 8, 0]).tobytes()
cases = [
    ((2**31 - 1, 2, 0, 2, 0, 0), sizes, 4),  # a tensor code far past the sizes
    ((1, 2, 0, 65536, -1, 0), sizes, 4),  # 65,536 chunks on a ring of 65,536 cores
    ((1, 1, 2**31 - 1, 1, 0, 0), sizes, 2**62),  # the first sample past a long
    ((1, 2, 0, 2, 2**31 - 1, 0), sizes, 4),  # a binding group far out of range
    ((1, 2, 0, 2, 0, 2**31 - 1), sizes, 4),  # a binding chunk far out of range
    ((1, 2, 0, 2, 0, 0), b"", 4),  # no sizes at all
]
for tp, sz, batch in cases:
    try:
        walk(tp, sz, batch, 65536, (tuple(range(65536)),) * 65536)
        raise SystemExit(f"accepted {tp}")
    except ValueError:
        pass
print("ok")
"""


def test_hostile_packed_rows_are_refused_without_a_crash() -> None:
    """Packed transfer rows far out of range (a tensor code, a binding group or chunk, the
    samples' product, 2**32 cores in the pieces), in a child process: a regression is a
    crash there, a failed test here."""

    r = run_child(_HOSTILE_PACKED)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])


def _wants(rng: np.random.Generator, dec: Any) -> tuple[list[Any], list[int]]:
    """Random answers: a scope code (0..3) per group chunk and per producer."""
    return ([tuple(int(x) for x in rng.integers(0, 4, gr.split)) for gr in dec.groups],
            [int(x) for x in rng.integers(0, 4, len(dec.groups))])


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_a_kept_walk_walks_again_as_a_new_walk(key: str, target: Target) -> None:
    """A walk kept for the repair rounds (``walk_rows`` with ``keep``, ``rewalk``) returns,
    walked again with other answers, what a new walk of the same rows returns; walked
    again with the first answers, what it first returned (its state cleared). A walk that
    fits is not kept."""
    space, mod, rng, (l1, llb, nc) = _set_up(key, target, 13)
    kept = fits = 0
    for v in space.sample_vectors(rng, 12):
        dec = _build.decode_groups(space, v[space.rep].tolist().__getitem__)
        sr = _rows(dec, space, mod)[0]
        for scale in (1.0, 0.05):
            args = (l1 * scale, llb * scale, nc, sr.refs, sr.is_out, sr.reads, sr.grows)

            gw, pw = _wants(rng, dec)
            first, handle = mod.walk_rows(*args, gw, sr.trows, sr.tprod, pw, True, *sr.tpack, True)
            assert first == mod.walk_rows(*args, gw, sr.trows, sr.tprod, pw, True, *sr.tpack)
            if handle is None:
                assert len(first) == 6  # fits: nothing to walk again
                fits += 1
                continue
            kept += 1
            for _ in range(3):
                gw2, pw2 = _wants(rng, dec)
                assert mod.rewalk(handle, gw2, pw2) == \
                    mod.walk_rows(*args, gw2, sr.trows, sr.tprod, pw2, True, *sr.tpack)
            assert mod.rewalk(handle, gw, pw) == first
    assert kept and fits


def test_bad_rewalks_are_refused() -> None:
    """``rewalk`` checks its handle and answers (a ValueError or TypeError, not a crash), and
    a filler that walks the walk being walked again is refused."""
    from search_space import _cwalk  # type: ignore[attr-defined]

    calls: list[Any] = []

    def fill(i: int) -> float:  # the table keeps None: asked every walk
        if calls:
            with pytest.raises(ValueError, match="walking"):
                _cwalk.rewalk(calls[0], [(0, 0)], [3])
            calls.append(i)
        return 1.0

    grow = (7, 0, 4, 0, (), [None] * 4, fill, 0.0, None, 2, (((0,),), ((1,),)))
    trow = (((0, 1, ((2,),)),), 2, 1, 4, 0)
    two = array("i", [0, 0, -1, 0]).tobytes()
    res, handle = _cwalk.walk_rows(0.5, 1e7, 8, two, b"\0\1", [[], [0]], [grow], [(0, 0)], [trow],
                                   [0], [3], True, None, None, 0, None, True)
    assert handle is not None and len(res) > 6  # the working set (1.0) overflows L1 (0.5)
    assert _cwalk.rewalk(handle, [(0, 0)], [3]) == res
    bad: list[tuple[Any, ...]] = [
        (handle, [(0, 0), (0, 0)], [3]),  # a group more than the walk's
        (handle, [(0, 0)], []),  # a producer fewer
        (handle, [()], [3]),  # no scope for chunk 0
        (handle, [[0, 0]], [3]),  # not a tuple
        (handle, [(9, 0)], [3]),  # a scope code out of range
        (handle, [(0, 0)], [4]),  # a transfer scope out of range
        (handle, [(0.0, 0)], [3]),  # not an int
        (object(), [(0, 0)], [3]),  # not a kept walk
    ]
    for args in bad:
        with pytest.raises((ValueError, TypeError)):
            _cwalk.rewalk(*args)
    calls.append(handle)
    _cwalk.rewalk(handle, [(0, 0)], [3])
    assert len(calls) > 1  # the filler ran, and its rewalk was refused
    calls.clear()
    assert _cwalk.rewalk(handle, [(0, 0)], [3]) == res


_KEPT_AFTER_CLEAR = r"""
import gc
from array import array
from search_space import _ccore
_cwalk = _ccore.load_extension("_cwalk")
def fill(i):
    return 1.0
grows = [(7, 0, 4, 0, (), [None] * 4, fill, 0.0, None, 2, (((0,),), ((1,),)))]
trows = [(((0, 1, ((2,),)),), 2, 1, 4, 0)]
two = array("i", [0, 0, -1, 0]).tobytes()
res, handle = _cwalk.walk_rows(0.5, 1e7, 8, two, b"\0\1", [[], [0]], grows, [(0, 0)], trows,
                               [0], [3], True, None, None, 0, None, True)
assert handle is not None
del fill
grows.clear(); trows.clear()
gc.collect()
junk = [[None] * 4 for _ in range(10000)], [(1.5,) * 11 for _ in range(10000)]
assert _cwalk.rewalk(handle, [(0, 0)], [3]) == res
print("ok")
"""


def test_a_kept_walk_outlives_the_callers_lists() -> None:
    """A kept walk borrows the rows' objects: it holds a snapshot of the lists it was given,
    so a caller that clears them before ``rewalk`` frees nothing the walk reads (review; a
    segfault before). In a child process: a regression is a crash there."""

    r = run_child(_KEPT_AFTER_CLEAR)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stderr[-2000:])
