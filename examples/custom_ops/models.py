"""The examples' ONNX models and their NumPy references.

``rmsnorm_mlp``: ``MatMul -> RMSNorm -> MatMul``; ``swish_mlp``: ``MatMul ->
Swish -> MatMul``. With ``custom=True`` the middle op is one node of the custom
domain ``com.example``; with ``custom=False`` it is written with standard ONNX
ops, as a model does without the plug-in (RMSNorm with ``Pow``, which is not on
the NPU: the NPU graph splits in two around a host round trip; Swish as
``Mul(x, Sigmoid(x))``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DOMAIN = "com.example"
EPSILON = 1e-5


def _weights(d: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "w1": (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32),
        "w2": (rng.standard_normal((d, d)) / np.sqrt(d)).astype(np.float32),
        "gamma": rng.uniform(0.5, 1.5, d).astype(np.float32),
    }


def _model(nodes: list[Any], batch: int, d: int, weights: dict[str, np.ndarray],
            custom: bool, name: str) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, d])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()],
    )
    opsets = [helper.make_opsetid("", 17)]
    if custom:
        opsets.append(helper.make_opsetid(DOMAIN, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.checker.check_model(model)
    return model


def rmsnorm_mlp(batch: int = 8, d: int = 192, custom: bool = True, seed: int = 0,
                op_type: str = "RMSNorm") -> onnx.ModelProto:
    """``MatMul(x, w1) -> RMSNorm(gamma) -> MatMul(w2)``."""
    w = _weights(d, seed)
    mm1 = helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1")
    mm2 = helper.make_node("MatMul", ["r", "w2"], ["y"], name="mm2")
    if custom:
        mid = [helper.make_node(op_type, ["h", "gamma"], ["r"], name="rmsnorm", domain=DOMAIN,
                                epsilon=EPSILON)]
    else:
        w["two"] = np.array(2.0, np.float32)
        w["eps"] = np.array(EPSILON, np.float32)
        mid = [helper.make_node("Pow", ["h", "two"], ["sq"], name="pow"),
               helper.make_node("ReduceMean", ["sq"], ["ms"], name="mean", axes=[-1]),
               helper.make_node("Add", ["ms", "eps"], ["mse"], name="add_eps"),
               helper.make_node("Sqrt", ["mse"], ["rms"], name="sqrt"),
               helper.make_node("Div", ["h", "rms"], ["hn"], name="div"),
               helper.make_node("Mul", ["hn", "gamma"], ["r"], name="scale")]
    return _model([mm1, *mid, mm2], batch, d, w, custom, "rmsnorm_mlp")


def rmsnorm_reference(x: np.ndarray, batch: int = 8, d: int = 192, seed: int = 0) -> np.ndarray:
    """NumPy output of :func:`rmsnorm_mlp` (float64 inside)."""
    w = {k: v.astype(np.float64) for k, v in _weights(d, seed).items()}
    h = x.astype(np.float64) @ w["w1"]
    r = h * w["gamma"] / np.sqrt((h * h).mean(-1, keepdims=True) + EPSILON)
    return (r @ w["w2"]).astype(np.float32)


def swish_mlp(batch: int = 8, d: int = 192, custom: bool = True, seed: int = 0,
              op_type: str = "Swish") -> onnx.ModelProto:
    """``MatMul(x, w1) -> Swish -> MatMul(w2)``."""
    w = _weights(d, seed)
    del w["gamma"]
    mm1 = helper.make_node("MatMul", ["x", "w1"], ["h"], name="mm1")
    mm2 = helper.make_node("MatMul", ["s", "w2"], ["y"], name="mm2")
    if custom:
        mid = [helper.make_node(op_type, ["h"], ["s"], name="swish", domain=DOMAIN)]
    else:
        mid = [helper.make_node("Sigmoid", ["h"], ["sg"], name="sigmoid"),
               helper.make_node("Mul", ["h", "sg"], ["s"], name="mul")]
    return _model([mm1, *mid, mm2], batch, d, w, custom, "swish_mlp")


def swish_reference(x: np.ndarray, batch: int = 8, d: int = 192, seed: int = 0) -> np.ndarray:
    """NumPy output of :func:`swish_mlp` (float64 inside)."""
    w = {k: v.astype(np.float64) for k, v in _weights(d, seed).items()}
    h = x.astype(np.float64) @ w["w1"]
    s = h / (1.0 + np.exp(-h))
    return (s @ w["w2"]).astype(np.float32)
