"""``graphtune schedule make|show|export`` (and the short form ``graphtune schedule MODEL.onnx``).

``make`` writes a :class:`~compiler.schedule.GraphSchedule` from an automatic
level (``--level N``, :func:`compiler.auto.graph_schedule_level`) or one of the
guide's hand-written plans (``--plan``); ``show`` prints the guide's table and
the execution order; ``export`` writes the model as ONNX with every node
annotated with its group, for Netron.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from autotune.commands._common import check_outputs, console, load_model
from autotune.report._placements import bind_shape, chunk_summary
from compiler.errors import GraphtuneError, ScheduleError
from compiler.files import AtomicFile, commit_all, write_atomic

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.model import Model
    from compiler.schedule import GraphSchedule, Placement

from compiler.guide_plans import PLAN_BATCH


class _ScheduleGroup(click.Group):
    """``graphtune schedule MODEL.onnx ...`` is ``graphtune schedule make MODEL.onnx ...``."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and (
            os.path.exists(args[0]) or args[0].endswith(".onnx")
        ):
            return "make", self.commands["make"], args
        return super().resolve_command(ctx, args)


def register(group: click.Group) -> None:
    """Attach this module's commands."""
    group.add_command(schedule_group)


@click.group("schedule", cls=_ScheduleGroup)
def schedule_group() -> None:
    """Make, show and export graph schedules.

    The short form ``graphtune schedule MODEL.onnx --level 3 -o S.json`` is ``make``.
    """


# ---- make ---------------------------------------------------------------------------------
@schedule_group.command("make")
@click.argument("model_path", metavar="MODEL.onnx|.pt2")
@click.option("--level", type=click.IntRange(0, 3), default=None, help="Automatic level O0-O3.")
@click.option("--plan", "plan_name", type=click.Choice(sorted(PLAN_BATCH)), default=None,
              help="One of the guide's hand-written plans.")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), default=None,
              help="The best tuned schedule of a tuning log (the one compile --log applies).")
@click.option("--batch", type=int, default=None,
              help="Batch to import the model at (default: the file's, or the plan's batch).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Schedule JSON to write.")
@click.option("--onnx", "onnx_out", type=click.Path(dir_okay=False), default=None,
              help="Also write the grouped graph as ONNX (for Netron).")
@click.option("--target", "target_file", type=click.Path(dir_okay=False), default=None,
              help="Hardware TOML (default: the STCP920).")
def make_cmd(
    model_path: str,
    level: int | None,
    plan_name: str | None,
    log_path: str | None,
    batch: int | None,
    output: str,
    onnx_out: str | None,
    target_file: str | None,
) -> None:
    """Write a graph schedule for MODEL.onnx from --level N, --plan NAME or --log LOG.jsonl."""
    if sum(x is not None for x in (level, plan_name, log_path)) != 1:
        raise ScheduleError("give exactly one of --level N, --plan NAME or --log LOG.jsonl")
    check_outputs({"-o": output, "--onnx": onnx_out}, inputs=[model_path, target_file, log_path])
    target = _target(target_file)
    if plan_name is not None:
        natural = PLAN_BATCH[plan_name]
        if batch is not None and batch != natural:
            raise ScheduleError(
                f"plan {plan_name} is written for batch {natural} (its core bindings assume "
                f"it), not {batch}: use --batch {natural} or --level N"
            )
        batch = natural
    model = load_model(model_path, batch)
    graph = model.graph
    if plan_name is not None:
        schedule = _run_plan(plan_name, graph)
    elif log_path is not None:
        schedule = _tuned(log_path, graph, target)
    else:
        from compiler.auto import graph_schedule_level

        assert level is not None
        schedule = graph_schedule_level(graph, target, level)
    schedule.validate(graph, target)
    inputs = [model_path, target_file]
    staged = [AtomicFile(output, inputs=inputs)]
    try:
        staged[0].write((schedule.dumps(indent=1) + "\n").encode())
        msg = (f"{output}: {len(schedule.groups)} groups, {len(schedule.transfers)} transfers, "
               f"{len(schedule.order)} steps, batch {schedule.batch} ({schedule.source})")
        if onnx_out is not None:
            staged.append(AtomicFile(onnx_out, inputs=inputs))
            proto, _, _ = annotated_onnx(model, schedule)
            staged[1].write(proto.SerializeToString())
            msg += f"; grouped graph {onnx_out}"
        commit_all(staged)  # both files or neither
    finally:
        for f in staged:
            f.discard()
    click.echo(msg)


def _target(path: str | None) -> Any:
    from compiler.target import Target

    return Target.from_file(path) if path else Target.default()


