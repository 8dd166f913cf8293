"""Regression tests for the cost terms of issue 8 (each failed before its fix) and the invariants."""

from __future__ import annotations

import dataclasses
import itertools
import math
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx import helper as h

from compiler.auto import graph_schedule_level
from compiler.graph import Graph
from compiler.model import Model
from compiler.opshape import OpKind, OpShape, array_cycles, matrix_tiles
from compiler.schedule import Placement, make_schedule
from compiler.target import Target
from sim import SimError, SimResult, lower_bound, simulate
from tests.sim.conftest import group, onnx_graph, w, zoo_graph

S = 256  # rows per sample: 256 x 512 FP16 = 256 KiB


def ok(r: SimResult | SimError) -> SimResult:
    assert isinstance(r, SimResult), r
    return r


def single(g: Graph, scope: str, bind: object, split: int = 1) -> object:
    return make_schedule(g, [group("G", range(len(g.ops)), scope, bind, split)])


# ---- finding 1: unequal core parts are costed per part ----------------------------------------
@pytest.fixture(scope="module")
def dense() -> Graph:
    """out = relu(x @ W), 2 samples of 256 x 512."""
    nodes = [h.make_node("MatMul", ["x", "W"], ["a"]), h.make_node("Relu", ["a"], ["out"])]
    return onnx_graph(nodes, {"x": [2, S, 512]}, {"out": [2, S, 512]}, {"W": w(512, 512)})


@pytest.fixture(scope="module")
def conv() -> Graph:
    """relu, then a compute-bound 3x3 convolution; 2 samples of 256 x 14 x 14."""
    nodes = [h.make_node("Relu", ["x"], ["y"]),
             h.make_node("Conv", ["y", "W"], ["out"], pads=[1, 1, 1, 1])]
    return onnx_graph(nodes, {"x": [2, 256, 14, 14]}, {"out": [2, 256, 14, 14]},
                      {"W": w(256, 256, 3, 3)})


def conv_on(g: Graph, bind: object) -> object:
    """The relu into L1, the convolution reading it there (no DDR re-reads)."""
    return make_schedule(g, [group("A", [0], "L1", bind), group("B", [1], "DDR", bind)])


def test_uneven_parts_end_with_their_slowest_part(conv: Graph, target: Target) -> None:
    even = ok(simulate(conv, conv_on(conv, [[0, 1], [2, 3]]), target))
    uneven = ok(simulate(conv, conv_on(conv, [[0, 1, 2], [3]]), target))
    alone = ok(simulate(conv, conv_on(conv, [[0], [3]]), target))
    # core 3 computes a whole sample alone: the uneven step is as slow as one core per
    # sample, and slower than two cores per sample
    assert uneven.latency_cycles > even.latency_cycles
    assert uneven.steps[1].mme_cycles == pytest.approx(alone.steps[1].mme_cycles)
    assert uneven.latency_cycles >= alone.latency_cycles * 0.99
    # a core of the 3-core part does 66 of a sample's 196 rows: two 64-row tiles, as many
    # as a core of a 2-core part (98 rows) and half of core 3's four
    assert uneven.busy_cycles["core0.mme"] == pytest.approx(0.5 * uneven.busy_cycles["core3.mme"])


def _rebind(graph: Graph, base: object, name: str, bind: object) -> object:
    groups = [dataclasses.replace(gr, chunks=tuple(Placement.make(c.mem_scope, bind)
                                                   for c in gr.chunks))
              if gr.name == name else gr for gr in base.groups]  # type: ignore[attr-defined]
    tp = {t.name: t.placement for t in base.transfers}  # type: ignore[attr-defined]
    return make_schedule(graph, groups, order=list(base.order),  # type: ignore[attr-defined]
                         transfer_placements=tp)


