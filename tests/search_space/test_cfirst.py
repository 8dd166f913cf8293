"""An op set's first-time analysis in C (search_space/_canalyse.c, glue search_space/_cfirst.py)
against its Python definitions.

For the op sets of schedules decoded from small zoo models, every run of up to 12
consecutive ops and random op subsets (hypothesis): the C analysis gives
:func:`compiler.derive.group_io`'s inputs and outputs, ``GroupInfo``'s output,
:func:`compiler.footprint.streamable_inputs` and ``stream_readers``, the packed chain
rows of :func:`search_space._cfoot.pack_rows` (byte for byte, with the op set's own
streamable bits and with other name lists) and ``capacity._facts``' windowed/attention
flags; :func:`search_space._cfirst.first_info` equals ``group_info`` and
:func:`search_space._cfirst.ws_parts` equals its Python path. Malformed tables and
arguments are refused (ValueError) in a child process.
"""

from __future__ import annotations

import random
from itertools import pairwise
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.capacity import _facts, in_compute_dtype
from compiler.derive import group_io
from compiler.footprint import stream_readers, streamable_inputs
from compiler.target import Target
from search_space import _ccore, build_space
from search_space._cfirst import STATS, analyse, ascending, first_info, io_of, tables, ws_parts
from search_space._cfoot import pack_rows
from search_space._structure import group_info
from tests.search_space._child import run_child
from tests.search_space.conftest import cpu_split_graph, small_graph