def _tuned(log_path: str, graph: Graph, target: Any) -> GraphSchedule:
    """The best valid record of ``graph``'s workload on ``target`` in a log."""
    from autotune import ApplyHistoryBest
    from compiler.schedule import GraphSchedule

    ctx = ApplyHistoryBest(log_path)
    found = ctx.query(graph.workload_key, target.key)
    if found is None:
        raise ScheduleError(f"{log_path} has no tuned schedule for {graph.name} "
                            f"(workload {graph.workload_key}) on {target.key}: tune it first")
    return GraphSchedule.from_json(found)


def _run_plan(name: str, graph: Graph) -> GraphSchedule:
    """A hand-written plan, with any failure to fit the model as one ScheduleError."""
    from compiler.guide_plans import guide_plan

    try:
        return guide_plan(name, graph)
    except GraphtuneError as exc:
        raise ScheduleError(f"plan {name} does not fit model {graph.name}: {exc}") from None
    except (KeyError, IndexError, ValueError, TypeError, AttributeError) as exc:
        # The plans index ops by type and position; a model without them fails here.
        detail = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        raise ScheduleError(f"plan {name} does not fit model {graph.name}: {detail}") from None


# ---- show ---------------------------------------------------------------------------------
@schedule_group.command("show")
@click.argument("schedule_path", metavar="S.json")
@click.option("--model", "model_path", default=None, metavar="MODEL.onnx|.pt2",
              help="Validate against this model and name each group's ops.")
@click.option("--target", "target_file", type=click.Path(dir_okay=False), default=None,
              help="Hardware TOML (default: the STCP920).")
def show_cmd(schedule_path: str, model_path: str | None, target_file: str | None) -> None:
    """Print a schedule's groups, transfers and execution order."""

    schedule = load_schedule(schedule_path)
    target = _target(target_file)  # a bad --target is an error even without --model
    graph = None
    if model_path is not None:
        graph = load_model(model_path, schedule.batch).graph
        schedule.validate(graph, target)
    _print_schedule(schedule, graph)


def load_schedule(path: str) -> GraphSchedule:
    """``GraphSchedule.load`` with a binary (non-UTF-8) file as a ScheduleError too."""
    from compiler.schedule import GraphSchedule

    try:
        return GraphSchedule.load(path)
    except UnicodeDecodeError:
        raise ScheduleError(f"{path} is not a schedule: not a JSON text file") from None


