"""The compiled plan maker (``sim/_cpack.c``: movement plans and a group plan's packing)
makes the Python functions' plans bit for bit: ``sim._moves._plan`` and the Python
``sim._ctime.pack_group`` are the reference. Movement plans are compared on random layouts
(every scope pair, pieces of any first sample, size and cores, uneven parts, a part's cores
in any order); whole step plans on chains of random and mutated schedules of zoo models
(halos, attention operands, gathered tables) on four targets, every plan made afresh both
ways (no plan or movement plan kept from the other way) and compared field by field, the
packed bytes and each movement plan's fields (floats by ``repr``, dicts in their order)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.memo import BoundedDict
from compiler.target import Target
from sim import _ctime, _engine, _moves, simulate
from sim._flows import Flows
from sim._resources import chip_of
from tests.sim.random_schedules import chain
from tests.sim.test_properties import graph_of
from tests.sim.test_step_plans import TARGETS

pytestmark = pytest.mark.skipif(_ctime.load_pack() is None,
                                reason="sim._cpack not built: plans are made in Python")

MODELS = ("tiny_cnn", "resnet18", "bert", "deepfm")


def _fields(p: _moves.MovePlan) -> str:
    return repr((p.flows, p.incoming, p.staying, p.noc, p.ddr, p.hops))


def _layout(rng: random.Random, cores: int) -> Any:
    scope = rng.choice(("L1", "L1", "LLB", "DDR"))
    pieces, first = [], rng.randint(-4, 4)
    for _ in range(rng.randint(1, 3)):
        spp, nparts = rng.randint(1, 4), rng.randint(1, 4)
        parts = tuple(tuple(rng.sample(range(cores), rng.randint(1, min(cores, 6))))
                      for _ in range(nparts))
        pieces.append((first, spp, parts))
        first += spp * nparts + rng.randint(-2, 2)  # gaps and overlaps between pieces
    rng.shuffle(pieces)
    return scope, tuple(pieces)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(tname=st.sampled_from(sorted(TARGETS)), seed=st.integers(0, 2**31 - 1))
def test_movement_plans_are_pythons(tname: str, seed: int) -> None:
    chip, rng, cpack = chip_of(TARGETS[tname]), random.Random(seed), _ctime.load_pack()
    for _ in range(20):
        src, dst = _layout(rng, chip.cores), _layout(rng, chip.cores)
        want = _moves._plan(chip, src, dst)
        got = _moves._plan_c(cpack, chip, src, dst)
        assert _fields(got) == _fields(want)
        assert got == want and isinstance(got, _moves.MovePlan)


def test_a_core_out_of_range_falls_back_to_python() -> None:
    chip, cpack = chip_of(Target.default()), _ctime.load_pack()
    src, dst = ("LLB", ((0, 2, ((0,), (1,))),)), ("L1", ((0, 4, ((chip.cores + 3,),)),))
    assert _fields(_moves._plan_c(cpack, chip, src, dst)) == _fields(_moves._plan(chip, src, dst))


def _flows_repr(fl: Flows | None) -> str:
    if fl is None:
        return "None"
    return repr((list(fl.flows.items()), list(fl.incoming.items()),
                 list(fl.staying.items()), fl.noc, fl.ddr, fl.hops))


def _plan_repr(plan: Any) -> str:
    return repr((plan.packed, [(k, _flows_repr(f)) for k, f in plan.staged],
                 [_flows_repr(f) for f in plan.streamed], plan.kinds, _flows_repr(plan.ex),
                 _flows_repr(plan.out), _flows_repr(plan.first), plan.cost_of, plan.host))


def _plans_made(graph: Any, s: Any, target: Target, cpack: Any,
                mp: pytest.MonkeyPatch) -> tuple[list[str], list[str], str]:
    """Every plan made simulating ``s`` afresh (no plan, movement plan or weight flows kept),
    the movement plans made, and the result, with ``cpack`` as the plan maker."""
    plans: list[str] = []
    moves: dict[object, _moves.MovePlan] = {}
    make = _engine.make_plan

    def recording(*args: Any) -> Any:
        plan = make(*args)
        plans.append(_plan_repr(plan))
        return plan

    with mp.context() as m:
        m.setattr(_engine, "plans_of", lambda graph, target: BoundedDict(0))
        m.setattr(_engine, "target_caches", lambda t: (chip_of(t), moves, {}))
        m.setattr(_engine, "load_pack", lambda: cpack)
        m.setattr(_engine, "make_plan", recording)
        result = simulate(graph, s, target)
    return plans, [f"{k!r}: {_fields(p)}" for k, p in moves.items()], repr(result)


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), tname=st.sampled_from(sorted(TARGETS)),
       seed=st.integers(0, 2**31 - 1))
def test_step_plans_made_in_c_are_pythons(model: str, tname: str, seed: int) -> None:
    graph, target, cpack = graph_of(model), TARGETS[tname], _ctime.load_pack()
    rng = random.Random(seed)
    with pytest.MonkeyPatch.context() as mp:
        for s in chain(graph, rng, target.chip.cores_per_cluster, 5):
            assert _plans_made(graph, s, target, cpack, mp) == _plans_made(graph, s, target,
                                                                           None, mp)


@pytest.mark.parametrize("model", ["resnet18", "bert"])
def test_the_automatic_levels_plans_made_in_c_are_pythons(model: str) -> None:
    """The zoo models' automatic-level schedules (BERT's plans packed too)."""
    from tests.sim.test_properties import seeds

    graph, target, cpack = graph_of(model), TARGETS["default"], _ctime.load_pack()
    packed = 0
    with pytest.MonkeyPatch.context() as mp:
        for s in seeds(model, "default"):
            c = _plans_made(graph, s, target, cpack, mp)
            assert c == _plans_made(graph, s, target, None, mp)
            packed += sum(not p.startswith("(None") for p in c[0])
    assert packed > 0


def test_the_switch_makes_plans_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """``GRAPHTUNE_PURE_SIM=1``: no plan maker; unset: sim._cpack's functions run."""
    monkeypatch.setenv("GRAPHTUNE_PURE_SIM", "1")
    assert _ctime.load_pack() is None
    monkeypatch.setenv("GRAPHTUNE_PURE_SIM", "0")
    mod = _ctime.load_pack()
    assert mod is not None and all(hasattr(mod, n) for n in _ctime.PACK_NEEDS)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**31 - 1))
