"""The simulator's behaviour: results, errors as values, capacity, contention, overlap, monotonicity."""

from __future__ import annotations

import json
import math

import pytest
from onnx import helper as h

from compiler.graph import Graph
from compiler.schedule import GraphSchedule, Placement, Step, make_schedule, single_group_schedule
from compiler.target import Target
from sim import SimError, SimResult, lower_bound, simulate, simulate_many, to_chrome_trace
from sim._resources import Reservations, chip_of
from tests.sim.conftest import group, onnx_graph, resnet_guide_plan, w

ALL = list(range(8))
S = 256  # rows per sample of the hand-built graphs: 256 x 512 FP16 = 256 KiB per sample


def ok(r: SimResult | SimError) -> SimResult:
    assert isinstance(r, SimResult), r
    return r


# ---- hand-built graphs -----------------------------------------------------------------------
@pytest.fixture(scope="module")
def branches() -> Graph:
    """y = relu(x@W1); z = relu(x@W2)@W4 (heavy); out = (y + z) * y."""
    nodes = [h.make_node("MatMul", ["x", "W1"], ["a"]), h.make_node("Relu", ["a"], ["y"]),
             h.make_node("MatMul", ["x", "W2"], ["c1"]), h.make_node("Relu", ["c1"], ["c2"]),
             h.make_node("MatMul", ["c2", "W4"], ["z"]),
             h.make_node("Add", ["y", "z"], ["t"]), h.make_node("Mul", ["t", "y"], ["out"])]
    return onnx_graph(nodes, {"x": [8, S, 512]}, {"out": [8, S, 512]},
                      {"W1": w(512, 512), "W2": w(512, 1024), "W4": w(1024, 512)})


def branch_schedule(g: Graph) -> GraphSchedule:
    """A (-> LLB), C (heavy, -> L1), D reads y from the LLB twice (staged) and z in place."""
    a_mm = next(op for op in g.ops
                if op.op_type == "matmul" and g.tensors[op.weights[0]].shape == (512, 512))
    a_ops = [a_mm.index, next(op.index for op in g.ops if op.inputs == (a_mm.output,))]
    d_ops = [op.index for op in g.ops if op.op_type in ("add", "multiply")]
    c_ops = [i for i in range(len(g.ops)) if i not in a_ops + d_ops]
    gs = [group("A", a_ops, "LLB", ALL), group("C", c_ops, "L1", ALL),
          group("D", d_ops, "DDR", ALL)]
    return make_schedule(g, gs, order=[Step("group", n) for n in "ACD"])


@pytest.fixture(scope="module")
def two_stage() -> Graph:
    """y = relu(x@W1) on cores 0 and 1, then out = y@W2 elsewhere (2 samples)."""
    nodes = [h.make_node("MatMul", ["x", "W1"], ["a"]), h.make_node("Relu", ["a"], ["y"]),
             h.make_node("MatMul", ["y", "W2"], ["out"])]
    return onnx_graph(nodes, {"x": [2, S, 512]}, {"out": [2, S, 512]},
                      {"W1": w(512, 512), "W2": w(512, 512)})


def moved(g: Graph, consumer: list[list[int]]) -> GraphSchedule:
    first = [op.index for op in g.ops][:2]
    return make_schedule(g, [group("P", first, "L1", [[0], [1]]),
                             group("Q", [2], "DDR", consumer)])


