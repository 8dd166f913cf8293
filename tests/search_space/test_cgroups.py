"""Pass 1's group loop in C (search_space/_cshape.c, driven by search_space/_cgroups.py).

The same vectors go through ``decode_groups`` with the C loop and with the Python loop
(the reference) on one space: every group equal field by field (its facts the same
object), the topological order and the name/output tables (with their order) equal, and
the recorder asked the same parameters in the same order. Whole decodes are compared with
the Python decoder in test_ccore.py. Malformed tables are a ValueError or TypeError, not a
crash (in a child process: a regression is a failure, not a dead test run).
"""

from __future__ import annotations

import dataclasses
from itertools import pairwise
from typing import Any

import numpy as np
import pytest

from compiler.target import Target
from search_space import SpaceOptions, _build, _cgroups, build_space
from search_space._lazy import flat_groups
from search_space._space import _Recorder
from tests.search_space._child import run_child
from tests.search_space.conftest import small_graph
from tests.sim.conftest import zoo_graph

pytestmark = pytest.mark.skipif(
    not _cgroups.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")

# every field of the group record but its facts (compared by identity): read from the
# dataclass, so a field added to _G and not set by _cshape.c's FIELD_NAMES fails here
_FIELDS = tuple(f.name for f in dataclasses.fields(_build._G) if f.name != "info")


def _decode(space: Any, vec: np.ndarray, compiled: bool, monkeypatch: pytest.MonkeyPatch
            ) -> tuple[Any, list[int]]:
    with monkeypatch.context() as m:
        if not compiled:
            m.setattr(_build, "groups_compiled", lambda *_: False)
        before = _cgroups.STATS["c"]
        rec = _Recorder(vec[space.rep].tolist(), space._rep_list)
        dec = _build.decode_groups(space, rec)
        assert (_cgroups.STATS["c"] > before) == compiled, "the C loop ran (or did not) as asked"
    return dec, rec.read()


def _agree(space: Any, vec: np.ndarray, monkeypatch: pytest.MonkeyPatch) -> None:
    # the Python loop first on some vectors, the C loop first on others: whichever meets a
    # new op set or shape first fills the caches the other reads
    order = (False, True) if int(vec.sum()) % 2 else (True, False)
    out = {c: _decode(space, vec, c, monkeypatch) for c in order}
    (dc, ac), (dp, ap) = out[True], out[False]
    assert ac == ap
    assert dc.topo == dp.topo
    assert list(dc.by_name) == list(dp.by_name)
    assert list(dc.by_out) == list(dp.by_out)
    assert len(dc.groups) == len(dp.groups)
    for gc, gp in zip(dc.groups, dp.groups, strict=True):
        assert type(gc) is type(gp)
        # _G has slots: a field the C loop does not set raises AttributeError when read
        assert set(_build._G.__slots__) == {*_FIELDS, "info"}
        assert all(hasattr(gc, f) and hasattr(gp, f) for f in _build._G.__slots__), gc.name
        assert gc.info is gp.info
        for f in _FIELDS:
            assert getattr(gc, f) == getattr(gp, f), (gc.name, f)
            assert type(getattr(gc, f)) is type(getattr(gp, f)), (gc.name, f)
        assert all(a is b for a, b in zip(gc.binds, gp.binds, strict=True))  # shared values
        assert dc.by_name[gc.name] is gc and dc.by_out[gc.info.output] is gc
    assert [t.name for t in dc.transfers] == [t.name for t in dp.transfers]
    assert dc.c_order == dp.c_order
    # what a kept schedule holds of the groups: made in C, as flat_groups makes it (values
    # by identity: the same shared objects)
    assert dp.flat is None and dc.flat is not None
    ref = flat_groups(dc.groups)
    assert len(dc.flat) == len(ref) == 8 * len(dc.groups)
    assert all(a is b or (type(a) is int and a == b) for a, b in zip(dc.flat, ref, strict=True))
    assert dc.flat == flat_groups(dp.groups)


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm", "wide_and_deep"])
def test_groups_equal_the_python_loops(key: str, target: Target,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(small_graph(key), target)
    rng = np.random.default_rng(30)
    vecs = [*space.sample_vectors(rng, 30), *space.sample_vectors(rng, 30, uniform=True)]
    for v in vecs:
        _agree(space, v, monkeypatch)
    for k in range(10):  # children: mutated and crossed over
        a, b = space.decode(vecs[k]), space.decode(vecs[-1 - k])
        _agree(space, space.encode(space.mutate(a, rng)), monkeypatch)
        _agree(space, space.encode(space.crossover(a, b, rng)), monkeypatch)


def test_batch_choices_and_batch_one(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    graphs = {b: zoo_graph("tiny_cnn", b) for b in (1, 4, 8)}
    space = build_space(graphs[8], target, options=SpaceOptions(batch_choices=(1, 4, 8)),
                        graph_at=graphs.__getitem__)
    rng = np.random.default_rng(31)
    for v in space.sample_vectors(rng, 40, uniform=True):
        _agree(space, v, monkeypatch)
    one = build_space(graphs[1], target)  # one divisor: no samples parameter is read
    for v in one.sample_vectors(rng, 20, uniform=True):
        _agree(one, v, monkeypatch)


def test_full_size_model(target: Target, monkeypatch: pytest.MonkeyPatch) -> None:
    space = build_space(zoo_graph("resnet50", 16), target)
    rng = np.random.default_rng(32)
    for v in space.sample_vectors(rng, 8):
        _agree(space, v, monkeypatch)


def test_other_readers_take_the_python_loop(target: Target) -> None:
    space = build_space(small_graph("tiny_cnn"), target)
    vec = space.sample_vectors(np.random.default_rng(33), 1)[0]
    values = vec[space.rep].tolist()
    before = _cgroups.STATS["c"]
    dec = _build.decode_groups(space, lambda d: values[d])  # a plain reader (a trial's kind)
    assert _cgroups.STATS["c"] == before and dec.topo


_HOSTILE = r"""
from search_space import _ccore
mod = _ccore.load_extension("_cshape")

class G:
    pass

def fit(info, s, c, p):
    return (s or 8, c, p)

def bind_set(perm, cores, parts, split, spread):
    return tuple(((0,),) for _ in range(split))

def row(name="g0", start=0, slot=0, dim=0, shared=None, sep=1, out=0, ins=(), oname="t0"):
    return ((name, start, object(), {} if shared is None else shared, sep, out, ins, oname), slot, dim)

def call(blocks, values=None, n_codes=4, batch=8, spp=(1, 2, 4, 8), cpp=(1, 2), parts=(1, 2),
         perms=((0, 1), None), spread=(0, 1), fit=fit, bind_set=bind_set, bind_sets=None,
         rep=None, active=None):
    values = [0] * 12 if values is None else values
    rep = list(range(len(values))) if rep is None else rep
    active = bytearray(len(values)) if active is None else active
    return mod.groups(values, rep, active, blocks, n_codes, batch, 2, spp, True,
                      cpp, parts, perms, spread, fit, lambda p, r: p, bind_set,
                      {} if bind_sets is None else bind_sets, G, "fit")

good = call([(row(),), (row("g1", 1, 1, 6, out=1, ins=(0,), oname="t1"),)])
assert [g.name for g in good[0]] == ["g0", "g1"] and good[3] == ["g0", "g1"], good
assert good[0][1].deps == ["g0"] and good[0][0].consumers == ["g1"]

bad = [
    lambda: call([]),                                        # no groups
    lambda: call([[row()]]),                                 # a block not a tuple
    lambda: call([(row()[:2],)]),                            # a short row
    lambda: call([((row()[0][:7], 0, 0),)]),                 # a short op set row
    lambda: call([(row(out=4),)]),                           # output code out of range
    lambda: call([(row(out=-1),)]),
    lambda: call([(row(ins=(9,)),)]),                        # input code out of range
    lambda: call([(row(ins=("a",)),)]),                      # input code not an int
    lambda: call([(row(dim=8),)]),                           # slot parameter past the vector
    lambda: call([(row(dim=-1),)]),
    lambda: call([(row(),)], values=[0, 9] + [0] * 10),      # a choice out of range
    lambda: call([(row(),)], values=[-1] + [0] * 11),
    lambda: call([(row(),)], values=[0, 0]),                 # a vector too short
    lambda: call([(row(shared=[]),)]),                       # shared not a dict
    lambda: call([(row(), row())]),                          # two groups of one name
    lambda: call([(row(),)], fit=lambda *a: (0, 1, 1)),      # fits out of range
    lambda: call([(row(),)], fit=lambda *a: (9, 1, 1)),
    lambda: call([(row(),)], fit=lambda *a: (4, 1, 4)),      # beyond the batch
    lambda: call([(row(),)], fit=lambda *a: (1, 1)),
    lambda: call([(row(),)], fit=lambda *a: None),
    lambda: call([(row(),)], fit=lambda *a: 1 / 0),          # a raising fit
    lambda: call([(row(),)], fit=lambda *a: (1, 2 ** 40, 1)),
    lambda: call([(row(),)], bind_set=lambda *a: ()),        # a binding per chunk
    lambda: call([(row(),)], bind_set=lambda *a: None),
    lambda: call([(row(),)], spp=(0,)),                      # samples per part out of range
    lambda: call([(row(),)], cpp=(0, 1)),
    lambda: call([(row(),)], cpp=("a", 1)),
    lambda: call([(row(),)], batch=0),
    lambda: call([(row(),)], n_codes=-1),
    lambda: call([(row(),)], perms=((0, 1),), values=[0, 0, 0, 1] + [0] * 8),  # past the table
    lambda: call([(row(),)], bind_sets={((0, 1), 1, 1, 8, False): "x"}),  # a cached binding
    lambda: call([(row(),)], bind_sets={((0, 1), 1, 1, 8, False): ((0,),)}),  # of one chunk
    lambda: call([(row(),)], active={}),                     # the marks: a bytearray
    lambda: call([(row(),)], active=bytearray(0)),           # a read past the marks
    lambda: call([(row(),)], rep=[-1] * 12),
    lambda: call([(row(),)], rep=[2 ** 70] * 12),
    lambda: call([(row(),)], rep=[0.0] * 12),                # a mark's index: an int
]
marks = bytearray(12)
call([(row(),), (row("g1", 1, 1, 6, out=1, ins=(0,), oname="t1"),)], active=marks,
     rep=[11 - d for d in range(12)])
assert marks != bytearray(12) and set(marks) == {0, 1}, marks  # rep[d] marked, nothing else
def slots(seg_of=(0, 0, 1), first=(0, 2), parts=((0, 1), (2,))):
    return mod.unit_slots(seg_of, first, parts)

assert slots() == (0, 2) and slots(parts=((0,), (1, 2))) == (0, 0)
bad += [
    lambda: slots(parts=()),                                 # no parts
    lambda: slots(parts=((),)),                              # an empty part
    lambda: slots(parts=((3,),)),                            # an op past the graph
    lambda: slots(parts=((-1,),)),
    lambda: slots(seg_of=(0, 0, 2)),                         # a segment past the table
    lambda: slots(seg_of=(0, "a", 1)),
    lambda: slots(parts=[[0]]),                              # a part not a tuple
    lambda: slots(parts=((2, 0),)),                          # a part ending before it starts
    lambda: slots(parts=((0,), (2, 0))),                     # one starting after all end
]
for k, f in enumerate(bad):
    try:
        f()
    except (ValueError, TypeError, ZeroDivisionError, OverflowError):
        continue
    raise SystemExit(f"case {k} was accepted")

# a fit or a name's hash that changes the blocks list during the call (review: the rows
# were borrowed from the caller's list): the call works on a snapshot
blocks = [(row(),), (row("g1", 1, 1, 6, out=1, ins=(0,), oname="t1"),)]
def clearing_fit(info, s, c, p):
    blocks.clear()
    return fit(info, s, c, p)
assert [g.name for g in call(blocks, fit=clearing_fit)[0]] == ["g0", "g1"]
class Name(str):
    def __hash__(self):
        grow.extend([(row("g9"),)] * 64)
        return str.__hash__(self)
grow = [(row(Name("g0")),)]
assert [g.name for g in call(grow)[0]] == ["g0"]

# a cycle: neither group is shaped (the Python loop leaves them at the defaults)
cyc = call([(row(ins=(1,)), row("g1", 1, 1, 6, out=1, ins=(0,), oname="t1"))])
assert cyc[3] == [] and [g.split for g in cyc[0]] == [1, 1] and cyc[0][0].binds == ()

# a reuse with a producer: the unshuffle is asked; a large run of calls keeps memory flat
for _ in range(2000):
    call([(row(),), (row("g1", 1, 1, 6, out=1, ins=(0,), oname="t1"),)],
         values=[0] * 9 + [1] + [0] * 2)
print("ok")
"""


def test_hostile_tables_are_refused_without_a_crash() -> None:
    r = run_child(_HOSTILE)
    assert r.returncode == 0 and r.stdout.strip() == "ok", (r.returncode, r.stdout[-500:],
                                                            r.stderr[-2000:])


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2", "deepfm"])
def test_unit_slots_equal_the_python_functions(key: str, target: Target) -> None:
    space = build_space(small_graph(key), target)
    segs = space.structure.segments
    n = len(segs)
    seen = 0
    for a in range(n):
        for b in range(a, min(n, a + 12)):
            for mode in ("whole", "anchors", "ops"):
                blk = _build.block_parts(space, a, b, mode)
                assert blk.slots == _build.unit_slots_py(space, blk.parts)
                assert _cgroups.unit_slots(space, blk.parts) == blk.slots
                seen += 1
    assert seen >= n
    # parts across segments in any grouping: the units they leave
    rng = np.random.default_rng(34)
    ops = len(space.graph.ops)
    for _ in range(200):
        cuts = sorted(set(rng.integers(1, ops, size=int(rng.integers(0, 6))).tolist()))
        bounds = [0, *cuts, ops]
        parts = [tuple(range(x, y)) for x, y in pairwise(bounds) if y > x]
        assert _cgroups.unit_slots(space, parts) == _build.unit_slots_py(space, parts)
