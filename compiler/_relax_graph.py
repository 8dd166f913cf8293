"""Normalise an imported Relax module and read it into a :class:`~compiler.graph.Graph`.

Normalisation (before anything reads the IR):
1. constant folding: first with numpy for the common cheap cases (ONNX Clip's NaN
   checks on its bounds, Gemm's weight transposes, bias reshapes, index arithmetic,
   shapes of constants), then ``FoldConstant`` for the rest. ``FoldConstant`` compiles
   each call it folds with LLVM (~0.1 s each; MobileNetV2's 140 Clip-bound checks took
   20 s); numpy gives the same values in microseconds,
2. ONNX Clip's ``call_tir(maximum*/minimum*)`` rewritten to ``relax.op.maximum/minimum``
   (otherwise the baked-in PrimFuncs pin the full batch and break batch splitting),
3. ``DeadCodeElimination`` (drops batch_norm's unused mean/var projections),
4. every binding renamed ``<op>_<k>`` (``conv2d_0``, ``add_15``) — the guide's
   ``SetSpanName`` — so Graph op names and Relax variable names agree,
5. which constants share storage recorded in ``main``'s attribute
   ``graphtune.weight_storage``: a constant folded from a view (transpose, reshape,
   cast) of another weight — GPT's LM head reading ``Transpose(wte)`` — holds the same
   parameter in another layout. Values cannot tell (weights are zeros when only the
   structure is read), so step 1 records each view's source as it folds it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np
import tvm
from tvm import relax

from compiler._qdq import WEIGHT_DTYPE_ATTR, fold_qdq, is_int8
from compiler._relax_util import attrs_to_dict, emit_main, main_bindings, remap, shape_of
from compiler.graph import Graph, Op, Tensor
from compiler.optable import count_flops, count_macs, is_npu_op, prod

SPAN_NAMES_ATTR = "graphtune.span_names"
WEIGHT_STORAGE_ATTR = "graphtune.weight_storage"


def op_type_of(value: Any) -> str:
    """Relax op name without the ``relax.`` prefix (``nn.conv2d``)."""
    name = str(value.op.name)
    return name[len("relax.") :] if name.startswith("relax.") else name


def _short(op_type: str) -> str:
    return op_type.split(".")[-1]


def normalize(mod: Any) -> Any:
    """Canonical form every other step expects (see the module docstring)."""
    views: dict[Any, Any] = {}
    mod = fold_constants_numpy(mod, views)
    mod = relax.transform.FoldConstant()(mod)
    mod = _canonicalize_clip(mod)
    mod = relax.transform.DeadCodeElimination(["main"])(mod)
    mod = relax.transform.CanonicalizeBindings()(mod)
    return _record_weight_dtypes(_record_weight_storage(set_span_names(mod), views), views)


def _weight_args(mod: Any) -> list[tuple[str, Any]]:
    """``(graph tensor name, constant)`` of every constant argument of ``main``'s calls.

    The names are :func:`build_graph`'s: ``<binding>.w<flat argument index>``.
    """
    out = []
    for b in main_bindings(mod):
        v = b.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
            for i, arg in enumerate(_flat_args(v.args)):
                if isinstance(arg, tvm.ir.GenericConst):
                    out.append((f"{b.var.name}.w{i}", arg))
    return out


def _record_weight_storage(mod: Any, views: dict[Any, Any]) -> Any:
    """Record in ``main``'s attributes which weight arguments share one parameter's bytes.

    Two arguments share when they are the same constant or one is a folded view of
    the other (``views``: folded constant -> the constant it was folded from). The
    constants survive the passes after folding as the same objects (TVM's mutators
    keep unchanged nodes), so identity finds them here, under their final names.
    The attribute maps each sharing tensor to the first one of its parameter.
    """
    first: dict[Any, str] = {}
    storage: dict[str, str] = {}
    for name, const in _weight_args(mod):
        owner = first.setdefault(_root(const, views), name)
        if owner != name:
            storage[name] = owner
    return _with_main_attr(mod, WEIGHT_STORAGE_ATTR, storage) if storage else mod


def _record_weight_dtypes(mod: Any, views: dict[Any, Any]) -> Any:
    """Record in ``main``'s attributes the INT8 weights folded from a ``dequantize``.

    The constant the CPU stand-in computes with is FP32; the NPU stores the INT8
    source (``compiler._qdq``), so the Graph tensor takes the source's dtype.
    """
    dtypes: dict[str, str] = {}
    for name, const in _weight_args(mod):
        src = str(_root(const, views).value.dtype)
        if is_int8(src) and not is_int8(str(const.value.dtype)):
            dtypes[name] = src
    return _with_main_attr(mod, WEIGHT_DTYPE_ATTR, dtypes) if dtypes else mod


def _with_main_attr(mod: Any, key: str, value: Any) -> Any:
    new = tvm.IRModule(dict(mod.functions), attrs=mod.attrs, global_infos=mod.global_infos)
    new["main"] = mod["main"].with_attr(key, value)
    return new


def _root(const: Any, views: dict[Any, Any]) -> Any:
    while const in views:
        const = views[const]
    return const


def _np_where(c: Any, a: Any, b: Any) -> Any:
    return np.where(c, a, b)


# Relax op -> numpy over constant tensor arguments. The result is cast to the binding's
# dtype and must have its static shape, or the call is left to FoldConstant.
_NUMPY_FOLD: dict[str, Callable[..., Any]] = {
    "relax.isnan": np.isnan,
    "relax.where": _np_where,
    "relax.less": np.less,
    "relax.less_equal": np.less_equal,
    "relax.greater": np.greater,
    "relax.greater_equal": np.greater_equal,
    "relax.equal": np.equal,
    "relax.not_equal": np.not_equal,
    "relax.add": np.add,
    "relax.subtract": np.subtract,
    "relax.multiply": np.multiply,
}
_FLOAT_ONLY: dict[str, Callable[..., Any]] = {"relax.divide": np.divide, "relax.sqrt": np.sqrt}
_RESHAPES = {"relax.reshape", "relax.expand_dims", "relax.squeeze", "relax.flatten"}


def fold_constants_numpy(mod: Any, views: dict[Any, Any] | None = None) -> Any:
    """Fold calls of ``main`` whose tensor arguments are all constants, with numpy.

    Covers elementwise ops, reshapes, transposes, casts, ``take``, ``concat``,
    ``broadcast_to`` and shapes of constants; anything else is left for
    ``FoldConstant``, which gives the same values (tests compare the two).

    Args:
        mod: The module.
        views: When given, filled with folded constant -> the constant it is a view
            of, for every fold of a view op (same elements in another layout or float
            type) of a floating-point constant.
    """
    bindings = main_bindings(mod)
    f = mod["main"]
    folded = 0

    def body(bb: relax.BlockBuilder) -> Any:
        nonlocal folded
        vmap: dict[Any, Any] = {}
        for b in bindings:
            value = remap(b.value, vmap)
            const = _numpy_value(value, b.var.ty)
            if const is not None:
                folded += 1
                vmap[b.var] = const
                source = _view_source(value, b.var.ty)
                if views is not None and source is not None:
                    views[const] = source
            else:
                vmap[b.var] = bb.emit(value, name_hint=b.var.name)
        out = f.body.body
        return vmap.get(out, remap(out, vmap))

    new = emit_main(mod, list(f.params), body)
    return new if folded else mod


_VIEWS = {*_RESHAPES, "relax.permute_dims", "relax.astype"}


def _view_source(value: Any, ty: Any) -> Any:
    """The floating-point constant a view op reads (the call is known constant), or None."""
    if str(value.op.name) not in (*_VIEWS, "relax.dequantize") \
            or not isinstance(value.args[0], tvm.ir.GenericConst):
        return None
    src = value.args[0]
    if str(value.op.name) == "relax.dequantize":  # an INT8 weight (compiler._qdq)
        return src if is_int8(str(src.value.dtype)) else None
    floats = ("float", "bfloat")
    if not (str(src.value.dtype).startswith(floats) and str(ty.dtype).startswith(floats)):
        return None
    return src


def _numpy_value(value: Any, ty: Any) -> Any:
    """The folded constant (or static ShapeExpr) of one call, or None."""
    if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
        return None
    name = str(value.op.name)
    args = list(value.args)
    if name == "relax.shape_of":  # of any tensor whose shape is static
        try:
            return relax.ShapeExpr(list(shape_of(args[0].ty)))
        except (ValueError, TypeError, AttributeError):
            return None
    if name == "relax.shape_to_tensor" and isinstance(args[0], relax.ShapeExpr):
        try:
            return relax.const(np.array([int(d) for d in args[0].values], np.int64), "int64")
        except TypeError:  # a symbolic dimension
            return None
    if not isinstance(ty, relax.TensorType) or ty.shape is None:
        return None
    try:
        out_shape = shape_of(ty)
    except (ValueError, TypeError):
        return None
    if name == "relax.concat":
        if not isinstance(args[0], relax.Tuple):
            return None
        tensors = list(args[0].fields)
        if not tensors or not all(isinstance(t, tvm.ir.GenericConst) for t in tensors):
            return None
        arrays = [t.value.numpy() for t in tensors]
        return _const(np.concatenate(arrays, axis=int(value.attrs.axis)), ty, out_shape)
    consts = [a for a in args if not isinstance(a, relax.ShapeExpr)]
    if not consts or not all(isinstance(a, tvm.ir.GenericConst) for a in consts):
        return None
    x = [a.value.numpy() for a in consts]
    try:
        if name in _NUMPY_FOLD:
            result = _NUMPY_FOLD[name](*x)
        elif name in _FLOAT_ONLY and all(np.issubdtype(a.dtype, np.floating) for a in x):
            result = _FLOAT_ONLY[name](*x)
        elif name in _RESHAPES or name == "relax.broadcast_to":
            result = x[0].reshape(out_shape) if name in _RESHAPES else \
                np.broadcast_to(x[0], out_shape)
        elif name == "relax.permute_dims":
            axes = value.attrs.axes
            result = np.transpose(x[0], None if axes is None else [int(a) for a in axes])
        elif name == "relax.astype":
            result = x[0]
        elif name == "relax.dequantize" and len(x) == 3:
            result = _dequantize(x[0], x[1], x[2], int(value.attrs.axis))
        elif name == "relax.take" and len(x) == 2:
            # "fast" promises in-range indices: numpy's "raise" checks that promise.
            modes: dict[str, Literal["raise", "wrap", "clip"]] = {
                "fast": "raise", "clip": "clip", "wrap": "wrap"}
            mode = modes.get(str(value.attrs.mode))
            if mode is None:
                return None
            axis = value.attrs.axis
            result = np.take(x[0], x[1], axis=None if axis is None else int(axis), mode=mode)
        else:
            return None
    except (ValueError, IndexError, TypeError):
        return None
    return _const(np.asarray(result), ty, out_shape)


def _dequantize(q: Any, scale: Any, zp: Any, axis: int) -> Any:
    """``(q - zero_point) * scale`` in FP32, per-channel along ``axis`` (as relax.dequantize)."""
    def along(v: Any) -> Any:
        if v.size == 1:
            return v.reshape(())
        shape = [1] * q.ndim
        shape[axis % q.ndim] = v.size
        return v.reshape(shape)

    return (q.astype(np.float32) - along(zp).astype(np.float32)) * along(scale).astype(np.float32)


def _const(result: Any, ty: Any, out_shape: tuple[int, ...]) -> Any:
    if tuple(result.shape) != out_shape:
        return None
    dtype = str(ty.dtype)
    # np.array, not np.ascontiguousarray: the latter turns a 0-d result into shape (1,).
    return relax.const(np.array(result, dtype=dtype, order="C"), dtype)


def _canonicalize_clip(mod: Any) -> Any:
    bindings = main_bindings(mod)
    if not any(_clip_call(b.value) for b in bindings):
        return mod
    f = mod["main"]

    def body(bb: relax.BlockBuilder) -> Any:
        vmap: dict[Any, Any] = {}
        for b in bindings:
            value = b.value
            kind = _clip_call(value)
            if kind:
                x, c = (remap(a, vmap) for a in value.args[1].fields)
                op = relax.op.maximum if kind == "maximum" else relax.op.minimum
                vmap[b.var] = bb.emit(op(x, c), name_hint=b.var.name)
            else:
                vmap[b.var] = bb.emit(remap(value, vmap), name_hint=b.var.name)
        return vmap[f.body.body] if f.body.body in vmap else remap(f.body.body, vmap)

    new = emit_main(mod, list(f.params), body)
    return relax.transform.DeadCodeElimination(["main"])(new)


def _clip_call(value: Any) -> str:
    if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op):
        return ""
    if value.op.name != "relax.call_tir" or not isinstance(value.args[0], tvm.ir.GlobalVar):
        return ""
    fname = value.args[0].name_hint
    for kind in ("maximum", "minimum"):
        if fname.startswith(kind) and len(value.args[1].fields) == 2:
            return kind
    return ""


def set_span_names(mod: Any) -> Any:
    """``SetSpanName``: give every binding of ``main`` a unique ``<op>_<k>`` name."""
    f = mod["main"]
    bindings = main_bindings(mod)
    producer_type: dict[Any, str] = {}
    counts: dict[str, int] = {}
    names: dict[Any, str] = {}
    for b in bindings:
        v = b.value
        if isinstance(v, relax.Call) and isinstance(v.op, tvm.ir.Op):
            user = _user_op(mod, v)  # a user op (compiler.ops) is named after itself
            t = user[0].lower() if user is not None else _short(op_type_of(v))
            producer_type[b.var] = t
            k = counts.get(t, 0)
            counts[t] = k + 1
            names[b.var] = f"{t}_{k}"
        elif isinstance(v, relax.TupleGetItem) and producer_type.get(v.tuple_value) == "batch_norm":
            names[b.var] = names[v.tuple_value]
            names[v.tuple_value] = names[v.tuple_value] + "_t"
        else:
            k = counts.get("v", 0)
            counts["v"] = k + 1
            names[b.var] = f"v_{k}"

    def body(bb: relax.BlockBuilder) -> Any:
        vmap: dict[Any, Any] = {}
        for b in bindings:
            vmap[b.var] = bb.emit(remap(b.value, vmap), name_hint=names[b.var])
        out = f.body.body
        return vmap.get(out, out)

    return emit_main(mod, list(f.params), body, attrs={SPAN_NAMES_ATTR: 1})


def has_span_names(mod: Any) -> bool:
    """Whether ``set_span_names`` already named this module's bindings."""
    attrs = mod["main"].attrs
    return attrs is not None and SPAN_NAMES_ATTR in attrs


