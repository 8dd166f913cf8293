"""The one capacity model (compiler.capacity): what the simulator and the levels both call."""

from __future__ import annotations

import pytest

from compiler.auto import graph_schedule_level
from compiler.capacity import check_capacity, plan_memory
from compiler.errors import ScheduleError
from compiler.graph import Graph
from compiler.schedule import GroupSpec, Placement, make_schedule
from compiler.target import Target
from sim import SimError, SimResult, simulate
from tests.sim.conftest import zoo_graph

DEFAULT = Target.default()
SMALL = DEFAULT.replace(l1={"data_bytes": 384 * 1024}, llb={"bytes": 2 * 1024 * 1024})
FEW_CORES = DEFAULT.replace(
    chip={"cores_per_cluster": 4}, noc={"cores_per_router": 1},
    l1={"data_bytes": 512 * 1024}, llb={"bytes": 4 * 1024 * 1024},
)
TARGETS = {"default": DEFAULT, "small_l1_llb": SMALL, "four_cores": FEW_CORES}


@pytest.fixture(scope="module")
def tiny() -> Graph:
    return zoo_graph("tiny_cnn", 8)


def _one_group(graph: Graph, bind: object, scope: str = "DDR") -> object:
    ops = tuple(range(len(graph.ops)))
    return make_schedule(graph, [GroupSpec("all", ops, 1, (Placement.make(scope, bind),))])


def test_uneven_parts_are_sized_part_by_part(tiny: Graph) -> None:
    """Finding 1 (L1 side): a one-core part holds its samples' whole working set.

    [[0..4],[5],[6],[7]] gives each part 2 of the 8 samples: core 5 computes 2 samples
    alone, exactly like a core of [[0],[5],[6],[7]], not a fifth of them like core 0.
    """
    uneven = plan_memory(tiny, _one_group(tiny, [[0, 1, 2, 3, 4], [5], [6], [7]]), DEFAULT)
    single = plan_memory(tiny, _one_group(tiny, [[0], [5], [6], [7]]), DEFAULT)
    assert uneven.ok and single.ok
    step = next(s for s in uneven.steps if s.l1_bytes)
    per_core = dict(step.l1_bytes)
    ref = dict(next(s for s in single.steps if s.l1_bytes).l1_bytes)
    assert per_core[5] == pytest.approx(ref[5])
    assert per_core[0] < per_core[5] / 2  # a fifth of the rows of the same 2 samples


def test_simulator_reports_the_capacity_models_overflow(tiny: Graph) -> None:
    tight = DEFAULT.replace(l1={"data_bytes": 4096})
    s = _one_group(tiny, [0, 1, 2, 3, 4, 5, 6, 7], "L1")
    issue = check_capacity(tiny, s, tight)
    assert issue is not None and issue.resource.startswith("L1 of core")
    r = simulate(tiny, s, tight, timeline=False)
    assert isinstance(r, SimError) and r.status == "capacity"
    assert r.message == issue.message and r.needed_bytes == issue.needed_bytes


def test_peaks_come_from_the_capacity_model(tiny: Graph) -> None:
    s = graph_schedule_level(tiny, DEFAULT, 3)
    plan = plan_memory(tiny, s, DEFAULT)
    r = simulate(tiny, s, DEFAULT, timeline=False)
    assert isinstance(r, SimResult) and plan.ok
    assert r.peak_l1_bytes == plan.peak_l1_bytes and r.peak_llb_bytes == plan.peak_llb_bytes


def test_wide_and_deep_o1_fits_the_llb() -> None:
    """Finding 6: Wide&Deep batch 2048 at O1 overflowed the LLB by 4 KiB."""
    g = zoo_graph("wide_and_deep", 2048)
    assert check_capacity(g, graph_schedule_level(g, DEFAULT, 1), DEFAULT) is None


def test_bert_o3_fits_a_small_target() -> None:
    """Finding 6: BERT (2 layers, batch 8) on 384 KiB L1 / 2 MiB LLB got an O3 that overflowed."""
    g = zoo_graph("bert_base", 8, num_layers=2)
    s = graph_schedule_level(g, SMALL, 3)
    assert check_capacity(g, s, SMALL) is None
    assert isinstance(simulate(g, s, SMALL, timeline=False), SimResult)


def test_a_level_that_cannot_fit_says_why(tiny: Graph) -> None:
    impossible = DEFAULT.replace(l1={"data_bytes": 64})
    with pytest.raises(ScheduleError, match="does not fit this target"):
        graph_schedule_level(tiny, impossible, 3)


def _every_level_fits(name: str, options: dict[str, object], target: Target) -> None:
    for batch in (1, 16):
        g = zoo_graph(name, batch, **options)
        for level in range(4):
            s = graph_schedule_level(g, target, level)
            r = simulate(g, s, target, timeline=False)
            assert isinstance(r, SimResult), f"{name} b{batch} O{level}: {r.message}"


@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize("name,options", [
    ("tiny_cnn", {}), ("resnet18", {}), ("mobilenet_v2", {}), ("bert_base", {"num_layers": 2}),
    ("deepfm", {}), ("wide_and_deep", {}),
])
def test_every_level_fits_every_target(name: str, options: dict[str, object], target_name: str
                                       ) -> None:
    _every_level_fits(name, options, TARGETS[target_name])


@pytest.mark.parametrize("target_name", sorted(TARGETS))
def test_the_walk_step_by_step_is_plan_memory(tiny: Graph, target_name: str) -> None:
    """CapacityWalk: fits() changes nothing, commit() of every step's own scope gives
    plan_memory's plan (issue included), and the walk goes on after an overflow."""
    from dataclasses import replace

    from compiler.capacity import CapacityWalk, order_nodes
    from compiler.derive import chunk_dag

    target = TARGETS[target_name]
    draft = graph_schedule_level(tiny, target, 3)
    schedules = [draft, replace(draft, groups=tuple(
        replace(g, chunks=tuple(Placement("L1", p.core_bind) for p in g.chunks))
        for g in draft.groups))]
    for s in schedules:
        deps, outs = chunk_dag(tiny, s)
        walk = CapacityWalk(tiny, target, s.groups, s.transfers, deps, outs, order_nodes(s))
        issues = 0
        for k, layout in enumerate(list(walk.layouts)):
            for other in ("L1", "LLB", "DDR"):
                walk.fits(k, other)
            issues += walk.commit(k, layout[0]) is not None
        assert walk.plan() == plan_memory(tiny, replace(s), target)
        assert (issues > 0) == (not walk.plan().ok)
        with pytest.raises(ValueError, match="next step"):
            walk.fits(0, "DDR")


# The full-size zoo (seconds to minutes per model): every level of every model at batch 1
# and 16 on the default target and the two smaller ones. `make test-slow` runs it.
@pytest.mark.slow
@pytest.mark.parametrize("target_name", sorted(TARGETS))
@pytest.mark.parametrize("name,options", [
    ("resnet50", {}), ("resnet101", {}), ("bert_base", {}), ("bert_large", {}),
    ("vit", {}), ("gpt", {}),
])
def test_every_level_of_the_full_size_zoo_fits_every_target(
    name: str, options: dict[str, object], target_name: str
) -> None:
    _every_level_fits(name, options, TARGETS[target_name])
