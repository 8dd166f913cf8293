"""Fixtures of the tuner tests: a tiny CNN as a graph and an ONNX file, imported once."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler import zoo
from compiler.graph import Graph
from compiler.model import Model
from compiler.target import Target


@pytest.fixture(scope="session")
def tune_target() -> Target:
    return Target.default()


@pytest.fixture(scope="session")
def tiny_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tiny_cnn at batch 4 (16 ops, one NPU function): small, fast to simulate."""
    path = tmp_path_factory.mktemp("tune_models") / "tiny.onnx"
    onnx.save(zoo.build("tiny_cnn", batch=4, weights="inputs"), str(path))
    return path


@pytest.fixture(scope="session")
def tiny_graph(tiny_onnx: Path) -> Graph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(onnx.load(str(tiny_onnx)), name="tiny").graph


def cpu_split_proto(name: str = "cpu_split", out: int = 64) -> onnx.ModelProto:
    """x -> MatMul -> Relu -> Log (a CPU op) -> MatMul -> Relu -> y: two NPU sub-functions,
    identical when ``out`` is 64."""
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array(rng.standard_normal((64, 64)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.standard_normal((64, out)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["m0"]),
        helper.make_node("Relu", ["m0"], ["r0"]),
        helper.make_node("Log", ["r0"], ["l0"]),
        helper.make_node("MatMul", ["l0", "w2"], ["m1"]),
        helper.make_node("Relu", ["m1"], ["y"]),
    ]
    g = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, out])], [w1, w2])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def proto_graph(proto: onnx.ModelProto, name: str) -> Graph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name=name).graph
