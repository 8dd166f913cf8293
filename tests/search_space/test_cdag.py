"""The compiled chunk DAG (search_space/_cdag.c) against the Python code it mirrors.

Every decode in these tests derives its transfers, chunk DAG, output nodes and
order in C; a hook then derives them again with :func:`compiler.derive.derive_transfers`
and :mod:`search_space._order` from the same shaped groups and requires the same
transfers (names, factors, chunks, placements), the same DAG in the same insertion
order, the same outputs and the same order. Every zoo model at two batches (1, and
6, whose divisors make splits that divide neither way: a concat then a split) and
the PyTorch-exported fixtures; random, mutated and crossed-over vectors, and with
hypothesis one op per group and every look-ahead. Whole decodes compiled vs pure
Python (scopes, memory plans, verdicts) are compared in ``test_ccore.py``.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler import zoo
from compiler.derive import derive_transfers
from compiler.graph import Graph
from compiler.model import load_onnx
from compiler.schedule import Placement, Transfer
from compiler.target import Target
from search_space import Space, _build, _cderive, build_spaces
from search_space._crows import unpack_reads
from search_space._dims import LOOKAHEADS, MODES, ORDERS
from search_space._order import breadth_order, depth_order
from tests.search_space._child import run_child
from tests.search_space.conftest import small_graph
from tests.sim.conftest import zoo_graph

pytestmark = pytest.mark.skipif(
    not _cderive.available(),
    reason="the compiled search core is not built (no C compiler) or GRAPHTUNE_PURE_PYTHON is set")

DATA = Path(__file__).resolve().parents[1] / "data" / "torch"

# every zoo model, made small where an option allows (the structure is what matters)
SMALL_OPTIONS: dict[str, dict[str, Any]] = {
    "bert_base": {"seq": 32, "num_layers": 2}, "bert_large": {"seq": 32, "num_layers": 2},
    "gpt": {"seq": 32, "num_layers": 2, "vocab": 1000},
    "vit": {"num_layers": 2, "image_size": 64},
    "efficientnet_b0": {"image_size": 64}, "mobilenet_v2": {"image_size": 64},
    "resnet18": {"image_size": 64}, "resnet34": {"image_size": 64},
    "resnet50": {"image_size": 64}, "resnet101": {"image_size": 64},
}

DEEP = {"resnet34", "resnet50", "resnet101", "mobilenet_v2", "efficientnet_b0"}


class _Checked:
    """Wraps ``Decoding.derive``: every compiled derive is compared with the Python one."""

    def __init__(self) -> None:
        self.count = 0
        self.kinds: set[str] = set()

    def __call__(self, original: Any) -> Any:
        def derive(dec: _build.Decoding) -> None:
            original(dec)
            assert dec.c_order is not None, "the compiled chunk DAG did not run"
            transfers, deps, outs = derive_transfers(dec.graph, dec._drafts())
            # packed, their names known before they are made (what the compiled walk reads)
            assert isinstance(dec.transfers, _cderive.PackedTransfers)
            assert dec.transfers.names == [t.name for t in transfers]
            assert dec.transfers == transfers
            for a, b in zip(dec.transfers, transfers, strict=True):  # as __init__ makes them
                assert type(a) is type(b) and list(vars(a).items()) == list(vars(b).items())
                assert a.placement is dec.space.placement("DDR", a.placement.core_bind)
            assert list(dec.deps.items()) == list(deps.items())  # the same insertion order
            assert dec.outs == outs
            splits = {gr.name: gr.split for gr in dec.groups}
            want = (depth_order(deps, outs, splits, dec.lookahead) if dec.order == "depth"
                    else breadth_order(deps, dec.topo, splits))
            assert dec.c_order == want
            self.count += 1
            whole = {t.tensor: t.src_factor for t in transfers
                     if t.kind == "concat" and t.dst_factor == 1}
            if whole:
                self.kinds.add("concat_all")
            for t in transfers:  # a split of a whole tensor its producer cut unevenly
                f = whole.get(t.tensor)
                if t.kind == "split" and t.src_factor == 1 and f and t.dst_factor % f \
                        and f % t.dst_factor:
                    self.kinds.add("uneven")
            self.kinds.add(f"{dec.order}{dec.lookahead}")
        return derive


@pytest.fixture
def checked(monkeypatch: pytest.MonkeyPatch) -> _Checked:
    c = _Checked()
    monkeypatch.setattr(_build.Decoding, "derive", c(_build.Decoding.derive))
    return c


def _children(space: Space, rng: np.random.Generator, n: int) -> Iterator[bool]:
    """Decode ``n`` random vectors (prior, then uniform), then mutants and crossovers; yields
    whether each child was decoded (False: a crossover child that is one of its parents,
    returned as it is by ``Space.crossover``)."""
    pool = [space.decode(v) for v in space.sample_vectors(rng, n // 2)]
    pool += [space.decode(v) for v in space.sample_vectors(rng, n - n // 2, uniform=True)]
    yield True
    for k in range(n):
        a, b = pool[k % len(pool)], pool[-1 - k % len(pool)]
        pool.append(space.mutate(a, rng) if k % 2 else space.crossover(a, b, rng))
        yield k % 2 == 1 or (pool[-1] is not a and pool[-1] is not b)


def _exercise(graph: Graph, target: Target, n: int, seed: int) -> int:
    """Children that are a parent (not decoded), over the graph's spaces."""
    rng = np.random.default_rng(seed)
    return sum(not decoded for space in build_spaces(graph, target)
               for decoded in _children(space, rng, n))


