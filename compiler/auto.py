"""Automatic graph-schedule levels O0-O3 (``tb.graph_schedule_level``), as in the TensorTurbo guide.

* **O0** — every op its own group, every result in DDR.
* **O1** — every op its own group, results in LLB while the cluster's LLB holds
  everything live, else DDR.
* **O2** — every op its own group, results in L1 while the cores' L1 holds them
  next to the running op's working set, else LLB, else DDR.
* **O3** — reorder, split and merge: cut the graph where a single tensor crosses
  (ResNet's residual adds, BERT's block ends); give each segment the fewest
  chunks whose working set (:mod:`compiler.footprint`, the simulator's
  lifetimes) fits a core's L1; merge neighbours when the merged group's extra
  weight reloads from DDR (one per chunk) cost less than spilling the boundary
  tensor through the LLB; run depth-first so a consumer chunk follows its
  producers (the guide's ResNet-50 order); start with every result in L1 and let
  a lifetimes walk over the order demote results L1 -> LLB -> DDR (farthest
  next use first) until every L1 and the LLB fit.

Capacities come from the :class:`~compiler.target.Target`. The walk here is a
simplified copy of the simulator's memory model (the compiler may not import
``sim``); the simulator stays the judge, and the tests check that every level
of every zoo model fits it. All levels return structurally valid schedules
for any graph and batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import gcd

from compiler.errors import ScheduleError
from compiler.footprint import group_footprint
from compiler.graph import Graph
from compiler.plan import chunk_dag, group_io, make_schedule
from compiler.schedule import GraphSchedule, Group, Placement
from compiler.target import Target

LEVELS = (0, 1, 2, 3)
_O2_L1_FRACTION = 0.8  # O2: of L1 for results and the running op; the rest is headroom


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
            ) / cores <= target.l1.data_bytes * _O2_L1_FRACTION
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
            if ps is not None and s is not None and ms is not None:
                apart = _cost(graph, prev, ps, target) + _cost(graph, seg, s, target)
                apart += _boundary_cost(graph, prev, target)
                if _cost(graph, both, ms, target) <= apart:
                    merged[-1] = (both, ms)
                    continue
        merged.append((seg, s))
    cores = target.chip.cores_per_cluster
    groups: list[Group] = []
    for k, (ops, split) in enumerate(merged):
        if split is None:
            # Not even one sample per chunk fits L1: per-op groups, results through LLB/DDR.
            for i in ops:
                op = graph.ops[i]
                bind = core_bind_for(graph.batch, cores)
                groups.append(Group(f"o3_{k}_{op.name}", (i,), 1, (Placement("LLB", bind),)))
            continue
        bind = core_bind_for(graph.batch // split, cores)
        groups.append(Group(f"group_{k}", tuple(ops), split, (Placement("L1", bind),) * split))
    # Start optimistic (every result in L1, the model outputs in DDR), then demote
    # what the memory walk finds does not fit.
    draft = make_schedule(graph, groups, order="depth", source="O3")
    return _fit(graph, draft, target)


def _fit(graph: Graph, schedule: GraphSchedule, target: Target) -> GraphSchedule:
    """Demote results L1 -> LLB -> DDR until the lifetimes walk fits the memories."""
    placements = _Placements(graph, schedule, target)
    for _ in range(4 * len(placements.nodes) + 8):
        victim = placements.overflow()
        if victim is None:
            break
        placements.demote(victim)
    return placements.schedule()


class _Placements:
    """A capacity walk over a schedule's order (the simulator's lifetimes, simplified).

    A result placed in L1 occupies its cores from its step until its last reader;
    one in LLB occupies the cluster's LLB likewise; the running group chunk also
    needs its working set (:func:`compiler.footprint.group_footprint`, inputs
    included, so inputs it reads are not counted twice). Model outputs and every
    result not allowed in a scope go to the next slower scope.
    """

    def __init__(self, graph: Graph, schedule: GraphSchedule, target: Target) -> None:
        self.g, self.s, self.t = graph, schedule, target
        deps, outs = chunk_dag(graph, schedule)
        self.nodes = [("g", st.name, st.chunk) if st.kind == "group" else ("t", st.name, 0)
                      for st in schedule.order]
        self.pos = {n: i for i, n in enumerate(self.nodes)}
        self.deps = deps
        self.last: dict[tuple[str, str, int], int] = {n: self.pos[n] for n in self.nodes}
        for n, ds in deps.items():
            for d in ds:
                self.last[d] = max(self.last[d], self.pos[n])
        for n in outs:
            self.last[n] = len(self.nodes)
        self.groups = {g.name: g for g in schedule.groups}
        self.transfers = {t.name: t for t in schedule.transfers}
        self.place: dict[tuple[str, str, int], Placement] = {}
        for n in self.nodes:
            p = self._initial(n)
            self.place[n] = p
        for n in outs:
            self.place[n] = Placement("DDR", self.place[n].core_bind)

    def _initial(self, n: tuple[str, str, int]) -> Placement:
        if n[0] == "g":
            return self.groups[n[1]].chunks[n[2]]
        tr = self.transfers[n[1]]
        if tr.kind == "split" and tr.tensor in self.g.inputs:
            return Placement("DDR", tr.placement.core_bind)
        return Placement("L1", tr.placement.core_bind)

    def _allowed(self, n: tuple[str, str, int], scope: str) -> bool:
        if n[0] == "g":
            out = group_io(self.g, self.groups[n[1]].ops).outputs[0]
        else:
            out = self.transfers[n[1]].tensor
        p = self.g.producer.get(out)
        return p is None or scope in self.g.ops[p].allowed_scopes

    def _bytes(self, n: tuple[str, str, int]) -> float:
        if n[0] == "g":
            gr = self.groups[n[1]]
            return self.g.nbytes(group_io(self.g, gr.ops).outputs[0]) / gr.split
        tr = self.transfers[n[1]]
        return self.g.nbytes(tr.tensor) * len(tr.dst_chunks) / tr.dst_factor

    def _work(self, n: tuple[str, str, int]) -> dict[int, float]:
        p = self.place[n]
        if n[0] != "g":
            if p.mem_scope != "L1":
                return {}
            per = self._bytes(n) / len(p.cores)
            return {c: per for c in p.cores}
        gr = self.groups[n[1]]
        samples = self.g.batch // gr.split
        parts = len(p.core_bind)
        need = group_footprint(self.g, gr.ops).peak_bytes(samples // parts, len(p.core_bind[0]))
        return {c: float(need) for c in p.cores}

    def overflow(self) -> tuple[str, str, int] | None:
        """A held result to demote so that the walk fits, or None when it fits."""
        l1_cap, llb_cap = self.t.l1.data_bytes, self.t.llb.bytes
        for i, n in enumerate(self.nodes):
            live = [m for m in self.nodes[:i] if self.last[m] >= i]
            reads = set(self.deps.get(n, ()))
            llb = sum(self._bytes(m) for m in live if self.place[m].mem_scope == "LLB")
            if self.place[n].mem_scope == "LLB":
                llb += self._bytes(n)
            if llb > llb_cap:
                held = [m for m in live if self.place[m].mem_scope == "LLB" and m not in reads]
                if held:
                    return max(held, key=lambda m: (self._next_use(m, i), self._bytes(m)))
                return n if self.place[n].mem_scope == "LLB" else None
            per_core = dict.fromkeys(range(self.t.chip.cores_per_cluster), 0.0)
            for c, b in self._work(n).items():
                per_core[c] += b
            for m in live:
                p = self.place[m]
                if p.mem_scope != "L1":
                    continue
                share = self._bytes(m) / len(p.cores)
                if m in reads:  # what this step reads in place is inside its working set
                    share *= self._unread_fraction(m)
                for c in p.cores:
                    per_core[c] += share
            worst = max(per_core, key=per_core.__getitem__)
            if per_core[worst] > l1_cap:
                held = [m for m in live if self.place[m].mem_scope == "L1"
                        and worst in self.place[m].cores
                        and (m not in reads or self._unread_fraction(m) > 0)]
                if held:
                    return max(held, key=lambda m: (self._next_use(m, i), self._bytes(m)))
                if n[0] == "t" and self.place[n].mem_scope == "L1":
                    return n
        return None

    def _unread_fraction(self, m: tuple[str, str, int]) -> float:
        """Of a result read by one consumer chunk, the part other chunks still need."""
        if m[0] == "t" and self.transfers[m[1]].kind == "split":
            pieces = len(self.transfers[m[1]].dst_chunks)
            return 1.0 - 1.0 / pieces
        return 0.0

    def _next_use(self, m: tuple[str, str, int], i: int) -> int:
        uses = [self.pos[n] for n, ds in self.deps.items() if m in ds and self.pos[n] >= i]
        return min(uses) if uses else len(self.nodes)

    def demote(self, n: tuple[str, str, int]) -> None:
        """Move a result one scope slower (L1 -> LLB -> DDR), skipping scopes it may not use."""
        p = self.place[n]
        order = ["L1", "LLB", "DDR"]
        for scope in order[order.index(p.mem_scope) + 1 :]:
            if self._allowed(n, scope) or scope == "DDR":
                self.place[n] = Placement(scope, p.core_bind)
                return

    def schedule(self) -> GraphSchedule:
        """The schedule with the walk's placements."""
        groups = []
        for gr in self.s.groups:
            chunks = tuple(self.place[("g", gr.name, c)] for c in range(gr.split))
            groups.append(Group(gr.name, gr.ops, gr.split, chunks))
        tp = {name: self.place[("t", name, 0)] for name in self.transfers}
        return make_schedule(self.g, groups, order=list(self.s.order), transfer_placements=tp,
                             source=self.s.source)
