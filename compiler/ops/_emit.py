"""A user op's implementation: its TE compute as a scheduled PrimFunc, emitted with call_tir.

:func:`primfunc` builds the op's ``te.compute`` on placeholders of the given
shapes, checks the result against the prototype's inference, turns it into a
PrimFunc (``te.create_prim_func``, what ``BlockBuilder.emit_te`` does), applies
the op's schedule (or :func:`auto_schedule`) on a ``tvm.s_tir.Schedule`` and
reads back what the simulator prices (:class:`Work`). :func:`emit_call` adds the
PrimFunc to a ``BlockBuilder`` and emits ``call_tir`` on it, so the compiled
artifact runs exactly the scheduled function.

The price (:class:`Work`), per compute stage of the TE body: its iterations
(output elements times reduction extent) and its lane padding on the 64-lane
vector unit: the stage's innermost vectorised loop (or, when the schedule
vectorised none of its loops, its innermost loop: the DSL's own vectorisation of
the innermost axis) of extent ``v`` issues ``ceil(v / 64)`` instructions of 64
lanes, so each iteration costs ``ceil(v / 64) * 64 / v`` lane slots: an inner
extent of 48 costs 64/48 = 4/3 the time of 64.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from compiler.ops._registry import CustomOp, OpError, _one_line

__all__ = ["ATTR_KEY", "NAME_KEY", "PAD_KEY", "Work", "auto_schedule", "emit_call", "lane_pad",
           "primfunc", "trial"]

NAME_KEY = "graphtune.op"
ATTR_KEY = "graphtune.op_attrs"
PAD_KEY = "graphtune.lane_pad"
WORK_KEY = "graphtune.op_work"
FUNC_PREFIX = "custom_"


@dataclass(frozen=True)
class Work:
    """What the simulator prices for one call of the op.

    Attributes:
        useful: Lane operations of the TE body (stage iterations: output elements
            times reduction extent), or the cost hint's count.
        padded: The same with every stage's lane padding (``>= useful``).
        lanes: ``stage name -> lane group`` (innermost vectorised extent, or
            innermost extent).
    """

    useful: float
    padded: float
    lanes: dict[str, int]

    @property
    def pad(self) -> float:
        """``padded / useful``: how much the schedule's lane groups waste."""
        return self.padded / self.useful if self.useful else 1.0


def lane_pad(extent: int, lanes: int = 64) -> float:
    """Lane slots per element of a loop of ``extent`` vectorised on ``lanes`` lanes."""
    e = max(int(extent), 1)
    return math.ceil(e / lanes) * lanes / e


def auto_schedule(sch: Any) -> None:
    """The default schedule (the DSL's "Auto Schedule" equivalent).

    Every stage's innermost loop is vectorised: whole when it has at most 64
    iterations, otherwise split by 64 (or by its largest divisor up to 64) and
    the inner part vectorised. A reduction's innermost loop cannot be vectorised
    in place and is left alone (the simulator then takes it as the lane group).
    """
    from tvm.s_tir import ScheduleError

    for block in sch.get_child_blocks(sch.get_sblock("root")):
        loops = sch.get_loops(block)
        if not loops:
            continue
        inner = loops[-1]
        extent = int(sch.get(inner).extent)
        try:
            if extent > 64:
                factor = max(d for d in range(1, 65) if extent % d == 0)
                if factor > 1:
                    inner = sch.split(inner, [None, factor])[-1]
                else:
                    continue
            sch.vectorize(inner)
        except ScheduleError:
            continue


def _placeholders(op: CustomOp, shapes: Sequence[Sequence[int]], dtypes: Sequence[str]
                  ) -> list[Any]:
    from tvm import te

    return [te.placeholder([int(d) for d in s], dtype=str(t), name=inp.name)
            for inp, s, t in zip(op.prototype.inputs, shapes, dtypes, strict=True)]