@pytest.mark.parametrize("name", [e.name for e in zoo.list_models()])
def test_zoo_models_at_two_batches(name: str, target: Target, checked: _Checked) -> None:
    kw = SMALL_OPTIONS.get(name, {})
    n = 5 if name in DEEP else 12  # the deep CNNs: fewer vectors, as many steps
    parents = sum(_exercise(zoo_graph(name, batch, **kw), target, n, seed=batch)
                  for batch in (1, 6))
    # two batches of n samples and n children, but a crossover child that is its parent
    assert checked.count >= 4 * n - parents


@pytest.mark.parametrize("fixture", ["resnet18_b16", "mobilenet_v2_b16", "vit_b1", "gpt_b16",
                                     "dlrm_b16"])
def test_torch_fixtures(fixture: str, target: Target, checked: _Checked) -> None:
    _exercise(load_onnx(DATA / f"{fixture}.onnx").graph, target, 15, seed=7)
    assert checked.count >= 30


def test_every_transfer_rule_and_order_is_met(target: Target, checked: _Checked) -> None:
    """Batch 6 (a 2-way consumer of a 3-way producer: concat everything, then split) and
    every order and look-ahead are among what the comparisons saw."""
    _exercise(zoo_graph("tiny_cnn", 6), target, 60, seed=3)
    _exercise(small_graph("bert2"), target, 30, seed=4)
    assert {"uneven", "concat_all"} <= checked.kinds
    assert {f"depth{la}" for la in LOOKAHEADS} | {"breadth0"} <= checked.kinds


_SPACES: dict[str, Space] = {}


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1), ops=st.booleans(), order=st.sampled_from(ORDERS),
       lookahead=st.sampled_from(LOOKAHEADS), key=st.sampled_from(["tiny_cnn", "bert2"]))