def test_resnet50_uneven_parts_are_no_faster_than_even(resnet50: Graph, target: Target) -> None:
    from tests.sim.conftest import resnet_guide_plan

    base = resnet_guide_plan(resnet50)
    even = ok(simulate(resnet50, base, target, timeline=False))  # group_0 on [[0-3],[4-7]]
    uneven = ok(simulate(resnet50, _rebind(resnet50, base, "group_0", [[0, 1, 2, 3, 4], [5, 6, 7]]),
                         target, timeline=False))
    assert uneven.chip_throughput_per_s < even.chip_throughput_per_s
    # the case: group_2 on [[0..4],[5],[6],[7]] either does not fit or is no faster
    even2 = ok(simulate(resnet50, _rebind(resnet50, base, "group_2", [[0, 1], [2, 3], [4, 5], [6, 7]]),
                        target, timeline=False))
    r = simulate(resnet50, _rebind(resnet50, base, "group_2", [[0, 1, 2, 3, 4], [5], [6], [7]]),
                 target, timeline=False)
    assert r.status == "capacity" or r.chip_throughput_per_s <= even2.chip_throughput_per_s  # type: ignore[union-attr]


def gather_graph(batch: int, lookups: int, rows: int, width: int) -> Graph:
    """out = table[idx]: ``lookups`` rows of ``width`` floats per sample."""
    table = np.random.default_rng(0).standard_normal((rows, width)).astype(np.float32)
    g = helper.make_graph(
        [h.make_node("Gather", ["table", "idx"], ["out"], axis=0)], "gather",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [batch, lookups])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, lookups, width])],
        [numpy_helper.from_array(table, "table")],
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name="gather").graph


def test_gathered_rows_are_counted_per_part_at_burst_granularity(target: Target) -> None:
    # 8,192 x 12 FP16 rows of 24 bytes (one 32-byte burst each): a 192 KiB table, larger
    # than half the weight buffer, so rows come from DDR one by one
    g = gather_graph(4, 64, 8192, 12)
    assert target.ddr.burst_bytes == 32
    rows = 4 * 64
    even = ok(simulate(g, single(g, "DDR", [[0, 1], [2, 3]]), target))
    uneven = ok(simulate(g, single(g, "DDR", [[0, 1, 2], [3]]), target))
    for r in (even, uneven):
        assert r.weight_bytes_loaded == pytest.approx(rows * 32, rel=0.02)
        assert r.ddr_bytes >= rows * 32 + g.nbytes("idx")


def test_a_small_table_is_loaded_once_instead_of_its_rows(target: Target) -> None:
    g = gather_graph(64, 64, 64, 4)  # a 512-byte table, 4,096 rows of 8 bytes
    r = ok(simulate(g, single(g, "DDR", [[0], [1], [2], [3], [4], [5], [6], [7]]), target))
    take = next(op for op in g.ops if op.op_type == "take")
    assert g.nbytes(take.weights[0]) == 512
    assert r.weight_bytes_loaded == pytest.approx(g.weight_bytes)  # every constant once


# ---- finding 3: weight-tile re-reads are charged where the input is ---------------------------
@pytest.fixture(scope="module")
def wide() -> Graph:
    """out = x @ W with W 512 x 1024 (1 MiB FP16: eight 128 KiB weight tiles)."""
    nodes = [h.make_node("MatMul", ["x", "W"], ["out"])]
    return onnx_graph(nodes, {"x": [2, S, 512]}, {"out": [2, S, 1024]}, {"W": w(512, 1024)})


def test_rereads_of_a_streamed_input_cross_ddr_again(wide: Graph, target: Target) -> None:
    tiles = math.ceil(wide.nbytes(wide.ops[0].weights[0]) / (target.l1.weight_bytes / 2))
    assert tiles == 8
    r = ok(simulate(wide, single(wide, "DDR", [[0], [1]]), target))
    x, out, wb = wide.nbytes("x"), wide.nbytes(wide.outputs[0]), wide.nbytes(wide.ops[0].weights[0])
    # x streams from DDR once per weight tile; weights once per core pair (LLB broadcast)
    assert r.ddr_bytes == pytest.approx(tiles * x + wb + out, rel=0.01)


