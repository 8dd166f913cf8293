"""Automatic graph-schedule levels O0-O3 (``tb.graph_schedule_level``), as in the TensorTurbo guide.

* **O0** — every op its own group, every result in DDR.
* **O1** — every op its own group, results in LLB, demoted to DDR where the
  LLB cannot hold everything live.
* **O2** — every op its own group, results in L1, demoted to LLB, then DDR,
  where the cores' L1 cannot hold them next to the running op's working set.
* **O3** — reorder, split and merge: cut the graph where a single tensor crosses
  (ResNet's residual adds, BERT's block ends); give each segment the fewest
  chunks whose working set (:mod:`compiler.footprint`) fits a core's L1; merge
  neighbours when the merged group's extra weight reloads from DDR (one per
  chunk) cost less than spilling the boundary tensor through the LLB; run
  depth-first so a consumer chunk follows its producers (the guide's ResNet-50
  order); start with every result in L1.

Every level then goes through :func:`fit_to_target`: the one capacity model
(:mod:`compiler.capacity`, which the simulator also uses) walks the order and
results are demoted L1 -> LLB -> DDR (farthest next use first) until every L1
and the LLB fit. No level returns a schedule that does not fit; when even
fully demoted it cannot, :class:`~compiler.errors.ScheduleError` says where.
Capacities come from the :class:`~compiler.target.Target`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from math import gcd

from compiler.capacity import CapacityIssue, check_capacity, order_nodes
from compiler.derive import Node, chunk_dag, group_io, single_tensor_cuts
from compiler.errors import ScheduleError
from compiler.footprint import group_footprint
from compiler.graph import Graph
from compiler.schedule import GraphSchedule, GroupSpec, Placement, make_schedule
from compiler.target import Target

LEVELS = (0, 1, 2, 3)


def graph_schedule_level(graph: Graph, target: Target, level: int = 3) -> GraphSchedule:
    """The automatic schedule of ``level`` (0-3) for ``graph`` at its batch on ``target``."""
    if level not in LEVELS:
        raise ScheduleError(f"graph_schedule_level must be 0, 1, 2 or 3, got {level!r}")
    if level == 3:
        return _o3(graph, target)
    return _per_op(graph, target, level)


def core_bind_for(samples: int, cores: int) -> tuple[tuple[int, ...], ...]:
    """Spread ``samples`` over ``cores``: gcd(samples, cores) parts of equal core counts."""
    parts = gcd(samples, cores)
    per = cores // parts
    return tuple(tuple(range(p * per, (p + 1) * per)) for p in range(parts))


def _per_op(graph: Graph, target: Target, level: int) -> GraphSchedule:
    cores = target.chip.cores_per_cluster
    bind = core_bind_for(graph.batch, cores)
    outputs = set(graph.outputs)
    want = {0: "DDR", 1: "LLB", 2: "L1"}[level]
    groups = []
    for op in graph.ops:
        scope = "DDR"
        if op.output not in outputs:
            scope = next(sc for sc in _SLOWER[want] if sc in op.allowed_scopes or sc == "DDR")
        groups.append(GroupSpec(op.name, (op.index,), 1, (Placement(scope, bind),)))
    draft = make_schedule(graph, groups, order="depth", source=f"O{level}")
    return fit_to_target(graph, draft, target)


# Kept for callers of the former private name (bench/sim_speed.py).
_single_tensor_cuts = single_tensor_cuts


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _min_split(graph: Graph, ops: Sequence[int], target: Target) -> int | None:
    """Fewest chunks whose per-core working set fits L1 (None: nothing fits).

    The working set is :func:`compiler.footprint.group_footprint` — the same
    lifetimes the simulator checks — with the group's inputs held to the end
    (another chunk may still need them) as a margin.
    """
    fp = group_footprint(graph, tuple(ops))
    separable = all(graph.ops[i].batch_separable for i in ops)
    cores = target.chip.cores_per_cluster
    for split in _divisors(graph.batch) if separable else [1]:
        samples = graph.batch // split
        bind = core_bind_for(samples, cores)
        per_core = fp.peak_bytes(samples // len(bind), len(bind[0]), held=True)
        if per_core <= target.l1.data_bytes:
            return split
    return None


def _cost(graph: Graph, ops: Sequence[int], split: int, target: Target) -> float:
    """Cycles a group spends reloading its weights from DDR, once per chunk."""
    return split * group_footprint(graph, tuple(ops)).weight_bytes / target.ddr.bytes_per_cycle


def _boundary_cost(graph: Graph, ops: Sequence[int], target: Target) -> float:
    """Cycles to spill a group's result to LLB and read it back (what merging saves)."""
    out = group_io(graph, ops).outputs
    return sum(2 * graph.nbytes(t) for t in out) / target.llb.bytes_per_cycle