def test_edges(seed: int, ops: bool, order: str, lookahead: int, key: str) -> None:
    """One op per group (the most transfers) or not, each order and look-ahead."""
    if key not in _SPACES:
        _SPACES[key] = build_spaces(small_graph(key), Target.default())[0]
    space = _SPACES[key]
    c = _Checked()
    original = _build.Decoding.derive
    _build.Decoding.derive = c(original)  # type: ignore[method-assign]
    try:
        vec = space.sample_vectors(np.random.default_rng(seed), 1)[0]
        if ops:
            vec[space._mode_free] = MODES.index("ops")
        free = {int(space.rep[d]): d for d in (space.d_order, space.d_lookahead) if d >= 0}
        for f, d in free.items():
            vec[f] = ORDERS.index(order) if d == space.d_order else LOOKAHEADS.index(lookahead)
        space.decode(vec)
    finally:
        _build.Decoding.derive = original  # type: ignore[method-assign]
    assert c.count >= 1  # a repair round (decode_fitted) derives again, each one checked


def test_bad_tables_are_refused() -> None:
    """The C code checks what it is given (a wrong table is an error, not a crash)."""
    from search_space import _cdag  # type: ignore[attr-defined]

    g0, g1 = ("g", "g0", 0), ("g", "g0", 1)
    b0, b1, ring = ((0,),), ((1,),), tuple([(0,)])  # ring: equal to b0, another object
    ok = [((g0, g1), (0, 1, -1), (1,), (0,), (b0, b1))]
    out = (1, 1, 0)
    names = ["x", "y"]

    def derive(groups: Any, tnodes: Any, known: Any, places: Any, *,
               order: int = 0, topo: Any = (), tensors: Any = names) -> Any:
        return _cdag.derive(groups, 1, 2, out, order, 0, list(topo), tnodes, known, ring,
                            Transfer, places, Placement, tensors)

    tnodes: list[list[Any]] = [[], []]
    known: dict[Any, Any] = {}
    places: dict[Any, Any] = {}
    transfers, deps, outs, order, reads = derive(ok, tnodes, known, places)
    # a 2-way group between a model input (split) and a model output (concatenated back),
    # derived by hand (the result on the cores of the consumer chunk, else of the first
    # source chunk)
    ddr0 = Placement("DDR", b0)
    assert transfers == [Transfer("concat_0", "concat", "y", 2, 1, (0, 1), (0,), ddr0),
                         Transfer("split_0", "split", "x", 1, 2, (0,), (0, 1), ddr0)]
    for t in transfers:  # field by field, in field order, as __init__ sets them
        made = Transfer(*(getattr(t, f.name) for f in dataclasses.fields(Transfer)))
        assert type(t) is Transfer and list(vars(t).items()) == list(vars(made).items())
    assert places == {("DDR", b0): ddr0} and transfers[0].placement is transfers[1].placement
    cat, cut = ("t", "concat_0", 0), ("t", "split_0", 0)
    assert tnodes == [[cat], [cut]]
    assert list(deps.items()) == [(cut, []), (g0, [cut]), (g1, [cut]), (cat, [g0, g1])]
    assert outs == [cat] and order == [cut, g0, g1, cat]
    assert reads == [[], [0], [0], [1, 2]]  # each step's dependencies by position
    assert order[1] is g0 and order[0] is tnodes[1][0]  # the given and interned tuples
    # the made values are known by key (kind, number, tensor, factors, chunk runs, binding)
    assert sorted(known) == [(0, 0, 1, 2, 1, 0, 2, 0, 1, id(b0)), (1, 0, 0, 1, 2, 0, 1, 0, 2, id(b0))]
    known = {k: f"T{k[0]}" for k in known}
    transfers, _, _, order2, _ = derive(ok, tnodes, known, places)
    assert transfers == ["T0", "T1"]  # known values are returned as they are
    assert all(a is b for a, b in zip(order, order2, strict=True))
    # not interned (known None): equal values, made anew by every call
    fresh, deps3, _, order3, _ = derive(ok, tnodes, None, places)
    again = derive(ok, tnodes, None, places)[0]
    assert fresh == again == [Transfer("concat_0", "concat", "y", 2, 1, (0, 1), (0,), ddr0),
                              Transfer("split_0", "split", "x", 1, 2, (0,), (0, 1), ddr0)]
    assert all(a is not b for a, b in zip(fresh, again, strict=True))
    assert order3 == order and list(deps3.items()) == list(deps.items())
    for bad in ([((g0, g1), (5, 1, -1), (1,), (0,), (b0, b1))],  # unknown tensor
                [((), (0, 1, -1), (1,), (0,), ())],  # split 0
                [((g0, g1), (0, 1), (1,), (0,), (b0, b1))],  # not triples
                [((g0, g1), (0, 1, -1), (1,), (0,), (b0,))],  # a binding short
                [((g0, g1), (0, 1, -1), (2**40,), (0,), (b0, b1))]):  # out of range
        with pytest.raises(ValueError):
            derive(bad, [[], []], {}, {})
    with pytest.raises(ValueError):
        derive(ok, [[], []], {}, {}, order=1, topo=[3])  # a topological order naming no group
    with pytest.raises(ValueError):
        derive(ok, [[]], {}, {})  # the interned nodes' lists
    with pytest.raises(ValueError):
        derive(ok, [[("t",)], []], {}, {})  # an interned node that is not one
    with pytest.raises(ValueError):
        derive(ok, [[], []], {}, {}, tensors=["x"])  # a tensor name short
    with pytest.raises(ValueError):
        derive(ok, [[], []], {}, {}, tensors=["x", 1])  # not a name
    with pytest.raises(TypeError):
        derive(ok, [[], []], [], {})  # known: a dict


