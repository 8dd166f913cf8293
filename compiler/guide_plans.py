"""Hand-written schedules from the manual-schedule guide, ported to graphtune.

* :func:`resnet50_schedule` — the guide's ``resnet50_schedule`` code, line for
  line, on this project's ResNet-50, batch 16. Group boundaries sit at the same
  residual adds by position: the guide's ``add[15]``, ``add[31]``, ``add[55]``
  count four adds per bottleneck in its Relay graph, i.e. the ends of the 4th,
  8th and 14th blocks — each stage's first (downsampling) block closes the
  previous group, as the guide's memory table says ("start to Conv3_x before
  downsampling" holds the 2,352 KiB block). In this graph (BatchNorm is one op,
  the FC bias is the only other add) those are ``add[3]``, ``add[7]``, ``add[13]``.
* :func:`bert_base_schedule` — the guide's BERT-base plan (seq 128, batch 8):
  pre-encoding group, per encoder block five attention groups split at the
  matmuls plus the "double matmul" FFN group, post-encoding group; split 1,
  one sample per core, everything in L1, the result to DDR.
* :func:`deepfm_schedule` — one group, everything in L1, batch 320 x 8.

Each takes an IRModule (or a :class:`~compiler.graph_schedule.GraphModule` to
plan without TVM) and returns the scheduled module; :func:`plan` returns just
the :class:`~compiler.schedule.GraphSchedule` for a Graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compiler.errors import ScheduleError
from compiler.graph import Graph, Op
from compiler.graph_schedule import (
    GetNPUSubFunctions,
    Group,
    GroupOps,
    ListOps,
    NPUMemScope,
    Schedule,
    ScheduleInfo,
    SplitGroups,
    graph_of,
    schedule_of,
)
from compiler.schedule import GraphSchedule

__all__ = ["PLANS", "PLAN_BATCH", "bert_base_schedule", "deepfm_schedule", "guide_plan", "resnet50_schedule"]


def _require_batch(name: str, graph: Graph, batch: int) -> None:
    if graph.batch != batch:
        raise ScheduleError(
            f"{name} is written for batch {batch} (its core bindings assume it), "
            f"the model has batch {graph.batch}: import it with --batch {batch}"
        )


def resnet50_schedule(mod: Any, batch: int = 16) -> Any:
    """The guide's ResNet-50 plan (batch 16), ported to this project's ResNet-50."""
    _require_batch("resnet50_schedule", graph_of(mod), batch)
    func = GetNPUSubFunctions(mod["main"])[0]
    ops = ListOps(func)
    if len(ops["add"]) != 17 or len(ops["nn.conv2d"]) != 53:
        raise ScheduleError(
            "resnet50_schedule expects ResNet-50 (53 convolutions, 16 residual adds + the FC "
            f"bias add); this model has {len(ops['nn.conv2d'])} convolutions and "
            f"{len(ops['add'])} adds"
        )
    # Four-stage partition (the guide's add[15]/[31]/[55]: ends of blocks 4, 8 and 14).
    groups = [
        Group([func.params[0]], ops["add"][3]),
        Group([ops["add"][3]], ops["add"][7]),
        Group([ops["add"][7]], ops["add"][13]),
        Group([ops["add"][13]], ops["nn.softmax"][0]),
    ]
    mod = GroupOps(groups)(mod)
    mod = SplitGroups(
        {
            groups[0]: batch // 2,
            groups[1]: batch // 4,
            groups[2]: batch // 8,
            groups[3]: batch // 16,
        }
    )(mod)
    ops = ListOps(GetNPUSubFunctions(mod["main"])[0])
    c4 = [[0, 1, 2, 3], [4, 5, 6, 7]]
    c2 = [[1, 3], [5, 7], [0, 2], [4, 6]]
    c1 = [3, 7, 2, 6, 1, 5, 0, 4]
    c0 = [7, 6, 5, 4, 3, 2, 1, 0]
    graph_schedule = [
        ScheduleInfo(ops["split"][0], NPUMemScope.DDR, c4),
        ScheduleInfo(groups[0][0], NPUMemScope.LLB, c4),
        ScheduleInfo(groups[0][1], NPUMemScope.L1, c4),
        ScheduleInfo(ops["concatenate"][0], NPUMemScope.L1, c2),
        ScheduleInfo(groups[1][0], NPUMemScope.LLB, c2),
        ScheduleInfo(groups[0][2], NPUMemScope.LLB, c4),
        ScheduleInfo(groups[0][3], NPUMemScope.L1, c4),
        ScheduleInfo(ops["concatenate"][1], NPUMemScope.L1, c2),
        ScheduleInfo(groups[1][1], NPUMemScope.L1, c2),
        ScheduleInfo(ops["concatenate"][2], NPUMemScope.L1, c1),
        ScheduleInfo(groups[2][0], NPUMemScope.LLB, c1),
        ScheduleInfo(groups[0][4], NPUMemScope.LLB, c4),
        ScheduleInfo(groups[0][5], NPUMemScope.L1, c4),
        ScheduleInfo(ops["concatenate"][3], NPUMemScope.L1, c2),
        ScheduleInfo(groups[1][2], NPUMemScope.LLB, c2),
        ScheduleInfo(groups[0][6], NPUMemScope.LLB, c4),
        ScheduleInfo(groups[0][7], NPUMemScope.L1, c4),
        ScheduleInfo(ops["concatenate"][4], NPUMemScope.L1, c2),
        ScheduleInfo(groups[1][3], NPUMemScope.L1, c2),
        ScheduleInfo(ops["concatenate"][5], NPUMemScope.L1, c1),
        ScheduleInfo(groups[2][1], NPUMemScope.L1, c1),
        ScheduleInfo(ops["concatenate"][6], NPUMemScope.L1, c0),
        ScheduleInfo(groups[3][0], NPUMemScope.DDR, c0),
    ]
    return Schedule(graph_schedule)(mod)


def _only_consumer(graph: Graph, op: Op) -> Op:
    users = graph.succs(op.index)
    if len(users) != 1:
        raise ScheduleError(f"expected one consumer of {op.name}, found {len(users)}")
    return graph.ops[users[0]]


def _producer(graph: Graph, tensor: str) -> Op:
    return graph.ops[graph.producer[tensor]]


def bert_base_schedule(mod: Any, batch: int = 8) -> Any:
    """The guide's BERT-base plan: batch 8, one sample per core, all in L1."""
    graph = graph_of(mod)
    _require_batch("bert_base_schedule", graph, batch)
    func = GetNPUSubFunctions(mod["main"])[0]
    ops = ListOps(func)
    lns = ops["nn.layer_norm"]
    softmaxes = ops["nn.softmax"]
    layers = len(softmaxes)
    if layers == 0 or len(lns) != 2 * layers + 1:
        raise ScheduleError(
            "bert_base_schedule expects a BERT encoder (an embedding LayerNorm and two "
            f"LayerNorms per block); this model has {len(lns)} LayerNorms, {layers} softmaxes"
        )
    groups = [Group([func.params[0]], lns[0])]
    for layer in range(layers):
        x = lns[2 * layer]
        sm = softmaxes[layer]
        scale = _producer(graph, sm.inputs[0])  # divide (or the matmul itself)
        scores = scale if scale.op_type == "matmul" else _producer(graph, scale.inputs[0])
        q, k = (_producer(graph, t) for t in scores.inputs[:2])
        ctx = _only_consumer(graph, sm)
        v = _producer(graph, next(t for t in ctx.inputs if t != sm.output))
        attn_ln = lns[2 * layer + 1]
        groups += [
            Group([x], q),  # Encoding group 0: Q projection
            Group([x], k),  # Encoding group 1: K projection
            Group([x], v),  # Encoding group 2: V projection
            Group([q, k], sm),  # Encoding group 3: scores, scale, softmax
            Group([sm, v, x], attn_ln),  # Encoding group 4: context, out-proj, residual, LN
            Group([attn_ln], lns[2 * layer + 2]),  # Encoding double matmul group (FFN)
        ]
    out_op = graph.ops[graph.producer[graph.outputs[0]]]
    groups.append(Group([lns[-1]], out_op))  # Post_encoding group
    mod = GroupOps(groups)(mod)
    cores = list(range(8))
    infos = [
        ScheduleInfo(g, NPUMemScope.DDR if g is groups[-1] else NPUMemScope.L1, cores)
        for g in groups
    ]
    return Schedule(infos)(mod)


