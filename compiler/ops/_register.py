"""Registering and forgetting a user operator: the checks, the trial on the example shapes
(:mod:`compiler.ops._emit`) and the op table (:mod:`compiler.optable`) in one step.

Apart from :mod:`compiler.ops._registry` (the records and their checks), which the
emitter, the patterns and the plug-in loader read: this module imports them all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from compiler import optable
from compiler.ops import _patterns
from compiler.ops._emit import trial
from compiler.ops._registry import (
    _LOCK,
    _ONNX,
    _OPS,
    CostHints,
    CustomOp,
    OpError,
    OpInfo,
    Prototype,
    _checked,
)

__all__ = ["register_op", "unregister_op"]


def register_op(
    name: str,
    prototype: Prototype,
    info: OpInfo,
    compute: Callable[..., Any],
    schedule: Callable[[Any], Any] | None = None,
    framework: Mapping[str, tuple[str, str]] | None = None,
    cost_hints: CostHints | None = None,
) -> CustomOp:
    """Register a user operator (see :mod:`compiler.ops`).

    Args:
        name: The op's name: a graph op type (``RMSNorm``); may not be a built-in op.
        prototype: Inputs, output, attributes, inference, batch freedom.
        info: Accepted dtypes, the unit (``vector``/``special``) and output scopes.
        compute: ``compute(*te_inputs, **attrs) -> te.Tensor``, in TVM's tensor
            expressions.
        schedule: ``schedule(sch)`` over a ``tvm.s_tir.Schedule`` of the op's
            PrimFunc; None: :func:`compiler.ops.auto_schedule`.
        framework: ``{"onnx": (domain, op_type)}``: the ONNX node it replaces at import.
        cost_hints: Override the work derived from the compute (with a reason).

    Returns:
        The registered :class:`CustomOp`.

    Raises:
        OpError: One line naming the problem; nothing is registered then.
    """
    op = _checked(name, prototype, info, compute, schedule, framework or {}, cost_hints)
    if op.prototype.example is not None:
        trial(op)  # inference, compute shape and schedule on the example shapes
    with _LOCK:
        if name in _OPS:
            raise OpError(f"op {name}: already registered (by another plug-in?)")
        claim = op.framework.get("onnx")
        if claim is not None and claim in _ONNX:
            raise OpError(f"op {name}: ONNX node {claim[0]}:{claim[1]} is already mapped to "
                          f"op {_ONNX[claim]}")
        optable.NPU_OPS[name] = optable.OpSpec(op.info.unit, 1.0, op.info.scopes)
        _OPS[name] = op
        if claim is not None:
            _ONNX[claim] = name
    return op


def unregister_op(name: str) -> None:
    """Forget a registered op (tests; a no-op for unknown names)."""
    with _LOCK:
        if _OPS.pop(name, None) is not None:
            optable.NPU_OPS.pop(name, None)
        for key in [k for k, v in _ONNX.items() if v == name]:
            del _ONNX[key]
        _patterns.drop(name)