def build_graph(mod: Any, name: str) -> Graph:
    """Read ``main`` of a normalised module into a Graph."""
    f = mod["main"]
    tensors: dict[str, Tensor] = {}
    offaxis: dict[str, tuple[int, int]] = {}
    # names as plain str: TVM's String would leak TVM objects into the frozen Graph
    params = [str(p.name) for p in f.params]
    first = shape_of(f.params[0].ty) if f.params else ()
    batch = int(first[0]) if first else 1
    for p in f.params:
        shape = shape_of(p.ty)
        batched = bool(shape) and shape[0] == batch
        tensors[str(p.name)] = Tensor(
            str(p.name), shape, str(p.ty.dtype), "input", prod(shape), 1 if batched else None
        )
    ops: list[Op] = []
    alias: dict[str, str] = {}
    tuple_producer: dict[str, int] = {}
    n_const = 0
    # Weights sharing one parameter's bytes: recorded by normalize() (views and shared
    # constants), or else found here by identity (a module normalize() did not see).
    recorded = f.attrs is not None and WEIGHT_STORAGE_ATTR in f.attrs
    storage = ({str(k): str(v) for k, v in f.attrs[WEIGHT_STORAGE_ATTR].items()}
               if recorded else {})
    first_use: dict[Any, str] = {}
    wdtype = ({str(k): str(v) for k, v in f.attrs[WEIGHT_DTYPE_ATTR].items()}
              if f.attrs is not None and WEIGHT_DTYPE_ATTR in f.attrs else {})

    def tensor_name(var: Any) -> str:
        name = str(var.name)
        return alias.get(name, name)

    for b in main_bindings(mod):
        v = b.value
        out_name = str(b.var.name)
        if isinstance(v, relax.Var):
            alias[out_name] = tensor_name(v)
            continue
        if isinstance(v, relax.TupleGetItem):
            src = tensor_name(v.tuple_value)
            src_op = tuple_producer.get(src)
            if src_op is not None and ops[src_op].op_type == "nn.batch_norm" and v.index == 0:
                op = ops[src_op]
                shape = shape_of(b.var.ty)
                old = tensors.pop(op.output)
                tensors[out_name] = Tensor(
                    out_name, shape, str(b.var.ty.dtype), "activation", prod(shape), old.batch_mult
                )
                ops[src_op] = _replace(
                    op, name=out_name, output=out_name, bindings=(*op.bindings, out_name)
                )
                tuple_producer.pop(src, None)
                continue
            ops.append(_make_op(len(ops), out_name, "tuple_get_item", [src], [], b.var,
                                {"index": int(v.index)}, tensors, batch))
            continue
        if not isinstance(v, relax.Call) or not isinstance(v.op, tvm.ir.Op):
            raise ValueError(f"unsupported binding {out_name}: {type(v).__name__}")
        op_type = op_type_of(v)
        inputs: list[str] = []
        weights: list[str] = []
        attrs = attrs_to_dict(v.attrs)
        user = _user_op(mod, v)
        if user is not None:  # call_tir of a user op's PrimFunc (compiler.ops)
            op_type, attrs = user[0], {**user[1], "graphtune.lane_pad": round(user[2].pad, 6)}
        for i, arg in enumerate(_flat_args(v.args)):
            if isinstance(arg, relax.Var):
                inputs.append(tensor_name(arg))
            elif isinstance(arg, tvm.ir.GenericConst):
                wname = f"{out_name}.w{i}"
                shape = tuple(int(s) for s in arg.value.shape)
                owner = first_use.setdefault(arg, wname)
                if not recorded and owner != wname:
                    storage[wname] = owner
                tensors[wname] = Tensor(wname, shape, wdtype.get(wname, str(arg.value.dtype)),
                                        "weight", prod(shape),
                                        storage=storage.get(wname))
                weights.append(wname)
                n_const += 1
            elif isinstance(arg, relax.ShapeExpr):
                attrs[f"arg{i}_shape"] = [int(x) for x in arg.values]
            elif isinstance(arg, tvm.ir.Constant):
                # A prim value (IntImm/FloatImm/StringImm: pad value, tril's k); TVM 0.27
                # has no relax.PrimValue class (GenericConst, a tensor, is caught above).
                attrs[f"arg{i}_value"] = str(arg.value)
            else:
                attrs[f"arg{i}"] = type(arg).__name__
        if user is not None:
            attrs.pop("arg0", None)  # the PrimFunc's GlobalVar
        op = _make_op(len(ops), out_name, op_type, inputs, weights, b.var, attrs, tensors, batch,
                      offaxis)
        if user is not None:
            op = _replace(op, flops=round(user[2].useful))
        if isinstance(b.var.ty, relax.TupleType):
            tuple_producer[out_name] = op.index
        ops.append(op)

    out_var = f.body.body
    outputs = (
        [tensor_name(x) for x in out_var.fields]
        if isinstance(out_var, relax.Tuple)
        else [tensor_name(out_var)]
    )
    ops = fold_qdq(ops, tensors, outputs)
    return Graph(
        name=name,
        batch=batch,
        ops=tuple(ops),
        tensors=tensors,
        inputs=tuple(params),
        outputs=tuple(outputs),
    )


