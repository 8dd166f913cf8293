"""Op sets alike up to tensor names (search_space/_cclass.py) have the same facts.

For op sets of decoded schedules of a two-layer BERT (its layers repeat), every op set
the compiled core gave a representative's facts (:meth:`GroupInfo.alike`) has the facts
:func:`search_space._structure.group_info` computes from scratch (inputs, output,
streamable inputs, scopes, splittability), and its working sets
(:func:`compiler.capacity.chunk_working_set`, every streamed subset up to two, output
streamed out or kept, held or not, a few chunk shapes) equal its representative's with
the streamed inputs mapped by position, float for float.
"""

from __future__ import annotations

from itertools import combinations

import numpy as np
import pytest

from compiler.capacity import chunk_working_set, in_compute_dtype
from compiler.derive import group_io
from compiler.target import Target
from search_space import _cclass, _ccore, build_space
from search_space._structure import group_info
from tests.search_space.conftest import small_graph

pytestmark = pytest.mark.skipif(
    not _ccore.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")


def test_alike_op_sets_have_the_same_facts(target: Target) -> None:
    space = build_space(small_graph("bert2"), target)
    rng = np.random.default_rng(8)
    for _ in range(12):
        space.sample(rng)
    shared = 0
    for (batch, ops), info in list(space._infos.items()):
        mem = in_compute_dtype(space.graph_for(batch), target)
        classes = space._cclasses[batch]  # type: ignore[attr-defined]
        key, _, _ = _cclass.class_key(mem, classes.desc, ops)
        rep = classes.reps.get(key)
        if rep is None or rep is info:
            continue
        shared += 1
        assert info.shared is rep.shared
        fresh = group_info(mem, ops)
        assert (info.inputs, info.output, info.streamable, info.scopes, info.separable) == \
            (fresh.inputs, fresh.output, fresh.streamable, fresh.scopes, fresh.separable)
        # the representative's working sets are this op set's, inputs mapped by position
        mine = [t for t in info.inputs if t in info.streamable]
        theirs = [t for t in rep.inputs if t in rep.streamable]
        assert len(mine) == len(theirs)
        for spp, cpp in ((1, 1), (1, 4), (2, 3), (batch, 8)):
            for k in range(min(2, len(mine)) + 1):
                for sub in combinations(range(len(mine)), k):
                    for off in (False, True):
                        for held in (False, True):
                            a = chunk_working_set(mem, ops, frozenset(mine[b] for b in sub),
                                                  off, held, spp, cpp)
                            b_ = chunk_working_set(mem, rep.ops,
                                                   frozenset(theirs[b] for b in sub),
                                                   off, held, spp, cpp)
                            assert a == b_, (ops, rep.ops, sub, off, held, spp, cpp)
    assert shared > 10


@pytest.mark.parametrize("key", ["bert2", "tiny_cnn"])
def test_an_alike_op_sets_group_io_is_read_from_its_class_key(key: str, target: Target) -> None:
    """An op set given a representative's facts keeps ``group_io`` of its ops (inputs and
    outputs, read from its class key) for the chunk DAG's rows: equal to ``group_io`` of
    the model at its own dtype; ``_cderive`` uses and drops it (decodes leave none behind)."""
    space = build_space(small_graph(key), target)
    rng = np.random.default_rng(8)
    space.sample(rng)  # the op sets met: the first of each class is its representative
    mem = in_compute_dtype(space.graph_for(space.batch), target)
    g = small_graph(key)
    seen = 0
    for ops in sorted({o for (_, o) in space._infos}):  # type: ignore[misc]
        info = _cclass.shared_info(space, mem, space.batch, ops)  # its class is known now
        kept = info.cache.get("cio")  # type: ignore[call-overload]
        if kept is None:
            continue
        seen += 1
        io = group_io(g, ops)
        assert kept == (io.inputs, io.outputs), ops
    assert seen > (5 if key == "bert2" else 0)
    for _ in range(4):
        space.sample(rng)
    assert all("cio" not in i.cache for i in space._infos.values())  # type: ignore[operator]


def test_op_sets_that_differ_are_not_alike(target: Target) -> None:
    """The first and second layers' Q projections are alike; a projection and the
    attention scores, or a projection with and without its bias add, are not."""
    g = in_compute_dtype(small_graph("bert2"), target)
    classes = _cclass._Classes(g)
    keys = {}
    mm = [op.index for op in g.ops if op.op_type == "matmul"]
    for i in mm:
        keys[i] = _cclass.class_key(g, classes.desc, (i,))[0]
    assert len(set(keys.values())) < len(mm)  # repeated layers: alike
    assert len(set(keys.values())) > 1  # projections and attention matmuls differ
    i = mm[0]
    nxt = g.succs(i)[0]
    assert _cclass.class_key(g, classes.desc, (i, nxt))[0] != keys[i]


@pytest.mark.parametrize("key", ["bert2", "tiny_cnn", "deepfm", "wide_and_deep"])
def test_compiled_class_key_is_the_python_one(key: str, target: Target) -> None:
    """``_cdag.class_key`` gives :func:`_cclass.class_key`'s value, tuple for tuple (key,
    outside tensors, output), on every op set decoded schedules met, every run of up to 12
    ops and random op sets (ascending, gaps: outside tensors read twice, outputs read
    outside)."""
    from search_space import _cdag  # type: ignore[attr-defined]

    space = build_space(small_graph(key), target)
    rng = np.random.default_rng(3)
    for _ in range(6):
        space.sample(rng)
    mem = in_compute_dtype(space.graph_for(space.batch), target)
    classes = space._cclasses[space.batch]  # type: ignore[attr-defined]
    assert classes.tables is not None
    n = len(mem.ops)
    sets: set[tuple[int, ...]] = {ops for (_, ops) in space._infos}  # type: ignore[misc]
    sets |= {tuple(range(a, min(n, a + k))) for a in range(n) for k in range(1, 13)}
    for _ in range(300):
        k = int(rng.integers(1, min(n, 20) + 1))
        sets.add(tuple(sorted(int(x) for x in rng.choice(n, k, replace=False))))
    for ops in sorted(sets):
        assert _cdag.class_key(classes.tables, ops) == _cclass.class_key(mem, classes.desc, ops)
    with pytest.raises(ValueError):
        _cdag.class_key(classes.tables, (1, 0))  # not ascending
    with pytest.raises(ValueError):
        _cdag.class_key(classes.tables, (n,))  # no such op
    with pytest.raises(ValueError):
        _cdag.class_key(classes.tables, ())


def test_bad_class_tables_are_refused() -> None:
    from search_space import _cdag  # type: ignore[attr-defined]

    # two tensors, one op reading x and writing y
    ok = (("x", "y"), [0], [1], [0, 1], [0], [-1, 0], [0, 1, 1], [0], [0, 1])
    tables = _cdag.class_tables(*ok)
    assert _cdag.class_key(tables, (0,)) == ((((0, (-1,), True),), ((False, True),), (0,)),
                                             ("x",), "y")
    for k, bad in ((2, [2]), (3, [0, 2]), (4, [5]), (5, [-2, 0]), (6, [0, 2, 1]), (7, [1]),
                   (8, [0, 2]), (2, [1, 1]), (2, [1 << 70]), (5, [-(1 << 70), 0])):
        args = list(ok)
        args[k] = bad
        # one int_array with _canalyse (search_space/_cutil.h): past a C long is out of
        # range too, a ValueError (it was an OverflowError here)
        with pytest.raises(ValueError):
            _cdag.class_tables(*args)
    with pytest.raises(ValueError):
        _cdag.class_tables(("x", 1), *ok[1:])  # names: str
    with pytest.raises(TypeError):
        _cdag.class_key(object(), (0,))  # not the tables
