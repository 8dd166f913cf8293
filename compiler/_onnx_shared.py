"""Keep an ONNX weight that is read through a view (a tied weight) visible as one parameter.

GPT-2 ties its LM head to the token embedding: the file reads ``wte`` in a ``Gather``
and ``Transpose(wte)`` in the head's ``MatMul``. TVM's ONNX frontend evaluates a
``Transpose`` (and the other views) of an initializer while it imports, so the module
holds two unrelated constants and the tie is gone before graphtune sees it. An
initializer read by a view op and by another node is therefore imported as a graph
input and bound right after the import (as the zoo's ``weights="inputs"`` weights
are): the view stays an op on one constant until
:func:`compiler._relax_graph.normalize` folds it and records where it came from.
"""

from __future__ import annotations

from typing import Any

import onnx
from onnx import numpy_helper

# ONNX ops whose output is their first input's elements in another layout or type.
VIEW_OPS = frozenset({"Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity",
                      "Cast"})
_FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                          onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16})


def shared_view_initializers(model: onnx.ModelProto) -> list[str]:
    """Float initializers read by a view op and by at least one other node, in file order."""
    readers: dict[str, int] = {}
    viewed: set[str] = set()
    for node in model.graph.node:
        for i, name in enumerate(dict.fromkeys(node.input)):
            readers[name] = readers.get(name, 0) + 1
            if i == 0 and node.op_type in VIEW_OPS:
                viewed.add(name)
    return [init.name for init in model.graph.initializer
            if init.data_type in _FLOAT_TYPES and init.name in viewed
            and readers.get(init.name, 0) >= 2]


def initializers_as_inputs(
    model: onnx.ModelProto, names: list[str]
) -> tuple[onnx.ModelProto, list[onnx.ValueInfoProto], dict[str, Any]]:
    """A copy of ``model`` whose initializers ``names`` are graph inputs without a value.

    Returns:
        The copy, the value infos of the new inputs (appended after the existing
        inputs, in ``names`` order) and their values (numpy arrays) to bind.
    """
    keep = set(names)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    values: dict[str, Any] = {}
    kept = []
    for init in out.graph.initializer:
        if init.name in keep:
            values[init.name] = numpy_helper.to_array(init)
        else:
            kept.append(init)
    del out.graph.initializer[:]
    out.graph.initializer.extend(kept)
    listed = {vi.name for vi in out.graph.input}
    new_inputs = []
    for name in names:
        arr = values[name]
        vi = onnx.helper.make_tensor_value_info(
            name, onnx.helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape))
        if name in listed:  # IR < 4 lists initializers among the inputs: move it to the end
            kept_inputs = [v for v in out.graph.input if v.name != name]
            del out.graph.input[:]
            out.graph.input.extend(kept_inputs)
        out.graph.input.append(vi)
        new_inputs.append(vi)
    return out, new_inputs, values
