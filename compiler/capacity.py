"""The one capacity model: does a schedule fit every L1 and the LLB, step by step?

Pure and timing-free. The simulator (which then adds timing), the automatic
levels O0–O3 (which demote results until it fits) and the search space's
pre-check all call :func:`plan_memory`, so they can never disagree about what
fits.

The walk follows ``schedule.order`` on one cluster, sizes in the target's
compute type (:func:`in_compute_dtype`):

* **results**: a step's output placed in L1 occupies, on each core of its
  parts, its slice of the samples (a part of ``k`` cores holds ``1/k`` of each
  of its samples; unbatched bytes are replicated on every core) from the step
  until its last reader ends; one placed in LLB occupies the cluster's LLB
  likewise; model outputs live to the end;
* **working set** of a group chunk, per core: the footprint of the group's
  op set (:func:`compiler.footprint.group_profile`) for the samples of *that
  core's part* shared by *that part's* cores (uneven parts are sized part by
  part), with the inputs it streams from LLB/DDR and an output it streams out
  counted as tiles, minus input bytes already on the core (the working set
  counts them);
* **stream buffers**: every input streamed from LLB/DDR and an output streamed
  out needs its tiles double-buffered in L1 while the DMA fills or drains them:
  two tiles of :data:`STREAM_TILE_ELEMENTS` elements (the vector engine's tile,
  as the simulator times it) or the core's whole slice when smaller. Without
  them a fully streamed op would need no L1 at all and fit any target;
* a **transfer**'s result reuses in place the source bytes that die with it.

An overflow is a :class:`CapacityIssue`: which L1 or the LLB, at which step,
bytes needed and available, and what was live.

Example:
    >>> plan = plan_memory(graph, schedule, target)
    >>> plan.ok, plan.peak_l1_bytes, plan.peak_llb_bytes
    >>> issue = check_capacity(graph, schedule, target)  # None when it fits
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.footprint import group_profile, peak_of, sample_bytes, streamable_inputs
from compiler.layout import (
    Layout,
    group_layout,
    input_layout,
    samples_per_core,
    staying_fraction,
    transfer_layout,
)
from compiler.memo import memo_of
from compiler.plan import Node, chunk_dag, group_io

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target

STREAM_TILE_ELEMENTS = 4096  # elements per DMA/vector tile (sim/_model.py uses the same tile)

__all__ = [
    "STREAM_TILE_ELEMENTS",
    "CapacityIssue",
    "MemoryPlan",
    "StepMemory",
    "check_capacity",
    "in_compute_dtype",
    "order_nodes",
    "plan_memory",
]


@dataclass(frozen=True)
class CapacityIssue:
    """Where a schedule does not fit.

    Attributes:
        resource: ``"L1 of core 5"`` or ``"LLB of cluster 0"``.
        core: The core (-1 for the LLB).
        step: The step that overflowed (``group_1[2]``, ``concat_0``).
        step_index: Its position in the order.
        needed_bytes: Bytes the step needed there.
        capacity_bytes: What the resource holds.
        live: ``(what, bytes)`` occupying it, largest first.
        live_steps: ``(order position, bytes)`` of the results occupying it (what a
            level may demote to a slower scope).
    """

    resource: str
    core: int
    step: str
    step_index: int
    needed_bytes: int
    capacity_bytes: int
    live: tuple[tuple[str, int], ...]
    live_steps: tuple[tuple[int, int], ...]

    @property
    def message(self) -> str:
        """One line: ``L1 of core 3 overflows at group_1[0]: needs ... (live: ...)``."""
        what = ", ".join(f"{n} {b}" for n, b in self.live[:4])
        return (f"{self.resource} overflows at {self.step}: needs {self.needed_bytes} bytes, "
                f"has {self.capacity_bytes} (live: {what})")


@dataclass(frozen=True)
class StepMemory:
    """Memory facts of one step that timing needs.

    Attributes:
        l1_bytes: ``(core, bytes)`` in use on each of the step's cores while it runs.
        streamed: Group inputs read tile by tile from LLB/DDR (not staged in L1).
        held: An L1 input of the step is still read by a later step.
    """

    l1_bytes: tuple[tuple[int, float], ...]
    streamed: frozenset[str]
    held: bool


@dataclass(frozen=True)
class MemoryPlan:
    """The walk's result: per-step memory and peaks, or the first overflow.

    ``steps`` covers the steps walked (all of them when ``ok``).
    """

    steps: tuple[StepMemory, ...]
    peak_l1_bytes_per_core: tuple[int, ...]
    peak_llb_bytes: int
    issue: CapacityIssue | None

    @property
    def ok(self) -> bool:
        """Whether every step fits."""
        return self.issue is None

    @property
    def peak_l1_bytes(self) -> int:
        """Largest L1 use of any core."""
        return max(self.peak_l1_bytes_per_core, default=0)


def in_compute_dtype(graph: Graph, target: Target) -> Graph:
    """The graph with floating-point tensors sized in the target's compute type.

    The Graph view sizes floats in FP16 (the STCP920's type); a target computing in
    another type gets a copy (remembered beside the graph).
    """
    width = target.dtype_bytes
    if graph.float_bytes == width:
        return graph
    memo = memo_of(graph)
    key = ("float_bytes", width)
    other: Graph | None = memo.get(key)
    if other is None:
        other = memo[key] = dataclasses.replace(graph, float_bytes=width)
    return other


def order_nodes(schedule: GraphSchedule) -> list[Node]:
    """The order as chunk-DAG nodes: ``("g", group, chunk)`` or ``("t", transfer, 0)``."""
    return [("g", st.name, st.chunk) if st.kind == "group" else ("t", st.name, 0)
            for st in schedule.order]


def check_capacity(graph: Graph, schedule: GraphSchedule, target: Target) -> CapacityIssue | None:
    """The first overflow of a structurally valid schedule, or None when it fits."""
    return plan_memory(graph, schedule, target).issue


def plan_memory(graph: Graph, schedule: GraphSchedule, target: Target) -> MemoryPlan:
    """Walk a structurally valid schedule's order and account every L1 and the LLB.

    The schedule must pass ``schedule.validate(graph, target)`` first (the walk
    trusts its structure). Remembered per (schedule, graph, target).
    """
    memo = memo_of(schedule, limit=8)
    key = ("capacity", id(graph), target.hash)
    hit = memo.get(key)
    if hit is not None and hit[0] is graph:
        return hit[1]  # type: ignore[no-any-return]
    plan = _Walk(in_compute_dtype(graph, target), schedule, target).run()
    memo[key] = (graph, plan)
    return plan


class _Walk:
    """One capacity walk (lives for one :func:`plan_memory` call)."""

    def __init__(self, graph: Graph, schedule: GraphSchedule, target: Target) -> None:
        self.g, self.s, self.t = graph, schedule, target
        self.n = target.chip.cores_per_cluster
        self.l1_cap = target.l1.data_bytes
        self.llb_cap = target.llb.bytes
        self.l1_live = [0.0] * self.n
        self.llb_live = 0.0
        self.peak_l1 = [0.0] * self.n
        self.peak_llb = 0.0
        # order position -> (per-core L1 bytes, LLB bytes) of a live result
        self.resident: dict[int, tuple[dict[int, float], float]] = {}
        self.steps: list[StepMemory] = []

    def run(self) -> MemoryPlan:
        g, s = self.g, self.s
        deps, outs = chunk_dag(g, s)
        order = order_nodes(s)
        pos = {node: i for i, node in enumerate(order)}
        end = len(order)
        last = list(range(end))
        for node, ds in deps.items():
            for d in ds:
                if pos[node] > last[pos[d]]:
                    last[pos[d]] = pos[node]
        for o in outs:
            last[pos[o]] = end
        self.last = last
        self.expire: dict[int, list[int]] = {}
        for i, lu in enumerate(last):
            self.expire.setdefault(lu, []).append(i)
        groups = {gr.name: gr for gr in s.groups}
        transfers = {tr.name: tr for tr in s.transfers}
        self.labels = [str(st) for st in s.order]
        self.layouts: list[Layout] = []
        self.provides: list[str] = []
        for node in order:
            if node[0] == "g":
                gr = groups[node[1]]
                self.layouts.append(group_layout(gr, node[2], g.batch))
                self.provides.append(group_io(g, gr.ops).outputs[0])
            else:
                tr = transfers[node[1]]
                self.layouts.append(transfer_layout(tr, g.batch))
                self.provides.append(tr.tensor)
        issue = None
        for k, node in enumerate(order):
            dep_idx = [pos[d] for d in deps.get(node, ())]
            if node[0] == "g":
                issue = self.group_step(k, groups[node[1]].ops, dep_idx)
            else:
                issue = self.transfer_step(k)
            if issue is not None:
                break
        return MemoryPlan(tuple(self.steps), tuple(int(x) for x in self.peak_l1),
                          int(self.peak_llb), issue)

    # ---- results -----------------------------------------------------------------------
    def sizes(self, i: int) -> tuple[int, int]:
        return sample_bytes(self.g, self.provides[i])

    def node_l1(self, i: int) -> dict[int, float]:
        sb, fb = self.sizes(i)
        return {c: spc * sb + fb for c, spc in samples_per_core(self.layouts[i]).items()}

    def node_total(self, i: int) -> float:
        sb, fb = self.sizes(i)
        return sum(spp * len(parts) for _, spp, parts in self.layouts[i][1]) * sb + fb

    def allocate(self, i: int) -> None:
        if self.last[i] <= i:
            return
        scope = self.layouts[i][0]
        if scope == "L1":
            per = self.node_l1(i)
            for c, b in per.items():
                self.l1_live[c] += b
            self.resident[i] = (per, 0.0)
        elif scope == "LLB":
            b = self.node_total(i)
            self.llb_live += b
            self.resident[i] = ({}, b)

    def release(self, k: int) -> None:
        for i in self.expire.get(k, ()):
            item = self.resident.pop(i, None)
            if item is None:
                continue
            for c, b in item[0].items():
                self.l1_live[c] -= b
            self.llb_live -= item[1]

    # ---- steps -------------------------------------------------------------------------
    def group_step(self, k: int, ops: tuple[int, ...], dep_idx: list[int]) -> CapacityIssue | None:
        g = self.g
        layout = self.layouts[k]
        stage: Layout = ("L1", layout[1])
        streamable = streamable_inputs(g, ops)
        by_tensor = {self.provides[d]: d for d in dep_idx}
        streamed: list[str] = []
        staying: dict[int, float] = {}
        held = False
        for name in group_io(g, ops).inputs:
            d = by_tensor.get(name)
            src_scope = self.layouts[d][0] if d is not None else input_layout(g.batch)[0]
            if src_scope != "L1":
                if name in streamable:
                    streamed.append(name)
                continue
            assert d is not None
            if self.last[d] > k:
                held = True
            sb, fb = sample_bytes(g, name)
            if sb:
                for c, n in staying_fraction(self.layouts[d], stage).items():
                    staying[c] = staying.get(c, 0.0) + n * sb
            if fb:
                src_cores = {c for _, _, parts in self.layouts[d][1] for p in parts for c in p}
                for _, _, parts in layout[1]:
                    for part in parts:
                        for c in part:
                            if c in src_cores:
                                staying[c] = staying.get(c, 0.0) + fb
        names = frozenset(streamed)
        out_off = layout[0] != "L1"
        prof = group_profile(g, ops, names, out_off, held)
        buffered = [sample_bytes(g, t) for t in sorted(names)]
        if out_off:
            buffered.append(sample_bytes(g, self.provides[k]))
        tile = STREAM_TILE_ELEMENTS * g.float_bytes
        usage: dict[int, float] = {}
        for _, spp, parts in layout[1]:
            for part in parts:
                work = float(peak_of(prof, spp, len(part)))
                for sb, fb in buffered:
                    work += 2.0 * min(tile, -(-sb * spp // len(part)) + fb)
                for c in part:
                    u = self.l1_live[c] - staying.get(c, 0.0) + work
                    usage[c] = u
                    if u > self.l1_cap:
                        return self.l1_issue(k, c, u, work, staying, dep_idx)
                    if u > self.peak_l1[c]:
                        self.peak_l1[c] = u
        if layout[0] == "LLB":
            need = self.llb_live + self.node_total(k)
            if need > self.llb_cap:
                return self.llb_issue(k, need)
            self.peak_llb = max(self.peak_llb, need)
        self.steps.append(StepMemory(tuple(usage.items()), names, held))
        self.release(k)
        self.allocate(k)
        return None

    def transfer_step(self, k: int) -> CapacityIssue | None:
        # sources dying here are reused in place: release before allocating
        self.release(k)
        self.allocate(k)
        layout = self.layouts[k]
        usage: dict[int, float] = {}
        if layout[0] == "L1":
            cores = dict.fromkeys(c for _, _, parts in layout[1] for p in parts for c in p)
            for c in cores:
                u = self.l1_live[c]
                usage[c] = u
                if u > self.l1_cap:
                    return self.l1_issue(k, c, u, 0.0, {}, [])
                if u > self.peak_l1[c]:
                    self.peak_l1[c] = u
        elif layout[0] == "LLB":
            if self.llb_live > self.llb_cap:
                return self.llb_issue(k, self.llb_live)
            self.peak_llb = max(self.peak_llb, self.llb_live)
        self.steps.append(StepMemory(tuple(usage.items()), frozenset(), False))
        return None

    # ---- overflows ---------------------------------------------------------------------
    def l1_issue(self, k: int, c: int, needed: float, work: float, reused: dict[int, float],
                 reads: list[int]) -> CapacityIssue:
        inputs = set(reads)
        live: list[tuple[str, int]] = []
        steps: list[tuple[int, int]] = []
        for i, (per, _) in self.resident.items():
            b = per.get(c, 0.0)
            if i in inputs:
                b -= min(b, reused.get(c, 0.0))
            if b > 0:
                live.append((f"{self.labels[i]} ({self.provides[i]})", int(b)))
                steps.append((i, int(b)))
        if work > 0:
            live.append((f"{self.labels[k]} working set", int(work)))
        live.sort(key=lambda x: -x[1])
        # rounded up: an overflow by a fraction of a byte still needs more than the capacity
        return CapacityIssue(f"L1 of core {c}", c, self.labels[k], k, math.ceil(needed),
                             self.l1_cap, tuple(live), tuple(steps))

    def llb_issue(self, k: int, needed: float) -> CapacityIssue:
        live = [(f"{self.labels[i]} ({self.provides[i]})", int(b))
                for i, (_, b) in self.resident.items() if b > 0]
        steps = [(i, int(b)) for i, (_, b) in self.resident.items() if b > 0]
        if needed > self.llb_live:
            live.append((f"{self.labels[k]} output ({self.provides[k]})",
                         int(needed - self.llb_live)))
        live.sort(key=lambda x: -x[1])
        return CapacityIssue("LLB of cluster 0", -1, self.labels[k], k, math.ceil(needed),
                             self.llb_cap, tuple(live), tuple(steps))
