"""ONNX import of every zoo model, the model API, golden sizes/FLOPs, workload keys, bad files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper

from compiler import ModelError, load_onnx, zoo
from compiler.graph import Graph

SCRIPT = Path(sys.executable).parent / "graphtune"
KIB = 1024
BERT_SMALL = dict(num_layers=2, hidden=64, heads=2, intermediate=128, vocab=100)
REDUCED: dict[str, dict[str, Any]] = {
    "tiny_cnn": {"image_size": 16},
    "resnet18": {"image_size": 32, "base_channels": 8},
    "resnet34": {"image_size": 32, "base_channels": 8},
    "resnet50": {},  # full size, inputs mode: ~2 s
    "resnet101": {"image_size": 32, "base_channels": 8},
    "mobilenet_v2": {"image_size": 32, "num_classes": 10},
    "bert_base": {**BERT_SMALL, "seq": 16},
    "bert_large": {**BERT_SMALL, "seq": 16},
    "deepfm": {},
    "wide_and_deep": {"bucket_size": 100, "deep_layers": [64, 32]},
}


def save(tmp: Path, name: str, batch: int = 1, weights: str = "inputs", **kw: Any) -> Path:
    path = tmp / f"{name}_{batch}_{weights}.onnx"
    onnx.save(zoo.build(name, batch=batch, weights=weights, **kw), str(path))
    return path


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("import")


@pytest.fixture(scope="module")
def resnet50(tmp: Path) -> Graph:
    return load_onnx(save(tmp, "resnet50")).graph


@pytest.fixture(scope="module")
def bert_base(tmp: Path) -> Graph:
    # One layer is enough: every per-sample size below is per layer.
    return load_onnx(save(tmp, "bert_base", seq=128, num_layers=1)).graph


def test_every_zoo_model_imports(tmp: Path) -> None:
    assert sorted(REDUCED) == sorted(e.name for e in zoo.list_models())
    for name, kw in REDUCED.items():
        m = load_onnx(save(tmp, name, batch=2, **kw))
        g = m.graph
        assert g.batch == 2 and len(g.ops) > 0 and g.flops > 0, name
        out = m.get_output_info()
        assert [o.name for o in m.proto.graph.output] == list(out), name
        assert all(d["shape"][0] == 2 for d in out.values()), name


def test_model_api_batch(tmp: Path) -> None:
    m = load_onnx(save(tmp, "tiny_cnn", batch=1, image_size=16))
    assert m.get_input_info() == {"input": {"shape": [1, 3, 16, 16], "dtype": "float32"}}
    assert m.get_output_info()["prob"]["shape"] == [1, 10]
    flops1 = m.graph.flops
    m.set_input_shape({"input": [4, 3, 16, 16]})
    assert m.get_input_info()["input"]["shape"] == [4, 3, 16, 16]
    assert m.get_output_info()["prob"]["shape"] == [4, 10]
    assert m.graph.batch == 4 and m.graph.flops == 4 * flops1
    m.set_batch(3)
    assert m.get_output_info()["prob"]["shape"] == [3, 10]
    with pytest.raises(ModelError, match="no input"):
        m.set_input_shape({"nope": [1]})
    with pytest.raises(ModelError, match="rank"):
        m.set_input_shape({"input": [1, 3]})


def resnet50_macs(image: int = 224) -> int:
    """MACs of torchvision's ResNet-50 v1.5 for one image, layer by layer."""
    s = image // 2
    macs = s * s * 64 * 3 * 7 * 7  # conv1
    s //= 2  # maxpool
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for b in range(blocks):
            st = stride if b == 0 else 1
            so = s // st
            cout = 4 * width
            macs += s * s * cin * width  # 1x1 reduce
            macs += so * so * width * width * 9  # 3x3 (the stride, v1.5)
            macs += so * so * width * cout  # 1x1 expand
            if b == 0:
                macs += so * so * cin * cout  # downsample
            cin, s = cout, so
    return macs + 2048 * 1000  # fc


def test_resnet50_golden(resnet50: Graph) -> None:
    expected = resnet50_macs()
    assert expected == pytest.approx(4.09e9, rel=0.01)
    assert resnet50.macs == pytest.approx(expected, rel=0.01)
    conv1 = resnet50.list_ops()["nn.conv2d"]
    first = min(conv1, key=lambda op: op.index)
    assert resnet50.tensors[first.output].shape == (1, 64, 112, 112)
    assert resnet50.nbytes(first.output) == 1568 * KIB
    assert resnet50.weight_bytes == pytest.approx(25.5e6 * 2, rel=0.02)