def _print_schedule(s: GraphSchedule, graph: Graph | None) -> None:
    from rich.table import Table

    out = console()
    key = s.workload_key or "-"
    out.print(f"[bold]graph schedule[/bold] batch {s.batch}, source {s.source or '-'}, "
              f"workload {key}" + (", [green]valid for the model[/green]" if graph else ""))
    groups = Table(title="groups")
    for col in ("group", "ops", "split", "samples/chunk", "mem_scope core_bind (per chunk)"):
        groups.add_column(col)
    for g in s.groups:
        ops = f"{len(g.ops)}"
        if graph is not None:
            first, last = graph.ops[g.ops[0]].name, graph.ops[g.ops[-1]].name
            ops = f"{first}..{last} ({len(g.ops)})" if len(g.ops) > 1 else f"{first} (1)"
        samples = str(s.batch // g.split) if g.split and s.batch % g.split == 0 else "?"
        groups.add_row(g.name, ops, str(g.split), samples, chunk_summary(g.chunks))
    out.print(groups)
    if s.transfers:
        tr = Table(title="transfers")
        for col in ("transfer", "kind", "tensor", "split", "chunks", "mem_scope", "core_bind"):
            tr.add_column(col)
        for t in s.transfers:
            tr.add_row(t.name, t.kind, t.tensor, f"{t.src_factor}->{t.dst_factor}",
                       f"{list(t.src_chunks)}->{list(t.dst_chunks)}", t.placement.mem_scope,
                       bind_shape(t.placement))
        out.print(tr)
    order = Table(title=f"execution order ({len(s.order)} steps)")
    for col in ("#", "step", "mem_scope", "core_bind"):
        order.add_column(col)
    by_group = {g.name: g for g in s.groups}
    by_transfer = {t.name: t for t in s.transfers}
    for i, step in enumerate(s.order):
        place: Placement | None = None
        if step.kind == "group" and step.name in by_group:
            chunks = by_group[step.name].chunks
            place = chunks[step.chunk] if step.chunk < len(chunks) else None
        elif step.kind == "transfer" and step.name in by_transfer:
            place = by_transfer[step.name].placement
        order.add_row(str(i), str(step), place.mem_scope if place else "?",
                      bind_shape(place) if place else "?")
    out.print(order)


# ---- export -------------------------------------------------------------------------------
@schedule_group.command("export")
@click.argument("schedule_path", metavar="S.json")
@click.option("--model", "model_path", required=True, metavar="MODEL.onnx|.pt2",
              help="The model the schedule was made for.")
@click.option("--onnx", "onnx_out", required=True, type=click.Path(dir_okay=False),
              help="ONNX file to write.")
@click.option("--functions", is_flag=True,
              help="Draw each group as one ONNX local function (a box Netron opens).")
def export_cmd(schedule_path: str, model_path: str, onnx_out: str, functions: bool) -> None:
    """Write MODEL.onnx with every node annotated with its group (open it in Netron)."""

    check_outputs({"--onnx": onnx_out}, inputs=[schedule_path, model_path])
    schedule = load_schedule(schedule_path)
    model = load_model(model_path, schedule.batch)
    schedule.validate(model.graph)
    matched, total = export_onnx(model, schedule, onnx_out, functions=functions,
                                 inputs=[schedule_path, model_path])
    shown = "as ONNX functions" if functions else "annotated with"
    click.echo(f"{onnx_out}: {total} nodes {shown} {len(schedule.groups)} groups "
               f"({matched} matched to Relax ops by dataflow and shape)")


def export_onnx(
    model: Model, schedule: GraphSchedule, path: str, functions: bool = False,
    inputs: Sequence[str | None] = (),
) -> tuple[int, int]:
    """Write the model with group annotations; returns (nodes matched, nodes).

    See :func:`annotated_onnx`; ``inputs`` are files ``path`` must not be.
    """
    proto, matched, total = annotated_onnx(model, schedule, functions)
    write_atomic(path, proto.SerializeToString(), inputs=[model.path, *inputs])
    return matched, total


def annotated_onnx(model: Model, schedule: GraphSchedule, functions: bool = False) -> tuple[Any, int, int]:
    """The model's ONNX with group annotations, the nodes matched to ops, and the nodes.

    Every node gets ``metadata_props`` ``graphtune.group``, ``graphtune.split``,
    ``graphtune.chunks`` and ``graphtune.mapping``, and a ``doc_string`` saying the
    same. The ops of the schedule are Relax ops (``conv2d_3``), not ONNX nodes, so
    nodes are matched to ops by dataflow: from the Relax tensors of a node's
    inputs, the nearest unclaimed downstream op of a compatible type and the
    node's output shape. A node with no such op (folded at import) inherits the
    group of its input's producer (``graphtune.mapping = inferred``).

    By default the grouping is shown with annotations, which keep the node list
    (and so every tool's view of the model) unchanged; ``functions=True`` also
    wraps each group in an ONNX local function (:mod:`._onnx_functions`).
    """
    import onnx

    from compiler.schedule import core_bind_json

    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)
    graph = model.graph
    group_of = schedule.group_of_op()
    groups = {g.name: g for g in schedule.groups}
    matches = match_nodes(model, graph)
    matched = 0
    for node, (op_index, how) in zip(proto.graph.node, matches):
        if how == "shape":
            matched += 1
        name = group_of.get(op_index) if op_index is not None else None
        del node.metadata_props[:]
        if name is None:
            node.doc_string = "graphtune: no group (no Relax op found for this node)"
            _prop(node, "graphtune.mapping", "none")
            continue
        g = groups[name]
        chunks = "; ".join(
            f"{c}: {p.mem_scope} {core_bind_json(p.core_bind)}" for c, p in enumerate(g.chunks)
        )
        op_name = graph.ops[op_index].name if op_index is not None else "?"
        how_text = ("matched to Relax op " + op_name) if how == "shape" else (
            f"no Relax op of its own (folded at import); group inherited from {op_name}")
        node.doc_string = (f"graphtune group {name}: split {g.split}, chunks [{chunks}]; "
                           f"{how_text}")
        _prop(node, "graphtune.group", name)
        _prop(node, "graphtune.split", str(g.split))
        _prop(node, "graphtune.chunks", chunks)
        _prop(node, "graphtune.relax_op", op_name)
        _prop(node, "graphtune.mapping", how)
    proto.doc_string = (f"graphtune schedule ({schedule.source or 'unknown source'}), batch "
                        f"{schedule.batch}, {len(schedule.groups)} groups; node metadata "
                        "graphtune.group names each node's group")
    onnx.checker.check_model(proto)
    total = len(proto.graph.node)
    if functions:
        from autotune.commands._onnx_functions import wrap_groups

        proto = wrap_groups(proto)
    return proto, matched, total


def _prop(node: Any, key: str, value: str) -> None:
    p = node.metadata_props.add()
    p.key, p.value = key, value