def test_packed_transfers_are_the_values_derive_makes() -> None:
    """``derive(..., lazy=1)`` packs the transfers (rows, bindings, names); ``make_transfers``
    makes the values the eager ``derive`` makes (field by field, the space's placements);
    a bad packed row is refused."""
    from search_space import _cdag  # type: ignore[attr-defined]

    g0, g1 = ("g", "g0", 0), ("g", "g0", 1)
    b0, b1, ring = ((0,),), ((1,),), tuple([(0,)])
    ok = [((g0, g1), (0, 1, -1), (1,), (0,), (b0, b1))]
    names = ["x", "y"]

    tnodes: list[list[Any]] = [[], []]  # the interned transfer nodes, shared by the calls

    def derive(known: Any, places: Any, lazy: int) -> Any:
        return _cdag.derive(ok, 1, 2, (1, 1, 0), 0, 0, [], tnodes, known, ring, Transfer, places,
                            Placement, names, None, lazy)

    eager = derive(None, {}, 0)
    places: dict[Any, Any] = {}
    packed, dag, outs, order, reads = derive(None, places, 1)
    assert [outs, order] == list(eager[2:4]) and places == {}  # nothing made yet
    # the reads packed (int32: the count of steps, then per step its count and reads)
    assert isinstance(reads, bytes) and unpack_reads(reads) == eager[4] and any(eager[4])
    assert np.frombuffer(reads, dtype=np.int32)[0] == len(eager[4])
    deps = _cdag.deps_of(*dag)  # the DAG packed: the same dict, in the same insertion order
    assert list(deps.items()) == list(eager[1].items())
    assert all(a is b for a, b in zip(deps, eager[1], strict=True))  # the same node objects
    nodes, flat = dag
    assert np.frombuffer(flat, dtype=np.int32).tolist() == [2, 0, 0, 1, 2, 1, 1, 2, 3, 2, 0, 1]
    for bad in ([2, 0, 0, 1, 2, 1, 1, 2, 3, 2, 0, 9], [2, 0, 0, 5, 3], [7, 0], [3, -1], [3, 0, 1],
                [0, 1, 0, 0]):
        with pytest.raises(ValueError):
            _cdag.deps_of(nodes, np.array(bad, dtype=np.int32).tobytes())
    with pytest.raises(ValueError):
        _cdag.deps_of(nodes, flat[:-1])  # not whole int32 entries
    assert _cdag.deps_of(nodes, b"") == {}  # an empty DAG
    for bad in ([0], [12345]):  # (one entry: not a row)
        with pytest.raises(ValueError):
            _cdag.deps_of(nodes, np.array(bad, dtype=np.int32).tobytes())
    rows, binds, tnames = packed
    assert tnames == ["concat_0", "split_0"] and binds == (b0, b0)
    assert np.frombuffer(rows, dtype=np.int32).reshape(-1, 8).tolist() == [
        [0, 1, 2, 1, 0, 2, 0, 1], [1, 0, 1, 2, 0, 1, 0, 2]]
    made = _cdag.make_transfers(rows, binds, tnames, names, Transfer, places, Placement)
    assert made == eager[0]
    for a, b in zip(made, eager[0], strict=True):
        assert type(a) is Transfer and list(vars(a).items()) == list(vars(b).items())
    assert made[0].placement is places[("DDR", b0)] is made[1].placement
    lazy = _cderive.PackedTransfers(_cdag, names, places, *packed)
    assert len(lazy) == 2 and lazy.names == tnames and lazy == eager[0] and lazy[1] == eager[0][1]
    assert list(lazy) == eager[0] and lazy.made() is lazy.made()  # made once
    assert lazy != tuple(eager[0]) and lazy != tuple(lazy)  # as a list: not equal to a tuple
    assert lazy == _cderive.PackedTransfers(_cdag, names, places, *packed)
    for copied in (pickle.loads(pickle.dumps(lazy)), copy.deepcopy(lazy), copy.copy(lazy)):
        assert type(copied) is list and copied == eager[0]  # pickled and copied as the list
    with pytest.raises(ValueError):
        derive({}, {}, 1)  # packed values are not interned
    row = list(np.frombuffer(rows, dtype=np.int32))

    def remade(k: int, v: int, *, b: Any = binds, n: Any = tnames, t: Any = names,
               also: tuple[int, int] | None = None) -> Any:
        bad = row.copy()
        bad[k] = v
        if also is not None:
            bad[also[0]] = also[1]
        return _cdag.make_transfers(np.array(bad, dtype=np.int32).tobytes(), b, n, t, Transfer, {},
                                    Placement)

    assert remade(0, 0) == made  # the row as it is
    for k, v in ((0, 2), (1, 2), (1, -1), (4, -1), (5, -1), (6, -1), (7, 1 << 21), (5, 2**31 - 1),
                 (2, 0), (3, 0), (2, -5), (3, -5), (2, 1 << 21), (3, 1 << 21)):  # (2, 3: factors)
        with pytest.raises(ValueError):
            remade(k, v)
    for first, run in ((4, 5), (6, 7)):  # a chunk run past the int32 range (the overflow check)
        with pytest.raises(ValueError):
            remade(first, 2**31 - 2, also=(run, 4))
    big = np.array(row, dtype=np.int32).reshape(2, 8)
    big[:, [4, 6]], big[:, [5, 7]] = 0, 1 << 20  # each row within its cap, all 4 Mi chunks
    with pytest.raises(ValueError):  # a total cap (2 Mi): a small buffer asks for no more
        _cdag.make_transfers(big.tobytes(), binds, tnames, names, Transfer, {}, Placement)
    for kw in ({"b": (b0,)}, {"n": ["a"]}, {"t": ["x", 1]}):
        with pytest.raises(ValueError):
            remade(0, 0, **kw)
    with pytest.raises(ValueError):
        _cdag.make_transfers(rows[:-4], binds, tnames, names, Transfer, {}, Placement)


