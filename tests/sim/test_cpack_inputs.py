"""``sim/_cpack.c``'s input flows against ``sim._plans.inputs_flows``'s Python loop, and what
the C refuses or leaves to Python (a conversion's error, a missing route, a value past a C
long): the review's notes on h130's plan maker."""

from __future__ import annotations

import dataclasses
import random
import struct
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.target import Target
from sim import _ctime, _engine, _moves, _plans
from sim._flows import Flows
from sim._resources import chip_of
from tests.sim.test_cpack import _fields, _flows_repr, _layout
from tests.sim.test_step_plans import TARGETS

pytestmark = pytest.mark.skipif(_ctime.load_pack() is None,
                                reason="sim._cpack not built: plans are made in Python")


def _inputs(rng: random.Random, cores: int) -> tuple[Any, Any, frozenset[str], Any]:
    """Random tensors, their sources, the streamed ones and re-reads (names repeat)."""
    names = [f"t{i}" for i in range(rng.randint(1, 5))]
    tensors, srcs = [], []
    for _ in range(rng.randint(0, 7)):
        sb, fb = rng.choice(((0, 0), (rng.randint(1, 9000), 0), (0, rng.randint(1, 900)),
                             (rng.randint(1, 50), rng.randint(1, 50))))
        tensors.append((rng.choice(names), sb, fb))
        if rng.random() < 0.25:
            srcs.append(None)
        else:
            lay = _layout(rng, cores)
            srcs.append((lay, tuple(sorted({c for _, _, ps in lay[1] for p in ps for c in p}))))
    streamed = frozenset(n for n in names if rng.random() < 0.5)
    rereads = tuple((rng.randint(0, 9), rng.choice(names), rng.randint(0, 3))
                    for _ in range(rng.randint(0, 4)))
    return tuple(tensors), tuple(srcs), streamed, rereads


def _made(chip: Any, cpack: Any, args: tuple[Any, ...], rereads: Any) -> str:
    sim = SimpleNamespace(g=SimpleNamespace(batch=8), chip=chip, moves={}, cpack=cpack)
    work = None if rereads is None else SimpleNamespace(rereads=rereads)
    staged, streamed = _plans.inputs_flows(sim, *args, work)  # type: ignore[arg-type]
    return repr(([(k, _flows_repr(f)) for k, f in staged.items()],
                 [(k, _flows_repr(f)) for k, f in streamed.items()],
                 [(k, _fields(p)) for k, p in sim.moves.items()]))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(tname=st.sampled_from(sorted(TARGETS)), seed=st.integers(0, 2**31 - 1))
def test_input_flows_made_in_c_are_pythons(tname: str, seed: int) -> None:
    """The buckets, each Flows' dicts in order, and the movement plans cached, in order."""
    chip, rng, cpack = chip_of(TARGETS[tname]), random.Random(seed), _ctime.load_pack()
    for _ in range(10):
        tensors, srcs, streamed, rereads = _inputs(rng, chip.cores)
        dst = _layout(rng, chip.cores)
        dst_cores = tuple(rng.sample(range(chip.cores), rng.randint(1, min(chip.cores, 4))))
        args = (tensors, srcs, dst, dst_cores, streamed)
        for rr in (rereads, None):
            assert _made(chip, cpack, args, rr) == _made(chip, None, args, rr)


def test_input_flows_malformed_raise() -> None:
    cpack, chip = _ctime.load_pack(), chip_of(Target.default())
    dst = ("L1", ((0, 2, ((0,),)),))
    rest = (("DDR", ((0, 8, ((-1,),)),)), {}, _moves.move_plan, _moves.fixed_plan, Flows,
            chip, cpack)
    for tensors, srcs in ((((1, 2),), (None,)), ((("a", 1, 0),), ((dst,),))):
        with pytest.raises(TypeError):
            cpack.inputs_flows(tensors, srcs, dst, (0,), frozenset(), (), *rest)
    with pytest.raises(TypeError):  # a re-read that is not (op, tensor, passes)
        cpack.inputs_flows((("a", 1, 0),), (None,), dst, (0,), frozenset("a"), ((0, "a"),),
                           *rest)
    with pytest.raises(TypeError):
        cpack.inputs_flows((), (), dst, (0,), frozenset(), ())