# ONNX op type -> Relax op types it may become (unlisted types match by shape only).
_RELAX_TYPES: dict[str, tuple[str, ...]] = {
    "Conv": ("nn.conv2d", "nn.conv1d"),
    "BatchNormalization": ("nn.batch_norm",),
    "Relu": ("nn.relu",),
    "Add": ("add",),
    "Sub": ("subtract",),
    "Mul": ("multiply",),
    "Div": ("divide",),
    "MaxPool": ("nn.max_pool2d",),
    "AveragePool": ("nn.avg_pool2d",),
    "GlobalAveragePool": ("mean", "nn.adaptive_avg_pool2d"),
    "Flatten": ("reshape",),
    "Reshape": ("reshape",),
    "Gemm": ("matmul", "add"),
    "MatMul": ("matmul",),
    "Softmax": ("nn.softmax",),
    "LayerNormalization": ("nn.layer_norm",),
    "Gather": ("take",),
    "Transpose": ("permute_dims",),
    "Clip": ("maximum", "minimum", "clip"),
    "Concat": ("concat",),
    "ReduceSum": ("sum",),
    "ReduceMean": ("mean",),
    "Sigmoid": ("sigmoid",),
    "Tanh": ("tanh",),
    "Erf": ("erf",),
    "Unsqueeze": ("expand_dims", "reshape"),
}
# Types lowered to a chain of several Relax ops; the whole chain is the node's.
_CHAINS = {"Gemm", "Clip"}
_SEARCH_DEPTH = 6


def match_nodes(model: Model, graph: Graph) -> list[tuple[int | None, str]]:
    """For each ONNX node: (Relax op index, "shape" | "inferred" | "none")."""
    shapes = _onnx_shapes(model, graph.batch)
    rel: dict[str, str] = {n: n for n in graph.inputs}  # ONNX tensor -> Relax tensor
    claimed: set[int] = set()
    out: list[tuple[int | None, str]] = []
    for node in model.proto.graph.node:
        srcs = [rel[t] for t in node.input if t in rel]
        want = shapes.get(node.output[0]) if node.output else None
        found = _search(graph, srcs, want, _RELAX_TYPES.get(node.op_type), claimed)
        if found is not None:
            if node.op_type in _CHAINS:
                found = _extend(graph, found, _RELAX_TYPES[node.op_type], claimed)
            claimed.add(found)
            for t in node.output:
                rel[t] = graph.ops[found].output
            out.append((found, "shape"))
            continue
        prod = next((graph.producer[s] for s in srcs if s in graph.producer), None)
        if srcs:
            for t in node.output:
                rel.setdefault(t, srcs[0])
        out.append((prod, "inferred") if prod is not None else (None, "none"))
    return out


def _search(graph: Graph, srcs: list[str], want: tuple[int, ...] | None,
            types: tuple[str, ...] | None, claimed: set[int]) -> int | None:
    frontier = [c for s in srcs for c in graph.consumers.get(s, ())]
    seen: set[int] = set()
    for _ in range(_SEARCH_DEPTH):
        nxt: list[int] = []
        for i in sorted(dict.fromkeys(frontier)):
            if i in seen:
                continue
            seen.add(i)
            op = graph.ops[i]
            if i not in claimed and (types is None or op.op_type in types) and (
                want is None or tuple(graph.tensors[op.output].shape) == want
            ):
                return i
            nxt.extend(graph.consumers.get(op.output, ()))
        frontier = nxt
    return None


def _extend(graph: Graph, i: int, types: tuple[str, ...], claimed: set[int]) -> int:
    while True:
        users = graph.succs(i)
        if len(users) != 1:
            return i
        u = graph.ops[users[0]]
        same = graph.tensors[u.output].shape == graph.tensors[graph.ops[i].output].shape
        if u.index in claimed or u.op_type not in types or not same:
            return i
        claimed.add(i)
        i = u.index


def _onnx_shapes(model: Model, batch: int) -> dict[str, tuple[int, ...]]:
    """Static output shapes of every ONNX tensor with the data inputs at ``batch``."""
    import onnx

    proto = onnx.ModelProto()
    proto.CopyFrom(model.proto)
    data = set(model.data_inputs)
    for vi in proto.graph.input:
        if vi.name in data and vi.type.tensor_type.shape.dim:
            vi.type.tensor_type.shape.dim[0].dim_value = batch
    del proto.graph.value_info[:]
    for o in proto.graph.output:
        if o.type.tensor_type.shape.dim:
            o.type.tensor_type.shape.dim[0].dim_value = batch
    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - fall back to type-only matching
        return {}
    out: dict[str, tuple[int, ...]] = {}
    for vi in [*inferred.graph.value_info, *inferred.graph.output]:
        dims = vi.type.tensor_type.shape.dim
        if dims and all(d.HasField("dim_value") for d in dims):
            out[vi.name] = tuple(int(d.dim_value) for d in dims)
    return out