_HOSTILE_MAKE = """
from compiler.schedule import Placement, Transfer
from search_space import _cdag
from tests.search_space._child import expect
b0 = ((0,),)
g0, g1 = ("g", "g0", 0), ("g", "g0", 1)
names = ["x", "y"]
packed = _cdag.derive([((g0, g1), (0, 1, -1), (1,), (0,), (b0, b0))], 1, 2, (1, 1, 0), 0, 0, [],
                      [[], []], None, ((0,),), Transfer, {}, Placement, names, None, 1)[0]
rows, binds, tnames = packed
binds, tnames = list(binds), list(tnames)

def hostile(scope, bind):  # a Placement that empties every list the call was given
    names.clear(); binds.clear(); tnames.clear()
    return Placement(scope, bind)

made = _cdag.make_transfers(rows, binds, tnames, names, Transfer, {}, hostile)
print([(t.name, t.tensor) for t in made])
expect(ValueError, _cdag.make_transfers, rows, binds, tnames, names, Transfer, {}, Placement)
print("ok")
"""


_HOSTILE_TYPE = """
import numpy as np
from compiler.schedule import Placement, Transfer
from search_space import _cdag
from tests.search_space._child import expect
b0 = ((0,),)
g0, g1 = ("g", "g0", 0), ("g", "g0", 1)
args = ([((g0, g1), (0, 1, -1), (1,), (0,), (b0, b0))], 1, 2, (1, 1, 0), 0, 0, [], [[], []], None,
        ((0,),))
rows, binds, names = _cdag.derive(*args, Transfer, {}, Placement, ["x", "y"], None, 1)[0]
for T in (np.ndarray, type, int, dict, Placement):  # object.__new__ would refuse or misbuild them
    expect(TypeError, _cdag.make_transfers, rows, binds, names, ["x", "y"], T, {}, Placement)
    expect(TypeError, _cdag.derive, *args, T, {}, Placement, ["x", "y"], None, 0)
    expect(TypeError, _cdag.derive, *args, T, {}, Placement, ["x", "y"], None, 1)
print("ok")
"""


