"""The simulator's step plans (``sim._plans.StepPlan``), kept across simulations of a
graph on a target, never change a result: a schedule simulated after others (its steps'
plans made by earlier schedules, chunks of other groups and other layouts at other first
samples) gives exactly the result of one simulated with every plan made afresh. Drawn by
hypothesis as chains of mutations (a child shares most steps with its parent, as a tune's
candidates do), on models with halos, attention operands, gathered tables and host-free
chains, on the default target and ones with a small L1 (inputs stream in), fewer cores and
without the LLB broadcast."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.graph import Graph
from compiler.memo import BoundedDict
from compiler.target import Target
from sim import _engine, simulate
from tests.sim.random_schedules import chain
from tests.sim.test_properties import graph_of

MODELS = ("tiny_cnn", "resnet18", "bert", "deepfm")


def _targets() -> dict[str, Target]:
    t = Target.default()
    return {"default": t,
            # an eighth of the L1: inputs in LLB/DDR stream in (the plans' streamed sets)
            "small_l1": t.replace(l1={"data_bytes": 128 * 1024, "weight_bytes": 32 * 1024}),
            "four_cores": t.replace(chip={"cores_per_cluster": 4},
                                    noc={"mesh_rows": 4, "mesh_cols": 2}),
            "no_broadcast": t.replace(llb={"broadcast": False})}


TARGETS = _targets()


def _fresh(graph: Graph, s: Any, target: Target, monkeypatch: pytest.MonkeyPatch) -> Any:
    """``s`` simulated with every step plan made for it (none looked up)."""
    with monkeypatch.context() as m:
        m.setattr(_engine, "plans_of", lambda graph, target: BoundedDict(0))
        return simulate(graph, s, target)


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(MODELS), tname=st.sampled_from(sorted(TARGETS)),
       seed=st.integers(0, 2**31 - 1))
def test_kept_step_plans_give_the_fresh_result(model: str, tname: str, seed: int) -> None:
    graph, target = graph_of(model), TARGETS[tname]
    rng = random.Random(seed)
    with pytest.MonkeyPatch.context() as mp:
        for s in chain(graph, rng, target.chip.cores_per_cluster, 8):
            kept = simulate(graph, s, target)  # plans from the earlier schedules
            fresh = _fresh(graph, s, target, mp)
            assert kept == fresh


def test_a_graph_keeps_the_plans_of_its_last_two_targets_only() -> None:
    """A sweep simulates one graph on many targets in one process: the plans of each new
    target replace the oldest's, so a process holds at most ``TARGETS_KEPT`` stores."""
    from compiler.capacity import in_compute_dtype
    from compiler.memo import memo_of
    from sim._plans import PLAN_LIMIT, TARGETS_KEPT, plans_of

    graph = graph_of("tiny_cnn")  # shared with the other tests: start without kept plans
    memo_of(in_compute_dtype(graph, TARGETS["default"])).pop("sim.steps", None)
    s = chain(graph, random.Random(0), 8, 1)[0]
    targets = [TARGETS["default"], TARGETS["no_broadcast"],
               TARGETS["default"].replace(ddr={"bytes_per_cycle": 13})]
    for t in targets:
        simulate(graph, s, t)
        assert len(plans_of(in_compute_dtype(graph, t), t)) > 0  # the run kept its plans
    kept = memo_of(in_compute_dtype(graph, targets[0]))["sim.steps"]
    assert TARGETS_KEPT == 2 and list(kept) == [t.hash for t in targets[-2:]]
    assert all(p.limit == PLAN_LIMIT for p in kept.values())
    # a target met again starts afresh and pushes out the oldest kept
    simulate(graph, s, targets[0])
    assert list(kept) == [t.hash for t in (targets[2], targets[0])]


def _flows_of(fl: Any) -> Any:
    return None if fl is None else (fl.flows, fl.incoming, fl.staying, fl.noc, fl.ddr, fl.hops)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(model=st.sampled_from(("resnet18", "bert")), tname=st.sampled_from(sorted(TARGETS)),
       seed=st.integers(0, 2**31 - 1))