_MOD = _ccore.load_extension("_canalyse")
pytestmark = pytest.mark.skipif(
    _MOD is None,
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")

_SETS: dict[str, tuple[Any, list[tuple[int, ...]]]] = {}


def _mem_and_sets(name: str, target: Target) -> tuple[Any, list[tuple[int, ...]]]:
    """The graph in the compute type and its op sets: decoded schedules' (the space keeps
    their facts), every run of 1 to 12 consecutive ops and 40 random subsets."""
    if name not in _SETS:
        g = cpu_split_graph() if name == "cpu_split" else small_graph(name)
        space = build_space(g, target)
        rng = np.random.default_rng(5)
        for _ in range(6):
            space.sample(rng)
        mem = in_compute_dtype(g, target)
        sets: set[tuple[int, ...]] = {info.ops for info in space._infos.values()}
        n = len(mem.ops)
        sets |= {tuple(range(a, min(n, a + k))) for a in range(n) for k in range(1, 13)}
        r = random.Random(1)
        sets |= {tuple(sorted(r.sample(range(n), r.randint(1, min(n, 24))))) for _ in range(40)}
        _SETS[name] = (mem, sorted(sets))
    return _SETS[name]


def _check(mem: Any, ops: tuple[int, ...]) -> None:
    an = analyse(_MOD, mem, ops)
    assert an is not None
    io = group_io(mem, ops)
    gi = group_info(mem, ops)
    f = _facts(mem, ops)
    assert an.inputs == io.inputs and an.outputs == io.outputs, ops
    assert an.output == gi.output, ops
    assert an.streamable == streamable_inputs(mem, ops), ops
    assert an.readers == stream_readers(mem, ops), ops
    assert (an.windowed, an.attention) == (f.windowed, f.attention), ops
    names = tuple(t for t in gi.inputs if t in gi.streamable)
    assert an.pack == pack_rows(mem, ops, names), ops
    # other bit assignments: reversed, and every input (non-streamable ones too)
    for other in (tuple(reversed(names)), io.inputs):
        got = analyse(_MOD, mem, ops, other)
        assert got is not None and got.pack == pack_rows(mem, ops, other), (ops, other)
    assert io_of(_MOD, mem, ops) == (io.inputs, io.outputs)


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2", "deepfm", "wide_and_deep", "cpu_split"])
def test_c_analysis_equals_the_python_definitions(name: str, target: Target) -> None:
    mem, sets = _mem_and_sets(name, target)
    for ops in sets:
        _check(mem, ops)
    assert len(sets) > (20 if name == "cpu_split" else 60)


@settings(max_examples=80, deadline=None)
@given(name=st.sampled_from(["tiny_cnn", "bert2"]), seed=st.integers(0, 2**32 - 1),
       size=st.integers(1, 40))
def test_random_op_sets_equal(name: str, seed: int, size: int) -> None:
    mem, _ = _mem_and_sets(name, Target.default())
    r = random.Random(seed)
    n = len(mem.ops)
    start = r.randrange(n)
    # a run with holes: what a block's anchor partition and odd decodes give
    ops = tuple(sorted({min(n - 1, start + r.randrange(2 * size)) for _ in range(size)}))
    _check(mem, ops)


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2"])
def test_first_info_and_ws_parts_equal_the_python_path(name: str, target: Target) -> None:
    mem, sets = _mem_and_sets(name, target)
    for ops in sets[:200]:
        want = group_info(mem, ops)
        got = first_info(_MOD, mem, ops)
        for field in ("ops", "inputs", "output", "streamable", "scopes", "separable"):
            assert getattr(got, field) == getattr(want, field), (ops, field)
        names = tuple(t for t in want.inputs if t in want.streamable)
        for nm in (names, want.inputs):
            c = ws_parts(_MOD, mem, ops, nm)
            py = ws_parts(None, mem, ops, nm)
            assert (c[0].windowed, c[0].attention) == (py[0].windowed, py[0].attention)
            assert c[1:] == py[1:], (ops, nm)


@pytest.mark.parametrize("name", ["tiny_cnn", "bert2"])
def test_the_analysis_first_info_keeps_serves_ws_parts_and_io_of(name: str, target: Target) -> None:
    """``first_info`` keeps its analysis in the op set's cache; ``ws_parts`` given it (and
    names in its order) answers without a new analysis what a new one answers, given names in
    another order it analyses anew (the packed rows' bits follow the names), and ``io_of``
    given it answers ``group_io`` of the model at its own dtype."""
    mem, sets = _mem_and_sets(name, target)
    g = small_graph(name)
    reused = 0
    for ops in [o for o in sets if ascending(o)][:200]:
        info = first_info(_MOD, mem, ops)
        kept = info.cache["can"]  # type: ignore[index]
        names = tuple(t for t in info.inputs if t in info.streamable)
        before = STATS["c"]
        got = ws_parts(_MOD, mem, ops, names, kept)
        assert STATS["c"] == before  # no new analysis
        fresh = ws_parts(_MOD, mem, ops, names)
        assert (got[0].windowed, got[0].attention) == (fresh[0].windowed, fresh[0].attention)
        assert got[1:] == fresh[1:], ops
        if len(names) > 1:
            other = tuple(reversed(names))
            assert ws_parts(_MOD, mem, ops, other, kept)[1:] == ws_parts(_MOD, mem, ops, other)[1:]
            reused += 1
        io = group_io(g, ops)
        before = STATS["c"]
        assert io_of(_MOD, g, ops, kept) == (io.inputs, io.outputs), ops
        assert STATS["c"] == before
    assert reused > 3


def test_a_size_past_int64_leaves_the_python_definitions(target: Target) -> None:
    """Tables whose numbers do not fit are not made: ``tables`` is None and the analysis
    falls back to the Python definitions."""

    class Huge:
        def tables(self, *args: Any) -> Any:
            return _MOD.tables(*args[:5], [2**63] * len(args[0]), *args[6:])

    g = small_graph("tiny_cnn")
    mem = in_compute_dtype(g, target)
    import dataclasses

    other = dataclasses.replace(mem)  # a new graph object: its own memo
    assert tables(Huge(), other) is None
    assert analyse(Huge(), other, (0, 1)) is None
    ops = (0, 1, 2)
    info = first_info(Huge(), other, ops)
    want = group_info(other, ops)
    assert (info.inputs, info.output, info.streamable) == (want.inputs, want.output, want.streamable)


_HOSTILE = r'''
from search_space import _canalyse as m
names = ("a", "b", "c")
# op 0: a -> b, op 1: b -> c
good = (names, [1, 2], [0, 1, 2], [0, 1], [0, 2], [1, 1, 1], [0, 0, 0], [4, 4, 4], [0, 0, 1],
        [0, 1, 2, 2], [0, 1])
cap = m.tables(*good)
print(m.analyse(cap, (0, 1), None)[0:4])
def refused(f, *a):
    try:
        f(*a)
    except (ValueError, TypeError, OverflowError):
        return
    raise SystemExit(f"accepted: {a!r}")
def bad(k, v):
    args = list(good)
    args[k] = v
    refused(m.tables, *args)
bad(1, [1, 3])               # an output past the tensors
bad(1, [1, -1])
bad(2, [0, 1, 5])            # offsets past the inputs
bad(2, [0, 2, 1])            # descending offsets
bad(3, [0, 9])               # an input past the tensors
bad(4, [0, 99])              # a flag past its bits
bad(5, [1, 1])               # a size table of the wrong length
bad(5, [1, -1, 1])           # a negative size
bad(5, [1, 2**64, 1])        # past int64
bad(8, [0, 0, 2])            # a flag that is not 0/1
bad(9, [0, 1, 2, 3])         # consumer offsets past the consumers
bad(10, [0, 5])              # a consumer past the ops
bad(0, ("a", 1, "c"))        # a name not a str
refused(m.tables, names)
refused(m.analyse, cap, (), None)           # empty
refused(m.analyse, cap, (1, 0), None)       # not ascending
refused(m.analyse, cap, (0, 0), None)       # repeated
refused(m.analyse, cap, (0, 2), None)       # past the ops
refused(m.analyse, cap, (-1,), None)
refused(m.analyse, cap, (2**70,), None)
refused(m.analyse, cap, (0, 1, 2, 3), None) # more ops than the graph has
refused(m.analyse, cap, (0,), (7,))         # a name index past the tensors
refused(m.analyse, cap, (0,), [0])          # names not a tuple
refused(m.analyse, cap, (0,), ("a",))
refused(m.analyse, cap, [0], None)          # ops not a tuple
class Sneaky:  # an index that calls back into the analysis while its op set is read
    def __index__(self):
        m.analyse(cap, (0, 1), None)
        return 0
refused(m.analyse, cap, (Sneaky(),), None)  # not an int: refused before any Python runs
refused(m.analyse, cap, (0,), (Sneaky(),))
import datetime
refused(m.analyse, __import__("datetime").datetime_CAPI, (0,), None)  # another capsule
# a table item whose __index__ clears the caller's list while C reads it: the readers of
# int tables (_cutil.h's int_array, ll_array) take a snapshot (a crash before)
from search_space import _cdag
victim = []
class Clear:
    def __index__(self):
        victim.clear()
        return 0
def survives(f, *a):
    try:
        f(*a)
    except (ValueError, TypeError, OverflowError):
        pass
victim[:] = [Clear()] + [0] * 100000
survives(m.tables, ("a",), victim, [0, 0], [], [0], [0], [0], [0], [0], [0, 0], [])
victim[:] = [Clear()] + [0] * 100000
survives(_cdag.class_tables, ("a",), victim, [0], [0, 0], [], [-1], [0, 0], [], [0])
print("ok")
'''


def test_hostile_tables_and_arguments_are_refused_without_a_crash() -> None:
    """Malformed tables (indices and offsets out of range, sizes negative or past int64)
    and arguments (op sets empty, unordered, out of range; name indices out of range;
    another module's capsule) raise, in a child process: a crash there fails here."""
    r = run_child(_HOSTILE)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stdout, r.stderr[-2000:])
    # the good tables: op 0 (a -> b) and op 1 (b -> c): the set reads a and makes c
    assert r.stdout.splitlines()[0] == "((0,), (2,), (), ())"


