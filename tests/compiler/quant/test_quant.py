"""INT8 quantization (issue 27): calibration, power-of-two scales, presets, bad sets, accuracy.

The classifier is the small CNN of ``_cnn.py``, trained here on a synthetic,
separable data set (no downloads).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner
from onnx import TensorProto, helper, numpy_helper

from autotune.cli import main
from compiler.executor import Executor
from compiler.model import Model
from compiler.quant import QuantConfig, QuantError, is_power2, power2, quantize, quantize_model
from tests.compiler.quant._cnn import dataset, trained_cnn

ort = pytest.importorskip("onnxruntime")


@pytest.fixture(scope="module")
def cnn() -> onnx.ModelProto:
    return trained_cnn(batch=16)


@pytest.fixture(scope="module")
def calib() -> np.ndarray:
    return dataset(128, seed=3)[0]


def _scales(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return {n.input[1]: inits[n.input[1]] for n in model.graph.node
            if n.op_type in ("QuantizeLinear", "DequantizeLinear")}


def _ort_reference(model: onnx.ModelProto, feed: dict[str, np.ndarray]) -> np.ndarray:
    # The QDQ model's own semantics: onnxruntime's graph optimisations would fuse the
    # pairs into its integer kernels (QLinearGlobalAveragePool, QGemm), which round
    # intermediate results in their own way.
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, feed)[0]


def test_power2_rounds_up_to_exact_powers() -> None:
    s = np.array([0.3, 0.25, 1.0, 3.0, 1e-6], np.float32)
    p = power2(s)
    assert is_power2(p) and np.all(p >= s) and np.all(p < 2 * s)
    assert p.tolist() == [0.5, 0.25, 1.0, 4.0, 2.0 ** -19]
    assert not is_power2(np.array([0.3], np.float32))


def test_int8_cnn_agrees_with_fp32_and_its_artifact_matches_onnxruntime(
        cnn: onnx.ModelProto, calib: np.ndarray, tmp_path: Path) -> None:
    cfg = {"calibration_set": [{"input": calib[:64]}, {"input": calib[64:]}]}
    qmodel, report = quantize_model(Model(cnn, "cnn"), cfg)
    assert report.held_out and report.samples == 32
    assert report.top1_agreement is not None and report.top1_agreement >= 0.99
    assert all(is_power2(s) for s in _scales(qmodel.proto).values())
    # the Graph view computes the convolutions and the classifier in INT8
    from compiler.opshape import op_shapes

    g = qmodel.graph
    matrix = [(op, d) for op, d in zip(g.ops, op_shapes(g)) if d.kind.is_matrix]
    assert len(matrix) == 3 and all(d.int8 for _, d in matrix)
    assert all(g.tensors[op.weights[0]].dtype == "int8" for op, _ in matrix)
    fp = Model(cnn, "cnn").graph
    assert g.workload_key != fp.workload_key
    assert g.nbytes(g.inputs[0]) == fp.nbytes(fp.inputs[0])  # the FP32 input stays FP
    # top-1 agreement on fresh samples, and the artifact against onnxruntime
    out = tmp_path / "cnn.int8.stcobj"
    used = Model(cnn, "cnn").compile(out, quant_config=cfg)
    assert used.batch == 16
    ex = Executor.load(out)
    x, _ = dataset(256, seed=11)
    got, ref, fp32 = [], [], []
    fsess = ort.InferenceSession(cnn.SerializeToString(), providers=["CPUExecutionProvider"])
    for i in range(0, 256, 16):
        feed = {"input": x[i:i + 16]}
        got.append(ex.run(feed)[0])
        ref.append(_ort_reference(qmodel.proto, feed))
        fp32.append(fsess.run(None, feed)[0])
    a, b, f = np.concatenate(got), np.concatenate(ref), np.concatenate(fp32)
    np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3)
    assert np.mean(a.argmax(1) == f.argmax(1)) >= 0.99
    assert np.abs(a - f).max() > 0  # it is INT8: not the FP32 numbers


def _skewed_model(batch: int) -> onnx.ModelProto:
    w = np.eye(4, dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1"),
         helper.make_node("Relu", ["h"], ["r"], name="relu"),
         helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")],
        "skewed", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, 4])],
        [numpy_helper.from_array(w, "w1"), numpy_helper.from_array(w, "w2")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_kl_divergence_and_percentile_give_different_power2_scales_on_a_skewed_activation() -> None:
    # heavy right tail: most values near 1, a few thousand times larger
    rng = np.random.default_rng(0)
    x = rng.lognormal(0.0, 1.5, (4096, 4)).astype(np.float32)
    model = _skewed_model(256)
    scales = {}
    for mode in ("percentile", "kl_divergence"):
        r = quantize(model, QuantConfig.from_dict({"calibration_set": {"x": x}, "calibrate_mode": mode}))
        s = _scales(r.model)
        assert all(is_power2(v) for v in s.values())
        scales[mode] = s
    relu = next(k for k in scales["percentile"] if k.startswith("r_"))
    assert scales["percentile"][relu] != scales["kl_divergence"][relu]


def test_a_preset_scale_is_used_exactly(cnn: onnx.ModelProto, calib: np.ndarray) -> None:
    cfg = QuantConfig.from_dict({"calibration_set": {"input": calib},
                                 "preset_scale": {"conv2": [0.3, 0.01]}})
    q = quantize(cnn, cfg).model
    node = next(n for n in q.graph.node if n.name == "conv2")
    producer = {o: n for n in q.graph.node for o in n.output}
    scales = _scales(q)
    act = scales[producer[node.input[0]].input[1]]
    wt = scales[producer[node.input[1]].input[1]]
    assert act.tolist() == np.float32(0.3).tolist()
    assert wt.shape == (16,) and np.all(wt == np.float32(0.01))
    others = [v for k, v in scales.items() if k not in (producer[node.input[0]].input[1],
                                                         producer[node.input[1]].input[1])]
    assert others and all(is_power2(v) for v in others)
    with pytest.raises(QuantError, match="no Conv/Gemm/MatMul/ConvTranspose node named 'nope'"):
        quantize(cnn, QuantConfig.from_dict({"calibration_set": {"input": calib},
                                             "preset_scale": {"nope": [1.0, 1.0]}}))


@pytest.mark.parametrize("case, expect", [
    ("name", "the model has no input 'image'"),
    ("shape", "has shape [32, 3, 8, 16], the model expects [N, 3, 16, 16]"),
    ("dtype", "has dtype float64, the model expects float32"),
    ("empty", "has no samples"),
])
@pytest.mark.parametrize("command", ["quantize", "compile"])
def test_a_bad_calibration_set_is_one_line_and_writes_nothing(
        cnn: onnx.ModelProto, calib: np.ndarray, tmp_path: Path, case: str, expect: str,
        command: str) -> None:
    model = tmp_path / "cnn.onnx"
    onnx.save(cnn, model)
    x = calib[:32]
    arrays = {"name": {"image": x}, "shape": {"input": x[:, :, :8]},
              "dtype": {"input": x.astype(np.float64)}, "empty": {"input": x[:0]}}[case]
    npz = tmp_path / "calib.npz"
    np.savez(npz, **arrays)
    out = tmp_path / ("out.onnx" if command == "quantize" else "out.stcobj")
    args = (["quantize", str(model), "--calib", str(npz), "-o", str(out)] if command == "quantize"
            else ["compile", str(model), "--quant", str(npz), "-o", str(out)])
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("graphtune: error: ") and expect in lines[0]
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["calib.npz", "cnn.onnx"]


def test_quant_config_keys_are_checked(calib: np.ndarray) -> None:
    with pytest.raises(QuantError, match="calibrate_mode must be one of"):
        QuantConfig.from_dict({"calibration_set": {"input": calib}, "calibrate_mode": "minmax"})
    with pytest.raises(QuantError, match="weight_scale must be 'power2'"):
        QuantConfig.from_dict({"calibration_set": {"input": calib}, "weight_scale": "float"})
    with pytest.raises(QuantError, match="unknown key"):
        QuantConfig.from_dict({"calibration_set": {"input": calib}, "bits": 4})
    with pytest.raises(QuantError, match="calibration set is empty"):
        QuantConfig.from_dict({"calibration_set": []})


def test_without_onnxruntime_the_error_names_the_extra(
        cnn: onnx.ModelProto, calib: np.ndarray, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime.quantization", None)  # import fails
    with pytest.raises(QuantError, match=r"pip install 'graphtune\[quant\]'"):
        quantize(cnn, QuantConfig.from_dict({"calibration_set": {"input": calib}}))
    model, npz = tmp_path / "cnn.onnx", tmp_path / "calib.npz"
    onnx.save(cnn, model)
    np.savez(npz, input=calib[:32])
    res = CliRunner().invoke(main, ["quantize", str(model), "--calib", str(npz), "-o",
                                    str(tmp_path / "q.onnx")])
    assert res.exit_code == 2 and res.stderr.strip() == (
        "graphtune: error: quantization needs onnxruntime: pip install 'graphtune[quant]'")
    assert not (tmp_path / "q.onnx").exists()


def test_an_int8_model_tunes_and_compiles_under_its_log(
        cnn: onnx.ModelProto, calib: np.ndarray, tmp_path: Path) -> None:
    import json

    from autotune import ApplyHistoryBest
    from compiler.artifact import read_text
    from compiler.model import load_onnx
    from compiler.schedule import GraphSchedule
    from compiler.target import Target

    model, npz, qdq = tmp_path / "cnn.onnx", tmp_path / "calib.npz", tmp_path / "cnn.int8.onnx"
    onnx.save(cnn, model)
    np.savez(npz, input=calib[:64])
    res = CliRunner().invoke(main, ["quantize", str(model), "--calib", str(npz), "-o", str(qdq),
                                    "--calibrate", "kl_divergence"])
    assert res.exit_code == 0, res.output
    assert "top-1 agreement" in res.stdout
    log = tmp_path / "tune.jsonl"
    res = CliRunner().invoke(main, ["tune", str(qdq), "--trials", "6", "--workers", "0",
                                    "--log", str(log), "--seed", "0", "--json"])
    assert res.exit_code == 0, res.output
    (task,) = json.loads(res.stdout.strip().splitlines()[-1])["tasks"]
    g8, g32 = load_onnx(qdq).graph, load_onnx(model).graph
    assert task["key"] == g8.workload_key != g32.workload_key  # INT8 and FP records never mix
    best = ApplyHistoryBest(str(log)).query(g8.workload_key, Target.default().key)
    assert best is not None
    assert ApplyHistoryBest(str(log)).query(g32.workload_key, Target.default().key) is None
    out = tmp_path / "cnn.int8.stcobj"
    res = CliRunner().invoke(main, ["compile", str(qdq), "--log", str(log), "--strict", "-o", str(out)])
    assert res.exit_code == 0, res.output
    used = GraphSchedule.loads(read_text(out, "schedule.json"))
    assert used.structural_key() == GraphSchedule.from_json(best).structural_key()