def _user_op(mod: Any, value: Any) -> Any:
    """``(name, attrs, work)`` of a user op's ``call_tir`` (:mod:`compiler.ops`), else None."""
    if not isinstance(value, relax.Call) or getattr(value.op, "name", "") != "relax.call_tir":
        return None
    from compiler.ops._emit import call_info

    return call_info(mod, value)


def _flat_args(args: Any) -> list[Any]:
    out: list[Any] = []
    for a in args:
        if isinstance(a, relax.Tuple):
            out.extend(a.fields)
        else:
            out.append(a)
    return out


def _replace(op: Op, **kw: Any) -> Op:
    import dataclasses

    return dataclasses.replace(op, **kw)


def _make_op(
    index: int,
    name: str,
    op_type: str,
    inputs: list[str],
    weights: list[str],
    var: Any,
    attrs: dict[str, Any],
    tensors: dict[str, Tensor],
    batch: int,
    offaxis: dict[str, tuple[int, int]] | None = None,
) -> Op:
    """One graph op; ``offaxis`` tracks tensors whose batch sits on an axis other than 0.

    ``offaxis`` maps such a tensor to ``(outer, inner)`` (see :func:`_moved_batch`).
    PyTorch's attention exports move the batch to axis 1, fold it into other
    dims and move it back; tracking it lets the values after the move back count
    as batched again.
    """
    ty = var.ty
    if isinstance(ty, relax.TupleType):
        shapes = [shape_of(t) for t in ty.fields]
        out_shape = shapes[0]
        elements = sum(prod(s) for s in shapes)
        dtype = str(ty.fields[0].dtype)
    else:
        out_shape = shape_of(ty)
        elements = prod(out_shape)
        dtype = str(ty.dtype)
    in_shapes = [tensors[t].shape for t in inputs] + [tensors[w].shape for w in weights]
    if op_type in ("nn.conv2d", "matmul") and len(inputs) == 2:
        in_shapes = [tensors[t].shape for t in inputs]
    mult, separable = _batch_rule(
        op_type, [tensors[t] for t in inputs], out_shape, attrs, batch, bool(weights)
    )
    if offaxis is not None and mult is None:
        if any(t in offaxis for t in inputs):
            separable = False  # it reads samples off axis 0: a chunk cannot slice them
        pos = _moved_batch(op_type, inputs, tensors, offaxis, out_shape, attrs, batch)
        if pos is not None:
            held = _batch_dim(out_shape, pos[0], batch)
            if held is not None and held[:2] == (0, 1):
                # The batch is back on axis 0: the value is batched again, but the op
                # reads it from another axis, so its group cannot split by samples.
                mult, separable = held[2], False
            else:
                offaxis[name] = pos
    tensors[name] = Tensor(name, out_shape, dtype, "activation", elements, mult)
    macs = count_macs(op_type, in_shapes, out_shape, attrs)
    flops = count_flops(op_type, in_shapes, out_shape, attrs)
    return Op(
        index=index,
        name=name,
        op_type=op_type,
        inputs=tuple(inputs),
        weights=tuple(weights),
        output=name,
        attrs=tuple(sorted(attrs.items())),
        macs=macs,
        flops=flops,
        on_npu=is_npu_op(op_type),
        batch_separable=separable,
        bindings=(name,),
    )