# ---- results and errors --------------------------------------------------------------------------
def test_result_is_consistent(tiny: Graph, target: Target) -> None:
    from compiler.auto import graph_schedule_level

    r = ok(simulate(tiny, graph_schedule_level(tiny, target, 3), target))
    assert r.latency_us == pytest.approx(target.cycles_to_us(r.latency_cycles))
    assert r.throughput_per_s == pytest.approx(tiny.batch / (r.latency_us * 1e-6))
    assert r.chip_throughput_per_s == pytest.approx(target.chip.clusters * r.throughput_per_s)
    assert r.lower_bound_us == pytest.approx(lower_bound(tiny, tiny.batch, target))
    assert r.latency_over_bound >= 1.0
    assert r.steps and r.steps[-1].end_cycles <= r.latency_cycles
    assert set(r.busy_cycles) >= {"core0.mme", "core7.vme", "core3.dma", "llb", "ddr"}
    assert any(k.startswith("noc ") for k in r.busy_cycles)
    assert all(0 <= v <= 1 + 1e-9 for v in r.busy_fraction().values())
    assert 0 < r.peak_l1_bytes <= target.l1.data_bytes
    # pure: same inputs, same answer
    again = ok(simulate(tiny, graph_schedule_level(tiny, target, 3), target))
    assert again.latency_cycles == r.latency_cycles and again.to_json() == r.to_json()


def test_lower_bound_is_a_roofline(resnet50: Graph, target: Target) -> None:
    lb16 = lower_bound(resnet50, 16, target)
    lb32 = lower_bound(resnet50, 32, target)
    launch = target.host.launch_overhead_us
    peak_cluster = 2 * target.matrix.macs_per_cycle * target.chip.cores_per_cluster * \
        target.clock_hz
    compute_us = 2 * resnet50.macs / peak_cluster * 1e6
    assert lb16 >= compute_us + launch - 1e-6
    assert lb32 - launch == pytest.approx(2 * (lb16 - launch), rel=0.01)


def test_structural_problems_are_values_not_exceptions(tiny: Graph, target: Target) -> None:
    s = single_group_schedule(tiny, Placement.make("DDR", ALL))
    wrong_batch = GraphSchedule(batch=4, groups=s.groups, transfers=s.transfers, order=s.order)
    missing = GraphSchedule(batch=s.batch, groups=(), transfers=(), order=())
    out = simulate_many(tiny, [s, wrong_batch, missing], target)
    assert isinstance(out[0], SimResult)
    for err in out[1:]:
        assert isinstance(err, SimError) and err.status == "invalid" and not err.ok
    assert "batch 4" in out[1].message  # type: ignore[union-attr]
    assert "in no group" in out[2].message  # type: ignore[union-attr]
    assert json.loads(json.dumps(out[1].to_json()))["status"] == "invalid"


def test_l1_overflow_names_core_step_bytes_and_live_tensors(branches: Graph,
                                                            target: Target) -> None:
    s = branch_schedule(branches)
    r = ok(simulate(branches, s, target))
    need = max(st.l1_bytes for st in r.steps)
    small = target.replace(l1={"data_bytes": need - 1024})
    err = simulate(branches, s, small)
    assert isinstance(err, SimError) and err.status == "capacity"
    assert err.resource.startswith("L1 of core ")
    assert err.step in {st.name for st in r.steps}
    assert err.needed_bytes > err.available_bytes == need - 1024
    assert err.live_tensors and all(b > 0 for _, b in err.live_tensors)
    assert err.resource in err.message and err.step in err.message


def test_llb_overflow_names_the_cluster(branches: Graph, target: Target) -> None:
    s = branch_schedule(branches)
    y_bytes = 8 * S * 512 * 2  # A's output, all 8 samples, in the LLB
    err = simulate(branches, s, target.replace(llb={"bytes": y_bytes - 1}))
    assert isinstance(err, SimError) and err.status == "capacity"
    assert err.resource == "LLB of cluster 0" and err.step == "A[0]"
    assert err.needed_bytes == y_bytes
    ok(simulate(branches, s, target.replace(llb={"bytes": y_bytes})))