def primfunc(op: CustomOp, shapes: Sequence[Sequence[int]], dtypes: Sequence[str],
             attrs: dict[str, Any], consts: Sequence[bool] | None = None
             ) -> tuple[Any, tuple[int, ...], str, Work]:
    """``(scheduled PrimFunc, output shape, dtype, Work)`` of ``op`` on inputs of these shapes.

    Raises:
        OpError: a wrong input, attribute, inference, compute or schedule (one line).
    """
    from tvm import te
    from tvm.s_tir import Schedule

    op.check_inputs(shapes, dtypes, consts)
    shape, dtype = op.infer(shapes, dtypes, attrs)
    xs = _placeholders(op, shapes, dtypes)
    try:
        out = op.compute(*xs, **attrs)
    except Exception as exc:
        raise OpError(f"op {op.name}: compute raised {_one_line(exc)}") from None
    if not isinstance(out, te.Tensor):
        raise OpError(f"op {op.name}: compute must return one te.Tensor, "
                      f"got {type(out).__name__}")
    got = tuple(int(d) for d in out.shape)
    if got != shape:
        raise OpError(f"op {op.name}: compute's output shape {list(got)} disagrees with the "
                      f"prototype's inference {list(shape)}")
    if str(out.dtype) != dtype:
        raise OpError(f"op {op.name}: compute's output dtype {out.dtype} disagrees with the "
                      f"prototype's inference {dtype}")
    stages = _stages(out)
    try:
        func = te.create_prim_func([*xs, out])
    except Exception as exc:
        raise OpError(f"op {op.name}: compute is not a TE program TVM can lower: "
                      f"{_one_line(exc)}") from None
    sch = Schedule(func)
    which = "schedule" if op.schedule is not None else "auto schedule"
    try:
        (op.schedule or auto_schedule)(sch)
    except Exception as exc:
        raise OpError(f"op {op.name}: {which} raised {_one_line(exc)}") from None
    work = _work(op, sch, stages, shape)
    scheduled = sch.mod["main"].without_attr("global_symbol").with_attrs({
        NAME_KEY: op.name,
        ATTR_KEY: json.dumps(attrs, sort_keys=True),
        WORK_KEY: json.dumps([work.useful, work.padded]),
        "tir.is_scheduled": True,
    })
    return scheduled, shape, dtype, work


def _stages(out: Any) -> list[tuple[str, float, float]]:
    """``(name, output elements, reduction extent)`` of every compute stage, producers first."""
    from tvm import te

    seen: dict[Any, None] = {}
    order: list[Any] = []

    def visit(t: Any) -> None:
        o = t.op
        if o in seen:
            return
        seen[o] = None
        for x in o.input_tensors:
            visit(x)
        if isinstance(o, te.ComputeOp):
            order.append(o)

    visit(out)
    stages = []
    for o in order:
        elements = math.prod(int(iv.dom.extent) for iv in o.axis)
        red = math.prod(int(iv.dom.extent) for iv in o.reduce_axis) if o.reduce_axis else 1
        stages.append((str(o.name), float(elements), float(red)))
    return stages


def _work(op: CustomOp, sch: Any, stages: list[tuple[str, float, float]],
          shape: tuple[int, ...]) -> Work:
    """Element and reduction counts of the stages, each padded by its lane group."""
    from tvm import tirx

    lanes: dict[str, int] = {}
    for name, _, _ in stages:
        try:
            loops = sch.get_loops(sch.get_sblock(name))
        except Exception:  # inlined by the schedule: priced with its consumer below
            continue
        fors = [sch.get(lp) for lp in loops]
        vec = [f for f in fors if f.kind == tirx.ForKind.VECTORIZED]
        inner = vec[-1] if vec else (fors[-1] if fors else None)
        lanes[name] = int(inner.extent) if inner is not None else 1
    out_name = stages[-1][0] if stages else ""
    default = lanes.get(out_name, 64)
    useful = padded = 0.0
    for name, elements, red in stages:
        n = elements * red
        useful += n
        padded += n * lane_pad(lanes.get(name, default))
    if op.cost_hints is not None:
        pad = padded / useful if useful else 1.0
        useful = math.prod(shape) * float(op.cost_hints.work_per_element)
        padded = useful * pad
    return Work(useful, padded, lanes)


def trial(op: CustomOp) -> Work:
    """Run the prototype, compute and schedule on the prototype's example shapes."""
    example = op.prototype.example or ()
    dtype = "float32" if "float32" in op.info.dtypes else op.info.dtypes[0]
    attrs = op.check_attrs({})
    try:
        return primfunc(op, example, [dtype] * len(example), attrs)[3]
    except OpError as exc:
        raise OpError(f"{exc} (registration check on the example shapes "
                      f"{[list(s) for s in example]})") from None


