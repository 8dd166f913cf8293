"""What runs on the NPU, on which unit, and how many FLOPs an op costs.

The support table is chapter 5 of the TensorTurbo user guide ("支持OP列表"),
spelled with Relax op names. Each entry lists the memory scopes the op's output
may live in (``Take``, ``TopK``, ``NMS`` and the ROI ops have no LLB variant).

FLOP formulas (documented here because the simulator and the cost model
depend on them; a MAC counts as two FLOPs):

* ``nn.conv2d``: ``2 * N*Co*Ho*Wo * (Ci/groups)*Kh*Kw``
* ``matmul``: ``2 * prod(out) * K`` (``K`` = contracted dimension)
* elementwise unary/binary ops, casts, comparisons, ``where``: one per output element
* ``nn.batch_norm``: 2 per element (scale and shift, inference form)
* ``nn.layer_norm``: 7 per element (mean, subtract, square, variance, divide, scale, shift)
* ``nn.softmax``: 5 per element (max, subtract, exp, sum, divide)
* ``nn.gelu``: 8 per element (tanh/erf form)
* pooling: one per window element per output (``max_pool2d``: ``prod(out)*Kh*Kw``);
  global/adaptive pooling and reductions: one per input element
* data movement (``reshape``, ``permute_dims``, ``concat``, ``split``, ``take``, ...): 0

``unit`` says where the work runs: ``matrix`` (the 64x32 MAC array), ``vector``
(64 lanes), ``special`` (vector unit at the transcendental rate) or ``move``
(pure data movement, costed by bytes).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

DDR, LLB, L1 = "DDR", "LLB", "L1"
_ALL = (DDR, LLB, L1)
_NO_LLB = (DDR, L1)


@dataclass(frozen=True)
class OpSpec:
    """How one op type maps onto the NPU."""

    unit: str  # matrix | vector | special | move
    flops_per_element: float = 1.0  # for vector/special ops, per output element
    scopes: tuple[str, ...] = _ALL


_UNARY = ["abs", "astype", "clip", "cosh", "logical_not", "sign", "sinh", "square", "nn.relu",
          "nn.leakyrelu", "nn.prelu", "nn.relu6", "negative", "zeros_like", "ones_like"]
_SPECIAL = ["erf", "exp", "sqrt", "tanh", "sigmoid", "nn.silu", "nn.mish"]
_BINARY = ["add", "nn.bias_add", "divide", "equal", "greater", "greater_equal", "less",
           "less_equal", "logical_and", "logical_or", "logical_xor", "maximum", "minimum",
           "multiply", "not_equal", "subtract", "where", "floor_divide"]
_REDUCE = ["argmax", "argmin", "max", "min", "mean", "sum"]
_MOVE = ["broadcast_to", "expand_dims", "full", "concat", "reshape", "strided_slice", "split",
         "squeeze", "permute_dims", "flatten", "gather_nd", "one_hot", "image.resize2d",
         "tuple_get_item"]

NPU_OPS: dict[str, OpSpec] = {}
for _n in _UNARY + _BINARY:
    NPU_OPS[_n] = OpSpec("vector", 1.0)
for _n in _SPECIAL:
    NPU_OPS[_n] = OpSpec("special", 1.0)
for _n in _REDUCE:
    NPU_OPS[_n] = OpSpec("vector", 1.0)
for _n in _MOVE:
    NPU_OPS[_n] = OpSpec("move", 0.0)
NPU_OPS.update(
    {
        "divide": OpSpec("special", 1.0),
        "take": OpSpec("move", 0.0, _NO_LLB),
        "nn.conv2d": OpSpec("matrix"),
        "nn.conv3d": OpSpec("matrix"),
        "matmul": OpSpec("matrix"),
        "nn.batch_norm": OpSpec("vector", 2.0),
        "nn.layer_norm": OpSpec("vector", 7.0),
        "nn.softmax": OpSpec("special", 5.0),
        "nn.gelu": OpSpec("special", 8.0),
        "nn.max_pool2d": OpSpec("vector"),
        "nn.avg_pool2d": OpSpec("vector"),
        "nn.adaptive_avg_pool2d": OpSpec("vector"),
        "vision.roi_align": OpSpec("vector", 4.0, _NO_LLB),
        "vision.roi_pool": OpSpec("vector", 4.0, _NO_LLB),
        "vision.non_max_suppression": OpSpec("vector", 4.0, _NO_LLB),
        "topk": OpSpec("vector", 4.0, _NO_LLB),
        # INT8 (compiler/_qdq.py): scale, round and saturate; an INT8 value scaled back
        "quantize": OpSpec("vector", 2.0),
        "dequantize": OpSpec("vector", 1.0),
    }
)

# Relay spellings used by the vendor guides, for ListOps lookups.
RELAY_ALIASES = {
    "concatenate": "concat",
    "transpose": "permute_dims",
    "nn.dense": "matmul",
    "nn.batch_matmul": "matmul",
    "batch_matmul": "matmul",
    "nn.global_avg_pool2d": "nn.adaptive_avg_pool2d",
    "cast": "astype",
    "select": "where",
}


def is_npu_op(op_type: str) -> bool:
    """Whether an op type is in the NPU support table."""
    return op_type in NPU_OPS


def op_spec(op_type: str) -> OpSpec:
    """The NPU spec of an op; CPU ops get a vector spec so they can still be costed.

    User ops (:mod:`compiler.ops`) are in :data:`NPU_OPS` once registered: the CLI
    loads ``--plugin`` modules and the ``graphtune.ops`` entry points before any
    import, a Ray worker loads the plug-ins its driver named in the environment when
    it starts (:func:`compiler.ops.load_from_environment`).
    """
    spec = NPU_OPS.get(op_type)
    return spec if spec is not None else OpSpec("vector", 1.0, ())


def prod(shape: Sequence[int]) -> int:
    """Number of elements of a shape (1 for a scalar)."""
    return math.prod(shape) if shape else 1


def count_macs(
    op_type: str,
    in_shapes: Sequence[Sequence[int]],
    out_shape: Sequence[int],
    attrs: dict[str, object],
) -> int:
    """Multiply-accumulates of a matrix op (0 for every other op)."""
    if op_type in ("nn.conv2d", "nn.conv3d"):
        w = in_shapes[1]
        groups = int(attrs.get("groups", 1))  # type: ignore[call-overload]
        # weight layout OIHW: w[1] is already Ci/groups.
        del groups
        return prod(out_shape) * prod(w[1:])
    if op_type == "matmul":
        a = in_shapes[0]
        k = a[-1] if len(a) >= 1 else 1
        return prod(out_shape) * int(k)
    return 0


def count_flops(
    op_type: str,
    in_shapes: Sequence[Sequence[int]],
    out_shape: Sequence[int],
    attrs: dict[str, object],
) -> int:
    """FLOPs of one op by the formulas in this module's docstring."""
    macs = count_macs(op_type, in_shapes, out_shape, attrs)
    if macs:
        return 2 * macs
    spec = op_spec(op_type)
    if spec.unit == "move":
        return 0
    if op_type in _REDUCE or op_type == "nn.adaptive_avg_pool2d":
        return prod(in_shapes[0]) if in_shapes else prod(out_shape)
    if op_type in ("nn.max_pool2d", "nn.avg_pool2d"):
        pool = attrs.get("pool_size", (1, 1))
        return prod(out_shape) * prod(pool)  # type: ignore[arg-type]
    return round(prod(out_shape) * spec.flops_per_element)
