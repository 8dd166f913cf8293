"""Structural validation of a GraphSchedule against a Graph (and a Target)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compiler._schedule_parts import ScheduleLike as GraphSchedule  # not compiler.schedule: it imports us
from compiler.derive import chunk_dag, derived, group_io, group_order
from compiler.errors import ScheduleError

if TYPE_CHECKING:
    from compiler._schedule_parts import GroupSpec, Placement
    from compiler.graph import Graph, Op
    from compiler.target import Target


def validate_schedule(s: GraphSchedule, graph: Graph, target: Target | None) -> None:
    """Raise ScheduleError naming the first problem; see GraphSchedule.validate."""
    if s.batch != graph.batch:
        raise ScheduleError(
            f"schedule is for batch {s.batch} but the model has batch {graph.batch}: "
            f"import the model at batch {s.batch} (--batch {s.batch})"
        )
    if s.workload_key and s.workload_key != graph.workload_key:
        raise ScheduleError(
            f"schedule was made for workload {s.workload_key}, this model is "
            f"{graph.workload_key}: make the schedule for this model"
        )
    passed = _passed(graph, target)
    # the checks below read only the groups' names and op sets (and the graph): a tune's
    # candidates share their interned op tuples, so a partition met before is not walked
    # again (key: names and op tuples by identity, the tuples kept alive in the value)
    skey = tuple([(g.name, id(g.ops)) for g in s.groups])
    if passed.get(skey) is None:
        _check_partition(s, graph)
        passed[skey] = tuple([g.ops for g in s.groups])
    for g in s.groups:
        if passed.get(id(g)) is not g:
            _check_group(g, graph, target)
            passed[id(g)] = g
    _check_transfers(s, graph, target, passed)
    _check_order(s, graph)


def mark_valid(s: object, graph: Graph, target: Target) -> None:
    """Remember that ``s`` is valid for ``graph`` on ``target`` (it passed
    :func:`validate_schedule`, or a search space decoded it for that graph and target: valid
    by construction), so :func:`known_valid` answers yes. A schedule is frozen: once valid
    for a (graph, target), it stays valid."""
    from compiler.memo import memo_of

    memo_of(s, limit=8)[("valid", id(graph), target.hash)] = graph


def known_valid(s: object, graph: Graph, target: Target) -> bool:
    """Whether :func:`mark_valid` was called for ``s``, this graph object and this target's
    value (the simulator validates a schedule only when not)."""
    from compiler.memo import peek_memo

    memo = peek_memo(s)
    return memo is not None and memo.get(("valid", id(graph), target.hash)) is graph


def _check_partition(s: GraphSchedule, graph: Graph) -> None:
    """The groups' names, op sets, order and outputs (what :func:`validate_schedule`'s memo of
    partitions stands for)."""
    names = [g.name for g in s.groups]
    dup = _first_dup(names)
    if dup:
        raise ScheduleError(f"two groups are named {dup!r}")
    n = len(graph.ops)
    owner: dict[int, str] = {}
    for g in s.groups:
        if not g.ops:
            raise ScheduleError(f"group {g.name} has no ops")
        for i in g.ops:
            if i >= n:
                raise ScheduleError(f"group {g.name}: op index {i} does not exist ({n} ops)")
            if i in owner and owner[i] != g.name:
                raise ScheduleError(
                    f"op {graph.ops[i].name} is in two groups: {owner[i]} and {g.name}"
                )
            owner[i] = g.name
    missing: list[str] = []
    if len(owner) != n or min(owner) < 0:  # else every op is owned
        missing = [op.name for op in graph.ops if op.index not in owner]
    if missing:
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise ScheduleError(f"op {missing[0]}{more} is in no group: every op needs one")
    group_order(graph, s.groups)  # a cycle first: it is the root cause of extra outputs
    for g in s.groups:
        io = group_io(graph, g.ops)
        if len(io.outputs) != 1:
            what = ", ".join(io.outputs) if io.outputs else "none"
            raise ScheduleError(
                f"group {g.name} has {len(io.outputs)} outputs ({what}): "
                "a group must have exactly one output"
            )


# Groups and transfer placements that passed their own checks, per graph and target (a
# group's checks read only the group, the graph and the target; decoded schedules share
# their interned groups and placements, so a tune's measurements mostly meet ones checked
# before: validating 300 bred ResNet-50 b16 / BERT-base b8 candidates took 0.65x / 0.56x
# the CPU, issue 20). By id, each object kept beside its id. Bounded.
_PASSED_LIMIT = 100_000


def _passed(graph: Graph, target: Target | None) -> dict[object, object]:
    """What passed its checks for this graph and target object: group id -> group,
    (placement id, samples) -> placement, ((name, op tuple id), ...) -> the op tuples."""
    from compiler.memo import memo_of

    memo = memo_of(graph)
    key = ("validated", id(target))
    got = memo.get(key)
    if got is None or got[0] is not target:
        got = memo[key] = (target, {})
    if len(got[1]) > _PASSED_LIMIT:
        got[1].clear()
    return got[1]


def _check_group(g: object, graph: Graph, target: Target | None) -> None:
    """A group's own checks. Its op set's checks (they read the op set and split only; a
    tune's new groups mostly place op sets met before) and its chunks' core bindings (by
    placement and samples, as the transfers') are remembered in :func:`_passed`."""
    from compiler._schedule_parts import GroupSpec

    assert isinstance(g, GroupSpec)
    passed = _passed(graph, target)
    opkey = ("op set", id(g.ops), g.split)
    seen = passed.get(opkey)
    if seen is None or seen[0] is not g.ops:  # type: ignore[index]
        out_op = _check_op_set(g, graph)
        passed[opkey] = (g.ops, out_op)
    else:
        out_op = seen[1]  # type: ignore[index]
    if len(g.chunks) != g.split:
        raise ScheduleError(
            f"group {g.name}: split {g.split} needs {g.split} chunk placements, "
            f"got {len(g.chunks)}"
        )
    samples = graph.batch // g.split
    for c, p in enumerate(g.chunks):
        if out_op.on_npu and p.mem_scope not in out_op.allowed_scopes:
            raise ScheduleError(
                f"group {g.name} chunk {c}: output op {out_op.name} ({out_op.op_type}) cannot "
                f"be placed in {p.mem_scope} (allowed: {', '.join(out_op.allowed_scopes)})"
            )
        key = (id(p), samples)
        if passed.get(key) is p:
            continue
        _check_bind(f"group {g.name} chunk {c}", p, samples, target)
        passed[key] = p


def _check_op_set(g: GroupSpec, graph: Graph) -> Op:
    """The checks of a group that read only its op set and split; returns its output op."""
    if g.split < 1:
        raise ScheduleError(f"group {g.name}: split factor must be >= 1, got {g.split}")
    host = [graph.ops[i] for i in g.ops if not graph.ops[i].on_npu]
    if host and len(host) < len(g.ops):
        npu = next(graph.ops[i] for i in g.ops if graph.ops[i].on_npu)
        raise ScheduleError(
            f"group {g.name}: {host[0].name} ({host[0].op_type}) runs on the host CPU and "
            f"{npu.name} ({npu.op_type}) on the NPU: an op off the NPU is a host segment, "
            "in a group of host ops only"
        )
    if graph.batch % g.split:
        raise ScheduleError(
            f"group {g.name}: split factor {g.split} does not divide batch {graph.batch}"
        )
    if g.split > 1:
        for i in g.ops:
            op = graph.ops[i]
            if not op.batch_separable:
                raise ScheduleError(
                    f"group {g.name}: op {op.name} ({op.op_type}) mixes samples, so the "
                    "group cannot be split along the batch: use split 1"
                )
    out = group_io(graph, g.ops).outputs[0]
    if g.split > 1 and not graph.tensors[out].batched:
        raise ScheduleError(
            f"group {g.name}: its output {out} does not carry the batch, so the group "
            "cannot be split along the batch: use split 1"
        )
    return graph.ops[graph.producer[out]]


def _check_bind(where: str, p: Placement, samples: int, target: Target | None) -> None:
    seen: set[int] = set()
    if not p.core_bind:
        raise ScheduleError(f"{where}: core_bind has no parts")
    for part in p.core_bind:
        if not part:
            raise ScheduleError(f"{where}: core_bind has an empty part (every part needs a core)")
        for core in part:
            if core < 0 or (target is not None and core >= target.chip.cores_per_cluster):
                top = target.chip.cores_per_cluster - 1 if target else 0
                raise ScheduleError(
                    f"{where}: core {core} does not exist (cores are 0-{top} in a cluster)"
                )
            if core in seen:
                raise ScheduleError(f"{where}: core {core} appears twice in core_bind")
            seen.add(core)
    parts = len(p.core_bind)
    if samples % parts:
        raise ScheduleError(
            f"{where}: {samples} samples cannot be divided evenly over {parts} core parts"
        )


def _check_transfers(s: GraphSchedule, graph: Graph, target: Target | None,
                     passed: dict[object, object] | None = None) -> None:
    expected, _, _ = derived(graph, s)
    exp = {t.name: t for t in expected}
    got = {t.name: t for t in s.transfers}
    if len(got) != len(s.transfers):
        raise ScheduleError(f"two transfers are named {_first_dup([t.name for t in s.transfers])!r}")
    for name, t in exp.items():
        if name not in got:
            raise ScheduleError(
                f"missing transfer {name}: {t.kind} of {t.tensor} chunks "
                f"{list(t.src_chunks)} (split {t.src_factor} -> {t.dst_factor})"
            )
        g = got[name]
        if (g.kind, g.tensor, g.src_factor, g.dst_factor, g.src_chunks, g.dst_chunks) != (
            t.kind, t.tensor, t.src_factor, t.dst_factor, t.src_chunks, t.dst_chunks
        ):
            raise ScheduleError(
                f"transfer {name} does not match the groups: expected {t.kind} of {t.tensor} "
                f"chunks {list(t.src_chunks)} -> {list(t.dst_chunks)} "
                f"(split {t.src_factor} -> {t.dst_factor})"
            )
    extra = set(got) - set(exp)
    if extra:
        raise ScheduleError(f"transfer {sorted(extra)[0]} is not needed by these groups")
    for t in s.transfers:
        samples = graph.batch // max(t.dst_factor, 1)
        samples = samples if samples else 1
        key = (id(t.placement), samples)
        if passed is not None and passed.get(key) is t.placement:
            continue
        _check_bind(f"transfer {t.name}", t.placement, samples, target)
        if passed is not None:
            passed[key] = t.placement


def _check_order(s: GraphSchedule, graph: Graph) -> None:
    deps, _ = chunk_dag(graph, s)
    want = set(deps)
    pos: dict[tuple[str, str, int], int] = {}
    for i, step in enumerate(s.order):
        node = ("g", step.name, step.chunk) if step.kind == "group" else ("t", step.name, 0)
        if node not in want:
            raise ScheduleError(f"order: {step} is not a step of this schedule")
        if node in pos:
            raise ScheduleError(f"order: {step} appears twice")
        pos[node] = i
    for node in deps:
        if node not in pos:
            label = f"{node[1]}[{node[2]}]" if node[0] == "g" else node[1]
            raise ScheduleError(f"order: {label} is missing")
    for node, ds in deps.items():
        for d in ds:
            if pos[d] > pos[node]:
                a = f"{node[1]}[{node[2]}]" if node[0] == "g" else node[1]
                b = f"{d[1]}[{d[2]}]" if d[0] == "g" else d[1]
                raise ScheduleError(f"order: {a} runs before {b}, which produces its input")


def _first_dup(names: list[str]) -> str:
    seen: set[str] = set()
    for n in names:
        if n in seen:
            return n
        seen.add(n)
    return ""
