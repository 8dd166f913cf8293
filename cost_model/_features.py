"""Schedule features: what a performance engineer looks at, computed without simulating.

:func:`features` turns candidate schedules of one graph into one row each. Every
column is named and documented in :data:`FEATURES` (``feature_names()`` lists
them in order). Columns are **normalised by the target** so a model trained on
one chip (or network) can rank on another:

* times are cycles at the target's rates (matrix MACs per cycle and granule,
  vector lanes, DDR / LLB / NoC / DMA bytes per cycle) divided by the
  *reference time* :func:`reference_cycles` of the graph on the target (the
  roofline: every MAC at peak on every core, vector work likewise, each weight
  and the model's inputs and outputs crossing DDR once), so 1.0 means "as long as
  the ideal whole inference";
* sizes are shares of the capacity they compete for (a core's L1, the LLB);
* counts are shares or logarithms.

What is counted (all from :mod:`compiler`; this package never imports ``sim``):
per-op work from :func:`compiler.opshape.op_shapes` (matrix work padded to the
array's granule, instruction counts, vector work at the transcendental rate,
weights), working sets and result sizes from :mod:`compiler.footprint` (the
pieces the capacity model adds up), and chunk geometry from
:mod:`compiler.layout` (which bytes stay in a core's L1, which cross the NoC and
over how many hops). The capacity columns are estimates at group boundaries,
not the capacity model's full walk over the order
(:func:`compiler.capacity.plan_memory`): that walk costs milliseconds per
candidate, more than everything else here together, and the search space's
pre-check already rejects candidates that overflow.

Speed: what depends on one chunk (op set, samples, scope, cores), one group or
one producer-consumer pair of groups is computed once and kept in tables beside
the graph (:func:`compiler.memo.memo_of`); a schedule is then a list of table
rows summed with numpy, and new pairs are computed together, vectorised.
Candidates of one search share most of their groups, so featurising thousands
costs little more than looking them up (``bench/cost_model.py`` measures it).

Example:
    >>> X = features(graph, candidates, target)   # (len(candidates), len(FEATURES))
    >>> dict(zip(feature_names(), X[0]))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.capacity import in_compute_dtype
from compiler.derive import group_io
from compiler.footprint import GATHER_OPS, group_footprint, sample_bytes, streamable_inputs
from compiler.layout import slices
from compiler.memo import memo_of
from compiler.opshape import OpKind, OpShape, array_cycles, matrix_tiles, op_shapes

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule, GroupSpec, Placement
    from compiler.target import Target
    from search_space import Space

__all__ = ["FEATURES", "Feature", "feature_names", "features", "reference_cycles"]


@dataclass(frozen=True)
class Feature:
    """One column: its name and what it measures."""

    name: str
    doc: str


FEATURES: tuple[Feature, ...] = (
    # ---- compute (cycles / reference) ----
    Feature("mme_cycles", "Matrix-engine cycles summed over group chunks, on each chunk's busiest "
            "core, with matrix work padded to the array's granule and the per-instruction overhead."),
    Feature("mme_useful_cycles", "The same without padding or overhead (MACs / MACs per cycle)."),
    Feature("mme_pad_waste", "Share of the matrix engine's time lost to padding and instruction "
            "overhead: 1 - useful / padded (0 without matrix work)."),
    Feature("vme_cycles", "Vector-engine cycles summed over chunks (busiest core; exp, erf, divide "
            "at the transcendental rate)."),
    Feature("move_cycles", "L1-local data movement summed over chunks (transposes, concats, "
            "gathered rows, inputs re-read when an op's weights exceed half the weight buffer)."),
    Feature("weight_bound_cycles", "Summed over chunks and ops: the longer of an op's matrix time "
            "and the time its weights take to reach the weight buffer (uncontended weight path)."),
    Feature("compute_serial", "Summed over chunks: max(matrix, vector, move, weight bound) + "
            "pipeline fill on the busiest core: the compute time if no two steps overlapped."),
    Feature("compute_group_critical", "Summed over groups: the busiest core's compute within the "
            "group (chunks on disjoint cores overlap, chunks sharing cores queue)."),
    Feature("core_busy_max", "Largest compute time of one core over the whole schedule: the "
            "compute time if steps on different cores overlapped perfectly."),
    Feature("core_busy_mean", "Mean compute time per core (total work / cores)."),
    Feature("core_imbalance", "core_busy_max / core_busy_mean (1 = perfectly balanced cores)."),
    # ---- memory traffic (cycles at the bandwidth / reference) ----
    Feature("ddr_cycles", "All DDR bytes (weights, results written to or read from DDR, model "
            "inputs and outputs, gathered table rows) / DDR bytes per cycle."),
    Feature("ddr_weight_cycles", "Weight bytes read from DDR (once per chunk with the LLB "
            "broadcast, once per core without) / DDR bytes per cycle."),
    Feature("ddr_act_cycles", "Activation bytes through DDR / DDR bytes per cycle."),
    Feature("llb_cycles", "Bytes through the LLB port (broadcast weights in and out, results "
            "written to and read from the LLB) / LLB bytes per cycle."),
    Feature("noc_cycles", "Bytes moved between cores' L1 over the NoC / link bytes per cycle."),
    Feature("noc_hops", "Mean XY-route hops per NoC byte (0 without NoC traffic)."),
    Feature("port_max_cycles", "Bytes through the busiest core's DMA port (weights into its weight "
            "buffer, inputs staged into its L1, results it sends to LLB/DDR or other cores) / "
            "port bytes per cycle."),
    Feature("group_roofline_cycles", "Summed over groups: the slowest of the group's compute "
            "(busiest core), its DDR, LLB and NoC bytes (its chunks' weights and results, its "
            "inputs) and its busiest DMA port: each group at its own bottleneck, one after another."),
    Feature("group_staged_cycles", "Summed over groups: inputs staged into L1 before the "
            "group computes (over the NoC, from LLB/DDR when it cannot stream them, through "
            "split/concat transfers), then the slowest of its compute and its streamed traffic "
            "(weights, streamed inputs, results written out)."),
    Feature("staged_load_cycles", "The staged part alone: the slowest of DDR, LLB and NoC for "
            "the inputs staged before each group, summed over groups."),
    Feature("weight_reload", "Weight bytes loaded from DDR / the model's weight bytes (>= 1: "
            "every extra chunk of a group reloads the group's weights)."),
    Feature("l1_reuse", "Share of the activation bytes groups read that are already in the "
            "consumer core's L1 (reused in place, no transfer)."),
    Feature("act_l1_share", "Share of group result bytes placed in L1."),
    Feature("act_llb_share", "Share of group result bytes placed in the LLB."),
    Feature("act_ddr_share", "Share of group result bytes placed in DDR."),
    # ---- structure ----
    Feature("steps_log2", "log2 of the number of steps (group chunks + split/concat transfers)."),
    Feature("groups_per_op", "Groups / ops (1 = every op its own group)."),
    Feature("chunks_mean_log2", "log2 of the mean split factor (chunks per group), weighted by "
            "each group's share of the ops."),
    Feature("chunks_max_log2", "log2 of the largest split factor."),
    Feature("transfers_per_step", "Split/concat transfers / steps."),
    Feature("step_overhead_cycles", "Steps x (DMA descriptor setup + DDR latency): the fixed cost "
            "of issuing every step, / reference."),
    Feature("cores_per_step", "Mean cores a group chunk runs on / cores per cluster."),
    Feature("cores_per_part", "Mean cores sharing one sample (cores per part) / cores per cluster."),
    Feature("samples_per_core", "Mean samples' worth of work per core of a chunk / batch."),
    Feature("interleave", "Share of consecutive steps that belong to different groups or "
            "transfers (depth-first waves are high, breadth-first low)."),
    # ---- capacity (the shared capacity model's working sets and result sizes) ----
    Feature("ws_peak_l1", "Largest per-core working set of a chunk (compiler.footprint, inputs "
            "staged, as the capacity model counts it) / L1 data bytes."),
    Feature("l1_peak_est", "Largest L1 use of one core estimated at group boundaries: the "
            "producer group's L1 results, the consumer's, and the consumer's working set / L1 "
            "data bytes (groups cut where one tensor crosses hold little else). 1 - headroom."),
    Feature("llb_peak_est", "Largest LLB use estimated at group boundaries (producer's and "
            "consumer's LLB results) / LLB bytes."),
)
_INDEX = {f.name: i for i, f in enumerate(FEATURES)}


def feature_names(space: Space | None = None) -> list[str]:
    """Column names of :func:`features`, in order (see :data:`FEATURES` for what each means).

    With ``space``, the space's parameters follow as ``space.<parameter name>``.
    """
    names = [f.name for f in FEATURES]
    if space is not None:
        names += [f"space.{d.name}" for d in space.free]
    return names


def reference_cycles(graph: Graph, target: Target) -> float:
    """The roofline of one inference of ``graph`` (its batch) on one cluster, in cycles.

    The simulator's lower bound without the host launch (``sim.lower_bound``, the same
    terms computed here): ``max(matrix ops on the array in whole granules with one
    instruction each (compiler.opshape.array_cycles) / cores, MACs / (MACs per cycle
    x cores), vector work / (lanes x cores), all MACs and vector work / both engines'
    peak, (weights + model inputs and outputs + gathered rows) / DDR bytes per
    cycle)``. Time features are divided by it.
    """
    g = in_compute_dtype(graph, target)
    memo = memo_of(g)
    key = ("cost_model.reference", target.hash)
    hit = memo.get(key)
    if hit is not None:
        return float(hit)
    shapes = op_shapes(g)
    batch = g.batch
    macs = flexible = tiled = vec = gathered = 0.0
    tcpe = target.vector.transcendental_cycles_per_element
    for s in shapes:
        per = batch if s.batched else 1
        if s.kind == OpKind.MATRIX and s.groups > 1:
            flexible += s.amount * per * s.groups * s.n * s.k
        elif s.kind == OpKind.MATRIX:
            macs += s.amount * per * s.n * s.k
            tiled += array_cycles(s, batch, target.matrix)
        elif s.kind == OpKind.BATCHED_MATMUL:
            macs += s.amount * per * s.gemm_rows * s.n * s.k
            tiled += array_cycles(s, batch, target.matrix)
        elif s.kind == OpKind.VECTOR:
            vec += s.amount * per
        elif s.kind == OpKind.SPECIAL:
            vec += s.amount * per * tcpe
        elif s.kind == OpKind.GATHER:
            gathered += s.amount * per
    weights = {w for op in g.ops if op.op_type not in GATHER_OPS for w in op.weights}
    io = sum(g.nbytes(t) for t in (*g.inputs, *g.outputs))
    cores = target.chip.cores_per_cluster
    mac_rate, lanes = target.matrix.macs_per_cycle, target.vector.lanes
    ref = max(macs / (mac_rate * cores), tiled / cores, vec / (lanes * cores),
              (macs + flexible + vec) / ((mac_rate + lanes) * cores),
              (sum(g.nbytes(w) for w in weights) + io + gathered) / target.ddr.bytes_per_cycle,
              1.0)
    memo[key] = ref
    return ref


def features(graph: Graph, schedules: Sequence[GraphSchedule], target: Target,
             space: Space | None = None) -> np.ndarray:
    """One row per schedule (float64): the :data:`FEATURES`, then the space's encoding.

    Args:
        graph: The model the schedules are for (at their batch).
        schedules: Structurally valid candidates (as the search space decodes them, or
            after ``schedule.validate``); they need not fit.
        target: The chip: rates and capacities normalise every column.
        space: When given, its encoding (``space.encode_many``: one column per
            parameter, the choice index) is appended (names: ``feature_names(space)``).
            Free for schedules the space decoded in this process; others are projected
            onto it first (slow). Models with these columns do not transfer to other
            networks (each space has its own parameters).
    """
    X = _featuriser(graph, target).run(schedules)
    if space is None:
        return X
    return np.hstack([X, space.encode_many(list(schedules)).astype(np.float64)])


# ---- tables ------------------------------------------------------------------------------------
# per group-config row (summed over a schedule's groups unless noted)
_G = ("mme", "useful", "vme", "move", "wbound", "serial", "critical", "ddr_w", "ddr_act",
      "llb", "out_l1", "out_llb", "out_ddr", "chunks", "ops", "cores", "cpp", "spc",
      "ws_max", "split_max", "split_ops", "llb_res")
_GI = {n: i for i, n in enumerate(_G)}
_G_MAX = [_GI["ws_max"], _GI["split_max"]]
# per edge row (one group input from its producer group)
_E = ("ddr", "llb", "noc", "hop_bytes", "stay", "read", "est_l1", "est_llb", "ddr_staged",
      "llb_staged")
_EI = {n: i for i, n in enumerate(_E)}
_E_MAX = [_EI["est_l1"], _EI["est_llb"]]
_SCOPE_CODE = {"DDR": 0, "LLB": 1, "L1": 2}
_L1 = _SCOPE_CODE["L1"]
_MAX_ROWS = 300_000  # tables are dropped and rebuilt past this many rows (bounded memory)
_MAX_SAMPLE_CELLS = 20_000_000  # ... or past this many per-sample cells (huge batches)
_EDGE_BLOCK_CELLS = 400_000  # new edges are computed in blocks of at most this many cells
_NAME = attrgetter("name")
_SCOPE = attrgetter("mem_scope")
_BIND = attrgetter("core_bind")


class _Rows:
    """A growing 2-D float array (rows appended, read by fancy indexing)."""

    def __init__(self, width: int, dtype: Any = np.float64) -> None:
        self.a = np.zeros((64, width), dtype=dtype)
        self.n = 0

    def append(self, row: Any) -> int:
        if self.n == len(self.a):
            self.a = np.concatenate([self.a, np.zeros_like(self.a)])
        self.a[self.n] = row
        self.n += 1
        return self.n - 1


@dataclass(frozen=True)
class _OpSet:
    """What a group's op set costs regardless of placement."""

    weights: float
    gather_sample: float
    gather_fixed: float
    out: str
    out_sample: float
    out_fixed: float
    inputs: tuple[str, ...]
    n_ops: int
    ident: int