def test_a_kept_exchange_is_the_fresh_one(model: str, tname: str, seed: int) -> None:
    """The exchange between a part's cores (halos, attention's operands) is kept by op set,
    samples per part and parts (``sim._plans.exchange_flows``): one kept while others of the
    same op sets at other sample counts and bindings were made equals one made afresh."""
    from types import SimpleNamespace

    from compiler.capacity import in_compute_dtype
    from sim import _ctime
    from sim._model import group_work
    from sim._plans import exchange_flows
    from sim._resources import chip_of

    target = TARGETS[tname]
    graph = in_compute_dtype(graph_of(model), target)
    rng = random.Random(seed)
    n, cores = len(graph.ops), target.chip.cores_per_cluster
    chip = chip_of(target)
    # the kept ones made with the compiled plan maker when built, the fresh ones in Python
    kept = SimpleNamespace(chip=chip, moves={}, plans=BoundedDict(10_000),
                           cpack=_ctime.load_pack())
    runs = [tuple(range(a, min(n, a + rng.randint(1, 12)))) for a in rng.sample(range(n), 4)]
    for _ in range(40):
        ops = rng.choice(runs)
        work = group_work(graph, ops, target)
        spp = rng.choice((1, 2, 4))
        order = rng.sample(range(cores), cores)
        size = rng.choice([k for k in (1, 2, 4, 8) if k <= cores])
        parts = tuple(tuple(order[i:i + size]) for i in range(0, rng.choice((size, cores)), size))
        fresh = SimpleNamespace(chip=chip, moves={}, plans=BoundedDict(10), cpack=None)
        assert _flows_of(exchange_flows(kept, ops, work, spp, parts)) == _flows_of(
            exchange_flows(fresh, ops, work, spp, parts))


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_movement_plans_see_sample_ranges_by_their_differences(data: st.DataObject) -> None:
    """What lets a transfer's (and a group step's) kept flows be keyed by layouts relative to
    its first sample: a movement plan between two layouts is the same after both are shifted
    by the same number of samples."""
    from sim._moves import move_plan
    from sim._plans import shift
    from sim._resources import chip_of

    chip = chip_of(TARGETS["default"])
    cores = st.lists(st.integers(0, 7), min_size=1, max_size=4, unique=True).map(tuple)

    def layout() -> Any:
        scope = data.draw(st.sampled_from(("L1", "LLB", "DDR")))
        spp = data.draw(st.sampled_from((1, 2, 4)))
        pieces, first = [], data.draw(st.integers(0, 8))
        for _ in range(data.draw(st.integers(1, 3))):
            parts = tuple(data.draw(cores) for _ in range(data.draw(st.integers(1, 2))))
            pieces.append((first, spp, parts))
            first += spp * len(parts) + data.draw(st.integers(0, 2))
        return (scope, tuple(pieces))

    src, dst, off = layout(), layout(), data.draw(st.integers(-8, 8))
    assert move_plan(chip, shift(src, off), shift(dst, off), {}) == move_plan(chip, src, dst, {})


def test_a_token_stands_for_one_value_even_after_the_table_is_cleared() -> None:
    from sim import _plans

    a = ("L1", ((0, 2, ((0, 1), (2, 3))),))
    b = ("L1", ((0, 2, ((0, 1), (2, 3))),))  # equal, another object
    tok = _plans.layout_token(a, (0, 1, 2, 3))
    assert _plans.layout_token(b, (0, 1, 2, 3)) == tok
    assert _plans.layout_token(a, (0, 1)) != tok  # the cores count
    assert _plans.layout_token(("LLB", a[1]), (0, 1, 2, 3)) != tok  # the scope counts
    _plans._TOKENS.clear()
    again = _plans.layout_token(a, (0, 1, 2, 3))
    assert again != tok  # a new number: a plan kept under the old one is missed, never wrong
    assert _plans.layout_token(("DDR", a[1]), ()) not in (tok, again)


def test_tokens_by_identity_are_the_tokens_by_value() -> None:
    from compiler.schedule import Placement
    from sim import _plans

    p = Placement("L1", ((0, 1), (2, 3)))
    q = Placement("L1", ((0, 1), (2, 3)))  # equal, another object
    r = Placement("L1", ((0, 1, 2, 3),))
    cores = (0, 1, 2, 3)

    def lay(place: Placement, chunk: int, samples: int) -> Any:  # compiler.layout.group_layout's
        return (place.mem_scope, ((chunk * samples, samples // len(place.core_bind), place.core_bind),))

    tok = _plans.group_token(p, lay(p, 0, 4), cores)
    assert tok == _plans.group_token(q, lay(q, 0, 4), cores)
    assert tok == _plans.group_token(p, lay(p, 3, 4), cores)  # relative to its first sample
    assert tok == _plans.layout_token(("L1", ((0, 2, ((0, 1), (2, 3))),)), cores)
    assert tok != _plans.group_token(p, lay(p, 0, 2), cores)  # samples
    assert tok != _plans.group_token(r, lay(r, 0, 4), cores)  # the parts
    ops, same = (1, 2, 3), tuple([1, 2, 3])
    assert ops is not same and _plans.ops_token(ops) == _plans.ops_token(same)
    assert _plans.ops_token((1, 2)) != _plans.ops_token(ops)