def test_two_transfers_on_one_link_take_longer_than_on_two(two_stage: Graph,
                                                           target: Target) -> None:
    chip = chip_of(target)
    # cores 0,1 share a router; 4,5 share the router below it, 2,3 the one to its right
    assert chip.routes[(0, 4)] == chip.routes[(1, 5)]
    assert set(chip.routes[(0, 4)]).isdisjoint(chip.routes[(1, 2)])
    shared = ok(simulate(two_stage, moved(two_stage, [[4], [5]]), target))
    apart = ok(simulate(two_stage, moved(two_stage, [[4], [2]]), target))
    assert shared.noc_bytes == apart.noc_bytes == 2 * S * 512 * 2

    def load(r: SimResult) -> float:  # Q waits for y to cross the NoC after P ends
        p, q = r.steps
        return q.start_cycles - p.end_cycles

    per_flow = S * 512 * 2 / target.noc.link_bytes_per_cycle
    assert load(shared) == pytest.approx(load(apart) + per_flow)
    assert shared.latency_cycles > apart.latency_cycles
    link = chip.names[chip.routes[(0, 4)][0]]
    assert shared.busy_cycles[link] == pytest.approx(2 * apart.busy_cycles[link])


def test_reservations_serialise_on_a_shared_resource(target: Target) -> None:
    chip = chip_of(target)
    res = Reservations(chip)
    link = chip.routes[(0, 4)][0]
    _, end1 = res.reserve("a", {link: 6400.0}, 0.0, 0.0)
    start2, end2 = res.reserve("b", {link: 6400.0}, 0.0, 0.0)
    _, end3 = res.reserve("c", {chip.routes[(1, 2)][0]: 6400.0}, 0.0, 0.0)
    assert end1 == end3 == 100.0 and start2 == 100.0 and end2 == 200.0


def test_prefetch_hides_loads_only_when_l1_has_room(branches: Graph, target: Target) -> None:
    s = branch_schedule(branches)
    roomy = ok(simulate(branches, s, target))
    steps = {st.name: st for st in roomy.steps}
    c, d = steps["C[0]"], steps["D[0]"]
    assert d.load_start_cycles < c.end_cycles and d.load_end_cycles <= c.end_cycles
    assert d.start_cycles == pytest.approx(c.end_cycles)  # the load was hidden
    # L1 that holds either step but not C's working set plus D's incoming input (y, one
    # sample of 256 x 512 FP16 per core, staged from the LLB)
    y_per_core = S * 512 * 2
    fits = max(c.l1_bytes, d.l1_bytes)
    cap = fits + y_per_core // 2
    assert fits <= cap < c.l1_bytes + y_per_core
    tight_target = target.replace(l1={"data_bytes": cap})
    tight = ok(simulate(branches, s, tight_target))
    t = {st.name: st for st in tight.steps}
    assert t["D[0]"].load_start_cycles >= t["C[0]"].end_cycles
    exposed = t["D[0]"].load_end_cycles - t["D[0]"].load_start_cycles
    assert exposed > 0
    assert tight.latency_cycles == pytest.approx(roomy.latency_cycles + exposed)


BANDWIDTHS = [("ddr", "bytes_per_cycle"), ("llb", "bytes_per_cycle"),
              ("dma", "core_bytes_per_cycle"), ("noc", "link_bytes_per_cycle"),
              ("l1", "bytes_per_cycle")]


@pytest.mark.parametrize(("section", "key"), BANDWIDTHS)
def test_more_bandwidth_never_slower(section: str, key: str, resnet50: Graph, branches: Graph,
                                     two_stage: Graph, tiny: Graph, target: Target) -> None:
    from compiler.auto import graph_schedule_level

    cases = [(resnet50, resnet_guide_plan(resnet50)), (branches, branch_schedule(branches)),
             (two_stage, moved(two_stage, [[4], [5]]))]
    cases += [(tiny, graph_schedule_level(tiny, target, lvl)) for lvl in range(4)]
    base = getattr(getattr(target, section), key)
    for g, s in cases:
        prev = ok(simulate(g, s, target, timeline=False)).latency_cycles
        for factor in (1.5, 2.0, 4.0):
            faster = target.replace(**{section: {key: base * factor}})
            lat = ok(simulate(g, s, faster, timeline=False)).latency_cycles
            assert lat <= prev * (1 + 1e-12), (s.source, section, factor)
            prev = lat