def test_decoding_analyses_new_op_sets_in_c(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sampling a fresh space analyses the first op set of each class in C: the Python
    analysis (``footprint._analyse``) runs for few of them (a capacity overflow's
    explanation still asks ``chunk_working_set``), the C analysis for all."""
    from compiler import footprint
    from search_space import _cclass, _cfirst

    calls = {"py": 0}
    real = footprint._analyse

    def counted(*args: Any) -> Any:
        calls["py"] += 1
        return real(*args)

    monkeypatch.setattr(footprint, "_analyse", counted)
    space = build_space(small_graph("bert2"), target)
    new0, c0 = _cclass.STATS["new"], _cfirst.STATS["c"]
    rng = np.random.default_rng(11)
    for _ in range(6):
        space.precheck(space.sample(rng))
    new = _cclass.STATS["new"] - new0
    assert new > 10
    assert _cfirst.STATS["c"] - c0 >= new
    assert calls["py"] < new / 4, (calls, new)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-3, 40), max_size=12))
def test_ascending_is_the_pairwise_check(ops: list[int]) -> None:
    """``ascending``: every pair strictly ascends (the generator it replaced), on the empty,
    one-op, repeated and descending sets hypothesis finds."""
    t = tuple(ops)
    assert ascending(t) == all(a < b for a, b in pairwise(t))
    assert ascending(()) and ascending((4,)) and not ascending((1, 1)) and not ascending((2, 1))