def test_bert_base_golden(bert_base: Graph) -> None:
    sizes = {t.elements for t in bert_base.tensors.values() if t.kind == "activation"}
    s1, s2, s3 = 128 * 768, 12 * 128 * 128, 128 * 3072
    assert {s1, s2, s3} <= sizes
    scores = bert_base.ops[bert_base.list_ops()["nn.softmax"][0].index].output
    assert bert_base.tensors[scores].elements == s2
    by_elements = {t.elements: t for t in bert_base.tensors.values() if t.kind == "activation"}
    assert [by_elements[s].nbytes(2) // KIB for s in (s1, s2, s3)] == [192, 384, 768]
    # DeepFM's "about 2.7 KiB per sample" is a guide figure built from its own accounting
    # of inputs, embeddings and MLP buffers; it has no single tensor to check against here.


def _info(path: Path, *extra: str) -> dict[str, Any]:
    r = subprocess.run([str(SCRIPT), "info", str(path), "--json", *extra], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_workload_key(tmp: Path) -> None:
    path = save(tmp, "tiny_cnn", batch=8, image_size=16)
    a, b = _info(path), _info(path)
    assert a["workload_key"] == b["workload_key"] == load_onnx(path).graph.workload_key
    assert a["flops"] == pytest.approx(8 * a["flops_per_sample"])
    b16 = _info(path, "--batch", "16")
    assert b16["workload_key"] != a["workload_key"]
    assert b16["flops_per_sample"] == a["flops_per_sample"] and b16["flops"] == 2 * a["flops"]
    random = load_onnx(save(tmp, "tiny_cnn", batch=8, weights="random", image_size=16))
    assert random.graph.workload_key == a["workload_key"]


def _bad_files(tmp: Path) -> dict[str, Path]:
    text = tmp / "notes.txt"
    text.write_text("not a model\n")
    data = save(tmp, "tiny_cnn", batch=1, weights="random", image_size=16).read_bytes()
    trunc = tmp / "trunc.onnx"
    trunc.write_bytes(data[: len(data) // 2])
    node = helper.make_node("FrobnicateTensor", ["x"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
    )
    unsupported = tmp / "unsupported.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              str(unsupported))
    # A valid ONNX op that TVM's frontend lacks (Det, opset 11+).
    det = helper.make_graph(
        [helper.make_node("Det", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 3])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    no_frontend = tmp / "det.onnx"
    onnx.save(helper.make_model(det, opset_imports=[helper.make_opsetid("", 17)]),
              str(no_frontend))
    return {"missing": tmp / "missing.onnx", "text": text, "truncated": trunc,
            "made-up op": unsupported, "op without TVM converter": no_frontend}


def test_bad_files(tmp: Path) -> None:
    for case, path in _bad_files(tmp).items():
        with pytest.raises(ModelError):
            load_onnx(path).graph  # noqa: B018
        r = subprocess.run([str(SCRIPT), "info", str(path)], capture_output=True, text=True,
                           timeout=120)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (case,
                                                                                      r.stderr)
        assert lines[0].startswith("graphtune: error:"), case


def _single_node_model(node: onnx.NodeProto, inits: list[onnx.TensorProto]) -> onnx.ModelProto:
    g = helper.make_graph(
        [node], "one", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 4, 4])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], inits,
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_ops_with_prim_value_arguments_import() -> None:
    # Relax calls whose arguments include a prim value (Trilu's k, Pad's call_tir) used to
    # raise AttributeError: module 'tvm.relax' has no attribute 'PrimValue'.
    from onnx import numpy_helper

    from compiler.model import Model

    pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64), "pads")
    pad = Model(_single_node_model(helper.make_node("Pad", ["x", "pads"], ["y"]), [pads]),
                name="pad").graph
    assert pad.tensors[pad.outputs[0]].shape == (2, 3, 6, 6)
    tril = Model(_single_node_model(helper.make_node("Trilu", ["x"], ["y"], upper=0), []),
                 name="tril").graph
    assert [(op.op_type, dict(op.attrs)) for op in tril.ops] == [("tril", {"arg1_value": "0"})]
