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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.derive import Node, chunk_dag, group_io
from compiler.footprint import (
    ChainPoint,
    Profile,
    chain_points,
    group_profile,
    peak_of,
    sample_bytes,
    stream_readers,
    streamable_inputs,
    weight_bytes,
)
from compiler.layout import (
    Layout,
    group_layout,
    input_layout,
    samples_per_core,
    staying_fraction,
    transfer_layout,
)
from compiler.memo import memo_of
from compiler.opshape import OpKind, OpShape, batched_split, op_shapes
from compiler.views import view_sources

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule, GroupSpec, Transfer
    from compiler.target import Target

STREAM_TILE_ELEMENTS = 4096  # elements per DMA/vector tile (sim/_model.py uses the same tile)

__all__ = [
    "STREAM_TILE_ELEMENTS",
    "CapacityIssue",
    "CapacityWalk",
    "MemoryPlan",
    "StepMemory",
    "check_capacity",
    "chunk_working_set",
    "in_compute_dtype",
    "llb_weight_tiles",
    "order_nodes",
    "plan_memory",
    "remember_plan",
    "stream_window",
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
        streamed: GroupSpec inputs read tile by tile from LLB/DDR (not staged in L1).
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


class _GroupFacts:
    """What every chunk step of one op set needs (remembered beside the graph).

    ``work`` remembers :func:`chunk_working_set` results by
    ``(streamed, stream_output, held, samples, cores)``.
    """

    __slots__ = ("attention", "buffers", "halo", "halo_points", "inputs", "ops", "output", "profiles",
                 "sizes", "streamable", "weight_bytes", "windowed", "work")

    def __init__(self, graph: Graph, ops: tuple[int, ...]) -> None:
        io = group_io(graph, ops)
        self.ops = ops
        self.inputs = io.inputs
        self.output = io.outputs[0] if io.outputs else graph.ops[ops[-1]].output
        self.streamable = streamable_inputs(graph, ops)
        self.weight_bytes = weight_bytes(graph, ops)
        self.sizes = {t: sample_bytes(graph, t) for t in (*io.inputs, self.output)}
        self.work: dict[tuple[frozenset[str], bool, bool, int, int], float] = {}
        # per (streamed, stream_output, held): the footprint's profile and chain points
        # (group_profile, chain_points: independent of the chunk's shape)
        self.profiles: dict[tuple[frozenset[str], bool, bool],
                            tuple[Profile, tuple[ChainPoint, ...]]] = {}
        # _halo_points and _stream_buffers: the shape-independent parts of the sums
        self.halo_points: dict[tuple[frozenset[str], bool, bool],
                               list[tuple[int, int, list[tuple[OpShape, bool, bool]]]]] = {}
        self.buffers: dict[frozenset[str], tuple[tuple[int, int, float | None], ...]] = {}
        # (halo bytes at the peak, window rows beyond the usual two stream tiles,
        # attention's busiest-core excess at the peak)
        self.halo: dict[tuple[frozenset[str], bool, bool, int, int],
                        tuple[float, float, float]] = {}
        shapes = op_shapes(graph)
        self.windowed = any(shapes[i].halo_bytes for i in ops)
        self.attention = any(shapes[i].kind == OpKind.BATCHED_MATMUL and shapes[i].batched
                             for i in ops)


def _facts(graph: Graph, ops: tuple[int, ...]) -> _GroupFacts:
    memo = memo_of(graph)
    key = ("capacity.facts", ops)
    hit: _GroupFacts | None = memo.get(key)
    if hit is None:
        hit = memo[key] = _GroupFacts(graph, ops)
    return hit


def cut_sides(samples: int, cores: int) -> int:
    """Most sides (0, 1 or 2) of one core's rows that are cut inside a sample.

    ``samples`` samples' rows (sample-major) are cut into ``cores`` equal pieces;
    core ``c`` holds ``[c * samples / cores, (c + 1) * samples / cores)`` in sample
    units, and a side of it is cut inside a sample when that end is not whole.
    """
    best = 0
    for c in range(cores):
        sides = ((c * samples) % cores != 0) + (((c + 1) * samples) % cores != 0)
        if sides > best:
            best = sides
            if best == 2:
                break
    return best


def halo_bytes_per_core(d: OpShape, samples: int, cores: int) -> float:
    """L1 bytes of input rows a core of the part receives for a windowed op's halo.

    Each cut side inside a sample brings half of :attr:`OpShape.halo_bytes`
    (``dilated kernel - stride`` rows per cut, shared by the cut's two cores), at
    most the rows of the sample the core does not already hold. The rows may come
    from several cores away (a dilated kernel reaching past the neighbour's rows):
    they need the room all the same.
    """
    sides = cut_sides(samples, cores)
    if not sides or not d.halo_bytes:
        return 0.0
    own = d.in_bytes * samples / cores
    room = d.in_bytes - own if samples < cores else d.in_bytes
    return min(sides / 2 * d.halo_bytes, max(room, 0.0))


def attention_excess_bytes(d: OpShape, samples: int, cores: int, float_bytes: int) -> float:
    """L1 bytes the busiest core of a part holds for a batched matmul beyond an even share.

    The footprint divides every batched tensor evenly over the part's cores; the
    matmul's GEMMs are split as :func:`compiler.opshape.batched_split` says (the
    same split its compute and NoC exchange use). The busiest core holds its GEMMs'
    share of the first operand and the output, and the *whole* second operand (K or
    V) of each GEMM it computes.
    """
    if cores < 2 or not d.amount:
        return 0.0
    sp = batched_split(d, samples, cores)
    even = samples / cores  # samples' worth each core holds under an even split
    busiest = sp.gemms * (sp.rows / max(d.gemm_rows, 1)) / d.amount
    out = d.amount * d.gemm_rows * d.n * float_bytes
    excess = max(0.0, busiest - even) * (d.in_bytes + out)
    excess += max(0.0, sp.gemms / d.amount - even) * d.operand_bytes
    return excess


def _work(graph: Graph, f: _GroupFacts, streamed: frozenset[str], stream_output: bool,
          held: bool, samples: int, cores: int) -> float:
    key = (streamed, stream_output, held, samples, cores)
    hit = f.work.get(key)
    if hit is not None:
        return hit
    pkey = (streamed, stream_output, held)
    both = f.profiles.get(pkey)
    if both is None:
        both = f.profiles[pkey] = (group_profile(graph, f.ops, streamed, stream_output, held),
                                   chain_points(graph, f.ops, streamed, stream_output, held))
    prof, points = both
    work = float(peak_of(prof, samples, cores))
    # halos (issue 25 item 3): a windowed op whose rows are cut inside a sample holds
    # its neighbours' rows beside its own while it runs; attention (item 4): the busiest
    # core holds its whole heads (or a head's rows and its whole K/V), not an even share
    halo_peak = attn_peak = 0.0
    if (f.windowed and cut_sides(samples, cores)) or (f.attention and cores > 1):
        for s, fx, chain in _halo_points(graph, f, pkey, points):
            halo = attn = 0.0
            for d, is_halo, is_attn in chain:
                if is_halo:
                    halo += halo_bytes_per_core(d, samples, cores)
                if is_attn:
                    attn += attention_excess_bytes(d, samples, cores, graph.float_bytes)
            if halo or attn:
                at = -(-s * samples // cores) + fx + halo + attn
                if at > work:
                    work, halo_peak, attn_peak = at, halo, attn
    tile = STREAM_TILE_ELEMENTS * graph.float_bytes
    buffers = windows = 0.0
    for sb, fb, window in _stream_buffers(graph, f, streamed):
        piece = min(tile, -(-sb * samples // cores) + fb)
        buf = 2.0 * piece
        # a windowed reader (issue 25 item 3) needs a whole window of rows, dilation x
        # (kernel - 1) + 1 of them, resident while the next tile streams in
        if window is not None and window + piece > buf:
            windows += window + piece - buf
            buf = window + piece
        buffers += buf
    if stream_output:
        sb, fb = f.sizes[f.output]
        buffers += 2.0 * min(tile, -(-sb * samples // cores) + fb)
    work += buffers
    f.work[key] = work
    f.halo[key] = (halo_peak, windows, attn_peak)
    return work


def _halo_points(graph: Graph, f: _GroupFacts, pkey: tuple[frozenset[str], bool, bool],
                 points: tuple[ChainPoint, ...]) -> list[tuple[int, int, list[tuple[OpShape, bool, bool]]]]:
    """The chain points of ``pkey`` with ops that add a halo (a windowed op whose first
    input is not streamed) or attention's excess, those ops in chain order with which
    they add: what :func:`_work` sums per chunk shape (independent of the shape)."""
    hit = f.halo_points.get(pkey)
    if hit is None:
        streamed = pkey[0]
        shapes = op_shapes(graph)
        roots = view_sources(graph, f.ops)
        hit = []
        for s, fx, chain in points:
            ops = []
            for i in chain:
                d = shapes[i]
                first = graph.ops[i].inputs[0] if d.halo_bytes else ""
                is_halo = bool(d.halo_bytes) and roots.get(first, first) not in streamed
                is_attn = d.kind == OpKind.BATCHED_MATMUL and bool(d.batched)
                if is_halo or is_attn:
                    ops.append((d, is_halo, is_attn))
            if ops:
                hit.append((s, fx, ops))
        f.halo_points[pkey] = hit
    return hit


def _stream_buffers(graph: Graph, f: _GroupFacts, streamed: frozenset[str]
                    ) -> tuple[tuple[int, int, float | None], ...]:
    """Per streamed input (sorted by name): its sizes and, for a windowed reader, the
    bytes of a whole window of rows (None otherwise): what :func:`_work` sums per shape."""
    hit = f.buffers.get(streamed)
    if hit is None:
        readers = stream_readers(graph, f.ops) if streamed else {}
        rows = []
        for t in sorted(streamed):
            sb, fb = f.sizes[t]
            rows.append((sb, fb, stream_window(graph, readers.get(t), sb, fb)))
        hit = f.buffers[streamed] = tuple(rows)
    return hit


def stream_window(graph: Graph, reader: int | None, sb: int, fb: int) -> float | None:
    """The bytes of a whole window of rows of a streamed input (``sb`` per sample, ``fb``
    fixed) its reader op ``reader`` needs at once, or None: no reader, or no window of
    more than one row (what :func:`_work` adds beyond the usual two stream tiles)."""
    rd = op_shapes(graph)[reader] if reader is not None else None
    if rd is not None and rd.window_rows > 1 and rd.in_rows:
        return min(rd.window_rows, rd.in_rows) * (sb + fb) / rd.in_rows
    return None


def llb_weight_tiles(weight_bytes: float, target: Target) -> float:
    """Bytes of a step's weights in the LLB while it runs (issue 25 item 6).

    Weights broadcast through the LLB on their way to the cores' weight buffers: up to
    two weight-buffer tiles (one loading, one being broadcast) are there at once. The
    capacity walk and the compiled search core (``search_space._ccore``) both read this.
    """
    if not target.llb.broadcast:
        return 0.0
    return min(weight_bytes, 2 * (target.l1.weight_bytes / 2))


def step_halo_bytes(graph: Graph, ops: tuple[int, ...], streamed: frozenset[str],
                    stream_output: bool, held: bool, samples: int, cores: int) -> float:
    """Halo bytes in :func:`chunk_working_set` at its peak (0 when the peak has none)."""
    f = _facts(graph, tuple(ops))
    streamed = frozenset(streamed) & f.streamable
    _work(graph, f, streamed, stream_output, held, samples, cores)
    return f.halo[(streamed, stream_output, held, samples, cores)][0]


def chunk_working_set(graph: Graph, ops: tuple[int, ...], streamed: frozenset[str],
                      stream_output: bool, held: bool, samples: int, cores: int) -> float:
    """Bytes one core of a group chunk needs for the chunk itself (the walk's working set).

    The footprint of the op set for ``samples`` samples shared by ``cores`` cores
    (:func:`compiler.footprint.group_profile`) plus the double-buffered tiles of
    every streamed input and of a streamed output. What is already live on the core
    comes on top (minus input bytes already in place): the walk adds it.

    Args:
        graph: The graph, sized in the target's compute type (:func:`in_compute_dtype`).
        ops: The group's op set.
        streamed: Inputs read tile by tile from LLB/DDR (others are ignored unless
            :func:`compiler.footprint.streamable_inputs` allows them).
        stream_output: The output goes to LLB/DDR as it is produced.
        held: An input in L1 is still read by a later step (inputs stay to the end).
        samples: Samples of the core's part.
        cores: Cores of the part.
    """
    f = _facts(graph, tuple(ops))
    return _work(graph, f, frozenset(streamed) & f.streamable, stream_output, held, samples, cores)


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
    deps, outs = chunk_dag(graph, schedule)
    walk = CapacityWalk(graph, target, schedule.groups, schedule.transfers, deps, outs,
                        order_nodes(schedule))
    for k, layout in enumerate(walk.layouts):
        if walk.commit(k, layout[0]) is not None:
            break
    plan = walk.plan()
    memo[key] = (graph, plan)
    return plan


def remember_plan(graph: Graph, schedule: GraphSchedule, target: Target, plan: MemoryPlan) -> None:
    """Record the plan of a schedule walked with :class:`CapacityWalk` in its order.

    For a caller that built ``schedule`` from the scopes it committed to a walk over
    the same groups, transfers, chunk DAG and order: :func:`plan_memory` then returns
    ``plan`` without walking again.
    """
    memo_of(schedule, limit=8)[("capacity", id(graph), target.hash)] = (graph, plan)


def working_set_entries(name: str, work: float,
                        halo: tuple[float, float, float]) -> list[tuple[str, int]]:
    """An overflowing step's own entries in an L1 issue: its working set beyond the halo
    terms, then each halo term (halo rows from other cores, window rows of a streamed
    input, attention heads beyond an even share) that is there. One definition for
    :meth:`CapacityWalk.l1_issue` and the compiled walk's (``search_space._crows``)."""
    out: list[tuple[str, int]] = []
    rest = work - sum(halo)
    if rest > 0:
        out.append((f"{name} working set", int(rest)))
    for what, b in zip(("halo rows from other cores", "window rows of a streamed input",
                        "attention heads beyond an even share"), halo):
        if b > 0:
            out.append((f"{name} {what}", int(b)))
    return out


class CapacityWalk:
    """The capacity walk, one step at a time (what :func:`plan_memory` runs).

    Built from a schedule's skeleton: its groups and transfers (their scopes are
    replaced as steps are committed), chunk DAG and order as chunk-DAG nodes.
    ``fits(k, scope)`` says whether step ``k`` (the next one) fits with its result
    in ``scope`` after the steps committed so far, without changing anything;
    ``commit(k, scope)`` walks it. A caller may so choose each result's scope as
    the walk reaches it (the search space does) and gets the same accounting as
    :func:`plan_memory` on the finished schedule. After the first overflow the walk
    goes on (a caller may keep deciding) but :meth:`plan` stops there, as
    :func:`plan_memory` does.

    Attributes:
        nodes: The order, as chunk-DAG nodes.
        last: Per position, the position of the last step reading its result
            (``len(nodes)`` for model outputs; itself when nobody reads it).
        reads: Per position, the positions of the results it reads.
        layouts: Per position, the result's layout (scope as committed so far).
    """

    def __init__(self, graph: Graph, target: Target, groups: Sequence[GroupSpec],
                 transfers: Sequence[Transfer], deps: Mapping[Node, Sequence[Node]],
                 outs: Sequence[Node], nodes: Sequence[Node]) -> None:
        g = self.g = in_compute_dtype(graph, target)
        self.n = target.chip.cores_per_cluster
        self.l1_cap = target.l1.data_bytes
        self.llb_cap = target.llb.bytes
        self.target = target
        self.l1_live = [0.0] * self.n
        self.llb_live = 0.0
        self.peak_l1 = [0.0] * self.n
        self.peak_llb = 0.0
        # order position -> (per-core L1 bytes, LLB bytes) of a live result
        self.resident: dict[int, tuple[dict[int, float], float]] = {}
        self.steps: list[StepMemory] = []
        self.issue: CapacityIssue | None = None
        self._plan: MemoryPlan | None = None
        self.done = 0
        self.nodes = list(nodes)
        pos = {node: i for i, node in enumerate(self.nodes)}
        end = len(self.nodes)
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
        self.reads = [[pos[d] for d in deps.get(node, ())] for node in self.nodes]
        by_group = {gr.name: (gr, _facts(g, gr.ops)) for gr in groups}
        by_transfer = {tr.name: tr for tr in transfers}
        self.layouts: list[Layout] = []
        self.provides: list[str] = []
        self.facts: list[_GroupFacts | None] = []
        batch = g.batch
        for node in self.nodes:
            if node[0] == "g":
                gr, f = by_group[node[1]]
                self.layouts.append(group_layout(gr, node[2], batch))
                self.provides.append(f.output)
                self.facts.append(f)
            else:
                tr = by_transfer[node[1]]
                self.layouts.append(transfer_layout(tr, batch))
                self.provides.append(tr.tensor)
                self.facts.append(None)
        self.input_scope = input_layout(batch)[0]
        self.size_of = [sample_bytes(g, t) for t in self.provides]
        self.src_of = [{self.provides[d]: d for d in reads} for reads in self.reads]
        self._trial: tuple[int, str, _Eval] | None = None
        self._prep: tuple[int, frozenset[str], dict[int, float], bool] | None = None
        self._l1: dict[int, dict[int, float]] = {}

    # ---- the interface -------------------------------------------------------------------
    def fits(self, k: int, scope: str) -> bool:
        """Whether step ``k`` (the next to commit) fits with its result in ``scope`` after
        the steps committed so far. Changes nothing."""
        if k != self.done:
            raise ValueError(f"step {k} is not the next step ({self.done})")
        ev = self._evaluate(k, (scope, self.layouts[k][1]), explain=False)
        self._trial = (k, scope, ev)
        return ev.issue is None

    def commit(self, k: int, scope: str) -> CapacityIssue | None:
        """Walk step ``k`` (the next one) with its result in ``scope``; its overflow or None."""
        if k != self.done:
            raise ValueError(f"step {k} is not the next step ({self.done})")
        self.layouts[k] = (scope, self.layouts[k][1])
        trial = self._trial
        ev = trial[2] if trial is not None and trial[0] == k and trial[1] == scope \
            and trial[2].issue is None else self._evaluate(k, self.layouts[k])
        self._trial = None
        self.done += 1
        recording = self.issue is None
        if recording:
            for c, u in ev.usage:
                if u > self.peak_l1[c]:
                    self.peak_l1[c] = u
        if ev.issue is not None:
            if recording:
                self.issue = ev.issue
                self._plan = MemoryPlan(tuple(self.steps), tuple(int(x) for x in self.peak_l1),
                                        int(self.peak_llb), ev.issue)
            self.release(k)
            self.allocate(k)
            return ev.issue
        if self.facts[k] is not None:
            if ev.llb_need is not None and recording:
                self.peak_llb = max(self.peak_llb, ev.llb_need)
            if recording:
                self.steps.append(StepMemory(tuple(ev.usage), ev.streamed, ev.held))
            self.release(k)
            self.allocate(k)
        else:
            self.release(k)
            self.allocate(k)
            if ev.llb_need is not None and recording:
                self.peak_llb = max(self.peak_llb, ev.llb_need)
            if recording:
                self.steps.append(StepMemory(tuple(ev.usage), frozenset(), False))
        return None

    def plan(self) -> MemoryPlan:
        """The accounting of the steps committed so far (up to the first overflow)."""
        if self._plan is not None:
            return self._plan
        return MemoryPlan(tuple(self.steps), tuple(int(x) for x in self.peak_l1),
                          int(self.peak_llb), None)

    def result_l1_bytes(self, k: int) -> dict[int, float]:
        """Bytes step ``k``'s result occupies on each core when placed in L1."""
        return self.node_l1(k)

    def result_bytes(self, k: int) -> float:
        """Bytes of step ``k``'s result (what it occupies in the LLB)."""
        return self.node_total(k)

    def label(self, i: int) -> str:
        """How step ``i`` is named in messages (``group_1[2]``, ``concat_0``)."""
        node = self.nodes[i]
        return f"{node[1]}[{node[2]}]" if node[0] == "g" else node[1]

    # ---- results -----------------------------------------------------------------------
    def sizes(self, i: int) -> tuple[int, int]:
        """``(bytes per sample, fixed bytes)`` of step ``i``'s result."""
        return self.size_of[i]

    def node_l1(self, i: int) -> dict[int, float]:
        """Bytes per core of result ``i`` in L1 (its pieces never change: remembered)."""
        hit = self._l1.get(i)
        if hit is None:
            sb, fb = self.sizes(i)
            hit = self._l1[i] = {c: spc * sb + fb
                                 for c, spc in samples_per_core(self.layouts[i]).items()}
        return hit

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
    def _evaluate(self, k: int, layout: Layout, explain: bool = True) -> _Eval:
        """The step's accounting; without ``explain`` an overflow is :data:`_OVER`."""
        f = self.facts[k]
        if f is not None:
            return self._evaluate_group(k, f, layout, explain)
        return self._evaluate_transfer(k, layout, explain)

    def _evaluate_group(self, k: int, f: _GroupFacts, layout: Layout, explain: bool) -> _Eval:
        g = self.g
        dep_idx = self.reads[k]
        prep = self._prep
        if prep is None or prep[0] != k:
            prep = self._prep = (k, *self._inputs(k, f, layout))
        _, names, staying, held = prep
        out_off = layout[0] != "L1"
        usage: list[tuple[int, float]] = []
        live, cap = self.l1_live, self.l1_cap
        for _, spp, parts in layout[1]:
            for part in parts:
                work = _work(g, f, names, out_off, held, spp, len(part))
                for c in part:
                    u = live[c] - staying.get(c, 0.0) + work
                    if u > cap:
                        halo = f.halo.get((names, out_off, held, spp, len(part)),
                                          (0.0, 0.0, 0.0))
                        issue = self.l1_issue(k, c, u, work, staying, dep_idx, self.resident,
                                              halo) if explain else _OVER
                        return _Eval(issue, usage, names, held, None)
                    usage.append((c, u))
        need = None
        # weights pass the LLB on their way to the cores (broadcast): up to two weight-buffer
        # tiles are there while the step runs (issue 25 item 6)
        tiles = llb_weight_tiles(f.weight_bytes, self.target)
        if layout[0] == "LLB" or tiles:
            need = self.llb_live + tiles
            if layout[0] == "LLB":
                need += self._total(k, layout)
            if need > self.llb_cap:
                issue = self.llb_issue(k, need, self.resident, self.llb_live, tiles) \
                    if explain else _OVER
                return _Eval(issue, usage, names, held, None)
        return _Eval(None, usage, names, held, need)

    def _inputs(self, k: int, f: _GroupFacts, layout: Layout
                ) -> tuple[frozenset[str], dict[int, float], bool]:
        """Streamed inputs, input bytes already in place per core, and whether an L1
        input is held for a later step (the same whatever the step's own scope)."""
        stage: Layout = ("L1", layout[1])
        streamable = f.streamable
        by_tensor = self.src_of[k]
        streamed: list[str] = []
        staying: dict[int, float] = {}
        held = False
        for name in f.inputs:
            d = by_tensor.get(name)
            src_scope = self.layouts[d][0] if d is not None else self.input_scope
            if src_scope != "L1":
                if name in streamable:
                    streamed.append(name)
                continue
            assert d is not None
            if self.last[d] > k:
                held = True
            sb, fb = f.sizes[name]
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
        return frozenset(streamed), staying, held

    def _total(self, k: int, layout: Layout) -> float:
        sb, fb = self.sizes(k)
        return sum(spp * len(parts) for _, spp, parts in layout[1]) * sb + fb

    def _evaluate_transfer(self, k: int, layout: Layout, explain: bool) -> _Eval:
        # sources dying here are reused in place: released before the result is allocated
        expiring = [i for i in self.expire.get(k, ()) if i in self.resident]
        own = self.last[k] > k
        usage: list[tuple[int, float]] = []
        if layout[0] == "L1":
            sb, fb = self.size_of[k]
            per = {c: spc * sb + fb for c, spc in samples_per_core(layout).items()} if own else {}
            cores = dict.fromkeys(c for _, _, parts in layout[1] for p in parts for c in p)
            for c in cores:
                u = self.l1_live[c]
                for i in expiring:
                    u -= self.resident[i][0].get(c, 0.0)
                u += per.get(c, 0.0)
                if u > self.l1_cap:
                    if not explain:
                        return _Eval(_OVER, usage, frozenset(), False, None)
                    resident = {i: v for i, v in self.resident.items() if i not in expiring}
                    if own:
                        resident[k] = (per, 0.0)
                    return _Eval(self.l1_issue(k, c, u, 0.0, {}, [], resident), usage,
                                 frozenset(), False, None)
                usage.append((c, u))
            return _Eval(None, usage, frozenset(), False, None)
        if layout[0] == "LLB":
            live = self.llb_live
            for i in expiring:
                live -= self.resident[i][1]
            if own:
                live += self._total(k, layout)
            if live > self.llb_cap:
                if not explain:
                    return _Eval(_OVER, usage, frozenset(), False, None)
                resident = {i: v for i, v in self.resident.items() if i not in expiring}
                if own:
                    resident[k] = ({}, self._total(k, layout))
                return _Eval(self.llb_issue(k, live, resident, live), usage, frozenset(), False,
                             None)
            return _Eval(None, usage, frozenset(), False, live)
        return _Eval(None, usage, frozenset(), False, None)

    # ---- overflows ---------------------------------------------------------------------
    def l1_issue(self, k: int, c: int, needed: float, work: float, reused: dict[int, float],
                 reads: list[int], resident: dict[int, tuple[dict[int, float], float]],
                 halo: tuple[float, float, float] = (0.0, 0.0, 0.0)) -> CapacityIssue:
        inputs = set(reads)
        live: list[tuple[str, int]] = []
        steps: list[tuple[int, int]] = []
        for i, (per, _) in resident.items():
            b = per.get(c, 0.0)
            if i in inputs:
                b -= min(b, reused.get(c, 0.0))
            if b > 0:
                live.append((f"{self.label(i)} ({self.provides[i]})", int(b)))
                steps.append((i, int(b)))
        live.extend(working_set_entries(self.label(k), work, halo))
        live.sort(key=lambda x: -x[1])
        # rounded up: an overflow by a fraction of a byte still needs more than the capacity
        return CapacityIssue(f"L1 of core {c}", c, self.label(k), k, math.ceil(needed), self.l1_cap,
                             tuple(live), tuple(steps))

    def llb_issue(self, k: int, needed: float, resident: dict[int, tuple[dict[int, float], float]],
                  llb_live: float, weight_tiles: float = 0.0) -> CapacityIssue:
        live = [(f"{self.label(i)} ({self.provides[i]})", int(b))
                for i, (_, b) in resident.items() if b > 0]
        steps = [(i, int(b)) for i, (_, b) in resident.items() if b > 0]
        if weight_tiles > 0:
            live.append((f"{self.label(k)} weight tiles in flight", int(weight_tiles)))
        if needed > llb_live + weight_tiles:
            live.append((f"{self.label(k)} output ({self.provides[k]})",
                         int(needed - llb_live - weight_tiles)))
        live.sort(key=lambda x: -x[1])
        return CapacityIssue("LLB of cluster 0", -1, self.label(k), k, math.ceil(needed), self.llb_cap,
                             tuple(live), tuple(steps))


_OVER = CapacityIssue("", 0, "", 0, 0, 0, (), ())  # an overflow not worth describing


class _Eval:
    """One step's accounting before it is committed (a plain class: made at every trial)."""

    __slots__ = ("held", "issue", "llb_need", "streamed", "usage")

    def __init__(self, issue: CapacityIssue | None, usage: list[tuple[int, float]],
                 streamed: frozenset[str], held: bool, llb_need: float | None) -> None:
        self.issue = issue
        self.usage = usage
        self.streamed = streamed
        self.held = held
        self.llb_need = llb_need
