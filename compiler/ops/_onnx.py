"""The ONNX plug-in ("算子适配插件"): custom-domain nodes and claimed patterns -> user ops.

Before TVM's importer sees the model (:func:`prepare`), the claimed standard op
chains are replaced by the user op (:mod:`compiler.ops._patterns`) and every
node of a registered ``(domain, op_type)`` gets the importer key
``graphtune.<op>``; :func:`converters` adds one converter per user op to TVM's
ONNX converter table for the import, which emits the op's scheduled PrimFunc
with ``call_tir`` (:func:`compiler.ops._emit.emit_call`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from compiler.ops._registry import custom_op, custom_ops, onnx_op

__all__ = ["KEY_PREFIX", "converters", "prepare", "unknown_nodes"]

KEY_PREFIX = "graphtune."
_DEFAULT_DOMAINS = ("", "ai.onnx")


def unknown_nodes(proto: Any, known: Any) -> list[str]:
    """Node kinds the importer cannot take: ``op_type``, or ``domain:op_type`` for a custom domain.

    A custom-domain node is known when a user op claims it (or, as TVM reads
    op types without domains, when its op type is a standard one).
    """
    bad = set()
    for n in proto.graph.node:
        if n.domain not in _DEFAULT_DOMAINS:
            if onnx_op(n.domain, n.op_type) is None and n.op_type not in known:
                bad.add(f"{n.domain}:{n.op_type}")
        elif n.op_type not in known:
            bad.add(n.op_type)
    return sorted(bad)


def prepare(proto: Any) -> Any:
    """The proto to import: patterns replaced, custom nodes keyed (a copy; ``proto`` if none)."""
    from compiler.ops._patterns import patterns, rewrite

    claimed = [n for n in proto.graph.node
               if n.domain not in _DEFAULT_DOMAINS and onnx_op(n.domain, n.op_type) is not None]
    if not claimed and not patterns():
        return proto
    import onnx

    new = onnx.ModelProto()
    new.CopyFrom(proto)
    changed = rewrite(new.graph, KEY_PREFIX + "{op}") > 0
    for n in new.graph.node:
        if n.domain in _DEFAULT_DOMAINS:
            continue
        op = onnx_op(n.domain, n.op_type)
        if op is not None:
            n.op_type = KEY_PREFIX + op.name
            n.domain = ""
            changed = True
    return new if changed else proto


def _converter(name: str) -> Any:
    from tvm.relax.frontend.onnx.onnx_frontend import OnnxOpConverter

    class _UserOp(OnnxOpConverter):  # type: ignore[misc]  # TVM's untyped base
        @classmethod
        def _impl_v1(cls, bb: Any, inputs: Any, attr: dict[str, Any], params: Any) -> Any:
            from compiler.ops._emit import emit_call
            from compiler.ops._registry import OpError

            op = custom_op(name)
            if op is None:
                raise OpError(f"op {name}: not registered")
            given = {k: v for k, v in attr.items() if k != "tvm_custom"}
            args = list(inputs)
            if any(a is None for a in args):
                raise OpError(f"op {name}: an optional (empty) input is not supported")
            return emit_call(bb, op, args, op.check_attrs(given))

    _UserOp.__name__ = f"UserOp_{name}"
    return _UserOp


@contextlib.contextmanager
def converters() -> Iterator[None]:
    """TVM's ONNX converter table with one entry per user op, for the duration."""
    ops = custom_ops()
    if not ops:
        yield
        return
    from tvm.relax.frontend.onnx import onnx_frontend

    original = onnx_frontend._get_convert_map
    extra = {KEY_PREFIX + n: _converter(n) for n in ops}

    def patched() -> dict[str, Any]:
        table = dict(original())
        table.update(extra)
        return table

    onnx_frontend._get_convert_map = patched
    try:
        yield
    finally:
        onnx_frontend._get_convert_map = original