def test_flows_added_in_c_are_pythons(seed: int) -> None:
    """``Flows.add`` by ``add_plan``: the same dicts (values to the bit, keys in order), noc,
    ddr and hops."""
    chip, rng, cpack = chip_of(Target.default()), random.Random(seed), _ctime.load_pack()
    c, py = Flows(), Flows()
    for _ in range(6):
        plan = _moves._plan(chip, _layout(rng, chip.cores), _layout(rng, chip.cores))
        nbytes = rng.choice([rng.randint(-3, 10**6), rng.random() * 1e5, 0, 3])
        c.add(plan, nbytes, cpack)
        py.add(plan, nbytes)
        assert _flows_repr(c) == _flows_repr(py)


def test_malformed_arguments_raise() -> None:
    """Wrong counts, shapes and types raise (never read past what was given)."""
    cpack, chip = _ctime.load_pack(), chip_of(Target.default())
    n, routes = chip.cores, tuple(chip.routes.get((a, b), ()) for a in range(chip.cores)
                                  for b in range(chip.cores))
    good = ((0, 2, ((0,), (1,))),)
    with pytest.raises(TypeError):
        cpack.move_plan(0, 0, good, good)
    with pytest.raises(ValueError):
        cpack.move_plan(0, 0, good, good, routes[:-1], n, len(chip.names), chip.llb, chip.ddr)
    with pytest.raises(ValueError):
        cpack.move_plan(3, 0, good, good, routes, n, len(chip.names), chip.llb, chip.ddr)
    for bad in ([(0, 2, ((0,),))], ((0, 2),), ((0, 2, ((),)),), ((0, 2, ((n,),)),)):
        with pytest.raises((TypeError, ValueError)):
            cpack.move_plan(0, 0, bad, good, routes, n, len(chip.names), chip.llb, chip.ddr)
    with pytest.raises(TypeError):
        cpack.pack_group((), (), None, None, (), None, 1.0, (0,), ((0,),), {})
    with pytest.raises(KeyError):  # a part size without its cost
        cpack.pack_group((), (), None, None, (), None, 1.0, (0,), ((0,),), {}, 0, 0, 0)
    with pytest.raises(TypeError):
        cpack.add_items({}, [(0, 1.0)], 2.0)
    with pytest.raises(TypeError):
        cpack.add_items({}, ((0,),), 2.0)


def test_rows_kinds_and_ranges_out_of_bounds_raise() -> None:
    """What the C refuses rather than reads wrong: op rows that are not whole rows (a stale
    build's layout), an op's kind out of range or NaN (``(int)`` of it is undefined), a
    part's samples past a C long (a plan of empty ranges, where Python's ints make a real
    one: the caller falls back to Python on the ValueError)."""
    import struct

    cpack, chip = _ctime.load_pack(), chip_of(Target.default())
    params = struct.pack("12d", *([1.0] * 12))
    row = [0.0] * 14
    for bad_rows in (struct.pack("13d", *row[:13]), struct.pack("15d", *row, 0.0)):
        with pytest.raises(ValueError, match="whole rows"):
            cpack.op_cost(bad_rows, (0,), 1, 1, params, frozenset())
        with pytest.raises(ValueError, match="whole rows"):
            cpack.work_scan(bad_rows, (0,), 1.0)
    for kind in (float("nan"), -1.0, 7.0):
        rows = struct.pack("14d", kind, *row[1:])
        with pytest.raises(ValueError, match="kind out of range"):
            cpack.op_cost(rows, (0,), 1, 1, params, frozenset())
        with pytest.raises(ValueError, match="kind out of range"):
            cpack.work_scan(rows, (0,), 1.0)
    n, routes = chip.cores, tuple(chip.routes.get((a, b), ()) for a in range(chip.cores)
                                  for b in range(chip.cores))
    huge = ((2**62, 2**62, ((0,), (1,))),)
    with pytest.raises(ValueError, match="samples out of range"):
        cpack.move_plan(0, 0, huge, huge, routes, n, len(chip.names), chip.llb, chip.ddr)
    src, dst = ("LLB", huge), ("L1", huge)
    assert _fields(_moves._plan_c(cpack, chip, src, dst)) == _fields(_moves._plan(chip, src, dst))
