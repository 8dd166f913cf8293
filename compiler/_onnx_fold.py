"""Fold a fixed-shape ONNX graph's shape arithmetic into constants before TVM imports it.

Exporters compute some Reshape targets from ``Shape`` at run time; torch's TorchScript
exporter does it for advanced indexing (``z[:, li, lj]`` in DLRM's interaction):
``Reshape(x, Concat([-1], Gather(Shape(z), [0])))``. TVM's ONNX frontend folds a
``Gather`` of a shape only for a 0-d index, so this 1-element index leaves a tensor that
its Reshape refuses ("Reshape requires the input new shape to be Shape"). With every
input shape fixed these values are known: ONNX shape inference gives the static shape of
each ``Shape``'s input, and the small integer arithmetic that follows is evaluated here
with numpy and written back as ``Constant`` nodes.

Graphs without ``Shape``/``Size`` are returned unchanged; in the others, every node whose
inputs are all known small values (at most ``MAX_ELEMENTS``: shapes, small constants)
is folded, so no weight is touched. :class:`compiler.model.Model` uses this only when
TVM cannot import the graph as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

# Folded values larger than this stay computed by TVM (shape values are a few elements).
MAX_ELEMENTS = 1024


def fold_shapes(model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    """``model`` with shape arithmetic replaced by constants (``model`` itself is not changed).

    Args:
        model: The ONNX model.
        input_shapes: The concrete shape of every graph input that has no initializer.

    Returns:
        ``model`` when it has no ``Shape``/``Size`` node or nothing can be folded;
        otherwise a copy whose folded nodes are gone and whose folded values that other
        nodes still read are ``Constant`` nodes.
    """
    graph = model.graph
    if not any(n.op_type in ("Shape", "Size") and n.domain in ("", "ai.onnx") for n in graph.node):
        return model
    static = _static_shapes(model, input_shapes)
    overridden = {i.name for i in graph.input}
    known: dict[str, np.ndarray] = {}
    for init in graph.initializer:
        if init.name not in overridden and _small(init.dims):
            known[init.name] = numpy_helper.to_array(init)
    folded: dict[int, list[np.ndarray]] = {}
    for i, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx"):
            continue
        if node.op_type == "Constant":
            value = _constant_value(node)
            if value is not None and value.size <= MAX_ELEMENTS:
                known[node.output[0]] = value
            continue
        if node.op_type in ("Shape", "Size"):
            shape = static.get(node.input[0])
            if shape is None:
                continue
            if node.op_type == "Shape":
                attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
                out = np.array(shape[attrs.get("start", 0):attrs.get("end", len(shape))], np.int64)
            else:
                out = np.array(int(np.prod(shape)), np.int64)
            outputs = [out]
        else:
            inputs = [n for n in node.input if n]
            if not inputs or not all(n in known for n in inputs):
                continue
            result = _evaluate(node, known)
            if result is None or any(v.size > MAX_ELEMENTS for v in result):
                continue
            outputs = result
        for name, value in zip(node.output, outputs):
            known[name] = value
        folded[i] = outputs
    if not folded:
        return model
    return _rewrite(model, folded)


def _small(dims: Sequence[int]) -> bool:
    return int(np.prod(dims)) <= MAX_ELEMENTS if dims else True


def _static_shapes(model: onnx.ModelProto, input_shapes: Mapping[str, Sequence[int]]
                   ) -> dict[str, list[int]]:
    """Tensor name -> static shape, by ONNX shape inference on a weightless copy."""
    light = onnx.ModelProto()
    light.ir_version = model.ir_version
    light.opset_import.extend(model.opset_import)
    g = light.graph
    g.node.extend(model.graph.node)
    g.output.extend(model.graph.output)
    overridden = {i.name for i in model.graph.input}
    for vi in model.graph.input:
        new = g.input.add()
        new.CopyFrom(vi)
        if vi.name in input_shapes:
            dims = new.type.tensor_type.shape.dim
            del dims[:]
            for d in input_shapes[vi.name]:
                dims.add().dim_value = int(d)
    for init in model.graph.initializer:
        if init.name in overridden:
            continue
        if _small(init.dims):
            g.initializer.append(init)
        else:  # shape inference needs the shape, not the values
            g.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    try:
        inferred = onnx.shape_inference.infer_shapes(light, strict_mode=False, data_prop=True)
    except Exception:  # a graph ONNX cannot infer: fold nothing, TVM reports the problem
        return {}
    out: dict[str, list[int]] = {}
    for vi in [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]:
        t = vi.type.tensor_type
        if not t.HasField("shape"):
            continue
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        if all(d >= 0 for d in dims):
            out[vi.name] = dims
    return out


def _constant_value(node: onnx.NodeProto) -> np.ndarray | None:
    for a in node.attribute:
        if a.name == "value":
            return numpy_helper.to_array(a.t)
        if a.name in ("value_int", "value_ints"):
            return np.array(helper.get_attribute_value(a), np.int64)
        if a.name in ("value_float", "value_floats"):
            return np.array(helper.get_attribute_value(a), np.float32)
    return None


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        q = np.abs(a) // np.abs(b)  # ONNX integer Div truncates toward zero
        return (np.sign(a) * np.sign(b) * q).astype(a.dtype)
    return (a / b).astype(a.dtype)


def _reshape(data: np.ndarray, shape: np.ndarray, allowzero: int) -> np.ndarray:
    dims = [int(d) for d in shape]
    if not allowzero:
        dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return data.reshape(dims)


def _unsqueeze(data: np.ndarray, axes: np.ndarray) -> np.ndarray:
    rank = data.ndim + len(axes)
    for ax in sorted(int(a) % rank for a in axes):
        data = np.expand_dims(data, ax)
    return data


def _slice(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, axes: np.ndarray | None = None,
           steps: np.ndarray | None = None) -> np.ndarray:
    index = [slice(None)] * data.ndim
    axes_list = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps_list = [1] * len(starts) if steps is None else [int(s) for s in steps]
    for s, e, ax, st in zip(starts, ends, axes_list, steps_list):
        index[ax % data.ndim] = slice(int(s), int(e), st)
    return data[tuple(index)]


_BINARY: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "Add": lambda a, b: (a + b).astype(a.dtype),
    "Sub": lambda a, b: (a - b).astype(a.dtype),
    "Mul": lambda a, b: (a * b).astype(a.dtype),
    "Div": _int_div,
    "Equal": np.equal,
    "Less": np.less,
    "Greater": np.greater,
    "Max": np.maximum,
    "Min": np.minimum,
}


def _mod(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    return np.fmod(a, b) if fmod else np.mod(a, b)


def _evaluate(node: onnx.NodeProto, known: dict[str, np.ndarray]) -> list[np.ndarray] | None:
    """numpy value of one node's outputs, or None for an op this module does not fold."""
    args: list[Any] = [known[n] if n else None for n in node.input]
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    op = node.op_type
    if op in _BINARY:
        return [np.asarray(_BINARY[op](args[0], args[1]))]
    if op == "Mod":
        return [np.asarray(_mod(args[0], args[1], attrs.get("fmod", 0))).astype(args[0].dtype)]
    if op == "Identity":
        return [args[0]]
    if op == "Neg":
        return [-args[0]]
    if op == "Not":
        return [np.logical_not(args[0])]
    if op == "Cast":
        return [args[0].astype(helper.tensor_dtype_to_np_dtype(attrs["to"]))]
    if op == "Gather":
        return [np.take(args[0], args[1], axis=attrs.get("axis", 0))]
    if op == "Concat":
        return [np.concatenate([a.reshape(-1) if a.ndim == 0 else a for a in args],
                               axis=attrs["axis"])]
    if op == "Unsqueeze" and len(args) == 2:
        return [_unsqueeze(args[0], args[1])]
    if op == "Squeeze":
        axes = tuple(int(a) for a in args[1]) if len(args) > 1 and args[1] is not None else None
        return [np.squeeze(args[0], axis=axes)]
    if op == "Slice" and len(args) >= 3:
        return [_slice(*args)]
    if op == "Reshape":
        return [_reshape(args[0], args[1], attrs.get("allowzero", 0))]
    if op == "Where":
        return [np.where(args[0], args[1], args[2])]
    if op == "Range":
        return [np.arange(args[0], args[1], args[2]).astype(args[0].dtype)]
    if op == "Expand":
        shape = np.broadcast_shapes(args[0].shape, tuple(int(d) for d in args[1]))
        return [np.broadcast_to(args[0], shape).copy()]
    if op == "ConstantOfShape":
        value = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
        dims = tuple(int(d) for d in args[0])
        if int(np.prod(dims)) > MAX_ELEMENTS:
            return None
        return [np.full(dims, value.reshape(-1)[0], dtype=value.dtype)]
    return None


def _rewrite(model: onnx.ModelProto, folded: dict[int, list[np.ndarray]]) -> onnx.ModelProto:
    graph = model.graph
    still_read = {n for i, node in enumerate(graph.node) if i not in folded for n in _reads(node)}
    still_read |= {o.name for o in graph.output}
    new = onnx.ModelProto()
    new.CopyFrom(model)
    del new.graph.node[:]
    for i, node in enumerate(graph.node):
        if i not in folded:
            new.graph.node.append(node)
            continue
        for name, value in zip(node.output, folded[i]):
            if name in still_read:
                tensor = numpy_helper.from_array(np.ascontiguousarray(value), name)
                new.graph.node.append(
                    helper.make_node("Constant", [], [name], name=f"{node.name or name}_folded",
                                     value=tensor)
                )
    return new


def _reads(node: onnx.NodeProto) -> list[str]:
    """Names a node reads, including those its subgraphs (Loop/If bodies) read."""
    names = list(node.input)
    for a in node.attribute:
        subgraphs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for g in subgraphs:
            for inner in g.node:
                names.extend(_reads(inner))
    return names