def _o3(graph: Graph, target: Target) -> GraphSchedule:
    cuts = single_tensor_cuts(graph)
    bounds = [*cuts, len(graph.ops) - 1]
    segments: list[list[int]] = []
    start = 0
    for end in bounds:
        if end >= start:
            segments.extend(_host_apart(graph, list(range(start, end + 1))))
            start = end + 1
    merged: list[tuple[list[int], int | None]] = []
    for seg in segments:
        s = _min_split(graph, seg, target)
        if merged and _on_npu(graph, seg) and _on_npu(graph, merged[-1][0]):
            prev, ps = merged[-1]
            both = prev + seg
            ms = _min_split(graph, both, target)
            if ps is not None and s is not None and ms is not None:
                apart = _cost(graph, prev, ps, target) + _cost(graph, seg, s, target)
                apart += _boundary_cost(graph, prev, target)
                if _cost(graph, both, ms, target) <= apart:
                    merged[-1] = (both, ms)
                    continue
        merged.append((seg, s))
    cores = target.chip.cores_per_cluster
    groups: list[GroupSpec] = []
    for k, (ops, split) in enumerate(merged):
        if split is None:
            # Not even one sample per chunk fits L1: per-op groups, results through LLB/DDR.
            for i in ops:
                op = graph.ops[i]
                bind = core_bind_for(graph.batch, cores)
                scope = "LLB" if "LLB" in op.allowed_scopes else "DDR"
                groups.append(GroupSpec(f"o3_{k}_{op.name}", (i,), 1, (Placement(scope, bind),)))
            continue
        bind = core_bind_for(graph.batch // split, cores)
        groups.append(GroupSpec(f"group_{k}", tuple(ops), split, (Placement("L1", bind),) * split))
    # Start optimistic (every result in L1, the model outputs in DDR), then demote
    # what the memory walk finds does not fit.
    draft = make_schedule(graph, groups, order="depth", source="O3")
    return fit_to_target(graph, _optimistic(graph, draft), target)


def _on_npu(graph: Graph, ops: Sequence[int]) -> bool:
    return all(graph.ops[i].on_npu for i in ops)


def _host_apart(graph: Graph, seg: list[int]) -> list[list[int]]:
    """A segment with ops off the NPU cut so that no group mixes host and NPU ops.

    Runs of host ops and of NPU ops become their own segments when each run has one
    output; otherwise every op of the segment is its own segment (one op, one output).
    """
    if _on_npu(graph, seg) or not any(graph.ops[i].on_npu for i in seg):
        return [seg]
    runs: list[list[int]] = [[seg[0]]]
    for i in seg[1:]:
        if graph.ops[i].on_npu == graph.ops[runs[-1][-1]].on_npu:
            runs[-1].append(i)
        else:
            runs.append([i])
    if all(len(group_io(graph, tuple(r)).outputs) == 1 for r in runs):
        return runs
    return [[i] for i in seg]


def _optimistic(graph: Graph, schedule: GraphSchedule) -> GraphSchedule:
    """Every transfer result in L1 (splits of model inputs stay DDR views), outputs in DDR."""
    _, outs = chunk_dag(graph, schedule)
    out_set = set(outs)
    transfers = tuple(
        replace(t, placement=Placement(
            "DDR" if ("t", t.name, 0) in out_set or (t.kind == "split" and t.tensor in graph.inputs)
            else "L1", t.placement.core_bind))
        for t in schedule.transfers
    )
    groups = tuple(
        replace(g, chunks=tuple(
            Placement("DDR", p.core_bind) if ("g", g.name, c) in out_set else p
            for c, p in enumerate(g.chunks)
        ))
        for g in schedule.groups
    )
    return replace(schedule, groups=groups, transfers=transfers)


_SLOWER = {"L1": ("L1", "LLB", "DDR"), "LLB": ("LLB", "DDR"), "DDR": ("DDR",)}


def fit_to_target(graph: Graph, schedule: GraphSchedule, target: Target) -> GraphSchedule:
    """Demote results L1 -> LLB -> DDR until the capacity model says the schedule fits.

    Each round asks :func:`compiler.capacity.check_capacity` for the first overflow
    and demotes one result occupying the overflowing memory: one the step does not
    read, farthest next use first (Belady), then one it reads, then the step's own
    output, then an input staged whole in L1 (so the step streams it). When nothing
    is left to demote and a group chunk's own working set is what overflows, that
    group is split along the batch into the next number of chunks (as the NPU
    compiler tiles an op that does not fit), and at one sample per chunk broken
    into one group per op. Every round lowers a scope, raises a
    split or breaks a group, so the loop ends.

    Raises:
        ScheduleError: when nothing is left to demote and the schedule still
            does not fit (one op's working set exceeds a core's L1), naming the
            overflow.
    """
    while True:
        issue = check_capacity(graph, schedule, target)
        if issue is None:
            return schedule
        deps, _ = chunk_dag(graph, schedule)
        nodes = order_nodes(schedule)
        victim = _victim(graph, schedule, issue, nodes, deps)
        if victim is not None:
            schedule = _demoted(graph, schedule, nodes[victim])
            continue
        finer = _split_further(graph, schedule, nodes[issue.step_index], target)
        if finer is None:
            finer = _ungrouped(graph, schedule, nodes[issue.step_index])
        if finer is None:
            raise ScheduleError(
                f"{schedule.source or 'the schedule'} does not fit this target even with every "
                f"result demoted: {issue.message}; use a target with more L1/LLB or a smaller batch"
            )
        schedule = finer


def _ungrouped(graph: Graph, schedule: GraphSchedule, n: Node) -> GraphSchedule | None:
    """The schedule with group ``n`` broken into one group per op (or None: one op already)."""
    if n[0] != "g":
        return None
    gr = schedule.group(n[1])
    if len(gr.ops) < 2:
        return None
    groups: list[GroupSpec] = []
    for g in schedule.groups:
        if g.name != gr.name:
            groups.append(g)
            continue
        groups.extend(GroupSpec(f"{g.name}_{graph.ops[i].name}", (i,), g.split, g.chunks) for i in g.ops)
    return make_schedule(graph, groups, order="depth", source=schedule.source)


def _split_further(graph: Graph, schedule: GraphSchedule, n: Node, target: Target
                   ) -> GraphSchedule | None:
    """The schedule with group ``n`` cut into the next larger number of chunks (or None)."""
    if n[0] != "g":
        return None
    gr = schedule.group(n[1])
    if not all(graph.ops[i].batch_separable for i in gr.ops):
        return None
    finer = [d for d in _divisors(graph.batch) if d > gr.split]
    if not finer:
        return None
    split = finer[0]
    bind = core_bind_for(graph.batch // split, target.chip.cores_per_cluster)
    scopes = [p.mem_scope for p in gr.chunks]
    chunks = tuple(Placement(scopes[min(c * len(scopes) // split, len(scopes) - 1)], bind)
                   for c in range(split))
    groups = [GroupSpec(g.name, g.ops, split, chunks) if g.name == gr.name else g
              for g in schedule.groups]
    return make_schedule(graph, groups, order="depth", source=schedule.source)


def _output_tensor(graph: Graph, schedule: GraphSchedule, n: Node) -> str:
    if n[0] == "g":
        return group_io(graph, schedule.group(n[1]).ops).outputs[0]
    return schedule.transfer(n[1]).tensor


def _scope_of(schedule: GraphSchedule, n: Node) -> str:
    if n[0] == "g":
        return schedule.group(n[1]).chunks[n[2]].mem_scope
    return schedule.transfer(n[1]).placement.mem_scope


def _next_scope(graph: Graph, schedule: GraphSchedule, n: Node) -> str | None:
    """The next slower scope the node's output may use (None: already in DDR)."""
    scope = _scope_of(schedule, n)
    p = graph.producer.get(_output_tensor(graph, schedule, n))
    for sc in _SLOWER[scope][1:]:
        if sc == "DDR" or p is None or sc in graph.ops[p].allowed_scopes:
            return sc
    return None


def _victim(graph: Graph, schedule: GraphSchedule, issue: CapacityIssue, nodes: list[Node],
            deps: dict[Node, list[Node]]) -> int | None:
    k = issue.step_index
    reads = {nodes.index(d) for d in deps.get(nodes[k], ())} if nodes[k] in deps else set()
    pos = {n: i for i, n in enumerate(nodes)}
    next_use: dict[int, int] = {}
    for n, ds in deps.items():
        i = pos[n]
        if i <= k:
            continue
        for d in ds:
            j = pos[d]
            if i < next_use.get(j, len(nodes) + 1):
                next_use[j] = i
    live = [(i, b) for i, b in issue.live_steps if _next_scope(graph, schedule, nodes[i])]
    unread = [(i, b) for i, b in live if i not in reads]
    for cands in (unread, [(i, b) for i, b in live if i in reads]):
        if cands:
            return max(cands, key=lambda x: (next_use.get(x[0], len(nodes)), x[1]))[0]
    if _next_scope(graph, schedule, nodes[k]):
        return k
    # An input staged whole in L1 counts in the step's working set, not as a live
    # result: moved out to LLB/DDR, the step can stream it tile by tile instead.
    staged = [i for i in reads
              if _scope_of(schedule, nodes[i]) == "L1" and _next_scope(graph, schedule, nodes[i])]
    if staged:
        return max(staged, key=lambda i: (next_use.get(i, len(nodes)), i))
    return None


def _demoted(graph: Graph, schedule: GraphSchedule, n: Node) -> GraphSchedule:
    """The schedule with node ``n``'s output one scope slower."""
    scope = _next_scope(graph, schedule, n)
    assert scope is not None
    if n[0] == "g":
        groups = tuple(
            replace(g, chunks=tuple(
                Placement(scope, p.core_bind) if c == n[2] else p for c, p in enumerate(g.chunks)
            )) if g.name == n[1] else g
            for g in schedule.groups
        )
        return replace(schedule, groups=groups)
    transfers = tuple(
        replace(t, placement=Placement(scope, t.placement.core_bind)) if t.name == n[1] else t
        for t in schedule.transfers
    )
    return replace(schedule, transfers=transfers)