def test_no_transfers_packed_empty() -> None:
    """A decode without transfers packs none: zero-length rows (no uninitialised bytes), no
    bindings, no names; ``make_transfers`` makes an empty list of them."""
    from search_space import _cdag  # type: ignore[attr-defined]

    b0, g0 = ((0,),), ("g", "g0", 0)
    (rows, binds, tnames), (nodes, flat), *_ = _cdag.derive(
        [((g0,), (0, 1, -1), (1,), (0,), (b0,))], 1, 2, (1, 1, 0), 0, 0, [], [[], []], None, ((0,),),
        Transfer, {}, Placement, ["x", "y"], None, 1)
    assert (rows, binds, tnames) == (b"", (), [])
    assert _cdag.make_transfers(rows, binds, tnames, ["x", "y"], Transfer, {}, Placement) == []
    assert _cdag.deps_of(nodes, flat) == {g0: []}
    with pytest.raises(ValueError):
        _cdag.make_transfers(bytes(32), binds, tnames, ["x", "y"], Transfer, {}, Placement)


def test_only_the_transfer_type_is_made() -> None:
    """A transfer type other than ``compiler.schedule.Transfer`` (``np.ndarray``, ``type``:
    ``object.__new__`` on them crashes) is refused by ``derive`` and ``make_transfers``
    (TypeError, no crash; in a child process)."""
    r = run_child(_HOSTILE_TYPE)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stdout, r.stderr[-2000:])


def test_make_transfers_reads_snapshots() -> None:
    """A Placement type that empties the caller's lists while ``make_transfers`` runs: the
    call reads its snapshots (no crash; in a child process), then refuses the emptied lists."""
    r = run_child(_HOSTILE_MAKE)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), (r.returncode, r.stdout, r.stderr[-2000:])
    assert r.stdout.splitlines()[0] == "[('concat_0', 'y'), ('split_0', 'x')]"