def test_rereads_of_an_input_in_l1_stay_on_chip(target: Target) -> None:
    nodes = [h.make_node("Relu", ["x"], ["y"]), h.make_node("MatMul", ["y", "W"], ["out"])]
    g = onnx_graph(nodes, {"x": [2, S, 512]}, {"out": [2, S, 1024]}, {"W": w(512, 1024)})
    s = make_schedule(g, [group("A", [0], "L1", [[0], [1]]), group("B", [1], "DDR", [[0], [1]])])
    r = ok(simulate(g, s, target))
    x, out, wb = g.nbytes("x"), g.nbytes(g.outputs[0]), g.nbytes(g.ops[1].weights[0])
    assert r.ddr_bytes == pytest.approx(x + wb + out, rel=0.01)


# ---- finding 4: cores of one part exchange halos and operands over the NoC ---------------------
def test_conv_halo_crosses_the_noc_when_a_sample_is_split(target: Target) -> None:
    nodes = [h.make_node("Conv", ["x", "W"], ["out"], pads=[1, 1, 1, 1])]
    g = onnx_graph(nodes, {"x": [2, 64, 56, 56]}, {"out": [2, 64, 56, 56]}, {"W": w(64, 64, 3, 3)})
    whole = ok(simulate(g, single(g, "L1", [[0], [1]]), target))
    split = ok(simulate(g, single(g, "L1", [[0, 1], [2, 3]]), target))
    assert whole.noc_bytes == 0
    halo = (3 - 1) * 56 * 64 * 2  # two input rows of every channel per cut, FP16
    assert split.noc_bytes == pytest.approx(2 * halo)  # one cut per sample, two samples
    four = ok(simulate(g, single(g, "L1", [[0, 1, 2, 3]]), target))  # 2 samples on 4 cores
    assert four.noc_bytes == pytest.approx(2 * halo)  # cuts inside samples: 4 - gcd(2, 4)


def test_attention_rows_split_across_cores_fetch_the_other_operand(target: Target) -> None:
    nodes = [h.make_node("MatMul", ["q", "k"], ["out"])]
    g = onnx_graph(nodes, {"q": [2, 4, 128, 64], "k": [2, 4, 64, 128]},
                   {"out": [2, 4, 128, 128]}, {})
    whole = ok(simulate(g, single(g, "L1", [[0], [1]]), target))
    split = ok(simulate(g, single(g, "L1", [[0, 1], [2, 3]]), target))
    assert whole.noc_bytes == 0
    k_bytes = 4 * 64 * 128 * 2  # one sample's K
    assert split.noc_bytes == pytest.approx(2 * k_bytes)


# ---- finding 5: depthwise convolutions are not padded to 32 columns -----------------------------
def test_depthwise_conv_runs_at_the_vector_rate(target: Target) -> None:
    nodes = [h.make_node("Conv", ["x", "W"], ["out"], pads=[1, 1, 1, 1], group=128)]
    g = onnx_graph(nodes, {"x": [8, 128, 56, 56]}, {"out": [8, 128, 56, 56]},
                   {"W": w(128, 1, 3, 3)})
    r = ok(simulate(g, single(g, "L1", list(range(8))), target))
    step = r.steps[0]
    per_core_macs = g.macs / 8
    assert step.vme_cycles == pytest.approx(per_core_macs / target.vector.lanes)
    assert r.busy_cycles["core0.mme"] == 0  # on the vector unit, not padded on the array


def test_mobilenet_v2_is_faster_than_resnet50(resnet50: Graph, target: Target) -> None:
    mnv2 = zoo_graph("mobilenet_v2", 16)
    assert resnet50.macs / mnv2.macs > 10
    fast = ok(simulate(mnv2, graph_schedule_level(mnv2, target, 3), target, timeline=False))
    slow = ok(simulate(resnet50, graph_schedule_level(resnet50, target, 3), target,
                       timeline=False))
    assert fast.chip_throughput_per_s > 2 * slow.chip_throughput_per_s


