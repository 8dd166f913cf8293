"""Apply a :class:`~compiler.schedule.GraphSchedule` to a normalised Relax module.

The result is real Relax, built with ``tvm.compile`` like any module:

* every group becomes a private Relax function ``<group name>`` whose params are
  the group's inputs at *chunk* shape (dim 0 = batch / split), carrying the
  attributes ``graphtune.group``, ``graphtune.split``, ``graphtune.mem_scope``
  (one per chunk) and ``graphtune.core_bind`` (one per chunk);
* ``main`` calls it once per chunk, with ``split``/``concat`` bindings for the
  schedule's transfers, in exactly the schedule's execution order;
* ``main`` carries the whole schedule as ``graphtune.schedule`` (JSON text).

Shape constants that pin the batch (a Reshape target ``[16, 128, 12, 64]``)
are rescaled to the chunk inside split groups.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import tvm
from tvm import relax

from compiler._relax_util import emit_main, main_bindings, remap, shape_of
from compiler.derive import group_io
from compiler.errors import ScheduleError

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule, GroupSpec

SCHEDULE_ATTR = "graphtune.schedule"


def apply_schedule(mod: Any, graph: Graph, schedule: GraphSchedule) -> Any:
    """The scheduled IRModule (see the module docstring)."""
    schedule.validate(graph)
    f = mod["main"]
    by_var = {b.var.name: b for b in main_bindings(mod)}
    params = {p.name: p for p in f.params}
    funcs: dict[str, Any] = {}

    from compiler.ops._emit import rebatcher

    rebatch = rebatcher(mod)  # user ops (compiler.ops): PrimFuncs rebuilt at chunk shapes

    def emit_groups(bb: relax.BlockBuilder) -> None:
        for g in schedule.groups:
            funcs[g.name] = _emit_group(bb, graph, g, by_var, rebatch)

    transfers = {t.name: t for t in schedule.transfers}
    groups = {g.name: g for g in schedule.groups}
    io = {g.name: group_io(graph, g.ops) for g in schedule.groups}
    producer_split: dict[str, int] = {}
    for g in schedule.groups:
        producer_split[io[g.name].outputs[0]] = g.split

    def body(bb: relax.BlockBuilder) -> Any:
        avail: dict[tuple[str, int, int], Any] = {}
        whole: dict[str, Any] = {}
        for name, p in params.items():
            avail[(name, 1, 0)] = p
            whole[name] = p

        def value(t: str, factor: int, chunk: int) -> Any:
            if not graph.tensors[t].batched:
                return whole[t]
            if (t, factor, chunk) not in avail:
                raise ScheduleError(f"tensor {t} chunk {chunk}/{factor} is not available yet")
            return avail[(t, factor, chunk)]

        for step in schedule.order:
            if step.kind == "group":
                g = groups[step.name]
                args = [value(t, g.split, step.chunk) for t in io[g.name].inputs]
                out_t = io[g.name].outputs[0]
                var = bb.emit(
                    relax.Call(funcs[g.name], args), name_hint=f"{g.name}_c{step.chunk}"
                )
                avail[(out_t, g.split, step.chunk)] = var
                if not graph.tensors[out_t].batched and step.chunk == 0:
                    whole[out_t] = var
            else:
                t = transfers[step.name]
                srcs = [value(t.tensor, t.src_factor, c) for c in t.src_chunks]
                if t.kind == "concat":
                    var = bb.emit(relax.op.concat(srcs, axis=0), name_hint=t.name)
                    avail[(t.tensor, t.dst_factor, t.dst_chunks[0])] = var
                else:
                    parts = bb.emit(
                        relax.op.split(srcs[0], len(t.dst_chunks), axis=0), name_hint=t.name
                    )
                    for i, c in enumerate(t.dst_chunks):
                        avail[(t.tensor, t.dst_factor, c)] = bb.emit(
                            relax.TupleGetItem(parts, i), name_hint=f"{t.name}_{i}"
                        )
        outs = [value(t, 1, 0) if graph.tensors[t].batched else whole[t] for t in graph.outputs]
        return outs[0] if len(outs) == 1 else relax.Tuple(outs)

    return emit_main(
        mod,
        list(f.params),
        body,
        attrs={SCHEDULE_ATTR: schedule.dumps()},
        extra=emit_groups,
    )


def _emit_group(bb: relax.BlockBuilder, graph: Graph, g: GroupSpec, by_var: dict[str, Any],
                rebatch: Any = None) -> Any:
    io = group_io(graph, g.ops)
    samples = graph.batch // g.split
    vmap: dict[Any, Any] = {}
    params = []
    for t in io.inputs:
        tensor = graph.tensors[t]
        src = by_var[t].var if t in by_var else None
        ty = src.ty if src is not None else None
        if ty is None:
            ty = relax.TensorType(list(tensor.shape), tensor.dtype)
        shape = list(shape_of(ty))
        if tensor.batched and g.split > 1:
            shape[0] = (tensor.batch_mult or 1) * samples
        p = relax.Var(t, relax.TensorType(shape, str(ty.dtype)))
        params.append(p)
        if src is not None:
            vmap[src] = p
        else:
            vmap[t] = p
    attrs = {
        "graphtune.group": g.name,
        "graphtune.split": g.split,
        "graphtune.mem_scope": [c.mem_scope for c in g.chunks],
        "graphtune.core_bind": [[list(p) for p in c.core_bind] for c in g.chunks],
    }
    with bb.function(g.name, params, attrs=attrs, private=True):
        with bb.dataflow():
            for i in sorted(g.ops):
                op = graph.ops[i]
                for bname in op.bindings:
                    b = by_var[bname]
                    val = _remap_value(b.value, vmap, graph, g, samples, op.output)
                    if rebatch is not None and g.split > 1:
                        val = rebatch(bb, val)
                    vmap[b.var] = bb.emit(val, name_hint=bname)
            out = bb.emit_output(vmap[by_var[io.outputs[0]].var])
        return bb.emit_func_output(out)


def _remap_value(value: Any, vmap: dict[Any, Any], graph: Graph, g: GroupSpec, samples: int,
                 out: str) -> Any:
    tensor = graph.tensors.get(out)
    if g.split > 1 and tensor is not None and tensor.batched and isinstance(value, relax.Call):
        args = list(value.args)
        changed = False
        for i, a in enumerate(args):
            if isinstance(a, relax.ShapeExpr) and len(a.values) == len(tensor.shape):
                dims = [int(x) for x in a.values]
                if dims and dims[0] == tensor.shape[0]:
                    dims[0] = (tensor.batch_mult or 1) * samples
                    args[i] = relax.ShapeExpr(dims)
                    changed = True
        if changed:
            value = relax.Call(value.op, args, value.attrs, value.ty_args)
    # Params created for model inputs are keyed by name (they have no binding).
    for var in relax.analysis.free_vars(value):
        if var not in vmap and var.name in vmap:
            vmap[var] = vmap[var.name]
    return remap(value, {k: v for k, v in vmap.items() if not isinstance(k, str)})


def scheduled_from(mod: Any) -> str | None:
    """The schedule JSON recorded on a scheduled module's ``main`` (None if unscheduled)."""
    attrs = mod["main"].attrs
    if attrs is None or SCHEDULE_ATTR not in attrs:
        return None
    return str(attrs[SCHEDULE_ATTR])


def check_well_formed(mod: Any) -> bool:
    """Whether TVM considers the module well formed."""
    return bool(tvm.relax.analysis.check_well_formed(mod))
