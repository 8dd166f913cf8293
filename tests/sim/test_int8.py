"""INT8 pricing (issue 27): 8-bit tensors at one byte, INT8 ops at the units' INT8 rates.

The graphs are QDQ ONNX models written by hand, as another tool would export
them (QuantizeLinear/DequantizeLinear around each convolution, INT8 weights with
per-channel scales), beside the same model in FP32.
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from compiler.auto import graph_schedule_level
from compiler.errors import ScheduleError
from compiler.graph import Graph
from compiler.model import Model
from compiler.opshape import OpKind, OpShape, array_cycles, matrix_tiles, op_shapes, unit_rates
from compiler.target import Target
from sim import SimError, SimResult, lower_bound, simulate
from tests.sim.random_schedules import mutate, random_schedule

SHAPE = [8, 64, 14, 14]


def _model(qdq: bool) -> Graph:
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    x = "x"

    def q(t: str, scale: float) -> str:
        if not qdq:
            return t
        s, z = f"{t}_s", f"{t}_z"
        inits.extend([numpy_helper.from_array(np.array(scale, np.float32), s),
                      numpy_helper.from_array(np.array(0, np.int8), z)])
        nodes.append(helper.make_node("QuantizeLinear", [t, s, z], [f"{t}_q"]))
        nodes.append(helper.make_node("DequantizeLinear", [f"{t}_q", s, z], [f"{t}_dq"]))
        return f"{t}_dq"

    for i in range(3):
        x = q(x, 2.0 ** -4)
        wname = f"w{i}"
        if qdq:
            inits += [numpy_helper.from_array(rng.integers(-127, 128, (64, 64, 3, 3)).astype(np.int8),
                                              f"{wname}_q"),
                      numpy_helper.from_array(np.full(64, 2.0 ** -9, np.float32), f"{wname}_s"),
                      numpy_helper.from_array(np.zeros(64, np.int8), f"{wname}_z")]
            nodes.append(helper.make_node("DequantizeLinear", [f"{wname}_q", f"{wname}_s", f"{wname}_z"],
                                          [wname], axis=0))
        else:
            inits.append(numpy_helper.from_array(rng.normal(0, 0.02, (64, 64, 3, 3)).astype(np.float32),
                                                 wname))
        nodes.append(helper.make_node("Conv", [x, wname], [f"c{i}"], pads=[1, 1, 1, 1]))
        c = q(f"c{i}", 2.0 ** -3)
        nodes.append(helper.make_node("Relu", [c], [f"r{i}"]))
        x = f"r{i}"
    nodes.append(helper.make_node("Identity", [x], ["out"]))
    g = helper.make_graph(nodes, "qdq" if qdq else "fp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, SHAPE)], inits)
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name=g.name).graph


@pytest.fixture(scope="module")
def int8() -> Graph:
    return _model(True)


@pytest.fixture(scope="module")
def fp() -> Graph:
    return _model(False)


def _rate1(t: Target) -> Target:
    return t.replace(matrix={"int8_rate": 1.0}, vector={"int8_rate": 1.0})


def test_a_qdq_export_imports_as_int8_convolutions(int8: Graph, fp: Graph) -> None:
    convs = [op for op in int8.ops if op.op_type == "nn.conv2d"]
    assert len(convs) == 3
    for op in convs:
        assert int8.tensors[op.inputs[0]].dtype == "int8"
        assert int8.tensors[op.weights[0]].dtype == "int8"
        assert int8.nbytes(op.weights[0]) == 64 * 64 * 9  # one byte per weight
    assert int8.weight_bytes < fp.weight_bytes / 1.9
    shapes = op_shapes(int8)
    assert [d.int8 for op, d in zip(int8.ops, shapes) if op.op_type == "nn.conv2d"] == [True] * 3
    assert not any(d.int8 for d in op_shapes(fp))
    # each pair became the INT8 output of the op before it (a convolution's results are
    # requantized by the vector unit); after the model input it is one quantize op
    kinds = [op.op_type for op in int8.ops]
    assert kinds == ["quantize"] + [op.op_type for op in fp.ops]
    for op, d in zip(int8.ops, shapes):
        if op.op_type == "nn.conv2d":
            assert int8.tensors[op.output].dtype == "int8"
            assert d.requant_flops == 2.0 * int8.tensors[op.output].elements / 8
    relus = [op for op in int8.ops if op.op_type == "nn.relu"]
    assert [int8.tensors[op.output].dtype for op in relus] == ["int8", "int8", "float32"]
    assert int8.workload_key != fp.workload_key


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 5000), n=st.integers(1, 700), k=st.integers(1, 5000),
       rate=st.sampled_from([1.0, 2.0, 4.0]))
def test_int8_matrix_work_runs_at_the_int8_rate_in_the_same_granules(
        rows: int, n: int, k: int, rate: float) -> None:
    t = Target.default().replace(matrix={"int8_rate": rate})
    fp16 = OpShape(OpKind.MATRIX, True, float(rows), 1, 1, n, k)
    i8 = OpShape(OpKind.MATRIX, True, float(rows), 1, 1, n, k, int8=True)
    mat, lanes = unit_rates(i8, t)
    assert unit_rates(fp16, t) == (t.matrix, float(t.vector.lanes))
    assert lanes == t.vector.lanes * t.vector.int8_rate
    a, b = matrix_tiles(fp16, rows, t.matrix), matrix_tiles(i8, rows, mat)
    assert a.tiles == b.tiles  # same 64x32 granules, one instruction each
    assert b.padded_cycles == pytest.approx(a.padded_cycles / rate)
    assert b.useful_cycles == pytest.approx(a.useful_cycles / rate)
    ovh = t.matrix.instr_overhead_cycles
    assert array_cycles(i8, 1, mat) == pytest.approx(b.padded_cycles + b.tiles * ovh)


def _busy(r: SimResult, engine: str) -> float:
    return sum(v for k, v in r.busy_cycles.items() if k.endswith(engine))


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_random_int8_schedules_keep_invariants_and_the_rate_only_speeds_the_matrix_unit(
        int8: Graph, rng: random.Random) -> None:
    t = Target.default()
    slow = _rate1(t)
    try:
        s = (random_schedule(int8, rng, 8) if rng.random() < 0.5
             else mutate(int8, graph_schedule_level(int8, t, rng.randint(0, 3)), rng, 8))
    except ScheduleError:
        return
    fast_r, slow_r = simulate(int8, s, t, timeline=False), simulate(int8, s, slow, timeline=False)
    for r in (fast_r, slow_r):
        assert isinstance(r, SimResult | SimError)
        if isinstance(r, SimError):
            assert r.status in ("invalid", "capacity"), r.message
    if isinstance(fast_r, SimResult) and isinstance(slow_r, SimResult):
        assert fast_r.latency_over_bound >= 1.0 and slow_r.latency_over_bound >= 1.0
        m_fast, m_slow = _busy(fast_r, ".mme"), _busy(slow_r, ".mme")
        assert m_slow / 2 - 1e-6 <= m_fast <= m_slow + 1e-6
        assert _busy(fast_r, ".vme") <= _busy(slow_r, ".vme") + 1e-6
        assert fast_r.ddr_bytes == pytest.approx(slow_r.ddr_bytes)  # rates move no bytes


def test_int8_o3_is_faster_moves_fewer_bytes_and_has_a_lower_bound(int8: Graph, fp: Graph) -> None:
    t = Target.default()
    a = simulate(int8, graph_schedule_level(int8, t, 3), t, timeline=False)
    b = simulate(fp, graph_schedule_level(fp, t, 3), t, timeline=False)
    assert isinstance(a, SimResult) and isinstance(b, SimResult)
    assert a.latency_us < b.latency_us
    assert lower_bound(int8, 8, t) < lower_bound(fp, 8, t)
    compute_bound = t.replace(host={"launch_overhead_us": 0.0}, ddr={"bytes_per_cycle": 1e6})
    assert lower_bound(int8, 8, _rate1(compute_bound)) > 1.5 * lower_bound(int8, 8, compute_bound)
    o0a = simulate(int8, graph_schedule_level(int8, t, 0), t, timeline=False)
    o0b = simulate(fp, graph_schedule_level(fp, t, 0), t, timeline=False)
    assert isinstance(o0a, SimResult) and isinstance(o0b, SimResult)
    # every result in DDR: INT8 tensors at one byte; the FP input (read twice: the input
    # quantize) and the FP output keep two
    assert o0a.ddr_bytes < 0.7 * o0b.ddr_bytes


@pytest.mark.slow
def test_resnet50_int8_o3_is_1_4_to_2_times_fp16_o3() -> None:
    """Issue 27's acceptance on the simulator (``bench/int8_resnet50.py`` reports the figures).

    Calibrated on 4 zoo images at batch 2 (the scales' values do not change pricing),
    simulated at batch 64. The matrix unit bounds both; INT8 stays under 2x because
    each 64x32 instruction keeps its fixed overhead and the vector unit requantizes.
    """
    from compiler import zoo
    from compiler.quant import QuantConfig, quantize

    pytest.importorskip("onnxruntime")
    proto = zoo.build("resnet50", batch=2, weights="random")
    feeds = [zoo.random_inputs(proto, seed=s) for s in range(2)]
    calib = {k: np.concatenate([f[k] for f in feeds]) for k in feeds[0]}
    qdq = quantize(proto, QuantConfig.from_dict({"calibration_set": calib})).model
    t = Target.default()
    tput = {}
    for name, p in (("fp", proto), ("int8", qdq)):
        m = Model(p, name=name)
        m.set_batch(64)
        r = simulate(m.graph, graph_schedule_level(m.graph, t, 3), t, timeline=False)
        assert isinstance(r, SimResult), r
        assert r.busy_cycles["core0.mme"] > 0.8 * r.latency_cycles  # matrix-bound
        tput[name] = r.throughput_per_s
    assert 1.4 <= tput["int8"] / tput["fp"] <= 2.0
