"""Automatic graph-schedule levels O0-O3 (``tb.graph_schedule_level``), as in the TensorTurbo guide.

* **O0** — every op its own group, every result in DDR.
* **O1** — every op its own group, results in LLB while the cluster's LLB holds
  everything live, else DDR.
* **O2** — every op its own group, results in L1 while the cores' L1 holds them
  next to the running op's working set, else LLB, else DDR.
* **O3** — reorder, split and merge: cut the graph where a single tensor crosses
  (ResNet's residual adds, BERT's block ends), merge neighbouring segments that
  fit L1 at the same split factor (more chunks would reload weights), split each group along
  the batch just enough for its working set to fit L1, keep group outputs in L1
  when they are small (else LLB, else DDR), and run depth-first so a consumer
  chunk follows its producers (the guide's ResNet-50 order).

Capacities come from the :class:`~compiler.target.Target`; the estimates here
are deliberately simple (per-sample peak of live tensors, spread evenly over
the cores of a chunk). The simulator is the judge: it tracks real lifetimes.
All levels return structurally valid schedules for any graph and batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd

from compiler.errors import ScheduleError
from compiler.graph import Graph
from compiler.plan import group_io, make_schedule
from compiler.schedule import GraphSchedule, Group, Placement
from compiler.target import Target

LEVELS = (0, 1, 2, 3)
_L1_WORK_FRACTION = 0.8  # of L1 for a chunk's working set; the rest holds live outputs


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
    last_use = _last_use(graph)
    outputs = set(graph.outputs)
    llb_live: dict[str, int] = {}
    l1_live: dict[str, int] = {}
    groups = []
    for op in graph.ops:
        for store in (llb_live, l1_live):  # free what nobody reads any more
            for t in [t for t in store if last_use.get(t, -1) < op.index]:
                del store[t]
        size = graph.nbytes(op.output)
        scope = "DDR"
        if op.output not in outputs and level >= 1:
            work = sum(graph.nbytes(t) for t in op.inputs) + size
            l1_ok = (
                sum(l1_live.values()) + work + size
            ) / cores <= target.l1.data_bytes * _L1_WORK_FRACTION
            llb_ok = sum(llb_live.values()) + size <= target.llb.bytes
            if level >= 2 and l1_ok and "L1" in op.allowed_scopes:
                scope = "L1"
                l1_live[op.output] = size
            elif llb_ok and "LLB" in op.allowed_scopes:
                scope = "LLB"
                llb_live[op.output] = size
        groups.append(Group(op.name, (op.index,), 1, (Placement(scope, bind),)))
    return make_schedule(graph, groups, order="depth", source=f"O{level}")


def _last_use(graph: Graph) -> dict[str, int]:
    last: dict[str, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            last[t] = op.index
    for t in graph.outputs:
        last[t] = len(graph.ops)
    return last


def peak_bytes_per_sample(graph: Graph, ops: Sequence[int]) -> tuple[float, int]:
    """(peak live batched bytes per sample, peak live unbatched bytes) inside an op set.

    Tensors live from their producer (or the group start, for group inputs) to
    their last consumer inside the set; the group's output lives to the end.
    """
    members = sorted(ops)
    inside = set(members)
    last: dict[str, int] = {}
    for i in members:
        for t in graph.ops[i].inputs:
            last[t] = i
    out = group_io(graph, members).outputs
    for t in out:
        last[t] = members[-1] + 1
    live: dict[str, tuple[float, int]] = {}
    for t in group_io(graph, members).inputs:
        live[t] = _split_bytes(graph, t)
    peak_b, peak_u = 0.0, 0
    for i in members:
        op = graph.ops[i]
        live[op.output] = _split_bytes(graph, op.output)
        b = sum(v[0] for v in live.values())
        u = sum(v[1] for v in live.values())
        peak_b, peak_u = max(peak_b, b), max(peak_u, u)
        for t in [t for t in live if last.get(t, -1) <= i and not _produced_after(graph, t, i, inside)]:
            del live[t]
    return peak_b, peak_u


def _produced_after(graph: Graph, t: str, i: int, inside: set[int]) -> bool:
    p = graph.producer.get(t)
    return p is not None and p in inside and p > i


def _split_bytes(graph: Graph, t: str) -> tuple[float, int]:
    tensor = graph.tensors[t]
    size = tensor.nbytes(graph.float_bytes)
    return (size / graph.batch, 0) if tensor.batched else (0.0, size)


def _single_tensor_cuts(graph: Graph) -> list[int]:
    """Op indices after which exactly one tensor is live (model inputs included)."""
    last = _last_use(graph)
    first_use: dict[str, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            first_use.setdefault(t, op.index)
    born = {op.output: op.index for op in graph.ops}
    for t in graph.inputs:
        born[t] = -1
    cuts = []
    # sweep: live count after op i = tensors born <= i with last use > i
    events: dict[int, int] = {}
    for t, b in born.items():
        lu = last.get(t, b)
        if lu > b:
            events[b] = events.get(b, 0) + 1
            events[lu] = events.get(lu, 0) - 1
    live = events.get(-1, 0)
    for op in graph.ops:
        live += events.get(op.index, 0)
        if live == 1 and op.index < len(graph.ops) - 1:
            cuts.append(op.index)
    return cuts


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _min_split(graph: Graph, ops: Sequence[int], target: Target) -> int | None:
    """Fewest chunks whose per-core working set fits L1 (None: nothing fits)."""
    per_sample, fixed = peak_bytes_per_sample(graph, ops)
    separable = all(graph.ops[i].batch_separable for i in ops)
    cores = target.chip.cores_per_cluster
    budget = target.l1.data_bytes * _L1_WORK_FRACTION
    for split in _divisors(graph.batch) if separable else [1]:
        samples = graph.batch // split
        bind = core_bind_for(samples, cores)
        cores_per_sample = len(bind[0])
        samples_per_part = samples // len(bind)
        per_core = per_sample * samples_per_part / cores_per_sample + fixed
        if per_core <= budget:
            return split
    return None


def _o3(graph: Graph, target: Target) -> GraphSchedule:
    cuts = _single_tensor_cuts(graph)
    bounds = [*cuts, len(graph.ops) - 1]
    segments: list[list[int]] = []
    start = 0
    for end in bounds:
        if end >= start:
            segments.append(list(range(start, end + 1)))
            start = end + 1
    merged: list[tuple[list[int], int | None]] = []
    for seg in segments:
        s = _min_split(graph, seg, target)
        if merged:
            prev, ps = merged[-1]
            both = prev + seg
            ms = _min_split(graph, both, target)
            # Merge only when no part must split more than alone: more chunks would reload
            # the lighter part's weights once per extra chunk.
            if ms is not None and ms == ps == s:
                merged[-1] = (both, ms)
                continue
        merged.append((seg, s))
    cores = target.chip.cores_per_cluster
    groups: list[Group] = []
    outputs = set(graph.outputs)
    for k, (ops, split) in enumerate(merged):
        if split is None:
            # nothing fits L1 even one sample per chunk: per-op groups through LLB/DDR
            for i in ops:
                op = graph.ops[i]
                bind = core_bind_for(graph.batch, cores)
                scope = "DDR" if op.output in outputs else "LLB"
                if scope not in op.allowed_scopes:
                    scope = "DDR"
                groups.append(Group(f"o3_{k}_{op.name}", (i,), 1, (Placement(scope, bind),)))
            continue
        samples = graph.batch // split
        bind = core_bind_for(samples, cores)
        out = group_io(graph, ops).outputs
        out_t = out[0] if len(out) == 1 else None
        if out_t is None:
            raise ScheduleError(f"O3 built a group with {len(out)} outputs")  # pragma: no cover
        out_op = graph.ops[graph.producer[out_t]]
        chunk_out = graph.nbytes(out_t) / split
        if out_t in outputs:
            scope = "DDR"
        elif chunk_out / cores <= target.l1.data_bytes * (1 - _L1_WORK_FRACTION):
            scope = "L1"
        elif chunk_out <= target.llb.bytes / 2 and "LLB" in out_op.allowed_scopes:
            scope = "LLB"
        else:
            scope = "DDR"
        if scope not in out_op.allowed_scopes:
            scope = "DDR"
        groups.append(Group(f"group_{k}", tuple(ops), split, (Placement(scope, bind),) * split))
    return make_schedule(graph, groups, order="depth", source="O3")
