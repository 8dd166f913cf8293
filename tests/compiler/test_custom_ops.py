"""User NPU operators (compiler.ops): registration checks, import, pricing, compile and run.

The worked examples in ``examples/custom_ops`` are the plug-ins under test.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tvm import te

from compiler import Executor, GroupSpec, Placement, Target, load_onnx, make_schedule, zoo
from compiler.auto import graph_schedule_level
from compiler.errors import GraphtuneError, ModelError, ScheduleError
from compiler.ops import (
    CostHints,
    Input,
    OpError,
    OpInfo,
    Output,
    Prototype,
    custom_op,
    custom_ops,
    lane_pad,
    load_plugins,
    register_op,
    unregister_op,
)
from compiler.opshape import op_shapes
from compiler.optable import NPU_OPS
from sim import SimError, lower_bound, simulate
from sim._model import group_cost

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "custom_ops"
SCRIPT = Path(sys.executable).parent / "graphtune"
BATCH, D = 8, 192


def _load(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(f"h23_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


models = _load("models")


@pytest.fixture(autouse=True)
def _clean_registry() -> Iterator[None]:
    """Every test starts and ends with the registry it found (ops and patterns)."""
    before = set(custom_ops())
    yield
    for name in set(custom_ops()) - before:
        unregister_op(name)


@pytest.fixture()
def rms() -> Any:
    module = _load("rmsnorm")  # registers RMSNorm at import
    assert custom_op("RMSNorm") is not None
    return module


@pytest.fixture()
def swish() -> Any:
    module = _load("swish")
    assert custom_op("Swish") is not None
    return module


def _save(tmp_path: Path, proto: onnx.ModelProto, name: str) -> Path:
    path = tmp_path / f"{name}.onnx"
    onnx.save(proto, str(path))
    return path


def _x(batch: int = BATCH, d: int = D) -> np.ndarray:
    return np.random.default_rng(3).standard_normal((batch, d)).astype(np.float32)


def _error_lines(stderr: str) -> list[str]:
    """stderr without the progress lines a slow (loaded) machine adds: ``graphtune: ... (5 s)``."""
    lines = stderr.strip().splitlines()
    progress = re.compile(r"graphtune: (?!error:).* \(\d+ s\)$")
    assert "Traceback" not in stderr
    return [ln for ln in lines if not progress.fullmatch(ln)]


def _same(shapes: list[tuple[int, ...]], dtypes: list[str], attrs: dict[str, Any]) -> Any:
    return shapes[0], dtypes[0]


def _relu(x: te.Tensor) -> te.Tensor:
    return te.compute(x.shape, lambda *i: te.max(x(*i), te.const(0, x.dtype)), name="r")


# ------------------------------------------------------------------ registration


def _proto(**kw: Any) -> Prototype:
    args: dict[str, Any] = {"inputs": (Input("x"),), "output": Output("y"), "infer": _same,
                            "example": ((2, 64),)}
    args.update(kw)
    return Prototype(**args)


@pytest.mark.parametrize("case,needle", [
    ("matrix", "unit 'matrix' refused"),
    ("rank", "shape inference returned rank 1"),
    ("compute", "compute's output shape [2, 32] disagrees with the prototype's inference [2, 64]"),
    ("builtin", "clashes with the built-in NPU op 'sigmoid'"),
    ("dtype", "info dtypes"),
    ("schedule", "schedule raised"),
    ("domain", "custom domain"),
])
def test_bad_registrations_are_one_line_and_register_nothing(case: str, needle: str) -> None:
    name = "sigmoid" if case == "builtin" else "BadOp"
    proto = _proto()
    info = OpInfo()
    compute: Any = _relu
    schedule: Any = None
    framework: Any = {"onnx": ("com.example", "BadOp")}
    if case == "matrix":
        info = OpInfo(unit="matrix")
    elif case == "rank":
        proto = _proto(output=Output("y", rank=2), infer=lambda s, d, a: ((s[0][0] * 64,), d[0]))
    elif case == "compute":
        def compute(x: te.Tensor) -> te.Tensor:
            return te.compute((2, 32), lambda i, j: x[i, j], name="r")
    elif case == "dtype":
        info = OpInfo(dtypes=("float32", "int8"))
    elif case == "schedule":
        def schedule(sch: Any) -> None:
            sch.get_sblock("no_such_block")
    elif case == "domain":
        framework = {"onnx": ("", "Relu")}
    with pytest.raises(OpError) as err:
        register_op(name, proto, info, compute, schedule, framework=framework)
    message = str(err.value)
    assert needle in message and "\n" not in message and name in message
    assert custom_op("BadOp") is None and "BadOp" not in NPU_OPS
    assert NPU_OPS["sigmoid"].unit == "special"  # the built-in is untouched
    from compiler.ops import onnx_op

    assert onnx_op("com.example", "BadOp") is None


def test_matrix_refusal_gives_the_guides_reason() -> None:
    with pytest.raises(OpError, match="vendor delivers them"):
        register_op("Cube", _proto(), OpInfo(unit="matrix"), _relu)


def test_duplicate_and_checked_attributes(rms: Any) -> None:
    with pytest.raises(OpError, match="already registered"):
        rms.register()
    op = custom_op("RMSNorm")
    assert op is not None
    assert op.check_attrs({}) == {"epsilon": 1e-6}
    with pytest.raises(OpError, match=r"op RMSNorm: attribute 'epsilon' = 2.0 is outside"):
        op.check_attrs({"epsilon": 2.0})
    with pytest.raises(OpError, match="unknown attribute 'axis'"):
        op.check_attrs({"axis": 1})
    with pytest.raises(OpError, match="input 'x' has rank 4"):
        op.check_inputs([(1, 2, 3, 4), (4,)], ["float32", "float32"])
    with pytest.raises(OpError, match="input 'x' is int32"):
        op.check_inputs([(2, 4), (4,)], ["int32", "float32"])


def test_use_time_errors_name_op_and_argument(rms: Any, tmp_path: Path) -> None:
    bad_eps = models.rmsnorm_mlp(BATCH, D)
    for attr in bad_eps.graph.node[1].attribute:
        attr.f = 3.0
    with pytest.raises(GraphtuneError) as err:
        _ = load_onnx(_save(tmp_path, bad_eps, "eps")).graph
    assert "op RMSNorm: attribute 'epsilon' = 3.0 is outside" in str(err.value)
    bad_gamma = models.rmsnorm_mlp(BATCH, D)
    bad_gamma.graph.node[1].input[1] = "w1"  # a [D, D] matrix where gamma is a vector
    with pytest.raises(GraphtuneError, match="input 'gamma' has rank 2"):
        _ = load_onnx(_save(tmp_path, bad_gamma, "gamma")).graph


# ------------------------------------------------------------------ import, partition


def test_without_plugin_the_unknown_op_is_one_line(tmp_path: Path) -> None:
    path = _save(tmp_path, models.rmsnorm_mlp(BATCH, D), "rms")
    with pytest.raises(ModelError, match=r"unknown ONNX op\(s\) com.example:RMSNorm"):
        load_onnx(path)
    proc = subprocess.run([str(SCRIPT), "info", str(path)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 2
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and "com.example:RMSNorm" in lines[0] and "--plugin" in lines[0]


def test_rmsnorm_is_one_npu_subfunction_and_runs(rms: Any, tmp_path: Path) -> None:
    before = load_onnx(_save(tmp_path, models.rmsnorm_mlp(BATCH, D, custom=False), "before"))
    assert len(before.graph.npu_subfunctions()) == 2  # Pow is not on the NPU
    model = load_onnx(_save(tmp_path, models.rmsnorm_mlp(BATCH, D), "after"))
    g = model.graph
    assert [op.op_type for op in g.ops] == ["matmul", "RMSNorm", "matmul"]
    assert g.npu_subfunctions() == [(0, 1, 2)]
    op = g.ops[1]
    assert op.on_npu and op.batch_separable and op.unit == "vector"
    # TE body: ss = BATCH x D (reduction), y = BATCH x D; vector length 64 over D = 192: no padding
    assert op.flops == 2 * BATCH * D and op.attr("graphtune.lane_pad") == 1.0
    assert op.attr("epsilon") == pytest.approx(models.EPSILON)
    out = tmp_path / "rms.stcobj"
    model.compile(out, schedule=graph_schedule_level(g, Target.default(), 3))
    (y,) = Executor.load(out).run({"x": _x()})
    np.testing.assert_allclose(y, models.rmsnorm_reference(_x(), BATCH, D), rtol=2e-3, atol=2e-3)


def test_default_auto_schedule_compiles_and_is_priced(rms: Any, tmp_path: Path) -> None:
    op = custom_op("RMSNorm")
    assert op is not None
    register_op("RMSNormAuto", op.prototype, op.info, rms.rmsnorm_compute,
                framework={"onnx": ("com.example", "RMSNormAuto")})
    model = load_onnx(_save(tmp_path, models.rmsnorm_mlp(BATCH, D, op_type="RMSNormAuto"), "a"))
    g = model.graph
    # y: D = 192 split by 64 and vectorised (no padding); ss: its reduction loop (192) is the
    # lane group, 3 whole instructions: no padding either
    assert g.ops[1].op_type == "RMSNormAuto" and g.ops[1].attr("graphtune.lane_pad") == 1.0
    out = tmp_path / "auto.stcobj"
    model.compile(out, schedule=graph_schedule_level(g, Target.default(), 3))
    ex = Executor.load(out)
    assert "T.vectorized(64)" in ex.ir
    (y,) = ex.run({"x": _x()})
    np.testing.assert_allclose(y, models.rmsnorm_reference(_x(), BATCH, D), rtol=2e-3, atol=2e-3)


def test_batch_split_group_rebuilds_the_op_per_chunk(rms: Any, tmp_path: Path) -> None:
    model = load_onnx(_save(tmp_path, models.rmsnorm_mlp(BATCH, D), "split"))
    g = model.graph
    chunk = Placement.make("DDR", [[0, 1]])
    schedule = make_schedule(g, [GroupSpec("g0", (0, 1, 2), 4, (chunk,) * 4)])
    assert schedule.groups[0].split == 4
    out = tmp_path / "split.stcobj"
    model.compile(out, schedule=schedule)
    ex = Executor.load(out)
    assert "custom_RMSNorm" in ex.ir and "(2, 192)" in ex.ir  # the PrimFunc at chunk shape
    (y,) = ex.run({"x": _x()})
    np.testing.assert_allclose(y, models.rmsnorm_reference(_x(), BATCH, D), rtol=2e-3, atol=2e-3)


# ------------------------------------------------------------------ pricing


def _swish_graph(tmp_path: Path, swish: Any, vl: int, batch: int = BATCH, d: int = D) -> Any:
    name = f"SwishV{vl}"
    if custom_op(name) is None:
        swish.register(name, vector_length=vl, pattern=False)
    proto = models.swish_mlp(batch, d, op_type=name)
    return load_onnx(_save(tmp_path, proto, f"swish{vl}_{batch}_{d}")).graph


def test_lane_padding_48_costs_four_thirds_of_64(swish: Any, tmp_path: Path) -> None:
    target = Target.default()
    g48, g64 = _swish_graph(tmp_path, swish, 48), _swish_graph(tmp_path, swish, 64)
    assert g48.ops[1].flops == g64.ops[1].flops == BATCH * D  # the same TE body
    s48, s64 = op_shapes(g48)[1], op_shapes(g64)[1]
    assert s48.amount / s64.amount == pytest.approx(4 / 3)
    c48 = group_cost(g48, (1,), BATCH, 1, target)
    c64 = group_cost(g64, (1,), BATCH, 1, target)
    assert c48.vme_cycles / c64.vme_cycles == pytest.approx(4 / 3)
    sched = graph_schedule_level(g64, target, 3)  # the same plan for both
    r64 = simulate(g64, sched, target)
    r48 = simulate(g48, dataclasses.replace(sched, workload_key=g48.workload_key), target)
    assert r48.status == r64.status == "ok"
    assert r48.latency_us > r64.latency_us  # type: ignore[union-attr]
    assert lane_pad(48) == pytest.approx(4 / 3) and lane_pad(128) == 1.0
    assert lane_pad(100) == pytest.approx(1.28)


@given(v=st.integers(1, 4096), lanes=st.sampled_from([16, 32, 64, 128]))
def test_lane_padding_invariant(v: int, lanes: int) -> None:
    """Padding never makes work cheaper; whole instructions: padded lanes are a multiple."""
    pad = lane_pad(v, lanes)
    assert pad >= 1.0
    assert round(pad * v) % lanes == 0 and pad * v < v + lanes
    assert (pad == 1.0) == (v % lanes == 0)


def test_cost_hints_override_the_count_with_a_reason(swish: Any, tmp_path: Path) -> None:
    with pytest.raises(OpError, match="cost_hints needs a reason"):
        register_op("Hinted", _proto(), OpInfo(), _relu, cost_hints=CostHints(4.0, " "))
    register_op("Hinted", _proto(), OpInfo(), _relu,
                framework={"onnx": ("com.example", "Hinted")},
                cost_hints=CostHints(4.0, "the relu is a compare and a select"))
    g = load_onnx(_save(tmp_path, models.swish_mlp(BATCH, D, op_type="Hinted"), "hint")).graph
    assert g.ops[1].op_type == "Hinted" and g.ops[1].flops == 4 * BATCH * D


@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(vl=st.sampled_from([8, 16, 24, 32, 48, 64, 96, 128]), level=st.integers(0, 3),
       batch=st.sampled_from([2, 8, 16]), seed=st.integers(0, 2**16))
def test_bound_stays_below_every_schedule(swish: Any, tmp_path: Path, vl: int, level: int,
                                          batch: int, seed: int) -> None:
    """The lower bound is below the latency of levels and random schedules, whatever the lanes."""
    from tests.sim.random_schedules import random_schedule

    target = Target.default()
    g = _swish_graph(tmp_path, swish, vl, batch=batch, d=D)
    bound = lower_bound(g, batch, target)
    schedules = [graph_schedule_level(g, target, level)]
    try:
        schedules.append(random_schedule(g, random.Random(seed), target.chip.cores_per_cluster))
    except ScheduleError:
        pass
    for schedule in schedules:
        result = simulate(g, schedule, target)
        if isinstance(result, SimError):
            # a random schedule may not fit; the invariant check (latency >= bound) never fires
            assert schedule is not schedules[0] and result.status in ("invalid", "capacity"), \
                result
            continue
        assert bound <= result.latency_us * (1 + 1e-9)


# ------------------------------------------------------------------ patterns


def _effnet(swish: Any, tmp_path: Path) -> tuple[onnx.ModelProto, Any, int, int]:
    proto = zoo.build("efficientnet_b0", batch=2, image_size=32, num_classes=10)
    nodes = proto.graph.node
    sig_in = {n.output[0]: n.input[0] for n in nodes if n.op_type == "Sigmoid"}
    chains = sum(1 for n in nodes if n.op_type == "Mul"
                 and any(sig_in.get(t) in n.input for t in n.input))
    gates = sum(1 for n in nodes if n.op_type == "Sigmoid") - chains
    return proto, load_onnx(_save(tmp_path, proto, "effnet")), chains, gates


def test_swish_pattern_fires_on_efficientnet(swish: Any, tmp_path: Path) -> None:
    _, model, chains, gates = _effnet(swish, tmp_path)
    assert chains == 49 and gates == 16  # 33 convs' and 16 SE Swish, 16 SE gates
    g = model.graph
    counts = g.op_counts()
    assert counts["Swish"] == chains and counts.get("sigmoid", 0) == gates
    assert all(op.on_npu for op in g.ops if op.op_type == "Swish")
    assert len(g.npu_subfunctions()) == 1


@pytest.mark.slow
def test_swish_pattern_on_efficientnet_matches_onnxruntime(swish: Any, tmp_path: Path) -> None:
    ort = pytest.importorskip("onnxruntime")
    proto, model, _, _ = _effnet(swish, tmp_path)
    g = model.graph
    out = tmp_path / "effnet.stcobj"
    model.compile(out, schedule=graph_schedule_level(g, Target.default(), 3))
    feeds = zoo.random_inputs(proto, seed=1)
    (y,) = Executor.load(out).run(feeds)
    (expected,) = ort.InferenceSession(proto.SerializeToString(),
                                       providers=["CPUExecutionProvider"]).run(None, feeds)
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-5)


def test_pattern_leaves_a_shared_sigmoid_alone(swish: Any, tmp_path: Path) -> None:
    proto = models.swish_mlp(BATCH, D, custom=False)
    # the Sigmoid's value is also read by an Add: replacing the chain would lose it
    mul = next(n for n in proto.graph.node if n.op_type == "Mul")
    mul.output[0] = "s0"
    add = onnx.helper.make_node("Add", ["s0", "sg"], ["s"], name="add")
    proto.graph.node.insert(list(proto.graph.node).index(mul) + 1, add)
    g = load_onnx(_save(tmp_path, proto, "shared")).graph
    assert "Swish" not in g.op_counts() and g.op_counts()["sigmoid"] == 1


# ------------------------------------------------------------------ plug-ins


def test_plugin_that_raises_is_one_line_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "badplugin.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(OpError, match=r"plug-in module .*badplugin.py failed: RuntimeError: boom"):
        load_plugins([str(bad)], entry_points=False)
    exits = tmp_path / "exits.py"
    exits.write_text("import sys\nsys.exit(3)\n")
    proc = subprocess.run([str(SCRIPT), "--plugin", str(exits), "zoo", "--list"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    lines = _error_lines(proc.stderr)
    assert len(lines) == 1 and "exits.py" in lines[0] and "sys.exit(3)" in lines[0], lines


def test_entry_point_group_registers_ops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "h23_ep_ops.py").write_text(
        "from compiler.ops import Input, OpInfo, Output, Prototype, register_op\n"
        "from tvm import te\n"
        "def register():\n"
        "    register_op('EpRelu', Prototype((Input('x'),), Output('y'), "
        "lambda s, d, a: (s[0], d[0])), OpInfo(),\n"
        "                lambda x: te.compute(x.shape, lambda *i: x(*i), name='r'))\n")
    dist = tmp_path / "h23_ep-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: h23-ep\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[graphtune.ops]\nep = h23_ep_ops:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    load_plugins([], entry_points=True)
    assert custom_op("EpRelu") is not None


def test_a_ray_worker_loads_the_plugins_named_in_the_environment() -> None:
    """A Ray worker of a --plugin run: its actor body loads GRAPHTUNE_PLUGINS when it starts."""
    code = ("from compiler.optable import op_spec; print(op_spec('Swish').unit); "
            "from autotune.running._ray_pool import _Worker; "
            "from autotune.measure._measurer import SimMeasurer; from compiler.target import Target; "
            "_Worker(Target.default(), SimMeasurer()); "
            "s = op_spec('Swish'); print(s.unit, s.scopes)")
    env = {**os.environ, "GRAPHTUNE_PLUGINS": str(EXAMPLES / "swish.py")}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    before, after = proc.stdout.split("\n")[:2]
    assert before == "vector"  # unknown until the plug-ins load (a CPU op's costing spec)
    assert after == "special ('DDR', 'LLB', 'L1')"


@pytest.mark.slow
def test_cli_tune_compile_run_with_plugin(tmp_path: Path) -> None:
    """Acceptance: --plugin on tune (100 trials), compile --log and run; equal to NumPy."""
    model = _save(tmp_path, models.rmsnorm_mlp(BATCH, D), "rms")
    plugin = str(EXAMPLES / "rmsnorm.py")
    log = tmp_path / "t.jsonl"

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([str(SCRIPT), "--plugin", plugin, *args], capture_output=True,
                              text=True, timeout=600, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return proc

    cli("tune", str(model), "--trials", "100", "--log", str(log), "--workers", "1")
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert len(records) >= 100
    art = tmp_path / "rms.stcobj"
    cli("compile", str(model), "--log", str(log), "-o", str(art), "--strict")
    np.save(tmp_path / "x.npy", _x())
    cli("run", str(art), "--input", f"x={tmp_path / 'x.npy'}", "-o", str(tmp_path / "y.npz"))
    y = np.load(tmp_path / "y.npz")["y"]
    np.testing.assert_allclose(y, models.rmsnorm_reference(_x(), BATCH, D), rtol=2e-3, atol=2e-3)


def test_examples_before_after() -> None:
    ba = _load("before_after")
    rows = ba.run()
    try:
        assert rows["RMSNorm before"]["subfunctions"] == 2
        assert rows["RMSNorm after"]["subfunctions"] == 1
        assert rows["Swish pattern"]["cpu_ops"] == []
        for r in rows.values():
            assert r["max_abs_error"] < 2e-3 and r["latency_us"] > 0
    finally:
        for name in ("RMSNorm", "Swish"):
            unregister_op(name)