_ELEMENTWISE_SAFE = {"nn.conv2d", "nn.conv3d", "nn.batch_norm", "nn.relu", "nn.max_pool2d",
                     "nn.avg_pool2d", "nn.adaptive_avg_pool2d", "nn.gelu", "nn.silu"}


def _batch_rule(
    op_type: str,
    inputs: list[Tensor],
    out_shape: tuple[int, ...],
    attrs: dict[str, Any],
    batch: int,
    const_operand: bool = False,
) -> tuple[int | None, bool]:
    """(batch multiplier of the output, whether the op splits along the batch).

    An op with no batched input produces an unbatched value and is trivially
    separable (it is replicated per chunk). An op with a batched input is
    separable when every chunk can be computed from its own slice.
    """
    batched = [t for t in inputs if t.batched]
    if not batched:
        return None, True
    lead = batched[0]
    mult = lead.batch_mult or 1

    def ok(m: int) -> tuple[int | None, bool]:
        return m, True

    def no() -> tuple[int | None, bool]:
        return None, False

    if not out_shape or out_shape[0] % batch:
        return no()
    out_mult = out_shape[0] // batch
    axes = attrs.get("axis", attrs.get("axes"))
    axis_list = [] if axes is None else ([axes] if isinstance(axes, int) else list(axes))
    ndim_out = len(out_shape)
    norm_axes = [a % max(len(lead.shape), 1) for a in axis_list]
    if op_type == "reshape":
        per_in = lead.elements // (batch)
        return ok(out_mult) if per_in * batch == prod_(out_shape) and out_mult >= 1 else no()
    if op_type in ("expand_dims", "squeeze"):
        rank = ndim_out if op_type == "expand_dims" else len(lead.shape)
        touched = [a % max(rank, 1) for a in axis_list] if axis_list else []
        if op_type == "squeeze" and not axis_list:
            touched = [i for i, d in enumerate(lead.shape) if d == 1]
        return ok(mult) if 0 not in touched and out_mult == mult else no()
    if op_type == "permute_dims":
        perm = attrs.get("axes")
        return ok(mult) if perm is None or ((perm and perm[0] == 0) and out_mult == mult) else no()
    if op_type in ("sum", "mean", "max", "min", "argmax", "argmin", "nn.softmax",
                   "nn.layer_norm", "concat", "split", "strided_slice", "nn.log_softmax"):
        if axes is None and op_type in ("sum", "mean", "max", "min", "argmax", "argmin"):
            return no()
        return ok(mult) if 0 not in norm_axes and out_mult == mult else no()
    user = _user_spec(op_type)
    if user is not None:  # a user op: separable when its prototype says the batch is free
        if user.prototype.batch_free and batched[0] is inputs[0] and out_mult == mult:
            return ok(out_mult)
        return out_mult if out_mult == mult else None, False
    if op_type == "take":
        if const_operand and len(inputs) == 1:
            return ok(out_mult)  # constant table, batched indices: an embedding lookup
        data = inputs[0] if inputs else None
        if data is not None and data.batched:
            ax = int(attrs.get("axis", 0) or 0) % len(data.shape)
            return ok(mult) if ax != 0 and out_mult == mult else no()
        return ok(out_mult)  # indices batched, table constant: an embedding lookup
    if op_type == "matmul":
        if all(t.batched for t in inputs) or (inputs[0].batched and len(inputs) == 1):
            return ok(mult) if out_mult == mult else no()
        a = inputs[0]
        if a.batched and (len(inputs) < 2 or len(inputs[1].shape) < ndim_out or True):
            return ok(mult) if out_mult == mult else no()
        return no()
    # elementwise ops, convolutions, pooling: batch stays on axis 0
    same_rank = all(len(t.shape) == ndim_out for t in batched)
    if same_rank and all((t.batch_mult or 1) == out_mult for t in batched):
        others = [t for t in inputs if not t.batched]
        if all(len(t.shape) < ndim_out or t.shape[0] == 1 for t in others):
            return ok(out_mult)
    return no()