@pytest.mark.parametrize("key", ["tiny_cnn", "bert2"])
def test_projection_after_a_look_ahead_change(key: str) -> None:
    """Projection derives the chunk DAG before it knows the look-ahead, then walks: the
    walk must use the order of the look-ahead set afterwards, not the one derived with
    (a copy of each schedule, so the projection really searches, must come back exact)."""
    import json

    from compiler.schedule import GraphSchedule

    space = build_spaces(small_graph(key), Target.default())[0]
    rng = np.random.default_rng(11)
    seen = set()
    for vec in space.sample_vectors(rng, 24):
        vec[int(space.rep[space.d_order])] = ORDERS.index("depth")
        vec[int(space.rep[space.d_lookahead])] = LOOKAHEADS.index(1 + int(rng.integers(3)))
        s = space.decode(vec)
        if not any(st.kind == "group" and st.chunk for st in s.order):
            continue  # no group split: every look-ahead gives the same order
        p = space.project(GraphSchedule.from_json(json.loads(s.dumps())))
        assert p.schedule is not None, p.reason
        assert p.schedule.structural_key() == s.structural_key()
        seen.add(p.params["lookahead"])
    assert seen - {0}


@pytest.mark.parametrize("key,options", [
    ("tiny_cnn", {}), ("bert2", {}), ("bert2", {"min_group_ops": 6, "max_group_ops": 40}),
    ("deepfm", {"max_group_ops": 3}), ("wide_and_deep", {"min_group_ops": 4})])
def test_read_blocks_in_c(key: str, options: dict[str, Any]) -> None:
    """``read_blocks`` over a recorder's assignment (``_cdag.blocks``) against the Python
    loop: the same blocks (the space's shared values), the same parameters read in the same
    order, on prior and uniform vectors and with every cut taken or none."""
    from search_space import SpaceOptions
    from search_space._space import _Recorder

    space = build_spaces(small_graph(key), Target.default(), options=SpaceOptions(**options))[0]
    rng = np.random.default_rng(5)
    vecs = list(space.sample_vectors(rng, 40)) + list(space.sample_vectors(rng, 40, uniform=True))
    cuts = sorted({int(space.rep[d]) for d in space.d_cut})
    for low in (0, space.n_choices.max()):  # every cut (rank 0) or none
        v = space.sample_vectors(rng, 1)[0]
        v[cuts] = np.minimum(low, space.n_choices[cuts] - 1)
        vecs.append(v)
    seen = set()
    for vec in vecs:
        full = vec[space.rep].tolist()
        compiled, python = _Recorder(full, space._rep_list), _Recorder(full, space._rep_list)
        got = _build.read_blocks(space, compiled)
        assert getattr(python, "values", None) is not None
        python.values = tuple(full)  # type: ignore[assignment]  # not a list: read_blocks takes the Python loop
        want = _build.read_blocks(space, python)
        assert got == want and all(a is b for a, b in zip(got, want, strict=True))
        assert compiled.active == python.active and any(compiled.active)
        seen.add(len(got))
    assert len(seen) >= 2  # blocks of more than one size


def test_bad_block_tables_are_refused() -> None:
    from search_space import _cdag  # type: ignore[attr-defined]
    from search_space._dims import MODES

    def blocks(values: Any, lens: Any, d_cut: Any, d_mode: Any, rep: Any = (0, 1, 2),
               active: Any = None) -> Any:
        active = bytearray(3) if active is None else active
        return _cdag.blocks(values, list(rep), active, lens, 2, d_cut, d_mode, 1, -1, MODES, {})

    assert blocks([0, 0, 1], [1, 1], [1], [0, 2]) == [(0, 0, "whole"), (1, 1, "anchors")]
    assert blocks([0, 5, 1], [1, 1], [1], [0, 2]) == [(0, 1, "whole")]  # rank 5: no cut
    with pytest.raises(ValueError):
        blocks([0, 0, 1], [1, 1], [1], [0])  # a mode per segment
    with pytest.raises(ValueError):
        blocks([0, 0, 1], [1, 1], [7], [0, 2])  # no such parameter
    with pytest.raises(ValueError):
        blocks([0, 0, 3], [1, 1], [1], [0, 2])  # no such mode
    with pytest.raises(ValueError):
        blocks([0, 0, 1], [1, -1], [1], [0, 2])  # a negative length
    with pytest.raises(TypeError):
        blocks((0, 0, 1), [1, 1], [1], [0, 2])  # values: a list
    # the recorder's marks: one byte per free parameter, rep[d] one of them
    marks = bytearray(3)
    assert blocks([0, 0, 1], [1, 1], [1], [0, 2], active=marks) == [(0, 0, "whole"), (1, 1, "anchors")]
    assert marks == bytearray([1, 1, 1])  # both modes and the cut read
    marks = bytearray(3)
    blocks([0, 0, 1], [1, 1], [1], [0, 2], rep=(2, 0, 2), active=marks)
    assert marks == bytearray([1, 0, 1])
    with pytest.raises(TypeError):
        blocks([0, 0, 1], [1, 1], [1], [0, 2], active={})  # the marks: a bytearray
    for rep in ((0, 3, 2), (0, -1, 2), (0, 2**70, 2)):  # outside the marks
        with pytest.raises((ValueError, OverflowError)):
            blocks([0, 0, 1], [1, 1], [1], [0, 2], rep=rep)
    with pytest.raises(ValueError):
        blocks([0, 0, 1], [1, 1], [1], [0, 2], active=bytearray(2))
    with pytest.raises(TypeError):
        blocks([0, 0, 1], [1, 1], [1], [0, 2], rep=(0, "1", 2))


