"""Small helpers over the TVM 0.27 Relax API (imported only where TVM is needed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tvm
from tvm import relax
from tvm.relax.expr_functor import PyExprMutator, mutator

_ATTR_METHODS = {"get_int", "get_int_tuple", "get_str", "id_", "is_", "same_as", "keys"}


@mutator
class Remap(PyExprMutator):  # type: ignore[misc]
    """Replace variables by the expressions in ``vmap``."""

    def __init__(self, vmap: dict[Any, Any]) -> None:
        super().__init__()
        self.vmap = vmap

    def visit_var_(self, v: Any) -> Any:
        return self.vmap.get(v, v)

    def visit_dataflow_var_(self, v: Any) -> Any:
        return self.vmap.get(v, v)


def remap(expr: Any, vmap: dict[Any, Any]) -> Any:
    """``expr`` with its variables replaced according to ``vmap``."""
    return Remap(vmap).visit_expr(expr)


def main_bindings(mod: Any) -> list[Any]:
    """The bindings of ``main``'s single dataflow block."""
    f = mod["main"]
    blocks = f.body.blocks
    out: list[Any] = []
    for blk in blocks:
        out.extend(blk.bindings)
    return out


def other_functions(mod: Any) -> Any:
    """A module holding every function but ``main`` (to rebuild ``main`` into)."""
    return tvm.IRModule({gv: fn for gv, fn in mod.functions.items() if gv.name_hint != "main"})


def shape_of(ty: Any) -> tuple[int, ...]:
    """Static shape of a TensorType (raises ValueError for symbolic dims)."""
    if ty.shape is None:
        raise ValueError("unknown shape")
    return tuple(int(x) for x in ty.shape.values)


def attrs_to_dict(attrs: Any) -> dict[str, Any]:
    """A Relax op's attrs as plain JSON-able Python values."""
    if attrs is None:
        return {}
    out: dict[str, Any] = {}
    for key in dir(attrs):
        if key.startswith("_") or key in _ATTR_METHODS:
            continue
        try:
            val = getattr(attrs, key)
        except Exception:
            continue
        if callable(val):
            continue
        out[key] = to_py(val)
    return out


def to_py(val: Any) -> Any:
    """Convert TVM runtime values (arrays, IntImm, strings) to Python values."""
    if val is None or isinstance(val, bool | int | float | str):
        return val
    if isinstance(val, tvm.tirx.IntImm):
        return int(val.value)
    if isinstance(val, tvm.tirx.FloatImm):
        return float(val.value)
    if hasattr(val, "__len__") and not isinstance(val, dict):
        try:
            return [to_py(v) for v in val]
        except TypeError:
            pass
    if hasattr(val, "value"):
        v = val.value
        if isinstance(v, bool | int | float | str):
            return v
    return str(val)


def emit_main(
    mod: Any,
    params: list[Any],
    body: Callable[[relax.BlockBuilder], Any],
    attrs: dict[str, Any] | None = None,
    extra: Callable[[relax.BlockBuilder], None] | None = None,
) -> Any:
    """Rebuild ``main`` with ``body(bb)`` emitting the dataflow and returning the output."""
    bb = relax.BlockBuilder(other_functions(mod))
    if extra is not None:
        extra(bb)
    fattrs = dict(mod["main"].attrs) if mod["main"].attrs is not None else {}
    if attrs:
        fattrs.update(attrs)
    with bb.function("main", params, attrs=fattrs):
        with bb.dataflow():
            out = body(bb)
            gv_out = bb.emit_output(out)
        bb.emit_func_output(gv_out)
    return bb.get()