def _featuriser(graph: Graph, target: Target) -> _Featuriser:
    memo = memo_of(graph)
    key = ("cost_model.featuriser", target.hash)
    f: _Featuriser | None = memo.get(key)
    if f is None or f.full():
        f = memo[key] = _Featuriser(graph, target)
    return f


class _Featuriser:
    """Tables of per-group and per-edge quantities for one (graph, target).

    Lives in the graph's memo. Keys are plain tuples of the schedule's own values
    (op indices, scopes, core bindings), never object identities, so equal groups of
    different candidates share a row.
    """

    def __init__(self, graph: Graph, target: Target) -> None:
        self.g = in_compute_dtype(graph, target)
        self.t = target
        self.n_cores = target.chip.cores_per_cluster
        self.batch = self.g.batch
        self.shapes = op_shapes(self.g)
        self.ref = reference_cycles(graph, target)
        self.hops = np.array([[len(target.route(target.router_of(0, a), target.router_of(0, b)))
                               for b in range(self.n_cores)] for a in range(self.n_cores)], float)
        weights = {w for op in self.g.ops if op.op_type not in GATHER_OPS for w in op.weights}
        self.model_weights = float(max(1, sum(self.g.nbytes(w) for w in weights)))
        self.io_ddr = float(sum(self.g.nbytes(t) for t in self.g.outputs))  # inputs: per read
        port = target.dma.core_bytes_per_cycle
        if target.llb.broadcast:
            self.wbw = min(target.ddr.bytes_per_cycle, target.llb.bytes_per_cycle / 2, port)
        else:
            self.wbw = target.ddr.bytes_per_cycle
        self.costs: dict[tuple[tuple[int, ...], int, int, int], tuple[float, ...]] = {}
        self.opsets: dict[tuple[int, ...], _OpSet] = {}
        self.tensor_bytes: dict[str, tuple[int, int]] = {}
        # core parts ("tuples"): membership and pairwise movement per byte of one sample
        self.tuple_ids: dict[tuple[int, ...], int] = {}
        self.members = _Rows(self.n_cores)
        self.pair_stay = np.zeros((0, 0))
        self.pair_noc = np.zeros((0, 0))
        self.pair_hop = np.zeros((0, 0))
        self.pair_port = np.zeros((0, 0, self.n_cores))
        # chunks (op set, samples, scope, bind) and group configs: a row of _G, then per
        # core: compute busy time, DMA port bytes, L1 bytes of results
        width = len(_G) + 3 * self.n_cores
        self.chunk_ids: dict[Any, int] = {}
        self.c_rows = _Rows(width)
        self.c_parts: list[np.ndarray] = []
        self.group_ids: dict[Any, int] = {}
        self.g_rows = _Rows(width)
        self.g_layout: list[int] = []
        self.g_ops: list[tuple[int, ...]] = []
        # layouts: per sample, the scope and the core part (tuple id) holding it
        self.layout_ids: dict[Any, int] = {}
        self.l_scope = _Rows(self.batch, np.int8)
        self.l_part = _Rows(self.batch, np.int32)
        self.layout(("model input",), [_SCOPE_CODE["DDR"]] * self.batch,
                    [self.tuple_id((0,))] * self.batch)
        self.g_out: list[str] = []
        self.g_inputs: list[tuple[str, ...]] = []
        self.g_chunks: list[tuple[Placement, ...]] = []
        # edges
        self.edge_ids: dict[tuple[int, int, str, int], int] = {}
        self.e_rows = _Rows(len(_E))
        self.e_port = _Rows(self.n_cores)
        self.pending: list[tuple[int, int, int, str, int]] = []

    def full(self) -> bool:
        return (self.g_rows.n > _MAX_ROWS or self.e_rows.n > _MAX_ROWS
                or self.g_rows.n * self.batch > _MAX_SAMPLE_CELLS)

    # ---- op sets and per-core compute ----------------------------------------------------------
    def opset(self, ops: tuple[int, ...]) -> _OpSet:
        hit = self.opsets.get(ops)
        if hit is None:
            g = self.g
            io = group_io(g, ops)
            fp = group_footprint(g, ops)
            osb, ofb = sample_bytes(g, io.outputs[0])
            hit = self.opsets[ops] = _OpSet(
                float(fp.weight_bytes), float(fp.gather_sample_bytes), float(fp.gather_fixed_bytes),
                io.outputs[0], float(osb), float(ofb), io.inputs, len(ops), len(self.opsets))
        return hit

    def cost(self, ops: tuple[int, ...], samples: int, cores: int, step_cores: int
             ) -> tuple[float, ...]:
        """(mme, useful, vme, move, wbound, fill) cycles of one core of a part."""
        key = (ops, samples, cores, step_cores)
        hit = self.costs.get(key)
        if hit is None:
            wbw = self.wbw if self.t.llb.broadcast else self.wbw / max(step_cores, 1)
            hit = self.costs[key] = _op_costs(self.shapes, ops, samples, cores, self.t, wbw)
        return hit

    # ---- core parts ------------------------------------------------------------------------------
    def tuple_id(self, cores: tuple[int, ...]) -> int:
        i = self.tuple_ids.get(cores)
        if i is not None:
            return i
        i = self.tuple_ids[cores] = len(self.tuple_ids)
        row = np.zeros(self.n_cores)
        row[list(cores)] = 1.0
        self.members.append(row)
        n = i + 1
        if n > len(self.pair_stay):
            cap = max(16, 2 * n)
            for name in ("pair_stay", "pair_noc", "pair_hop"):
                old = getattr(self, name)
                new = np.zeros((cap, cap))
                new[:len(old), :len(old)] = old
                setattr(self, name, new)
            old_p = self.pair_port
            new_p = np.zeros((cap, cap, self.n_cores))
            new_p[:len(old_p), :len(old_p)] = old_p
            self.pair_port = new_p
        parts = list(self.tuple_ids)
        for j, other in enumerate(parts):
            self._pair(i, cores, j, other)
            if j != i:
                self._pair(j, other, i, cores)
        return i

    def _pair(self, si: int, src: tuple[int, ...], di: int, dst: tuple[int, ...]) -> None:
        """Movement of one sample's bytes from part ``src`` (in L1) to part ``dst``."""
        stay = noc = hop = 0.0
        port = self.pair_port[si, di]
        for a, b, frac in slices(src, dst):
            if a == b:
                stay += frac
                continue
            noc += frac
            hop += frac * self.hops[a, b]
            port[a] += frac
            port[b] += frac
        self.pair_stay[si, di] = stay
        self.pair_noc[si, di] = noc
        self.pair_hop[si, di] = hop

    # ---- groups --------------------------------------------------------------------------------
    def group_id(self, gr: GroupSpec) -> int:
        ops = gr.ops
        ch = gr.chunks
        # a contiguous op range is keyed by its ends (hashing ~100 ints per group adds up)
        okey: Any = (ops[0], ops[-1]) if ops and ops[-1] - ops[0] + 1 == len(ops) else ops
        key = (okey, tuple(map(_SCOPE, ch)), tuple(map(_BIND, ch)))
        i = self.group_ids.get(key)
        if i is None:
            i = self.group_ids[key] = self._add_group(gr)
        return i

    def chunk_id(self, ops: tuple[int, ...], info: _OpSet, n: int, scope: str,
                 bind: tuple[tuple[int, ...], ...]) -> int:
        """Row of one chunk of ``n`` samples of an op set placed at (scope, bind)."""
        key = (info.ident, n, scope, bind)
        hit = self.chunk_ids.get(key)
        if hit is not None:
            return hit
        t = self.t
        nc = self.n_cores
        row = [0.0] * (len(_G) + 3 * nc)  # the group row, then busy, port, L1 results per core
        spp = n // len(bind)
        cores = [c for p in bind for c in p]
        fp = group_footprint(self.g, ops)
        step = ws = 0.0
        best: tuple[float, ...] = (0.0,) * 6
        parts: list[int] = []
        busy0, l1_0 = len(_G), len(_G) + 2 * nc
        l1_out = info.out_sample * spp
        for part in bind:
            k = len(part)
            c = self.cost(ops, spp, k, len(cores))
            total = max(c[0], c[2], c[3], c[4]) + c[5]
            for core in part:
                row[busy0 + core] += total
                if scope == "L1":
                    row[l1_0 + core] += l1_out / k + info.out_fixed
            if total >= step:
                step, best = total, c
            ws = max(ws, fp.peak_bytes(spp, k))
            parts.extend([self.tuple_id(part)] * spp)
        for name, v in zip(("mme", "useful", "vme", "move", "wbound"), best):
            row[_GI[name]] = v
        row[_GI["serial"]] = step
        row[_GI["ws_max"]] = ws
        w = info.weights
        # weights: once per chunk through the LLB broadcast, else once per core
        row[_GI["ddr_w"]] = w if t.llb.broadcast else w * len(cores)
        llb = 2.0 * w if t.llb.broadcast else 0.0
        gathered = info.gather_sample * n + info.gather_fixed * len(cores)
        out = info.out_sample * n + info.out_fixed
        row[_GI["ddr_act"]] = gathered + (out if scope == "DDR" else 0.0)
        row[_GI["out_" + scope.lower()]] = out
        if scope == "LLB":
            llb += out
            row[_GI["llb_res"]] = out
        row[_GI["llb"]] = llb
        per_core = w + (gathered + (out if scope != "L1" else 0.0)) / len(cores)
        for core in cores:
            row[busy0 + nc + core] += per_core
        row[_GI["cores"]] = len(cores)
        row[_GI["cpp"]] = len(cores) / len(bind)
        row[_GI["spc"]] = spp * len(bind) / len(cores)
        i = self.chunk_ids[key] = self.c_rows.append(row)
        self.c_parts.append(np.array(parts, dtype=np.int32))
        return i

    def _add_group(self, gr: GroupSpec) -> int:
        info = self.opset(gr.ops)
        n = self.batch // gr.split
        ids = [self.chunk_id(gr.ops, info, n, p.mem_scope, p.core_bind) for p in gr.chunks]
        rows = self.c_rows.a[ids]
        total = rows.sum(0)
        nc, ng = self.n_cores, len(_G)
        row = total[:ng]
        busy = total[ng:ng + nc]
        row[_G_MAX] = rows[:, _G_MAX].max(0)
        row[_GI["critical"]] = busy.max()
        row[_GI["chunks"]] = gr.split
        row[_GI["ops"]] = info.n_ops
        row[_GI["split_max"]] = gr.split
        row[_GI["split_ops"]] = gr.split * info.n_ops
        i = self.g_rows.append(total)
        self.g_layout.append(self.layout(
            ("group", i), np.repeat([_SCOPE_CODE[p.mem_scope] for p in gr.chunks], n),
            np.concatenate([self.c_parts[c] for c in ids])))
        self.g_out.append(info.out)
        self.g_inputs.append(info.inputs)
        self.g_chunks.append(gr.chunks)
        self.g_ops.append(gr.ops)
        return i

    # ---- layouts -------------------------------------------------------------------------------
    def layout(self, key: Any, scopes: Any, parts: Any) -> int:
        """Intern a per-sample layout (scope code and core-part id of every sample)."""
        i = self.layout_ids.get(key)
        if i is None:
            i = self.layout_ids[key] = self.l_scope.append(scopes)
            self.l_part.append(parts)
        return i

    def transfer_layouts(self, s: GraphSchedule) -> dict[tuple[str, int], int]:
        """(tensor, split it is cut into) -> layout of the transfers that re-chunk it."""
        by: dict[tuple[str, int], list[tuple[tuple[int, ...], str, Any]]] = {}
        for tr in s.transfers:
            p = tr.placement
            by.setdefault((tr.tensor, tr.dst_factor), []).append(
                (tr.dst_chunks, p.mem_scope, p.core_bind))
        out = {}
        for (tensor, factor), items in by.items():
            key = ("transfer", factor, tuple(items))
            i = self.layout_ids.get(key)
            if i is None:
                n = self.batch // factor
                scopes = np.full(self.batch, _SCOPE_CODE["DDR"], dtype=np.int8)
                parts = np.zeros(self.batch, dtype=np.int32)
                for chunks, scope, bind in items:
                    spp = n // len(bind)
                    ids = np.repeat([self.tuple_id(part) for part in bind], spp)
                    for d in chunks:
                        scopes[d * n:(d + 1) * n] = _SCOPE_CODE[scope]
                        parts[d * n:(d + 1) * n] = ids
                i = self.layout(key, scopes, parts)
            out[(tensor, factor)] = i
        return out

    def streamable(self, gid: int) -> frozenset[str]:
        """Inputs group ``gid`` can stream from LLB/DDR (compiler.footprint)."""
        return streamable_inputs(self.g, self.g_ops[gid])

    # ---- edges: one group input, from its producer (through transfers) ---------------------------
    def edge_id(self, pid: int, cid: int, tensor: str, mid: int) -> int:
        key = (pid, cid, tensor, mid)
        i = self.edge_ids.get(key)
        if i is None:
            i = self.edge_ids[key] = self.e_rows.n + len(self.pending)
            self.pending.append((i, pid, cid, tensor, mid))
        return i

    def flush_edges(self) -> None:
        """Compute the rows of the edges met since the last call, vectorised."""
        if not self.pending:
            return
        pend, self.pending = self.pending, []
        block = max(1, _EDGE_BLOCK_CELLS // (self.batch * self.n_cores))
        for lo in range(0, len(pend), block):
            rows, ports = self._edges(pend[lo:lo + block])
            for r, p in zip(rows, ports):
                self.e_rows.append(r)
                self.e_port.append(p)

    def _move(self, src: np.ndarray, dst: np.ndarray, dst_l1: bool
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per byte of every sample moved from layouts ``src`` to ``dst`` (one per edge):
        DDR, LLB, NoC and hop-weighted NoC bytes, bytes staying in place (summed over
        samples) and DMA-port bytes per core. ``dst_l1``: the destination is staged in L1
        (a consumer reading its input) whatever the layout's scope."""
        ss = self.l_scope.a[src].astype(np.int64)
        sp = self.l_part.a[src].astype(np.int64)
        dp = self.l_part.a[dst].astype(np.int64)
        ds = np.full_like(ss, _L1) if dst_l1 else self.l_scope.a[dst].astype(np.int64)
        ddr_c, llb_c = _SCOPE_CODE["DDR"], _SCOPE_CODE["LLB"]
        both = (ss == _L1) & (ds == _L1)
        read = (ss != _L1) & (ds == _L1)  # DDR/LLB -> L1
        write = (ss == _L1) & (ds != _L1)  # L1 -> DDR/LLB
        system = (ss != _L1) & (ds != _L1) & (ss != ds)  # LLB <-> DDR
        ddr = ((read & (ss == ddr_c)) | (write & (ds == ddr_c)) | system).sum(1)
        llb = ((read & (ss == llb_c)) | (write & (ds == llb_c)) | system).sum(1)
        noc = np.where(both, self.pair_noc[sp, dp], 0.0).sum(1)
        hop = np.where(both, self.pair_hop[sp, dp], 0.0).sum(1)
        stay = np.where(both, self.pair_stay[sp, dp], 0.0).sum(1)
        member = self.members.a[: len(self.tuple_ids)]
        frac = member / member.sum(1)[:, None]
        port = np.einsum("eb,ebc->ec", both.astype(float), self.pair_port[sp, dp])
        port += np.einsum("eb,ebc->ec", read.astype(float), frac[dp])
        port += np.einsum("eb,ebc->ec", write.astype(float), frac[sp])
        return ddr, llb, noc, hop, stay, port

    def _edges(self, pend: list[tuple[int, int, int, str, int]]) -> tuple[np.ndarray, np.ndarray]:
        m = len(pend)
        pid = np.array([p[1] for p in pend])
        cid = np.array([p[2] for p in pend])
        mid = np.array([p[4] for p in pend])
        sb = np.empty(m)
        fb = np.empty(m)
        for k, p in enumerate(pend):
            b = self.tensor_bytes.get(p[3])
            if b is None:
                b = self.tensor_bytes[p[3]] = sample_bytes(self.g, p[3])
            sb[k], fb[k] = b
        is_in = pid < 0
        g_layout = np.array(self.g_layout)
        src = np.where(is_in, 0, g_layout[np.maximum(pid, 0)])
        dst = g_layout[cid]
        via = mid >= 0
        # the consumer reads from the transfers' layout when there is one
        first = np.where(via, mid, src)
        ddr, llb, noc, hop, stay, port = self._move(first, dst, True)
        # the consumer streams an input read from LLB/DDR tile by tile when it can; else the
        # input is staged in L1 before it starts (so are transfers' moves: steps of their own)
        streams = np.array([p[3] in self.streamable(p[2]) for p in pend])
        ddr_staged = np.where(streams, 0.0, ddr)
        llb_staged = np.where(streams, 0.0, llb)
        if via.any():
            d2, l2, n2, h2, _, p2 = self._move(src[via], mid[via], False)
            ddr[via] += d2
            llb[via] += l2
            noc[via] += n2
            hop[via] += h2
            port[via] += p2
            ddr_staged[via] += d2
            llb_staged[via] += l2
        rows = np.zeros((m, len(_E)))
        rows[:, _EI["ddr_staged"]] = ddr_staged * sb
        rows[:, _EI["llb_staged"]] = llb_staged * sb
        rows[:, _EI["ddr"]] = ddr * sb
        rows[:, _EI["llb"]] = llb * sb
        rows[:, _EI["noc"]] = noc * sb
        rows[:, _EI["hop_bytes"]] = hop * sb
        rows[:, _EI["stay"]] = stay * sb
        rows[:, _EI["read"]] = self.batch * sb
        ports = port * sb[:, None]
        # capacity estimate: the producer's L1 results and the consumer's, next to its working set
        nc, ng = self.n_cores, len(_G)
        l1 = self.g_rows.a[:, ng + 2 * nc:ng + 3 * nc]
        p0 = np.maximum(pid, 0)
        prod_l1 = np.where(is_in[:, None], 0.0, l1[p0])
        rows[:, _EI["est_l1"]] = (prod_l1 + l1[cid]).max(1) + self.g_rows.a[cid, _GI["ws_max"]]
        llb_res = self.g_rows.a[:, _GI["llb_res"]]
        rows[:, _EI["est_llb"]] = np.where(is_in, 0.0, llb_res[p0]) + llb_res[cid]
        for k_, p in enumerate(pend):  # unbatched tensors: every consumer core needs a copy
            if fb[k_]:
                self._fixed_edge(rows[k_], ports[k_], p[1], p[2], fb[k_])
        return rows, ports

    def _fixed_edge(self, row: np.ndarray, port: np.ndarray, pid: int, cid: int, fb: float
                    ) -> None:
        scope = _SCOPE_CODE["DDR"] if pid < 0 else int(self.l_scope.a[self.g_layout[pid], 0])
        src = self.g_chunks[pid][0].cores if pid >= 0 else ()
        src_cores = set(src)
        first = src[0] if src else 0
        for place in self.g_chunks[cid]:
            for core in place.cores:
                row[_EI["read"]] += fb
                if scope == _SCOPE_CODE["L1"]:
                    if core in src_cores:
                        row[_EI["stay"]] += fb
                        continue
                    row[_EI["noc"]] += fb
                    row[_EI["hop_bytes"]] += fb * self.hops[first, core]
                    port[first] += fb
                elif scope == _SCOPE_CODE["DDR"]:
                    row[_EI["ddr"]] += fb
                elif scope == _SCOPE_CODE["LLB"]:
                    row[_EI["llb"]] += fb
                port[core] += fb

    # ---- schedules ----------------------------------------------------------------------------
    def run(self, schedules: Sequence[GraphSchedule]) -> np.ndarray:
        n = len(schedules)
        out = np.zeros((n, len(FEATURES)))
        if n == 0:
            return out
        gids: list[int] = []
        eids: list[int] = []
        e_slot: list[int] = []  # position in gids of each edge's consumer
        g_off = np.zeros(n, dtype=np.int64)
        e_off = np.zeros(n, dtype=np.int64)
        misc = np.zeros((n, 3))
        group_id, edge_id, g_out, g_inputs = self.group_id, self.edge_id, self.g_out, self.g_inputs
        for k, s in enumerate(schedules):
            g_off[k] = len(gids)
            e_off[k] = len(eids)
            ids = [group_id(gr) for gr in s.groups]
            splits = {g_out[i]: (i, gr.split) for i, gr in zip(ids, s.groups)}
            xfer = self.transfer_layouts(s) if s.transfers else {}
            base = len(gids)
            for pos, (i, gr) in enumerate(zip(ids, s.groups)):
                for t in g_inputs[i]:
                    pid, split = splits.get(t, (-1, 1))
                    mid = xfer.get((t, gr.split), -1) if split != gr.split else -1
                    eids.append(edge_id(pid, i, t, mid))
                    e_slot.append(base + pos)
            gids.extend(ids)
            names = list(map(_NAME, s.order))
            misc[k] = (len(names), len(s.transfers),
                       sum(map(str.__ne__, names, names[1:])) / max(len(names) - 1, 1))
        self.flush_edges()
        gi = np.asarray(gids)
        rows = self.g_rows.a[gi]
        total = np.add.reduceat(rows, g_off, axis=0)
        nc, ng = self.n_cores, len(_G)
        G = total[:, :ng]
        busy = total[:, ng:ng + nc]
        port = total[:, ng + nc:ng + 2 * nc]
        Gmax = np.maximum.reduceat(rows[:, _G_MAX], g_off, axis=0)
        n_groups = np.diff(np.append(g_off, len(gids)))
        E = np.zeros((n, len(_E)))
        Emax = np.zeros((n, len(_E_MAX)))
        has = np.diff(np.append(e_off, len(eids))) > 0
        # each group's own roofline: its compute and the traffic of its chunks and inputs
        tg = self.t
        g_ddr = rows[:, _GI["ddr_w"]] + rows[:, _GI["ddr_act"]]
        g_llb = rows[:, _GI["llb"]].copy()
        g_noc = np.zeros(len(gi))
        g_port = rows[:, ng + nc:ng + 2 * nc].copy()
        g_ddr_st = np.zeros(len(gi))
        g_llb_st = np.zeros(len(gi))
        if has.any():
            ei = np.asarray(eids)
            e_rows, e_port = self.e_rows.a[ei], self.e_port.a[ei]
            E[has] = np.add.reduceat(e_rows, e_off[has], axis=0)
            Emax[has] = np.maximum.reduceat(e_rows[:, _E_MAX], e_off[has], axis=0)
            port[has] += np.add.reduceat(e_port, e_off[has], axis=0)
            es = np.asarray(e_slot)
            np.add.at(g_ddr, es, e_rows[:, _EI["ddr"]])
            np.add.at(g_llb, es, e_rows[:, _EI["llb"]])
            np.add.at(g_noc, es, e_rows[:, _EI["noc"]])
            np.add.at(g_port, es, e_port)
            np.add.at(g_ddr_st, es, e_rows[:, _EI["ddr_staged"]])
            np.add.at(g_llb_st, es, e_rows[:, _EI["llb_staged"]])
        g_time = np.max([rows[:, _GI["critical"]], g_ddr / tg.ddr.bytes_per_cycle,
                         g_llb / tg.llb.bytes_per_cycle, g_noc / tg.noc.link_bytes_per_cycle,
                         g_port.max(1) / tg.dma.core_bytes_per_cycle], axis=0)
        staged = np.max([g_ddr_st / tg.ddr.bytes_per_cycle, g_llb_st / tg.llb.bytes_per_cycle,
                         g_noc / tg.noc.link_bytes_per_cycle], axis=0)
        streamed = np.max([rows[:, _GI["critical"]],
                           (g_ddr - g_ddr_st) / tg.ddr.bytes_per_cycle,
                           (g_llb - g_llb_st) / tg.llb.bytes_per_cycle], axis=0)
        misc = np.hstack([misc, np.add.reduceat(g_time, g_off)[:, None],
                          np.add.reduceat(staged + streamed, g_off)[:, None],
                          np.add.reduceat(staged, g_off)[:, None]])
        self._fill(out, G, Gmax, busy, port, E, Emax, n_groups, misc)
        return out

    def _fill(self, out: np.ndarray, G: np.ndarray, Gmax: np.ndarray, busy: np.ndarray,
              port: np.ndarray, E: np.ndarray, Emax: np.ndarray, n_groups: np.ndarray,
              misc: np.ndarray) -> None:
        t, ref = self.t, self.ref
        ddr_bw, llb_bw = t.ddr.bytes_per_cycle, t.llb.bytes_per_cycle

        def col(name: str, values: np.ndarray) -> None:
            out[:, _INDEX[name]] = values

        def gcol(name: str) -> np.ndarray:
            return G[:, _GI[name]]

        def ecol(name: str) -> np.ndarray:
            return E[:, _EI[name]]

        chunks = np.maximum(gcol("chunks"), 1)
        mme = gcol("mme")
        col("mme_cycles", mme / ref)
        col("mme_useful_cycles", gcol("useful") / ref)
        col("mme_pad_waste", np.where(mme > 0, 1.0 - gcol("useful") / np.maximum(mme, 1e-9), 0.0))
        col("vme_cycles", gcol("vme") / ref)
        col("move_cycles", gcol("move") / ref)
        col("weight_bound_cycles", gcol("wbound") / ref)
        col("compute_serial", gcol("serial") / ref)
        col("compute_group_critical", gcol("critical") / ref)
        bmax, bmean = busy.max(axis=1), busy.mean(axis=1)
        col("core_busy_max", bmax / ref)
        col("core_busy_mean", bmean / ref)
        col("core_imbalance", bmax / np.maximum(bmean, 1e-9))
        ddr_act = gcol("ddr_act") + ecol("ddr") + self.io_ddr
        col("ddr_cycles", (gcol("ddr_w") + ddr_act) / ddr_bw / ref)
        col("ddr_weight_cycles", gcol("ddr_w") / ddr_bw / ref)
        col("ddr_act_cycles", ddr_act / ddr_bw / ref)
        col("llb_cycles", (gcol("llb") + ecol("llb")) / llb_bw / ref)
        col("noc_cycles", ecol("noc") / t.noc.link_bytes_per_cycle / ref)
        col("noc_hops", ecol("hop_bytes") / np.maximum(ecol("noc"), 1e-9))
        col("port_max_cycles", port.max(axis=1) / t.dma.core_bytes_per_cycle / ref)
        col("weight_reload", gcol("ddr_w") / self.model_weights)
        col("l1_reuse", ecol("stay") / np.maximum(ecol("read"), 1e-9))
        outs = np.maximum(gcol("out_l1") + gcol("out_llb") + gcol("out_ddr"), 1e-9)
        col("act_l1_share", gcol("out_l1") / outs)
        col("act_llb_share", gcol("out_llb") / outs)
        col("act_ddr_share", gcol("out_ddr") / outs)
        steps = np.maximum(misc[:, 0], 1)
        col("steps_log2", np.log2(steps))
        col("groups_per_op", n_groups / max(len(self.g.ops), 1))
        col("chunks_mean_log2", np.log2(np.maximum(gcol("split_ops") / np.maximum(gcol("ops"), 1), 1)))
        col("chunks_max_log2", np.log2(np.maximum(Gmax[:, 1], 1)))
        col("transfers_per_step", misc[:, 1] / steps)
        col("step_overhead_cycles", steps * (t.dma.setup_cycles + t.ddr.latency_cycles) / ref)
        col("cores_per_step", gcol("cores") / chunks / self.n_cores)
        col("cores_per_part", gcol("cpp") / chunks / self.n_cores)
        col("samples_per_core", gcol("spc") / chunks / self.batch)
        col("interleave", misc[:, 2])
        col("group_roofline_cycles", misc[:, 3] / ref)
        col("group_staged_cycles", misc[:, 4] / ref)
        col("staged_load_cycles", misc[:, 5] / ref)
        col("ws_peak_l1", Gmax[:, 0] / t.l1.data_bytes)
        col("l1_peak_est", Emax[:, 0] / t.l1.data_bytes)
        col("llb_peak_est", Emax[:, 1] / t.llb.bytes)


def _op_costs(shapes: tuple[OpShape, ...], ops: tuple[int, ...], s: int, k: int, target: Target,
              wbw: float) -> tuple[float, float, float, float, float, float]:
    """Per-core cycles of ``s`` samples shared by ``k`` cores: the engines' work at the
    target's rates (matrix work padded to the granule, one instruction per output tile)."""
    mat, vec = target.matrix, target.vector
    gm, gn, macs, ovh = mat.granule_m, mat.granule_n, mat.macs_per_cycle, mat.instr_overhead_cycles
    lanes, tcpe = vec.lanes, vec.transcendental_cycles_per_element
    l1bw = target.l1.bytes_per_cycle
    half_wb = target.l1.weight_bytes / 2
    mme = vme = move = fill = useful = wbound = 0.0
    for i in ops:
        d = shapes[i]
        kind = d.kind
        if kind == OpKind.VIEW:
            continue
        share = math.ceil(s * d.amount / k) if d.batched else math.ceil(d.amount)
        if kind.is_matrix:
            mt = matrix_tiles(d, share, mat)
            t_op = mt.padded_cycles + mt.tiles * ovh
            mme += t_op
            useful += mt.useful_cycles
            fill += d.k * gm * gn / macs + ovh
            wbound += max(t_op, d.weight_bytes / wbw)
            if d.weight_bytes > half_wb:
                extra = math.ceil(d.weight_bytes / half_wb) - 1
                move += extra * (s * d.in_bytes / k if d.batched else d.in_bytes) / l1bw
        elif kind in (OpKind.VECTOR, OpKind.SPECIAL):
            c = share / lanes * (tcpe if kind == OpKind.SPECIAL else 1.0)
            vme += c
            fill += min(c, 4096 / lanes)
            if d.weight_bytes:
                wbound += d.weight_bytes / wbw
        elif kind == OpKind.MOVE:
            move += 2.0 * share / l1bw
        else:  # gathered rows written once into L1
            move += share / l1bw
    return mme, useful, vme, move, wbound, fill