def test_more_chunks_load_more_weights(tiny: Graph, target: Target) -> None:
    from compiler.auto import core_bind_for

    loaded = []
    for split in (1, 2, 4):
        bind = core_bind_for(tiny.batch // split, 8)
        r = ok(simulate(tiny, single_group_schedule(tiny, Placement("DDR", bind), split), target,
                        timeline=False))
        loaded.append(r.weight_bytes_loaded)
    assert loaded[0] == pytest.approx(tiny.weight_bytes)
    assert loaded[1] == pytest.approx(2 * loaded[0]) and loaded[2] == pytest.approx(4 * loaded[0])


def test_chrome_trace_has_a_track_per_engine_port_and_link(resnet50: Graph,
                                                           target: Target) -> None:
    r = ok(simulate(resnet50, resnet_guide_plan(resnet50), target))
    trace = json.loads(json.dumps(to_chrome_trace(r)))
    names = {e["args"]["name"] for e in trace["traceEvents"] if e.get("name") == "thread_name"}
    for c in range(8):
        assert {f"core{c}.mme", f"core{c}.vme", f"core{c}.dma"} <= names
    assert {"llb", "ddr"} <= names and any(n.startswith("noc ") for n in names)
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert spans and all(e["dur"] > 0 and e["ts"] >= 0 for e in spans)
    tracks = {e["tid"] for e in spans}
    assert len(tracks) >= 8 * 3 + 2
    last = max(e["ts"] + e["dur"] for e in spans)
    assert last <= r.latency_us + 1e-6
    assert math.isclose(trace["otherData"]["latency_us"], r.latency_us)


def test_sizes_follow_the_target_compute_type(branches: Graph, target: Target) -> None:
    s = branch_schedule(branches)
    fp16 = ok(simulate(branches, s, target))
    # the schedule fills half of the FP16 L1 (plus stream tiles): FP32 needs a larger L1
    fp32 = ok(simulate(branches, s, target.replace(compute_dtype="float32",
                                                   l1={"data_bytes": 2 * target.l1.data_bytes})))
    assert branches.tensors["x"].dtype == "float32" and branches.float_bytes == 2
    assert fp32.weight_bytes_loaded == pytest.approx(2 * fp16.weight_bytes_loaded)
    # twice the bytes, and more passes over x: a weight tile holds half the elements
    assert fp32.ddr_bytes > 2 * fp16.ddr_bytes
    assert fp32.peak_l1_bytes == 2 * fp16.peak_l1_bytes


def test_random_schedules_give_results_or_errors_never_exceptions(tiny: Graph,
                                                                  target: Target) -> None:
    import random

    from compiler.errors import ScheduleError
    from compiler.schedule import GroupSpec

    rng = random.Random(7)
    n, seen = len(tiny.ops), set()
    for _ in range(40):
        cuts = sorted(rng.sample(range(1, n), rng.randint(0, 5)))
        bounds = [0, *cuts, n]
        groups = []
        for i in range(len(bounds) - 1):
            split = rng.choice([1, 2, 4, 8])
            chunks = []
            for _c in range(split):
                parts = rng.choice([p for p in (1, 2, 4, 8) if (8 // split) % p == 0])
                per = rng.choice([k for k in (1, 2, 4) if k * parts <= 8])
                cores = rng.sample(range(8), parts * per)
                chunks.append(Placement.make(rng.choice(["DDR", "LLB", "L1"]),
                                             [cores[j * per:(j + 1) * per] for j in range(parts)]))
            groups.append(GroupSpec(f"g{i}", tuple(range(bounds[i], bounds[i + 1])), split,
                                tuple(chunks)))
        try:
            s = make_schedule(tiny, groups, order=rng.choice(["depth", "breadth"]))
        except ScheduleError:
            continue
        r = simulate(tiny, s, target)
        seen.add(r.status)
        if isinstance(r, SimResult):
            assert r.latency_over_bound >= 1.0 and r.peak_l1_bytes <= target.l1.data_bytes
        else:
            assert r.message and (r.status == "invalid" or r.needed_bytes > r.available_bytes)
    assert "ok" in seen and len(seen) >= 2