# ---- invariants --------------------------------------------------------------------------------
def test_each_invariant_names_its_violation(dense: Graph, target: Target) -> None:
    from sim._invariants import check_invariants

    r = ok(simulate(dense, single(dense, "DDR", [[0, 1], [2, 3]]), target))
    assert check_invariants(r, dense, target, 4) is None
    cases = {
        "latency>=bound": dataclasses.replace(r, latency_cycles=1.0),
        "ddr>=compulsory": dataclasses.replace(r, ddr_bytes=0.0),
        "busy<=100%": dataclasses.replace(
            r, busy_cycles={**r.busy_cycles, "ddr": 2 * r.latency_cycles}),
    }
    for name, bad in cases.items():
        err = check_invariants(bad, dense, target, 4)
        assert isinstance(err, SimError) and err.status == "invariant" and err.invariant == name
        assert name in err.message


def test_a_violation_becomes_an_invariant_error(dense: Graph, target: Target,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import sim._invariants as inv

    monkeypatch.setattr(inv, "lower_bound_cycles", lambda g, b, t: 1e15)
    err = simulate(dense, single(dense, "DDR", [[0, 1], [2, 3]]), target)
    assert isinstance(err, SimError) and err.status == "invariant"
    assert err.invariant == "latency>=bound" and err.to_json()["invariant"] == "latency>=bound"


def test_flop_rate_above_the_cores_used_is_a_violation(dense: Graph, target: Target) -> None:
    from sim._invariants import check_invariants

    r = ok(simulate(dense, single(dense, "DDR", [[0, 1], [2, 3]]), target))
    per_core = 2 * (target.matrix.macs_per_cycle + target.vector.lanes)
    too_fast = dataclasses.replace(r, latency_cycles=dense.flops / per_core / 2)
    err = check_invariants(too_fast, dense, target, 1)
    assert isinstance(err, SimError) and err.invariant in ("flops<=peak", "latency>=bound")
    # the bound may fire first; with the bound out of the way the FLOP rate does
    import sim._invariants as inv

    orig = inv.lower_bound_cycles
    try:
        inv.lower_bound_cycles = lambda g, b, t: 0.0  # type: ignore[assignment]
        err = check_invariants(too_fast, dense, target, 1)
    finally:
        inv.lower_bound_cycles = orig  # type: ignore[assignment]
    assert isinstance(err, SimError) and err.invariant == "flops<=peak"


def test_lower_bound_counts_grouped_convs_on_either_engine(target: Target) -> None:
    nodes = [h.make_node("Conv", ["x", "W"], ["out"], pads=[1, 1, 1, 1], group=128)]
    g = onnx_graph(nodes, {"x": [8, 128, 56, 56]}, {"out": [8, 128, 56, 56]},
                   {"W": w(128, 1, 3, 3)})
    cores = target.chip.cores_per_cluster
    both = (target.matrix.macs_per_cycle + target.vector.lanes) * cores
    launch = target.host.launch_overhead_us
    assert lower_bound(g, 8, target) >= target.cycles_to_us(g.macs / both) + launch - 1e-9


def test_tiny_target_variant_keeps_invariants(target: Target) -> None:
    tiny = zoo_graph("tiny_cnn", 8)
    small = target.replace(l1={"data_bytes": 256 * 1024}, chip={"cores_per_cluster": 4},
                           noc={"mesh_rows": 4, "mesh_cols": 2})
    for lvl in range(4):
        r = simulate(tiny, graph_schedule_level(tiny, small, lvl), small, timeline=False)
        assert r.status != "invariant", r


@settings(max_examples=300, deadline=None)
@given(kind=st.sampled_from([OpKind.MATRIX, OpKind.BATCHED_MATMUL]),
       amount=st.integers(1, 300), gemm_rows=st.integers(1, 200), n=st.integers(1, 300),
       k=st.integers(1, 5000), batch=st.integers(1, 32), data=st.data())
def test_no_split_of_a_matrix_op_beats_its_array_floor(
        kind: OpKind, amount: int, gemm_rows: int, n: int, k: int, batch: int,
        data: st.DataObject) -> None:
    """However the rows (GEMMs) are cut into pieces, as the engine prices each piece, the
    pieces cost at least ``array_cycles`` (the lower bound's matrix term)."""
    mat = Target.default().matrix
    d = OpShape(kind, True, float(amount), 1, gemm_rows if kind == OpKind.BATCHED_MATMUL else 1,
                n, k)
    total = amount * batch
    cuts = sorted(data.draw(st.lists(st.integers(1, max(total - 1, 1)), max_size=12)))
    edges = [0, *[c for c in cuts if 0 < c < total], total]
    pieces = [b - a for a, b in itertools.pairwise(edges) if b > a]
    spent = 0.0
    for rows in pieces:
        mt = matrix_tiles(d, rows, mat)
        spent += mt.padded_cycles + mt.tiles * mat.instr_overhead_cycles
    assert spent >= array_cycles(d, batch, mat) - 1e-6


def test_lower_bound_counts_whole_granules_and_one_instruction_each(target: Target) -> None:
    """1x1 convolutions over 64 channels spend 96 of every 160 array cycles on the
    instruction (granule fill and drain): the bound says so, above the MAC roofline."""
    depth = 48
    names = ["x", *[f"a{i}" for i in range(depth - 1)], "out"]
    nodes = [h.make_node("Conv", [names[i], f"W{i}"], [names[i + 1]]) for i in range(depth)]
    g = onnx_graph(nodes, {"x": [8, 64, 28, 28]}, {"out": [8, 64, 28, 28]},
                   {f"W{i}": w(64, 64, 1, 1) for i in range(depth)})
    mat, cores = target.matrix, target.chip.cores_per_cluster
    rows, n, k = 8 * 28 * 28, 64, 64
    tiles = math.ceil(rows / mat.granule_m) * math.ceil(n / mat.granule_n)
    floor = depth * tiles * (mat.granule_m * mat.granule_n * k / mat.macs_per_cycle
                             + mat.instr_overhead_cycles) / cores
    launch = target.host.launch_overhead_us
    assert lower_bound(g, 8, target) == pytest.approx(target.cycles_to_us(floor) + launch)
    assert floor > 2 * g.macs / (mat.macs_per_cycle * cores)
    for level in range(4):
        r = ok(simulate(g, graph_schedule_level(g, target, level), target))
        assert r.latency_us >= r.lower_bound_us


def test_compulsory_ddr_bytes_count_a_shared_weight_once(target: Target) -> None:
    """Two matmuls reading W and its transpose (one storage, like a tied embedding's
    head): the bound counts W's bytes once; the simulator loads it for each and stays
    above the bound."""
    from compiler.bound import compulsory_ddr_bytes

    nodes = [h.make_node("MatMul", ["x", "W"], ["a"]),
             h.make_node("Transpose", ["W"], ["Wt"], perm=[1, 0]),
             h.make_node("MatMul", ["a", "Wt"], ["out"])]
    g = onnx_graph(nodes, {"x": [2, S, 512]}, {"out": [2, S, 512]}, {"W": w(512, 512)})
    weights = [t for t in g.tensors.values() if t.kind == "weight"]
    assert g.weight_bytes == 512 * 512 * 2 < sum(t.nbytes() for t in weights)
    act = 2 * S * 512 * 2
    assert compulsory_ddr_bytes(g, 2, target) == pytest.approx(512 * 512 * 2 + 2 * act)
    r = ok(simulate(g, graph_schedule_level(g, target, 3), target))
    assert r.ddr_bytes >= compulsory_ddr_bytes(g, 2, target)
