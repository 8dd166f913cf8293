"""Power-of-two scales in a QDQ ONNX model, and the user's preset scales.

The TensorTurbo guide's only weight-scale mode is ``power2``: the NPU rescales by
shifting, so every scale is ``2**k``. :func:`power2_scales` rewrites every scale
initializer of the QuantizeLinear/DequantizeLinear nodes to the smallest power of
two at least as large (the calibrated range is never clipped further), and
re-quantizes each quantized weight with its new scale, from the FP32 weight when
the float model is given. Zero points are kept: symmetric quantization's zero
points are 0, and a non-zero point keeps its place on the (now wider) integer grid.

Preset scales (``{"layer": [input_scale, weight_scale]}``, the ONNX node name
of a Conv, Gemm or MatMul) replace the scale of that node's quantized input
activation and of its weight exactly, as given (no rounding).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from compiler.quant._config import QuantError

PRESET_OPS = ("Conv", "Gemm", "MatMul", "ConvTranspose")


@dataclass(frozen=True)
class _Dq:
    """A DequantizeLinear of an initializer (a quantized weight)."""

    value: str
    scale: str
    zero_point: str | None
    axis: int


def power2(scale: np.ndarray) -> np.ndarray:
    """The smallest power of two >= each scale (scales must be > 0)."""
    return np.exp2(np.ceil(np.log2(scale.astype(np.float64)))).astype(scale.dtype)


def is_power2(scale: np.ndarray) -> bool:
    """Whether every element is an exact power of two."""
    m, _ = np.frexp(np.asarray(scale, dtype=np.float64))
    return bool(np.all(m == 0.5))


def power2_scales(qdq: Any, presets: Mapping[str, tuple[float, float]],
                  float_model: Any | None = None) -> Any:
    """The QDQ model with power-of-two scales and the presets applied (a new proto).

    Args:
        qdq: The QDQ ``onnx.ModelProto`` (onnxruntime's ``quantize_static`` output).
        presets: Layer name -> (input_scale, weight_scale), used exactly.
        float_model: The FP32 model the weights were quantized from (re-quantize from
            the original values), or None (re-quantize the dequantized values).

    Raises:
        QuantError: a preset names no Conv/Gemm/MatMul node, or one whose input or
            weight is not quantized.
    """
    import onnx
    from onnx import numpy_helper

    model = onnx.ModelProto()
    model.CopyFrom(qdq)
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    values = {n: numpy_helper.to_array(t) for n, t in inits.items()}
    originals = ({i.name: numpy_helper.to_array(i) for i in float_model.graph.initializer}
                 if float_model is not None else {})
    producer = {o: n for n in g.node for o in n.output}
    weight_dq: dict[str, _Dq] = {}  # DQ output -> its weight
    scales: set[str] = set()
    for n in g.node:
        if n.op_type not in ("QuantizeLinear", "DequantizeLinear") or len(n.input) < 2:
            continue
        if n.input[1] in inits:
            scales.add(n.input[1])
        if n.op_type == "DequantizeLinear" and n.input[0] in inits:
            axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
            zp = n.input[2] if len(n.input) > 2 and n.input[2] else None
            weight_dq[n.output[0]] = _Dq(n.input[0], n.input[1], zp, axis)

    fixed: dict[str, np.ndarray] = {}
    nodes = {n.name: n for n in g.node if n.name}
    for layer, (in_scale, w_scale) in presets.items():
        node = nodes.get(layer)
        if node is None or node.op_type not in PRESET_OPS:
            raise QuantError(f"preset_scale: no {'/'.join(PRESET_OPS)} node named {layer!r} in the model")
        act = producer.get(node.input[0])
        if act is None or act.op_type != "DequantizeLinear" or act.input[1] not in inits:
            raise QuantError(f"preset_scale: the input of {layer!r} is not quantized")
        w = weight_dq.get(node.input[1]) if len(node.input) > 1 else None
        if w is None:
            raise QuantError(f"preset_scale: the weight of {layer!r} is not a quantized initializer")
        for name, preset in ((act.input[1], in_scale), (w.scale, w_scale)):
            fixed[name] = np.full(values[name].shape, preset, dtype=values[name].dtype)

    new_scale: dict[str, np.ndarray] = {}
    for name in scales:
        old = values[name]
        if np.any(old <= 0) or not np.all(np.isfinite(old)):
            raise QuantError(f"scale {name!r} is not positive and finite")
        new_scale[name] = fixed.get(name, power2(old))

    for dq_out, w in weight_dq.items():
        if w.value in values and w.scale in new_scale:
            values[w.value] = _requantize(values, w, new_scale[w.scale], originals.get(dq_out))
    for name, v in new_scale.items():
        values[name] = v
    for name, t in inits.items():
        if name in new_scale or any(d.value == name for d in weight_dq.values()):
            t.CopyFrom(numpy_helper.from_array(values[name], name))
    return model


def check_preset_layers(proto: Any, presets: Mapping[str, tuple[float, float]]) -> None:
    """Every preset names a Conv/Gemm/MatMul node of the FP32 model (checked before calibrating).

    Raises:
        QuantError: the first preset that names no such node.
    """
    ops = {n.name: n.op_type for n in proto.graph.node if n.name}
    for layer in presets:
        if ops.get(layer) not in PRESET_OPS:
            raise QuantError(f"preset_scale: no {'/'.join(PRESET_OPS)} node named {layer!r} in the model")


def _requantize(values: Mapping[str, np.ndarray], w: _Dq, scale: np.ndarray,
                original: np.ndarray | None) -> np.ndarray:
    q = values[w.value]
    old = values[w.scale]
    zp = values[w.zero_point] if w.zero_point else np.zeros((), q.dtype)

    def along(v: np.ndarray) -> np.ndarray:  # per-channel vectors broadcast on the axis
        if v.ndim == 0 or v.size == 1:
            return v.reshape(())
        shape = [1] * q.ndim
        shape[w.axis % q.ndim] = v.size
        return v.reshape(shape)

    if original is not None and original.shape == q.shape:
        real = original.astype(np.float64)
    else:
        real = (q.astype(np.float64) - along(zp).astype(np.float64)) * along(old).astype(np.float64)
    info = np.iinfo(q.dtype)
    new = np.round(real / along(scale).astype(np.float64)) + along(zp).astype(np.float64)
    return np.clip(new, info.min, info.max).astype(q.dtype)