def test_a_failed_conversion_is_the_error_raised() -> None:
    """Each number is checked before the next is read: the first bad one's error is raised
    (h130's C read two to four, then checked once: the last conversion's error won)."""
    cpack, chip = _ctime.load_pack(), chip_of(Target.default())
    n, names = chip.cores, len(chip.names)
    routes = tuple(chip.routes.get((a, b), ()) for a in range(n) for b in range(n))
    good, huge = ((0, 2, ((0,), (1,))),), 2**2000
    with pytest.raises(TypeError):  # scopes
        cpack.move_plan("x", huge, good, good, routes, n, names, chip.llb, chip.ddr)
    with pytest.raises(TypeError):  # a piece's first sample, then its samples per part
        cpack.move_plan(0, 0, (("x", huge, ((0,),)),), good, routes, n, names, chip.llb,
                        chip.ddr)
    with pytest.raises(TypeError):  # the slowest part's cycles, then the latency terms
        cpack.pack_group((), (), None, None, (), None, "x", (), (), {}, huge, 0, 0)
    fl = Flows()
    fl.incoming = {"x": huge}  # type: ignore[dict-item]
    with pytest.raises(TypeError):  # a Flows item's key, then its value
        cpack.pack_group((), (("DDR", fl),), None, None, (), None, 1.0, (), (), {}, 0, 0, 0)
    params, rows = struct.pack("12d", *([1.0] * 12)), struct.pack("14d", *([0.0] * 14))
    with pytest.raises(TypeError):  # samples, then cores
        cpack.op_cost(rows, (0,), "x", huge, params, frozenset())


def test_a_missing_route_is_not_zero_hops() -> None:
    """A chip without the route a plan needs: Python's KeyError, never a plan without the
    links (h130's flattening read a missing route as no links)."""
    cpack, chip = _ctime.load_pack(), chip_of(Target.default())
    routes = dict(chip.routes)
    del routes[(0, 1)]
    holed = dataclasses.replace(chip, routes=routes)
    src, dst = ("L1", ((0, 1, ((0,),)),)), ("L1", ((0, 1, ((1,),)),))
    with pytest.raises(KeyError):
        _moves._plan(holed, src, dst)
    with pytest.raises(KeyError):
        _moves._plan_c(cpack, holed, src, dst)
    assert _fields(_moves._plan_c(cpack, chip, src, dst)) == _fields(_moves._plan(chip, src, dst))


@pytest.mark.parametrize("core", [2**70, "c0"])  # (not 1.0: equal to 1, it would
# enter _moves._ranges' cache as core 1's ranges)
def test_what_the_c_does_not_take_falls_back(core: Any) -> None:
    """A core past a C long (OverflowError) or not an int (TypeError): Python's plan."""
    cpack, chip = _ctime.load_pack(), chip_of(Target.default())
    src, dst = ("LLB", ((0, 2, ((0,),)),)), ("L1", ((0, 2, ((core,),)),))
    assert _fields(_moves._plan_c(cpack, chip, src, dst)) == _fields(_moves._plan(chip, src, dst))


def test_the_plan_context_declares_what_the_c_reads() -> None:
    """``PlanContext`` (what plan making reads of a simulation) lists the latency terms the
    compiled packer reads, and the simulation has them."""
    declared = set(_plans.PlanContext.__annotations__)
    assert {"setup", "hop_lat", "ddr_lat", "cpack", "moves", "chip"} <= declared
    sim_init = _engine._Sim.__init__.__code__.co_names
    assert {"setup", "hop_lat", "ddr_lat"} <= set(sim_init)


@pytest.mark.parametrize("items", [((1, 2.0), (1, 3.0), (2, -0.0)), ((3, -0.0), (1, 0.5)),
                                   ((1, 2.0), (2, 1.0), (1, -2.0), (2, 4.0))])
def test_items_added_to_an_empty_dict_are_pythons(items: Any) -> None:
    """``add_items`` into an empty dict puts the items without looking each up; resources
    repeated (never in a plan made from a dict, but add_items takes any pairs) are summed as
    Python sums them, in Python's order, and -0.0 becomes 0.0 as ``0.0 + -0.0`` does."""
    cpack = _ctime.load_pack()
    for start in ({}, {2: 1.0}):
        want, got = dict(start), dict(start)
        for r, c in items:
            want[r] = want.get(r, 0.0) + c * 3
        cpack.add_items(got, items, 3)
        assert repr(list(got.items())) == repr(list(want.items()))
