"""User NPU operators, as the vendor's operator framework (TBE) defines them.

A user op has the four parts of the TBE guide:

* **prototype** (算子原型库, :class:`Prototype`): inputs, the output, attributes
  with types and ranges, and the shape/dtype inference; checked on every use;
* **information entry** (算子信息库, :class:`OpInfo`): accepted dtypes
  (``float16``, ``float32``), the unit (``vector`` or ``special``; ``matrix``
  is refused: cube operators are the vendor's) and the output's memory scopes;
* **implementation** (算子实现): ``compute``, a TVM tensor-expression function
  (``te.compute``) emitted into the Relax module with ``call_tir`` so the
  compiled artifact runs it, and ``schedule``, a function over a
  ``tvm.s_tir.Schedule`` (split, reorder, fuse, vectorize, parallel, ...);
  without one, :func:`auto_schedule`;
* **plug-in** (算子适配插件): ``framework={"onnx": (domain, op_type)}`` maps an
  ONNX custom-domain node onto the op at import, and :func:`register_pattern`
  claims a chain of standard ONNX ops (``Mul(x, Sigmoid(x))`` -> ``Swish``).

A registered op is an NPU op: it joins groups, is split along the batch when the
prototype says ``batch_free``, its output may live in the info entry's scopes,
and the simulator prices it from its compute (element and reduction counts of
the TE body at the unit's rate, padded to the 64-lane vector unit by the
schedule's innermost vectorised extent; :class:`CostHints` overrides the count
with a reason). Plug-ins are modules loaded by ``graphtune --plugin MODULE``
or the entry-point group ``graphtune.ops`` (:func:`load_plugins`).

Example:
    >>> from tvm import te
    >>> from compiler.ops import Input, OpInfo, Output, Prototype, register_op
    >>> register_op("Swish", Prototype((Input("x"),), Output("y"),
    ...                                lambda s, d, a: (s[0], d[0]), batch_free=True),
    ...             OpInfo(unit="special"),
    ...             lambda x: te.compute(x.shape, lambda *i: x(*i) * te.sigmoid(x(*i))),
    ...             framework={"onnx": ("com.example", "Swish")})
"""

from compiler.ops._emit import Work, auto_schedule, lane_pad
from compiler.ops._onnx import converters, prepare, unknown_nodes
from compiler.ops._patterns import Pattern, register_pattern
from compiler.ops._plugins import ENTRY_POINT_GROUP, load_from_environment, load_plugins
from compiler.ops._register import register_op, unregister_op
from compiler.ops._registry import (
    Attr,
    CostHints,
    CustomOp,
    Input,
    OpError,
    OpInfo,
    Output,
    Prototype,
    custom_op,
    custom_ops,
    onnx_op,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Attr",
    "CostHints",
    "CustomOp",
    "Input",
    "OpError",
    "OpInfo",
    "Output",
    "Pattern",
    "Prototype",
    "Work",
    "auto_schedule",
    "converters",
    "custom_op",
    "custom_ops",
    "lane_pad",
    "load_from_environment",
    "load_plugins",
    "onnx_op",
    "prepare",
    "register_op",
    "register_pattern",
    "unknown_nodes",
    "unregister_op",
]
