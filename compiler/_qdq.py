"""INT8 in the Graph view: QuantizeLinear/DequantizeLinear pairs folded into INT8 tensors.

TVM's ONNX frontend imports a QDQ model (``QuantizeLinear``/``DequantizeLinear``
around every quantized op) as ``relax.quantize``/``relax.dequantize`` calls around
FP32 ops: the CPU stand-in computes ``dequantize -> op in FP32 -> quantize``, which
gives the same numbers as INT8 kernels with FP32 rescaling. The NPU, though, runs
the op on INT8 operands and stores INT8 results, and that is what pricing must see:

* a quantized weight (``dequantize`` of an INT8 constant) is folded at import into
  an FP32 constant that remembers its INT8 source (``normalize`` records it in
  ``main``'s attribute ``graphtune.weight_dtype``): its Graph tensor is ``int8``;
* ``P -> quantize -> dequantize`` becomes one op ``P`` (the requantize of its result
  counted as vector work, :data:`REQUANTIZE_FLOPS_PER_ELEMENT` per element; a matrix
  op gets the attribute ``requantize`` and its vector unit requantizes the array's
  results, :attr:`compiler.opshape.OpShape.requant_flops`) whose output tensor is
  ``int8`` and named after the ``dequantize`` (what its consumers read); the op
  covers the three Relax bindings. After a model input, or when ``P`` has other
  readers, the pair stays one ``quantize`` op of its own;
* a ``dequantize`` of an activation not made by a folded pair (an INT8 model input,
  or a model output, which the artifact returns in FP32) stays an op (vector work)
  with an FP output.

An op computes in INT8 (:func:`is_int8_op`) when every activation it reads is an
8-bit integer and, for a matrix op, its weight too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from compiler.graph import Op, Tensor
from compiler.optable import op_spec

INT8_DTYPES = ("int8", "uint8")
REQUANTIZE_FLOPS_PER_ELEMENT = 2.0  # scale (multiply or shift) + round and saturate
WEIGHT_DTYPE_ATTR = "graphtune.weight_dtype"
REQUANTIZE_ATTR = "requantize"  # a matrix op whose results are requantized to INT8


def is_int8(dtype: str) -> bool:
    """Whether a dtype is an 8-bit integer."""
    return dtype in INT8_DTYPES


def is_int8_op(op: Op, tensors: Mapping[str, Tensor]) -> bool:
    """Whether an op computes on INT8 operands (see the module doc)."""
    if not op.inputs or not all(is_int8(tensors[t].dtype) for t in op.inputs):
        return False
    if op_spec(op.op_type).unit == "matrix" and op.weights:
        return is_int8(tensors[op.weights[0]].dtype)
    return True


def fold_qdq(ops: Sequence[Op], tensors: dict[str, Tensor], outputs: Sequence[str]
             ) -> list[Op]:
    """Fold quantize/dequantize pairs (see the module doc); ``tensors`` is updated in place.

    Returns the new op list, re-indexed from 0 in the same topological order.
    """
    if not any(op.op_type == "dequantize" for op in ops):
        return list(ops)
    producer = {op.output: i for i, op in enumerate(ops)}
    readers: dict[str, int] = {}
    for op in ops:
        for t in dict.fromkeys(op.inputs):
            readers[t] = readers.get(t, 0) + 1
    outs = set(outputs)
    new: dict[int, Op] = dict(enumerate(ops))
    for d_idx, d in enumerate(ops):
        if d.op_type != "dequantize" or len(d.inputs) != 1:
            continue
        q_idx = producer.get(d.inputs[0])
        if q_idx is None or ops[q_idx].op_type != "quantize" or q_idx not in new:
            continue
        q = ops[q_idx]
        if readers.get(q.output, 0) != 1 or q.output in outs or d.output in outs \
                or len(q.inputs) != 1:
            continue
        qty = tensors[q.output]
        p_idx = producer.get(q.inputs[0])
        p = new.get(p_idx) if p_idx is not None else None
        fold_into_p = (p is not None and readers.get(p.output, 0) == 1 and p.output not in outs
                       and p.on_npu)
        host = p if fold_into_p and p is not None else q
        requant = int(REQUANTIZE_FLOPS_PER_ELEMENT * qty.elements)
        merged = dataclasses.replace(
            host, name=d.name, output=d.output,
            weights=tuple(dict.fromkeys((*host.weights, *(q.weights if host is not q else ()),
                                         *d.weights))),
            flops=(host.flops + requant) if host is not q else requant,
            attrs=((*host.attrs, (REQUANTIZE_ATTR, True))
                   if host is not q and op_spec(host.op_type).unit == "matrix" else host.attrs),
            on_npu=True,
            bindings=(*host.bindings, *(q.bindings if host is not q else ()), *d.bindings),
        )
        old = tensors[d.output]
        tensors[d.output] = dataclasses.replace(old, dtype=qty.dtype)
        if host is not q:
            assert p_idx is not None
            tensors.pop(p.output, None)  # type: ignore[union-attr]
            del new[p_idx]
        tensors.pop(q.output, None)
        del new[q_idx]
        new[d_idx] = merged
    return [dataclasses.replace(op, index=k) for k, op in enumerate(new[i] for i in sorted(new))]