def emit_call(bb: Any, op: CustomOp, args: Sequence[Any], attrs: dict[str, Any]) -> Any:
    """``call_tir`` of ``op``'s scheduled PrimFunc on ``args`` (Relax tensors), to emit.

    The PrimFunc is added to ``bb``'s module; the call is returned unbound.
    """
    import tvm
    from tvm import relax

    from compiler._relax_util import shape_of

    shapes, dtypes, consts = [], [], []
    for inp, a in zip(op.prototype.inputs, args, strict=False):
        ty = a.ty
        if not isinstance(ty, relax.TensorType) or ty.shape is None:
            raise OpError(f"op {op.name}: input {inp.name!r} is not a tensor of known shape")
        try:
            shapes.append(shape_of(ty))
        except (TypeError, ValueError):
            raise OpError(f"op {op.name}: input {inp.name!r} has a dynamic shape: "
                          "not supported") from None
        dtypes.append(str(ty.dtype))
        consts.append(isinstance(a, tvm.ir.GenericConst))
    if len(args) != len(op.prototype.inputs):
        op.check_inputs([()] * len(args), dtypes)  # the count error
    func, shape, dtype, _ = primfunc(op, shapes, dtypes, attrs, consts)
    gv = bb.add_func(func, f"{FUNC_PREFIX}{op.name}")
    return relax.call_tir(gv, relax.Tuple(list(args)), relax.TensorType(list(shape), dtype))


def call_info(mod: Any, value: Any) -> tuple[str, dict[str, Any], Work] | None:
    """``(op name, attrs, work)`` when ``value`` is a ``call_tir`` of a user op's PrimFunc."""
    import tvm
    from tvm import relax

    if not isinstance(value, relax.Call) or not isinstance(value.op, tvm.ir.Op) \
            or value.op.name != "relax.call_tir" or not isinstance(value.args[0], tvm.ir.GlobalVar):
        return None
    gv = value.args[0]
    if not gv.name_hint.startswith(FUNC_PREFIX):
        return None
    try:
        func = mod[gv]
    except Exception:
        return None
    fattrs = func.attrs
    if fattrs is None or NAME_KEY not in fattrs:
        return None
    useful, padded = json.loads(str(fattrs[WORK_KEY]))
    return (str(fattrs[NAME_KEY]), json.loads(str(fattrs[ATTR_KEY])),
            Work(float(useful), float(padded), {}))


def rebatcher(mod: Any) -> Callable[[Any, Any], Any] | None:
    """For :mod:`compiler._apply`: re-emit a user op's call at its arguments' (chunk) shapes.

    Returns None when ``mod`` calls no user op. The returned function takes
    ``(bb, value)`` and returns the value to emit (a new ``call_tir`` when
    ``value`` calls a user op whose PrimFunc was built for other shapes).
    """
    from compiler._relax_util import main_bindings, shape_of
    from compiler.ops._registry import custom_op

    calls = {}
    shapes: dict[Any, list[tuple[int, ...]]] = {}  # the shapes each PrimFunc was built for
    for b in main_bindings(mod):
        info = call_info(mod, b.value)
        if info is not None:
            calls[b.value.args[0]] = info
            shapes[b.value.args[0]] = [shape_of(a.ty) for a in b.value.args[1].fields]
    if not calls:
        return None

    def rebatch(bb: Any, value: Any) -> Any:
        from tvm import relax

        if not isinstance(value, relax.Call) or not value.args \
                or value.args[0] not in calls:
            return value
        name, attrs, _ = calls[value.args[0]]
        op = custom_op(name)
        if op is None:
            raise OpError(f"op {name}: not registered in this process: load its plug-in "
                          "(--plugin MODULE or the graphtune.ops entry point)")
        args = list(value.args[1].fields)
        try:
            now = [shape_of(a.ty) for a in args]
        except (TypeError, ValueError, AttributeError):
            return value
        if now == shapes[value.args[0]]:
            return value
        return emit_call(bb, op, args, attrs)

    return rebatch
