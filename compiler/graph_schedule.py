"""TensorTurbo's manual graph-schedule primitives, on Relax.

Names and semantics follow the TensorTurbo guide (chapter 4.2) and the
manual-schedule guide; each primitive transforms the Relax module for real
(groups become Relax functions carrying their attributes; split groups become
split -> per-chunk calls -> concat) and records the resulting
:class:`~compiler.schedule.GraphSchedule` on ``main`` (read it back with
:func:`schedule_of`).

``Group`` accepts both argument orders found in the guides: ``Group(inputs,
output)`` (the ResNet-50 example) and ``Group(output, inputs)`` (the API
reference); a list is always the inputs.

Example (the guide's flow)::

    func = GetNPUSubFunctions(mod["main"])[0]
    ops = ListOps(func)
    groups = [Group([func.params[0]], ops["add"][2]), Group([ops["add"][2]], ops["nn.softmax"][0])]
    mod = GroupOps(groups)(mod)
    mod = SplitGroups({groups[0]: 8, groups[1]: 1})(mod)
    ops = ListOps(GetNPUSubFunctions(mod["main"])[0])
    mod = Schedule([
        ScheduleInfo(ops["split"][0], NPUMemScope.DDR, [0, 1, 2, 3, 4, 5, 6, 7]),
        ScheduleInfo(groups[0][0], NPUMemScope.L1, [0, 1]), ...
    ])(mod)
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from compiler.errors import ScheduleError
from compiler.graph import Graph, Op, OpIndex
from compiler.schedule import GraphSchedule, NPUMemScope, Placement, Step, make_schedule
from compiler.schedule import GroupSpec as GroupValue

__all__ = [
    "FuseTargetOps",
    "GetNPUSubFunctions",
    "Group",
    "GroupOps",
    "ListOps",
    "NPUMemScope",
    "Schedule",
    "ScheduleInfo",
    "SetSpanName",
    "SplitGroups",
    "schedule_of",
]

STATE_ATTR = "graphtune.state"
_MAX_SESSIONS = 256  # scheduling sessions remembered (oldest forgotten first)
_STATES: OrderedDict[str, _State] = OrderedDict()


def _remember(sid: str, state: _State) -> None:
    _STATES[sid] = state
    while len(_STATES) > _MAX_SESSIONS:
        _STATES.popitem(last=False)


@dataclass
class _State:
    """What the primitives know about one scheduling session."""

    base: Any  # the normalised, unscheduled IRModule
    graph: Graph
    groups: list[Group] = field(default_factory=list)
    splits: dict[str, int] = field(default_factory=dict)
    fused: set[str] = field(default_factory=set)
    schedule: GraphSchedule | None = None


class GraphModule:
    """Stand-in for an IRModule when scheduling a bare Graph (no TVM needed).

    ``resnet50_schedule(GraphModule(graph))`` runs the same primitives and
    records the same GraphSchedule, without touching Relax: the simulator and
    the search space use this.
    """

    def __init__(self, graph: Graph, state_id: str | None = None) -> None:
        if state_id is None:
            state_id = uuid.uuid4().hex
            _remember(state_id, _State(base=None, graph=graph))
        self.state_id = state_id
        self.attrs = {STATE_ATTR: state_id}

    def __getitem__(self, name: str) -> GraphModule:
        return self


def _state_of(obj: Any) -> tuple[str, _State]:
    """Find (or start) the session of a module, a function or a sub-function."""
    if isinstance(obj, NPUSubFunction | GraphModule):
        return obj.state_id, _STATES[obj.state_id]
    if isinstance(obj, Graph):
        return _state_of(GraphModule(obj))
    import tvm

    func = obj["main"] if isinstance(obj, tvm.IRModule) else obj
    attrs = func.attrs
    if attrs is not None and STATE_ATTR in attrs:
        sid = str(attrs[STATE_ATTR])
        if sid in _STATES:
            return sid, _STATES[sid]
    from compiler._relax_graph import build_graph, set_span_names

    mod = obj if isinstance(obj, tvm.IRModule) else tvm.IRModule({"main": func})
    base = set_span_names(mod) if not _named(mod) else mod
    sid = uuid.uuid4().hex
    _remember(sid, _State(base=base, graph=build_graph(base, "model")))
    return sid, _STATES[sid]


def _named(mod: Any) -> bool:
    from compiler._relax_graph import has_span_names

    return has_span_names(mod)


@dataclass(frozen=True)
class ParamRef:
    """A data input of an NPU sub-function (``func.params[0]``)."""

    name: str


@dataclass(frozen=True)
class TransferRef:
    """A split/concatenate step inserted by ``SplitGroups`` (``ops["concatenate"][2]``)."""

    name: str
    op_type: str


@dataclass(frozen=True)
class ChunkRef:
    """One chunk (sub-group) of a group: ``groups[0][3]``."""

    group: Group
    chunk: int


@dataclass
class NPUSubFunction:
    """An NPU kernel function: a run of NPU ops between CPU ops."""

    state_id: str
    ops: tuple[int, ...]
    params: list[ParamRef]


def SetSpanName(mod: Any) -> Any:
    """Give every op a unique name (``conv2d_0``, ``add_15``); imported models already have them."""
    from compiler._relax_graph import set_span_names

    return mod if _named(mod) else set_span_names(mod)


def GetNPUSubFunctions(function: Any) -> list[NPUSubFunction]:
    """NPU kernel functions of ``main`` in DAG post-order (CPU ops separate them)."""
    sid, st = _state_of(function)
    g = st.graph
    out = []
    for run in g.npu_subfunctions():
        produced = {g.ops[i].output for i in run}
        ins: dict[str, None] = {}
        for i in run:
            for t in g.ops[i].inputs:
                if t not in produced:
                    ins[t] = None
        out.append(NPUSubFunction(sid, run, [ParamRef(t) for t in ins]))
    return out


def ListOps(function: Any) -> OpIndex:
    """``{op_type: [ops in DFS post-order]}``; after ``SplitGroups`` also ``split``/``concatenate``."""
    _, st = _state_of(function)
    ops = function.ops if isinstance(function, NPUSubFunction) else None
    index = st.graph.list_ops(ops)
    if st.schedule is not None:
        for kind in ("split", "concat"):
            refs = sorted(
                (t for t in st.schedule.transfers if t.kind == kind),
                key=lambda t: int(t.name.rsplit("_", 1)[1]),
            )
            if refs:
                index[kind] = [TransferRef(t.name, kind) for t in refs]  # type: ignore[misc]
    return index


class Group:
    """A multi-input, single-output op set: ``Group(inputs, output)`` or ``Group(output, inputs)``."""

    def __init__(self, a: Any, b: Any, name: str | None = None) -> None:
        if isinstance(a, list | tuple):
            self.inputs, self.output = list(a), b
        elif isinstance(b, list | tuple):
            self.inputs, self.output = list(b), a
        else:
            raise ScheduleError("Group needs a list of inputs and one output op")
        if not isinstance(self.output, Op):
            raise ScheduleError(f"Group output must be an op from ListOps, got {self.output!r}")
        self.name = name or ""

    def __getitem__(self, chunk: int) -> ChunkRef:
        return ChunkRef(self, chunk)

    def __hash__(self) -> int:
        return hash(self.output.name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Group) and other.output.name == self.output.name

    def __repr__(self) -> str:
        return f"Group({self.name or self.output.name})"

    def op_set(self, graph: Graph) -> tuple[int, ...]:
        """Ancestors of the output (inclusive) up to, not including, the inputs."""
        stop = set()
        for i in self.inputs:
            if isinstance(i, Op):
                stop.add(i.output)
            elif isinstance(i, ParamRef):
                stop.add(i.name)
            else:
                raise ScheduleError(f"Group input must be an op or a param, got {i!r}")
        found: set[int] = set()
        stack = [self.output.index]
        while stack:
            idx = stack.pop()
            if idx in found:
                continue
            found.add(idx)
            for t in graph.ops[idx].inputs:
                if t in stop or t not in graph.producer:
                    continue
                stack.append(graph.producer[t])
        return tuple(sorted(found))


def _apply(sid: str, st: _State, order: Sequence[Step] | str = "depth",
           placements: dict[tuple[str, int], Placement] | None = None,
           transfer_places: dict[str, Placement] | None = None) -> Any:
    g = st.graph
    owned: dict[int, str] = {}
    values: list[GroupValue] = []
    all_cores = (tuple(range(8)),)
    for grp in st.groups:
        ops = grp.op_set(g)
        for i in ops:
            if i in owned:
                raise ScheduleError(
                    f"op {g.ops[i].name} is in two groups: {owned[i]} and {grp.name}"
                )
            owned[i] = grp.name
        split = st.splits.get(grp.name, 1)
        chunks = tuple(
            (placements or {}).get((grp.name, c), Placement("DDR", all_cores)) for c in range(split)
        )
        values.append(GroupValue(grp.name, ops, split, chunks))
    for op in g.ops:  # ops outside every group are groups of their own
        if op.index not in owned:
            chunks = ((placements or {}).get((op.name, 0), Placement("DDR", all_cores)),)
            values.append(GroupValue(op.name, (op.index,), 1, chunks))
    values.sort(key=lambda v: min(v.ops))
    st.schedule = make_schedule(
        g, values, order=order, transfer_placements=transfer_places, source="manual"
    )
    if st.base is None:
        return GraphModule(g, sid)
    from compiler._apply import apply_schedule

    mod = apply_schedule(st.base, g, st.schedule)
    return _tag(mod, sid)


def _tag(mod: Any, sid: str) -> Any:
    import tvm

    main_gv = mod.get_global_var("main")
    func = mod["main"].with_attr(STATE_ATTR, sid)
    new = tvm.IRModule({gv: f for gv, f in mod.functions.items() if gv.name_hint != "main"})
    new[main_gv] = func
    return new


def GroupOps(groups: Sequence[Group]) -> Callable[[Any], Any]:
    """Outline each group into a Relax function (groups named ``group_<i>`` in list order)."""

    def run(mod: Any) -> Any:
        sid, st = _state_of(mod)
        for i, grp in enumerate(groups):
            if not grp.name:
                grp.name = f"group_{len(st.groups) + i}"
        st.groups = [*st.groups, *groups]
        return _apply(sid, st)

    return run


def FuseTargetOps(groups: Sequence[Group]) -> Callable[[Any], Any]:
    """Fuse each group into one function that cannot be split (``SplitGroups`` refuses it)."""

    def run(mod: Any) -> Any:
        for i, grp in enumerate(groups):
            if not grp.name:
                grp.name = f"fused_{i}"
        new = GroupOps(groups)(mod)
        _, st = _state_of(new)
        st.fused.update(g.name for g in groups)
        return new

    return run


def SplitGroups(factors: dict[Group, int]) -> Callable[[Any], Any]:
    """Split groups along the batch: factor = number of chunks (16 images, factor 8 = 2 each)."""

    def run(mod: Any) -> Any:
        sid, st = _state_of(mod)
        known = {g.name for g in st.groups}
        for grp, factor in factors.items():
            if grp.name not in known:
                raise ScheduleError(f"{grp!r} was not grouped: call GroupOps first")
            if grp.name in st.fused and factor != 1:
                raise ScheduleError(f"group {grp.name} was fused by FuseTargetOps: it cannot split")
            if not isinstance(factor, int) or factor < 1 or st.graph.batch % factor:
                raise ScheduleError(
                    f"group {grp.name}: split factor {factor} does not divide batch {st.graph.batch}"
                )
            st.splits[grp.name] = factor
        return _apply(sid, st)

    return run


@dataclass(frozen=True)
class ScheduleInfo:
    """Placement of one group chunk, transfer or op: ``ScheduleInfo(x, mem_scope, core_bind)``."""

    op_or_group: Any
    mem_scope: Any
    core_bind: Any

    def step_and_placement(self) -> tuple[Step, Placement]:
        """The order entry this info schedules and its placement."""
        place = Placement.make(self.mem_scope, self.core_bind)
        x = self.op_or_group
        if isinstance(x, ChunkRef):
            return Step("group", x.group.name, x.chunk), place
        if isinstance(x, Group):
            return Step("group", x.name, 0), place
        if isinstance(x, TransferRef):
            return Step("transfer", x.name), place
        if isinstance(x, Op):
            return Step("group", x.name, 0), place
        raise ScheduleError(f"ScheduleInfo needs a group chunk, a split/concat or an op, got {x!r}")


def Schedule(infos: Sequence[ScheduleInfo]) -> Callable[[Any], Any]:
    """Fix placements and the execution order (the list order) of every step."""

    def run(mod: Any) -> Any:
        sid, st = _state_of(mod)
        if st.schedule is None:
            raise ScheduleError("call GroupOps before Schedule")
        steps: list[Step] = []
        placements: dict[tuple[str, int], Placement] = {}
        transfer_places: dict[str, Placement] = {}
        for info in infos:
            step, place = info.step_and_placement()
            steps.append(step)
            if step.kind == "group":
                placements[(step.name, step.chunk)] = place
            else:
                transfer_places[step.name] = place
        wanted = {str(s) for s in st.schedule.order}
        given = {str(s) for s in steps}
        missing = [s for s in (str(x) for x in st.schedule.order) if s not in given]
        if missing:
            more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
            raise ScheduleError(f"no ScheduleInfo for {missing[0]}{more}: schedule every step")
        extra = given - wanted
        if extra:
            raise ScheduleError(f"ScheduleInfo for {sorted(extra)[0]}, which is not a step")
        return _apply(sid, st, order=steps, placements=placements, transfer_places=transfer_places)

    return run


def schedule_of(mod: Any) -> GraphSchedule:
    """The GraphSchedule recorded on a module scheduled with these primitives."""
    if isinstance(mod, GraphModule):
        st = _STATES[mod.state_id]
        if st.schedule is None:
            raise ScheduleError("no graph schedule recorded yet: run GroupOps/Schedule first")
        return st.schedule
    from compiler._apply import scheduled_from

    text = scheduled_from(mod)
    if text is None:
        raise ScheduleError("this module carries no graph schedule: run GroupOps/Schedule on it")
    return GraphSchedule.loads(text)


def graph_of(mod: Any) -> Graph:
    """The Graph a scheduling session works on."""
    return _state_of(mod)[1].graph