@pytest.mark.parametrize("key", ["resnet18", "bert_base", "mobilenet_v2"])
def test_transfers_and_dag_read_late(key: str) -> None:
    """A sampled candidate (walked and pre-checked: its transfers and DAG still packed) read
    late, after its schedule is built: what :func:`compiler.derive.derived` remembers (made
    by ``make_transfers`` and ``deps_of`` only now) equals ``derive_transfers`` of the
    schedule's groups (values field by field, the DAG in its insertion order, the outputs)."""
    from compiler.derive import derived
    from compiler.memo import peek_memo
    from search_space import build_space

    space = build_space(zoo_graph(key, 1, **SMALL_OPTIONS[key]), Target.default())
    rng = np.random.default_rng(3)
    unmade = 0
    for _ in range(12):
        s = space.sample(rng)
        graph = space.graph_for(s.batch)
        memo = peek_memo(s)
        assert memo is not None
        d = memo[("derived", id(graph))][1]
        assert isinstance(d, _cderive.Derived)
        transfers = d.transfers
        assert isinstance(transfers, _cderive.PackedTransfers)
        unmade += d._deps is None and transfers._made is None
        assert s.order and s.groups  # the schedule built (its transfers read)
        tr, deps, outs = derived(graph, s)
        want, wdeps, wouts = derive_transfers(graph, s.groups)
        assert tr == want
        for a, b in zip(tr, want, strict=True):
            assert type(a) is Transfer and list(vars(a).items()) == list(vars(b).items())
        assert list(deps.items()) == list(wdeps.items()) and outs == wouts
    assert unmade  # some were read late (made only by this reading)


@pytest.mark.parametrize("first", ["decode", "schedule"])
def test_dag_made_once(first: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A decode and the schedule it made share the packed DAG's maker: whichever reads the
    DAG first makes it, the other reads the same dict (it was made twice)."""
    from compiler.memo import peek_memo
    from search_space import build_space

    made: list[_build.Decoding] = []
    schedule = _build.Decoding.schedule

    def keep(dec: _build.Decoding) -> Any:
        made.append(dec)
        return schedule(dec)

    monkeypatch.setattr(_build.Decoding, "schedule", keep)
    space = build_space(zoo_graph("resnet18", 1, **SMALL_OPTIONS["resnet18"]), Target.default())
    rng = np.random.default_rng(4)
    for _ in range(4):
        s = space.sample(rng)
        dec = made[-1]
        memo = peek_memo(s)
        assert memo is not None
        d = memo[("derived", id(space.graph_for(s.batch)))][1]
        assert isinstance(d, _cderive.Derived) and d._deps is None and dec._deps is None
        if first == "decode":
            assert dec.deps is d.deps()
        else:
            assert d.deps() is dec.deps