def deepfm_schedule(mod: Any, batch: int = 320 * 8) -> Any:
    """The guide's DeepFM plan: one group, all in L1, 320 samples per core, result to DDR."""
    graph = graph_of(mod)
    _require_batch("deepfm_schedule", graph, batch)
    func = GetNPUSubFunctions(mod["main"])[0]
    out_op = graph.ops[graph.producer[graph.outputs[0]]]
    group = Group(list(func.params), out_op)
    mod = GroupOps([group])(mod)
    return Schedule([ScheduleInfo(group, NPUMemScope.DDR, list(range(8)))])(mod)


PLANS: dict[str, Callable[..., Any]] = {
    "resnet50": resnet50_schedule,
    "bert_base": bert_base_schedule,
    "deepfm": deepfm_schedule,
}


def _natural_batch(fn: Callable[..., Any]) -> int:
    import inspect

    return int(inspect.signature(fn).parameters["batch"].default)


PLAN_BATCH: dict[str, int] = {name: _natural_batch(fn) for name, fn in PLANS.items()}
"""The batch each hand-written plan is written for (its core bindings assume it)."""


def guide_plan(name: str, graph: Graph) -> GraphSchedule:
    """Run a named hand-written schedule on a Graph (no TVM) and return its GraphSchedule."""
    from compiler.graph_schedule import GraphModule

    if name not in PLANS:
        raise ScheduleError(f"unknown plan {name!r}: choose one of {', '.join(PLANS)}")
    fn = PLANS[name]
    s = schedule_of(fn(GraphModule(graph)))  # at the plan's own batch: a mismatch is an error
    s.validate(graph)
    return GraphSchedule(
        batch=s.batch,
        groups=s.groups,
        transfers=s.transfers,
        order=s.order,
        workload_key=s.workload_key,
        source=fn.__name__,
    )