def _user_spec(op_type: str) -> Any:
    """The registered user op of this type (:mod:`compiler.ops`), or None."""
    from compiler.ops._registry import custom_op

    return custom_op(op_type)


_KEEPS_LEADING = {"add", "subtract", "multiply", "divide", "nn.gelu", "nn.relu", "nn.silu",
                  "tanh", "sigmoid", "erf", "power", "sqrt", "rsqrt", "exp", "clip", "matmul",
                  "nn.softmax", "nn.layer_norm", "nn.dropout", "astype"}


def _moved_batch(
    op_type: str,
    inputs: list[str],
    tensors: dict[str, Tensor],
    offaxis: dict[str, tuple[int, int]],
    out_shape: tuple[int, ...],
    attrs: dict[str, Any],
    batch: int,
) -> tuple[int, int] | None:
    """Where the batch sits in the output, ``(outer, inner)``, for a batch carried off axis 0.

    A position says the value, read in row-major order, is ``outer`` blocks of
    ``batch`` samples of ``inner`` elements each. Views (reshape, squeeze,
    expand_dims) keep it; a permute moves the dim that holds the batch; ``take``
    with a scalar index on another dim drops that dim; ops that keep the dims up
    to the batch's (elementwise, matmul, softmax/layer norm over a later axis)
    rescale ``inner``. Anything else loses it (None).
    """
    moved = [(t, offaxis[t] if t in offaxis else (1, tensors[t].elements // batch))
             for t in inputs if t in offaxis or tensors[t].batched]
    if not moved or batch < 1:
        return None
    name, (outer, inner) = moved[0]
    shape = tensors[name].shape
    out_elements = prod(out_shape)
    if op_type in ("reshape", "squeeze", "expand_dims", "flatten"):
        return (outer, inner) if out_elements == prod(shape) else None
    held = _batch_dim(shape, outer, batch)
    if held is None:
        return None
    axis, o, m = held
    if op_type == "permute_dims":
        perm = attrs.get("axes")
        order = list(perm) if perm is not None else list(reversed(range(len(shape))))
        if sorted(order) != list(range(len(shape))):
            return None
        new_axis = order.index(axis)
        return prod(out_shape[:new_axis]) * o, m * prod(out_shape[new_axis + 1:])
    if op_type == "take" and inputs and inputs[0] == name and len(out_shape) == len(shape) - 1:
        ax = int(attrs.get("axis", 0) or 0) % len(shape)
        if ax == axis:
            return None
        return (outer // shape[ax], inner) if ax < axis else (outer, inner // shape[ax])
    if op_type in _KEEPS_LEADING and len(out_shape) == len(shape) and \
            tuple(out_shape[:axis + 1]) == tuple(shape[:axis + 1]):
        axes = attrs.get("axis", attrs.get("axes"))
        axis_list = [] if axes is None else ([axes] if isinstance(axes, int) else list(axes))
        if any(x % len(shape) <= axis for x in axis_list):
            return None
        return outer, m * prod(out_shape[axis + 1:])
    return None


def _batch_dim(shape: tuple[int, ...], outer: int, batch: int) -> tuple[int, int, int] | None:
    """``(axis, o, m)``: dim ``axis`` is ``o * batch * m`` and holds the batch; None if split."""
    acc = 1
    for i, d in enumerate(shape):
        if acc > outer:
            return None
        if outer % acc == 0 and d % (outer // acc * batch) == 0:
            o = outer // acc
            return i, o, d // (o * batch)
        acc *= d
    return None


def prod_(shape: tuple[int, ...]) -> int:
    return prod(shape)
