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

Speed: what depends on one group config (op set and its chunks' placements) or
one producer-consumer pair of groups is computed once and kept in tables beside
the graph (:func:`compiler.memo.memo_of`); a schedule is then a list of table
rows summed with numpy. Schedules the search space decoded carry codes of the
values they share (:mod:`compiler.codes`: group specs, transfer placements, order
steps): their table rows are gathered with numpy over all candidates at once
(producers by sorting, transfers' layouts and edges by a verified hash), with no
Python per group or edge once the tables are warm. Other schedules (built by hand,
loaded, copied) walk their objects, looking values up by identity first, by value
otherwise; both paths give the same rows. New groups, edges and layouts are then
computed together, vectorised over all their chunks (per-core costs from per-op
tables, an op set's being the sum over its ops, added in the same order) and
edges (movement once per pair of result layouts; equal layouts share one).
``bench/cost_model.py`` (section ``speed``) measures 10,000 ResNet-50 candidates.

Example:
    >>> X = features(graph, candidates, target)   # (len(candidates), len(FEATURES))
    >>> dict(zip(feature_names(), X[0]))
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, repeat
from operator import attrgetter
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from compiler.capacity import in_compute_dtype
from compiler.codes import ScheduleCodes, ValueTable, codes_of
from compiler.derive import group_io
from compiler.footprint import (
    GATHER_OPS,
    group_footprint,
    group_profile,
    peak_of,
    sample_bytes,
    streamable_inputs,
)
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

    The simulator's roofline without the host launch (``sim._bound.roofline_cycles``,
    the same terms computed here; ``sim.lower_bound`` may be higher: it also takes the
    work bound of ``sim/_tight_bound.py``): ``max(matrix ops on the array in whole granules with one
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
    weights = {g.tensors[w].storage or w  # a weight sharing another's bytes counts once
               for op in g.ops if op.op_type not in GATHER_OPS for w in op.weights}
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
_EDGE_BLOCK_CELLS = 400_000  # movement between layouts is computed in blocks of this many cells
_PAIR = 1 << 32  # a pair of layouts as one integer
_GROUP_BLOCK_CELLS = 4_000_000  # new groups are computed in blocks of about this many cells
_MAX_KEEP = 200_000  # objects kept alive for identity look-ups, per kind
_DEDUP_BATCH = 256  # groups' result layouts are shared by content up to this batch
_NAME = attrgetter("name")
_ORDER = attrgetter("order")


_GROUPS = attrgetter("groups")
_TRANSFERS = attrgetter("transfers")
_STEPS = attrgetter("order")

# per schedule, walked or gathered: group configs and where each schedule's start; edges and
# where each schedule's start; each edge's consumer (position in the group configs); per
# schedule: steps, transfers, interleave
_Walked = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _ORDER_NAMES(s: GraphSchedule) -> map[str]:
    return map(_NAME, s.order)


def _edge_hash(keys: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row of edge keys (four int64 columns)."""
    k = keys.astype(np.uint64)
    with np.errstate(over="ignore"):
        return (k[:, 0] * np.uint64(0x9E3779B97F4A7C15) + k[:, 1] * np.uint64(0xC2B2AE3D27D4EB4F)
                + k[:, 2] * np.uint64(0x165667B19E3779F9) + k[:, 3] * np.uint64(0x27D4EB2F165667C5))


_SALT = np.random.default_rng(20261125).integers(1, 2**63, size=4096, dtype=np.uint64) | 1


def _run_hash(codes: np.ndarray, starts: np.ndarray, lens: np.ndarray, pos: np.ndarray
              ) -> np.ndarray:
    """A 64-bit hash of each run of codes (position-salted, with its length)."""
    salt = _SALT[np.minimum(pos, len(_SALT) - 1)]
    with np.errstate(over="ignore"):
        return (np.add.reduceat((codes.astype(np.uint64) + np.uint64(1)) * salt, starts)
                + lens.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15))


@lru_cache(maxsize=1024)
def _slice_shape(ks: int, kd: int) -> list[tuple[int, int, float]]:
    """:func:`compiler.layout.slices` between parts of ``ks`` and ``kd`` cores, by position."""
    return slices(tuple(range(ks)), tuple(range(kd)))


def _misc(n_steps: np.ndarray, n_tr: np.ndarray, differ: np.ndarray) -> np.ndarray:
    """Steps, transfers and interleave per schedule; ``differ``: whether each step's name
    differs from the next one's, over the schedules' steps one after another."""
    n = len(n_steps)
    s_off = np.concatenate([[0], np.cumsum(n_steps)[:-1]])
    changes = np.zeros(n)
    if len(differ):
        # pairs starting at each schedule's first step; a schedule's last pair is the next's
        # boundary, which is not counted
        cum = np.concatenate([[0.0], np.cumsum(differ)])
        last = s_off + np.maximum(n_steps - 1, 0)
        changes = cum[np.minimum(last, len(differ))] - cum[s_off]
    misc = np.zeros((n, 3))
    misc[:, 0] = n_steps
    misc[:, 1] = n_tr
    misc[:, 2] = changes / np.maximum(n_steps - 1, 1)
    return misc


class _CodeMaps:
    """A featuriser's view of one producer's value table (:mod:`compiler.codes`): each code's
    row here, filled as codes are met."""

    def __init__(self, table: ValueTable) -> None:
        self.table = table  # kept alive: the featuriser finds this by the table's identity
        self.group = np.zeros(0, dtype=np.int64)  # group code -> group config (-1: not yet)
        self.t_ti = np.zeros(0, dtype=np.int64)  # transfer code -> tensor index
        self.t_factor = np.zeros(0, dtype=np.int64)  # ... and its destination factor
        # ... and what it adds to a layout (an item: factor, destination chunks, scope, core
        # binding here), each distinct item once
        self.t_item = np.zeros(0, dtype=np.int64)
        self.items: list[tuple[int, tuple[int, ...], str, int]] = []
        self.item_ids: dict[tuple[int, tuple[int, ...], str, int], int] = {}
        self.layouts: dict[tuple[int, ...], int] = {}  # one tensor's transfer items -> layout
        self.step_name = np.zeros(0, dtype=np.int64)  # step code -> name id
        # the table's group codes: op tuple code, first placement (in g_places); codes of
        # op tuples -> op set, of placements -> placement here
        self.g_ops = np.zeros(0, dtype=np.int64)
        self.g_first = np.zeros(0, dtype=np.int64)
        self.g_places = np.zeros(0, dtype=np.int64)
        self.g_split = np.zeros(0, dtype=np.int64)  # per group code: split, placements
        self.g_count = np.zeros(0, dtype=np.int64)
        self.ops_ident = np.zeros(0, dtype=np.int64)
        self.place_id = np.zeros(0, dtype=np.int64)
        self.names: dict[str, int] = {}
        self.clear_runs()

    def clear_runs(self) -> None:
        """Forget the runs of transfer codes with a layout (kept with their hashes)."""
        self._run_hash: list[int] = []
        self._run_codes: list[int] = []
        self._run_first: list[int] = []
        self._run_len: list[int] = []
        self._run_lay: list[int] = []
        self._runs: tuple[np.ndarray, ...] | None = None

    def add_run(self, h: int, codes: tuple[int, ...], layout: int) -> None:
        self._run_hash.append(h)
        self._run_first.append(len(self._run_codes))
        self._run_codes.extend(codes)
        self._run_len.append(len(codes))
        self._run_lay.append(layout)

    def known_runs(self) -> tuple[np.ndarray, ...] | None:
        """Sorted hashes, their runs' indices, and per run: codes (flat), first, length,
        layout."""
        if not self._run_hash:
            return None
        if self._runs is None or len(self._runs[0]) != len(self._run_hash):
            hs = np.asarray(self._run_hash, dtype=np.uint64)
            order = np.argsort(hs)
            self._runs = (hs[order], order, np.asarray(self._run_codes, dtype=np.int64),
                          np.asarray(self._run_first, dtype=np.int64),
                          np.asarray(self._run_len, dtype=np.int64),
                          np.asarray(self._run_lay, dtype=np.int64))
        return self._runs


class _Rows:
    """A growing 2-D array (rows appended one or many at a time, read by fancy indexing)."""

    def __init__(self, width: int, dtype: Any = np.float64) -> None:
        self.a = np.zeros((64, width), dtype=dtype)
        self.n = 0

    def _reserve(self, m: int) -> None:
        if self.n + m > len(self.a):
            new = np.zeros((max(2 * len(self.a), self.n + m), self.a.shape[1]), dtype=self.a.dtype)
            new[: self.n] = self.a[: self.n]
            self.a = new

    def append(self, row: Any) -> int:
        self._reserve(1)
        self.a[self.n] = row
        self.n += 1
        return self.n - 1

    def extend(self, rows: np.ndarray) -> int:
        """Append ``rows``; the index of the first."""
        m = len(rows)
        self._reserve(m)
        self.a[self.n:self.n + m] = rows
        self.n += m
        return self.n - m


@dataclass(frozen=True)
class _OpSet:
    """What a group's op set costs regardless of placement."""

    ops: tuple[int, ...]
    weights: float
    gather_sample: float
    gather_fixed: float
    out: str
    out_sample: float
    out_fixed: float
    inputs: tuple[str, ...]
    # per input: (tensor, tensor index, streamable from LLB/DDR by this op set)
    edges: tuple[tuple[str, int, bool], ...]
    n_ops: int
    ident: int
    out_index: int


def _featuriser(graph: Graph, target: Target) -> _Featuriser:
    memo = memo_of(graph)
    key = ("cost_model.featuriser", target.hash)
    f: _Featuriser | None = memo.get(key)
    if f is None or f.full():
        f = memo[key] = _Featuriser(graph, target)
    return f


class _Featuriser:
    """Tables of per-group and per-edge quantities for one (graph, target).

    Lives in the graph's memo. Keys are the schedule's own values (op sets,
    scopes, core bindings), never object identities, so equal groups of different
    candidates share a row. Identities only short-cut the lookup of a value seen
    before: the search space shares its op tuples and ``Placement`` values between
    the candidates it decodes, and each id maps to the value's index while the
    object is kept alive here.

    Schedules with codes (:mod:`compiler.codes`) are gathered by :meth:`_gather`,
    through one :class:`_CodeMaps` per producer's value table (codes -> rows here);
    the others are walked by :meth:`_walk`. Both register new group configs and
    edges and leave them to :meth:`flush_groups` and :meth:`flush_edges`.

    New groups are computed together, vectorised over their chunks
    (:meth:`flush_groups`); a group whose core parts differ in size (never decoded
    by the search space) takes the chunk-by-chunk path (:meth:`_group_slow`).
    ``vectorised=False`` forces that path for every group and the object walk for
    every schedule: the reference the tests compare with.
    """

    def __init__(self, graph: Graph, target: Target, vectorised: bool = True) -> None:
        self.g = in_compute_dtype(graph, target)
        self.t = target
        self.vectorised = vectorised
        self.n_cores = target.chip.cores_per_cluster
        self.batch = self.g.batch
        self.shapes = op_shapes(self.g)
        self.ref = reference_cycles(graph, target)
        self.hops = np.array([[len(target.route(target.router_of(0, a), target.router_of(0, b)))
                               for b in range(self.n_cores)] for a in range(self.n_cores)], float)
        self.hops_list: list[list[float]] = self.hops.tolist()
        weights = {w for op in self.g.ops if op.op_type not in GATHER_OPS for w in op.weights}
        self.model_weights = float(max(1, sum(self.g.nbytes(w) for w in weights)))
        self.io_ddr = float(sum(self.g.nbytes(t) for t in self.g.outputs))  # inputs: per read
        port = target.dma.core_bytes_per_cycle
        if target.llb.broadcast:
            self.wbw = min(target.ddr.bytes_per_cycle, target.llb.bytes_per_cycle / 2, port)
        else:
            self.wbw = target.ddr.bytes_per_cycle
        self.costs: dict[tuple[tuple[int, ...], int, int, int], tuple[float, ...]] = {}
        # (op set, samples, cores per part, cores) -> row of cws_rows: cost() and the working set
        self.cws_index: dict[tuple[int, int, int, int], int] = {}
        self.cws_rows = _Rows(7)
        self.ws_cache: dict[tuple[int, int, int], float] = {}
        self.op_tables: dict[tuple[int, int, float], np.ndarray] = {}
        self.opsets: dict[tuple[int, ...], _OpSet] = {}
        # per op: weights (gather tables excluded) and rows gathered (per sample, fixed), as
        # compiler.footprint counts them
        self.op_weights = [0 if op.op_type in GATHER_OPS else self.g.weight_bytes_of(op)
                           for op in self.g.ops]
        self.op_gathered = [sample_bytes(self.g, op.output) if op.op_type in GATHER_OPS
                            else (0, 0) for op in self.g.ops]
        self.opset_list: list[_OpSet] = []
        # per op set: weights, gathered bytes per sample and fixed, output bytes per sample and
        # fixed, ops
        self.os_vals = _Rows(6)
        # per op set, its inputs (edges) as flat lists: first, count; tensor index, streams
        self.os_in_ptr: list[int] = []
        self.os_in_cnt: list[int] = []
        self.os_in_ti: list[int] = []
        self.os_in_streams: list[bool] = []
        self.ops_ids: dict[int, _OpSet] = {}  # id(ops tuple) -> its op set (object kept below)
        self.ops_keep: list[Any] = []
        # tensors: index, (bytes per sample, fixed bytes)
        self.tensor_index: dict[str, int] = {}
        self.t_bytes = _Rows(2)
        # core parts ("tuples"): membership and pairwise movement per byte of one sample
        self.tuple_ids: dict[tuple[int, ...], int] = {}
        self.members = _Rows(self.n_cores)
        self.pair_stay = np.zeros((0, 0))
        self.pair_noc = np.zeros((0, 0))
        self.pair_hop = np.zeros((0, 0))
        self.pair_port = np.zeros((0, 0, self.n_cores))
        self.pair_done = np.zeros((0, 0), dtype=bool)  # which pairs are computed
        self.tuple_list: list[tuple[int, ...]] = []
        # core bindings: cores (with multiplicity), parts, part size (0: unequal), part ids
        self.bind_ids: dict[tuple[tuple[int, ...], ...], int] = {}
        self.b_member = _Rows(self.n_cores)
        self.b_info = _Rows(3, np.int64)  # parts, part size, cores
        self.b_tids: list[list[int]] = []
        # placements (scope, binding): value -> index; id(Placement) -> index (object kept)
        self.place_ids: dict[int, int] = {}
        self.place_keep: list[Any] = []
        self.place_vals: dict[tuple[str, int], int] = {}
        self.bind_objs: dict[int, int] = {}  # id(core_bind tuple) -> binding (object kept)
        self.bind_keep: list[Any] = []
        self.p_info = _Rows(2, np.int64)  # scope code, binding
        # chunks of the chunk-by-chunk path (op set, samples, scope, bind)
        width = len(_G) + 3 * self.n_cores
        self.chunk_ids: dict[Any, int] = {}
        self.c_rows = _Rows(width)
        self.c_parts: list[np.ndarray] = []
        # group configs (op set, placements): a row of _G, then per core: compute busy time,
        # DMA port bytes, L1 bytes of results; the layout of its result
        self.group_ids: dict[Any, int] = {}
        # (op set, id of each chunk's Placement) -> group config (the chunk tuples kept)
        self.group_obj_ids: dict[tuple[int, ...], int] = {}
        self.group_obj_keep: list[Any] = []
        self.g_rows = _Rows(width)
        self.g_layout = _Rows(1, np.int64)
        self.g_info: list[_OpSet] = []
        self.g_chunks: list[tuple[Placement, ...]] = []
        self.g_pending: list[int] = []
        # op set, split, result tensor index, first placement in g_place, placements
        self.g_meta = _Rows(5, np.int64)
        self.g_place = _Rows(1, np.int64)
        # per producer value table (compiler.codes): its codes -> rows here
        self.code_maps: dict[int, _CodeMaps] = {}
        self._inputs: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
        # layouts: per sample, the scope and the core part (tuple id) holding it
        self.layout_ids: dict[Any, int] = {}
        self.g_layout_ids: dict[bytes, int] = {}  # group results' layouts, by content
        self.l_scope = _Rows(self.batch, np.int8)
        self.l_part = _Rows(self.batch, np.int32)
        self.layout(("model input",), [_SCOPE_CODE["DDR"]] * self.batch,
                    [self.tuple_id((0,))] * self.batch)
        # edges
        self.edge_ids: dict[tuple[int, int, int, int], int] = {}
        self.e_rows = _Rows(len(_E))
        self.e_port = _Rows(self.n_cores)
        self.pending: list[tuple[int, int, int, int, bool]] = []
        self.pend_chunks: list[np.ndarray] = []  # (pending edges before these, registered in bulk)
        self.n_pending = 0
        self.e_keys = _Rows(4, np.int64)  # computed edges' keys, for find_edges
        self.e_index: tuple[np.ndarray, np.ndarray] | None = None
        # movement per byte of each sample between two layouts (src * _PAIR + dst -> row of
        # DDR, LLB, NoC, hop-weighted NoC, staying bytes, then port bytes per core), when the
        # destination is staged in L1 (True) or not
        self.mv_index: dict[bool, dict[int, int]] = {False: {}, True: {}}
        self.mv_rows = {False: _Rows(5 + self.n_cores), True: _Rows(5 + self.n_cores)}

    def full(self) -> bool:
        return (self.g_rows.n > _MAX_ROWS or self.e_rows.n > _MAX_ROWS
                or self.g_rows.n * self.batch > _MAX_SAMPLE_CELLS)

    # ---- op sets, tensors and per-core compute -------------------------------------------------
    def tensor(self, name: str) -> int:
        i = self.tensor_index.get(name)
        if i is None:
            i = self.tensor_index[name] = self.t_bytes.append(sample_bytes(self.g, name))
        return i

    def opset(self, ops: tuple[int, ...]) -> _OpSet:
        hit = self.opsets.get(ops)
        if hit is None:
            g = self.g
            io = group_io(g, ops)
            # what group_footprint's summary adds up (weights; gathered rows per sample and
            # fixed), per op: the summary's live-byte profiles are not needed here
            w = gs = gf = 0
            for i in sorted(set(ops)):
                w += self.op_weights[i]
                gs += self.op_gathered[i][0]
                gf += self.op_gathered[i][1]
            osb, ofb = sample_bytes(g, io.outputs[0])
            stream = streamable_inputs(g, ops)
            hit = self.opsets[ops] = _OpSet(
                ops, float(w), float(gs), float(gf), io.outputs[0], float(osb), float(ofb), io.inputs,
                tuple((t, self.tensor(t), t in stream) for t in io.inputs), len(ops),
                len(self.opset_list), self.tensor(io.outputs[0]))
            self.opset_list.append(hit)
            self.os_in_ptr.append(len(self.os_in_ti))
            self.os_in_cnt.append(len(hit.edges))
            self.os_in_ti.extend(ti for _, ti, _ in hit.edges)
            self.os_in_streams.extend(st for _, _, st in hit.edges)
            self.os_vals.append((hit.weights, hit.gather_sample, hit.gather_fixed, hit.out_sample,
                                 hit.out_fixed, hit.n_ops))
        return hit

    def opset_of(self, ops: tuple[int, ...]) -> _OpSet:
        """:meth:`opset`, remembered by the tuple's identity too."""
        hit = self.opset(ops)
        if len(self.ops_keep) >= _MAX_KEEP:
            self.ops_ids.clear()
            self.ops_keep.clear()
        self.ops_ids[id(ops)] = hit
        self.ops_keep.append(ops)
        return hit

    def cost(self, ops: tuple[int, ...], samples: int, cores: int, step_cores: int
             ) -> tuple[float, ...]:
        """(mme, useful, vme, move, wbound, fill) cycles of one core of a part."""
        key = (ops, samples, cores, step_cores)
        hit = self.costs.get(key)
        if hit is None:
            table = self.op_table(samples, cores, step_cores)
            hit = self.costs[key] = tuple(table[:, list(ops)].sum(axis=1).tolist())
        return hit

    def op_table(self, samples: int, cores: int, step_cores: int) -> np.ndarray:
        """(6, ops): each op's (mme, useful, vme, move, wbound, fill) cycles on one core of a
        part of ``cores`` cores sharing ``samples`` samples, in a step on ``step_cores`` cores
        (an op set's costs are the sums over its ops)."""
        wbw = self.wbw if self.t.llb.broadcast else self.wbw / max(step_cores, 1)
        return self.op_table_w(samples, cores, wbw)

    def op_table_w(self, samples: int, cores: int, wbw: float) -> np.ndarray:
        """:meth:`op_table` at weight bandwidth ``wbw``."""
        key = (samples, cores, wbw)
        hit = self.op_tables.get(key)
        if hit is None:
            hit = self.op_tables[key] = np.array(
                [_op_costs(self.shapes, (i,), samples, cores, self.t, wbw)
                 for i in range(len(self.shapes))], dtype=np.float64).reshape(-1, 6).T.copy()
        return hit

    def working_set(self, ident: int, samples: int, cores: int) -> float:
        """Per-core working set of op set ``ident`` (footprint peak) for a part of ``cores``
        cores sharing ``samples`` samples."""
        key = (ident, samples, cores)
        ws = self.ws_cache.get(key)
        if ws is None:
            # = group_footprint(...).peak_bytes(samples, cores), without the footprint's summary
            prof = group_profile(self.g, self.opset_list[ident].ops)
            ws = self.ws_cache[key] = float(peak_of(prof, samples, cores))
        return ws

    def costs_many(self, ident: np.ndarray, samples: np.ndarray, cores: np.ndarray,
                   step_cores: np.ndarray) -> np.ndarray:
        """:meth:`cost` of op sets ``ident`` and their :meth:`working_set`, ``(len, 7)``, for
        many keys: new ones summed over their ops with numpy, per op table (the same sums
        as :meth:`cost`, added in the same order)."""
        keys = list(zip(ident.tolist(), samples.tolist(), cores.tolist(), step_cores.tolist()))
        at = np.fromiter(map(self.cws_index.get, keys, repeat(-1)), dtype=np.int64,
                         count=len(keys))
        miss = np.flatnonzero(at < 0)
        if len(miss):
            if self.t.llb.broadcast:
                wbw = np.full(len(miss), self.wbw)
            else:
                wbw = self.wbw / np.maximum(step_cores[miss], 1)
            rows = np.zeros((len(miss), 7))
            tables: dict[tuple[int, int, float], list[int]] = {}
            for j, key in enumerate(zip(samples[miss].tolist(), cores[miss].tolist(),
                                        wbw.tolist())):
                tables.setdefault(key, []).append(j)
            for (s_, k_, w_), js in tables.items():
                table = self.op_table_w(s_, k_, w_)
                ops = [self.opset_list[i].ops for i in ident[miss[js]].tolist()]
                lens = np.fromiter(map(len, ops), dtype=np.int64, count=len(ops))
                flat = np.fromiter(chain.from_iterable(ops), dtype=np.int64, count=int(lens.sum()))
                row = np.repeat(np.arange(len(ops)), lens)
                pos = np.arange(len(flat)) - np.repeat(np.cumsum(lens) - lens, lens)
                # op after op, as sum(axis=1) adds them (cumsum adds in order; pairwise sums
                # would differ in the last bit), in blocks of keys
                block = max(1, 4_000_000 // (6 * int(lens.max())))
                js_a = np.asarray(js)
                for lo in range(0, len(ops), block):
                    hi = min(lo + block, len(ops))
                    sel = (row >= lo) & (row < hi)
                    P = np.zeros((6, hi - lo, int(lens[lo:hi].max())))
                    P[:, row[sel] - lo, pos[sel]] = table[:, flat[sel]]
                    C = np.cumsum(P, axis=2)
                    rows[js_a[lo:hi], :6] = C[:, np.arange(hi - lo), lens[lo:hi] - 1].T
            rows[:, 6] = [self.working_set(*key) for key in zip(
                ident[miss].tolist(), samples[miss].tolist(), cores[miss].tolist())]
            first = self.cws_rows.extend(rows)
            at[miss] = np.arange(first, first + len(miss))
            self.cws_index.update(zip([keys[j] for j in miss.tolist()], at[miss].tolist()))
        return self.cws_rows.a[at]

    # ---- core parts, bindings, placements ----------------------------------------------------------
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
            done = np.zeros((cap, cap), dtype=bool)
            done[:len(self.pair_done), :len(self.pair_done)] = self.pair_done
            self.pair_done = done
        self.tuple_list.append(cores)
        return i

    def pairs(self, sp: np.ndarray, dp: np.ndarray) -> None:
        """Compute the pairs of core parts ``(sp[k], dp[k])`` not computed yet (on demand: most
        of the parts' pairs are never met)."""
        cap = len(self.pair_done)
        new = ~self.pair_done[sp, dp]
        if not new.any():
            return
        for k in np.unique(sp[new] * cap + dp[new]).tolist():
            si, di = divmod(k, cap)
            self._pair(si, self.tuple_list[si], di, self.tuple_list[di])
            self.pair_done[si, di] = True

    def _pair(self, si: int, src: tuple[int, ...], di: int, dst: tuple[int, ...]) -> None:
        """Movement of one sample's bytes from part ``src`` (in L1) to part ``dst``."""
        stay = noc = hop = 0.0
        port = [0.0] * self.n_cores  # Python floats: the same sums as numpy's, faster here
        hops = self.hops_list
        for i, j, frac in _slice_shape(len(src), len(dst)):  # = slices(src, dst)
            a, b = src[i], dst[j]
            if a == b:
                stay += frac
                continue
            noc += frac
            hop += frac * hops[a][b]
            port[a] += frac
            port[b] += frac
        self.pair_port[si, di] = port
        self.pair_stay[si, di] = stay
        self.pair_noc[si, di] = noc
        self.pair_hop[si, di] = hop

    def bind_id(self, bind: tuple[tuple[int, ...], ...]) -> int:
        i = self.bind_ids.get(bind)
        if i is None:
            member = np.zeros(self.n_cores)
            for part in bind:
                for c in part:
                    member[c] += 1.0
            sizes = set(map(len, bind))
            self.b_member.append(member)
            self.b_tids.append([self.tuple_id(part) for part in bind])
            i = self.bind_ids[bind] = self.b_info.append(
                (len(bind), len(bind[0]) if len(sizes) == 1 else 0, sum(map(len, bind))))
        return i

    def bind_of(self, bind: tuple[tuple[int, ...], ...]) -> int:
        """:meth:`bind_id`, remembered by the tuple's identity too."""
        b = self.bind_id(bind)
        if len(self.bind_keep) >= _MAX_KEEP:
            self.bind_objs.clear()
            self.bind_keep.clear()
        self.bind_objs[id(bind)] = b
        self.bind_keep.append(bind)
        return b

    def place_of(self, p: Placement) -> int:
        """:meth:`place`, remembered by the object's identity too (the search space shares
        its group chunks' placements)."""
        i = self.place(p)
        if len(self.place_keep) >= _MAX_KEEP:
            self.place_ids.clear()
            self.place_keep.clear()
        self.place_ids[id(p)] = i
        self.place_keep.append(p)
        return i

    def place(self, p: Placement) -> int:
        """Index of a placement's (scope, binding)."""
        b = self.bind_objs.get(id(p.core_bind))
        if b is None:
            b = self.bind_of(p.core_bind)
        key = (p.mem_scope, b)
        i = self.place_vals.get(key)
        if i is None:
            i = self.place_vals[key] = self.p_info.append((_SCOPE_CODE[p.mem_scope], b))
        return i

    # ---- groups --------------------------------------------------------------------------------
    def group_of(self, gr: GroupSpec, info: _OpSet) -> int:
        """The group config of ``gr`` (new or seen), remembered by its placements' identities."""
        get = self.place_ids.get
        seen = tuple(get(id(p)) for p in gr.chunks)
        places = (tuple(map(self.place_of, gr.chunks)) if None in seen
                  else cast("tuple[int, ...]", seen))
        key = (info.ident, places)
        i = self.group_ids.get(key)
        if i is None:
            i = self.new_group(key, gr, info, places)
        if len(self.group_obj_keep) >= _MAX_KEEP:
            self.group_obj_ids.clear()
            self.group_obj_keep.clear()
        # the placements stay alive with their tuple, so their ids are not reused
        self.group_obj_ids[(info.ident, *map(id, gr.chunks))] = i
        self.group_obj_keep.append(gr.chunks)
        return i

    def new_group(self, key: Any, gr: GroupSpec, info: _OpSet, places: tuple[int, ...]) -> int:
        """Register a group config; its row is computed by the next :meth:`flush_groups`."""
        i = self.group_ids[key] = len(self.g_info)
        self.g_info.append(info)
        self.g_chunks.append(gr.chunks)
        self.g_pending.append(i)
        self.g_meta.append((info.ident, gr.split, info.out_index, self.g_place.n, len(places)))
        self.g_place.extend(np.asarray(places, dtype=np.int64).reshape(-1, 1))
        return i

    def flush_groups(self) -> None:
        """Compute the rows and result layouts of the groups met since the last call."""
        if not self.g_pending:
            return
        pend, self.g_pending = self.g_pending, []
        base = self.g_rows.n
        assert pend[0] == base and pend[-1] == base + len(pend) - 1
        width = len(_G) + 3 * self.n_cores
        rows = np.zeros((len(pend), width))
        scopes = np.zeros((len(pend), self.batch), dtype=np.int8)
        parts = np.zeros((len(pend), self.batch), dtype=np.int32)
        # the vectorised path: groups whose chunks' core parts have equal sizes and whose split
        # divides the batch (all the search space decodes)
        equal = self.b_info.a[: self.b_info.n, 1][self.p_info.a[: self.p_info.n, 1]] > 0
        pend_a = np.asarray(pend, dtype=np.int64)
        flat, n_chunks = self._group_places(pend_a)
        split = self.g_meta.a[pend_a, 1]
        ok = np.logical_and.reduceat(equal[flat], np.cumsum(n_chunks) - n_chunks)
        ok &= (self.batch % split == 0) & (n_chunks == split)
        ok &= self.vectorised
        fast = np.flatnonzero(ok).tolist()
        for j in np.flatnonzero(~ok).tolist():
            rows[j], scopes[j], parts[j] = self._group_slow(pend[j])
        # blocks of groups, so the per-chunk arrays stay small
        cells = np.cumsum(split[fast] * width + self.batch)
        lo = 0
        while lo < len(fast):
            hi = max(lo + 1, int(np.searchsorted(cells, cells[lo] + _GROUP_BLOCK_CELLS)))
            sel = np.asarray(fast[lo:hi])
            rows[sel], scopes[sel], parts[sel] = self._groups_fast(pend_a[sel])
            lo = hi
        self.g_rows.extend(rows)
        self.g_layout.extend(self._group_layouts(scopes, parts)[:, None])

    def _group_layouts(self, scopes: np.ndarray, parts: np.ndarray) -> np.ndarray:
        """Layout ids of new groups' results (one per row of ``scopes``, ``parts``); equal
        layouts share one (for small batches) so edges move bytes between fewer pairs."""
        if self.batch > _DEDUP_BATCH:
            at = self.l_scope.extend(scopes)
            self.l_part.extend(parts)
            return np.arange(at, at + len(scopes))
        both = np.concatenate([scopes.astype(np.int32), parts], axis=1)
        # rows with equal hashes, checked equal, are looked up once
        with np.errstate(over="ignore"):
            h = (both.astype(np.uint64) * _SALT[:both.shape[1]]).sum(1)
        _, first, inv = np.unique(h, return_index=True, return_inverse=True)
        inv = inv.ravel()
        if not (both[first][inv] == both).all():  # two layouts with one hash
            first, inv = np.arange(len(both)), np.arange(len(both))
        keys = [r.tobytes() for r in both[first]]
        get = self.g_layout_ids.get
        ids = np.fromiter(map(get, keys, repeat(-1)), dtype=np.int64, count=len(keys))
        new = np.flatnonzero(ids < 0)  # distinct: one row per hash
        if len(new):
            at = self.l_scope.extend(scopes[first[new]])
            self.l_part.extend(parts[first[new]])
            ids[new] = np.arange(at, at + len(new))
            self.g_layout_ids.update(zip([keys[j] for j in new.tolist()], ids[new].tolist()))
        return ids[inv]

    def _groups_fast(self, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows, result scopes and core parts per sample of groups whose core parts are equal.

        The same quantities as :meth:`_group_slow`, vectorised over all their chunks.
        """
        t, nc, ng = self.t, self.n_cores, len(_G)
        p_info = self.p_info.a[: self.p_info.n]
        b_info = self.b_info.a[: self.b_info.n]
        meta = self.g_meta.a[gids]
        splits, ident = meta[:, 1], meta[:, 0]
        n_g = self.batch // splits
        pl = self._group_places(gids)[0]
        grp = np.repeat(np.arange(len(gids)), splits)
        starts = np.concatenate([[0], np.cumsum(splits)[:-1]])
        scope = p_info[pl, 0]
        bind = p_info[pl, 1]
        nparts, k, ncores = b_info[bind, 0], b_info[bind, 1], b_info[bind, 2]
        n = n_g[grp]
        spp = n // nparts
        oi = ident[grp]
        # per-core costs: once per (op set, samples per part, cores per part, cores)
        assert spp.max() < 1 << 24 and ncores.max() < 1 << 10
        key = ((oi * (1 << 24) + spp) * (1 << 10) + k) * (1 << 10) + ncores
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        cw = self.costs_many(oi[first], spp[first], k[first], ncores[first]).T[:, inv.ravel()]
        total = np.max(cw[[0, 2, 3, 4]], axis=0) + cw[5]
        # op-set quantities per chunk
        ov = self.os_vals.a[oi].T
        w, gs, gf, osb, ofb = ov[0], ov[1], ov[2], ov[3], ov[4]
        is_l1, is_llb, is_ddr = (scope == _L1), (scope == _SCOPE_CODE["LLB"]), (scope == 0)
        # one column per chunk (rows: the group row's quantities, then per core)
        R = np.zeros((ng + 3 * nc, len(pl)))
        for j, name in enumerate(("mme", "useful", "vme", "move", "wbound")):
            R[_GI[name]] = cw[j]
        R[_GI["serial"]] = total
        bc = t.llb.broadcast
        R[_GI["ddr_w"]] = w if bc else w * ncores
        gathered = gs * n + gf * ncores
        out = osb * n + ofb
        R[_GI["ddr_act"]] = gathered + np.where(is_ddr, out, 0.0)
        R[_GI["out_l1"]] = np.where(is_l1, out, 0.0)
        R[_GI["out_llb"]] = np.where(is_llb, out, 0.0)
        R[_GI["out_ddr"]] = np.where(is_ddr, out, 0.0)
        R[_GI["llb"]] = (2.0 * w if bc else 0.0) + np.where(is_llb, out, 0.0)
        R[_GI["llb_res"]] = np.where(is_llb, out, 0.0)
        R[_GI["cores"]] = ncores
        R[_GI["cpp"]] = ncores / nparts
        R[_GI["spc"]] = spp * nparts / ncores
        member = self.b_member.a[: self.b_member.n].T[:, bind]
        R[ng:ng + nc] = total * member
        per_core = w + (gathered + np.where(is_l1, 0.0, out)) / ncores
        R[ng + nc:ng + 2 * nc] = per_core * member
        R[ng + 2 * nc:] = np.where(is_l1, osb * spp / np.maximum(k, 1) + ofb, 0.0) * member
        rows = np.add.reduceat(R, starts, axis=1).T
        n_ops = ov[5, starts]
        rows[:, _GI["ws_max"]] = np.maximum.reduceat(cw[6], starts)
        rows[:, _GI["split_max"]] = splits
        rows[:, _GI["critical"]] = rows[:, ng:ng + nc].max(1)
        rows[:, _GI["chunks"]] = splits
        rows[:, _GI["ops"]] = n_ops
        rows[:, _GI["split_ops"]] = splits * n_ops
        # result layouts: sample s of a group is in chunk s // n, part (s mod n) // spp
        s = np.arange(self.batch)[None, :]
        ch = starts[:, None] + s // n_g[:, None]
        part = (s % n_g[:, None]) // spp[ch]
        width = max(map(len, self.b_tids))
        tids = np.zeros((len(self.b_tids), width), dtype=np.int32)
        for b, ids in enumerate(self.b_tids):
            tids[b, :len(ids)] = ids
        return rows, scope[ch], tids[bind[ch], part]

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

    def _group_slow(self, gid: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Row, result scopes and core parts per sample of one group, chunk by chunk."""
        info, chunks, split = self.g_info[gid], self.g_chunks[gid], int(self.g_meta.a[gid, 1])
        n = self.batch // split
        ids = [self.chunk_id(info.ops, info, n, p.mem_scope, p.core_bind) for p in chunks]
        rows = self.c_rows.a[ids]
        total = rows.sum(0)
        nc, ng = self.n_cores, len(_G)
        row = total[:ng]
        busy = total[ng:ng + nc]
        row[_G_MAX] = rows[:, _G_MAX].max(0)
        row[_GI["critical"]] = busy.max()
        row[_GI["chunks"]] = split
        row[_GI["ops"]] = info.n_ops
        row[_GI["split_max"]] = split
        row[_GI["split_ops"]] = split * info.n_ops
        scopes = np.repeat([_SCOPE_CODE[p.mem_scope] for p in chunks], n)
        return total, scopes, np.concatenate([self.c_parts[c] for c in ids])

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
        by: dict[tuple[str, int], list[tuple[tuple[int, ...], str, int]]] = {}
        get = self.bind_objs.get
        for tr in s.transfers:
            p = tr.placement  # made per candidate, mostly; their core bindings are shared
            b = get(id(p.core_bind))
            if b is None:
                b = self.bind_of(p.core_bind)
            by.setdefault((tr.tensor, tr.dst_factor), []).append((tr.dst_chunks, p.mem_scope, b))
        return {(tensor, factor): self.transfer_layout(factor, items)
                for (tensor, factor), items in by.items()}

    def transfer_layout(self, factor: int, items: list[tuple[tuple[int, ...], str, int]]) -> int:
        """Layout of the transfers re-chunking one tensor ``factor`` ways: per transfer, its
        destination chunks, scope and core binding."""
        key = ("transfer", factor, tuple(items))
        i = self.layout_ids.get(key)
        if i is None:
            n = self.batch // factor
            # lists: a few dozen samples, where numpy's per-call overhead dominates
            scopes = [_SCOPE_CODE["DDR"]] * self.batch
            parts = [0] * self.batch
            for chunks, scope_name, b in items:
                scope = [_SCOPE_CODE[scope_name]] * n
                tids = self.b_tids[b]
                r = n // len(tids)
                ids = [t for t in tids for _ in range(r)]
                if len(ids) != n:
                    raise ValueError(f"a transfer's {n} samples per chunk do not divide among "
                                     f"{len(tids)} core parts")
                for d in chunks:
                    scopes[d * n:(d + 1) * n] = scope
                    parts[d * n:(d + 1) * n] = ids
            i = self.layout(key, scopes, parts)
        return i

    # ---- edges: one group input, from its producer (through transfers) ---------------------------
    def new_edge(self, key: tuple[int, int, int, int], streams: bool) -> int:
        i = self.edge_ids[key] = self.e_rows.n + self.n_pending
        self.pending.append((*key, streams))
        self.n_pending += 1
        return i

    def new_edges(self, rows: np.ndarray) -> int:
        """Register edges ``rows`` (producer, consumer, tensor, transfers' layout, streams) in
        one go; the id of the first (found by :meth:`find_edges`, not by ``edge_ids``)."""
        if self.pending:  # keep the order ids were handed out in
            self.pend_chunks.append(np.array(self.pending, dtype=np.int64).reshape(-1, 5))
            self.pending = []
        first = self.e_rows.n + self.n_pending
        self.pend_chunks.append(rows)
        self.n_pending += len(rows)
        return first

    def find_edges(self, keys: np.ndarray) -> np.ndarray:
        """Ids of the computed edges with ``keys`` (rows of producer, consumer, tensor,
        transfers' layout), -1 where not found: a sorted hash of every key, each hit checked
        against the key itself (a collision is a miss: at worst an edge is computed twice)."""
        n = self.e_keys.n
        if self.e_index is None or len(self.e_index[0]) != n:
            h = _edge_hash(self.e_keys.a[:n])
            order = np.argsort(h, kind="stable")
            self.e_index = (h[order], order)
        hs, ids = self.e_index
        if not n:
            return np.full(len(keys), -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(hs, _edge_hash(keys)), n - 1)
        e = ids[pos]
        return np.where((self.e_keys.a[e] == keys).all(1), e, -1)

    def flush_edges(self) -> None:
        """Compute the rows of the edges met since the last call, vectorised."""
        if self.pending:
            self.pend_chunks.append(np.array(self.pending, dtype=np.int64).reshape(-1, 5))
            self.pending = []
        if not self.pend_chunks:
            return
        pend = np.concatenate(self.pend_chunks)
        self.pend_chunks, self.n_pending = [], 0
        self.e_keys.extend(pend[:, :4])
        g_layout = self.g_layout.a[: self.g_layout.n, 0]
        member = self.members.a[: len(self.tuple_ids)]
        frac = member / member.sum(1)[:, None]
        rows, ports = self._edges(pend, g_layout, frac)  # movement is computed in blocks
        self.e_rows.extend(rows)
        self.e_port.extend(ports)

    def _move(self, src: np.ndarray, dst: np.ndarray, dst_l1: bool, frac: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per byte of every sample moved from layouts ``src`` to ``dst`` (one per edge):
        DDR, LLB, NoC and hop-weighted NoC bytes, bytes staying in place (summed over
        samples) and DMA-port bytes per core. ``dst_l1``: the destination is staged in L1
        (a consumer reading its input) whatever the layout's scope. ``frac``: each core
        part's share of every core."""
        ss = self.l_scope.a[src].astype(np.int64)
        sp = self.l_part.a[src].astype(np.int64)
        dp = self.l_part.a[dst].astype(np.int64)
        ds = np.full_like(ss, _L1) if dst_l1 else self.l_scope.a[dst].astype(np.int64)
        ddr_c, llb_c = _SCOPE_CODE["DDR"], _SCOPE_CODE["LLB"]
        both = (ss == _L1) & (ds == _L1)
        read = (ss != _L1) & (ds == _L1)  # DDR/LLB -> L1
        write = (ss == _L1) & (ds != _L1)  # L1 -> DDR/LLB
        system = (ss != _L1) & (ds != _L1) & (ss != ds)  # LLB <-> DDR
        self.pairs(sp[both], dp[both])
        ddr = ((read & (ss == ddr_c)) | (write & (ds == ddr_c)) | system).sum(1)
        llb = ((read & (ss == llb_c)) | (write & (ds == llb_c)) | system).sum(1)
        noc = np.where(both, self.pair_noc[sp, dp], 0.0).sum(1)
        hop = np.where(both, self.pair_hop[sp, dp], 0.0).sum(1)
        stay = np.where(both, self.pair_stay[sp, dp], 0.0).sum(1)
        port = np.einsum("eb,ebc->ec", both.astype(float), self.pair_port[sp, dp])
        port += np.einsum("eb,ebc->ec", read.astype(float), frac[dp])
        port += np.einsum("eb,ebc->ec", write.astype(float), frac[sp])
        return ddr, llb, noc, hop, stay, port

    def _move_pairs(self, src: np.ndarray, dst: np.ndarray, dst_l1: bool, frac: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                               np.ndarray]:
        """:meth:`_move`, computed once per pair of layouts (edges share few pairs: equal
        layouts share an id) and kept."""
        index, rows = self.mv_index[dst_l1], self.mv_rows[dst_l1]
        u, inv = np.unique(src * _PAIR + dst, return_inverse=True)
        at = np.fromiter(map(index.get, u.tolist(), repeat(-1)), dtype=np.int64, count=len(u))
        new = np.flatnonzero(at < 0)
        block = max(1, _EDGE_BLOCK_CELLS // (self.batch * self.n_cores))
        for lo in range(0, len(new), block):
            sel = new[lo:lo + block]
            ddr, llb, noc, hop, stay, port = self._move(u[sel] // _PAIR, u[sel] % _PAIR, dst_l1,
                                                        frac)
            first = rows.extend(np.column_stack([ddr, llb, noc, hop, stay, port]))
            at[sel] = np.arange(first, first + len(sel))
            index.update(zip(u[sel].tolist(), at[sel].tolist()))
        R = rows.a[at[inv.ravel()]]
        return R[:, 0], R[:, 1], R[:, 2], R[:, 3], R[:, 4], R[:, 5:]

    def _edges(self, pend: np.ndarray, g_layout: np.ndarray, frac: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
        """Rows of edges ``pend`` (producer, consumer, tensor, transfers' layout, streams)."""
        m = len(pend)
        pid, cid, tix, mid, streams = pend.T
        streams = streams.astype(bool)
        tb = self.t_bytes.a[tix]
        sb, fb = tb[:, 0], tb[:, 1]
        is_in = pid < 0
        src = np.where(is_in, 0, g_layout[np.maximum(pid, 0)])
        dst = g_layout[cid]
        via = mid >= 0
        # the consumer reads from the transfers' layout when there is one
        first = np.where(via, mid, src)
        ddr, llb, noc, hop, stay, port = self._move_pairs(first, dst, True, frac)
        # the consumer streams an input read from LLB/DDR tile by tile when it can; else the
        # input is staged in L1 before it starts (so are transfers' moves: steps of their own)
        ddr_staged = np.where(streams, 0.0, ddr)
        llb_staged = np.where(streams, 0.0, llb)
        if via.any():
            d2, l2, n2, h2, _, p2 = self._move_pairs(src[via], mid[via], False, frac)
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
        for k_ in np.flatnonzero(fb):  # unbatched tensors: every consumer core needs a copy
            self._fixed_edge(rows[k_], ports[k_], int(pid[k_]), int(cid[k_]), float(fb[k_]))
        return rows, ports

    def _fixed_edge(self, row: np.ndarray, port: np.ndarray, pid: int, cid: int, fb: float
                    ) -> None:
        scope = _SCOPE_CODE["DDR"] if pid < 0 else int(self.l_scope.a[self.g_layout.a[pid, 0], 0])
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
        # schedules with codes (compiler.codes: decoded by a search space) are gathered with
        # numpy, per value table; the others (and all with vectorised=False) walk their objects
        plain: list[int] = []
        coded: dict[int, tuple[ValueTable, list[int], list[ScheduleCodes]]] = {}
        for k, s in enumerate(schedules):
            c = codes_of(s) if self.vectorised else None
            if c is None:
                plain.append(k)
                continue
            hit = coded.get(id(c.table))
            if hit is None:
                hit = coded[id(c.table)] = (c.table, [], [])
            hit[1].append(k)
            hit[2].append(c)
        parts: list[tuple[list[int], _Walked]] = []
        if plain:
            parts.append((plain, self._walk([schedules[k] for k in plain])))
        for table, ks, cs in coded.values():
            parts.append((ks, self._gather(self._maps(table), cs)))
        self.flush_groups()
        self.flush_edges()
        for ks, walked in parts:
            if len(ks) == n:
                out[:] = self._aggregate(*walked)
            else:
                out[ks] = self._aggregate(*walked)
        return out

    def _walk(self, schedules: Sequence[GraphSchedule]) -> _Walked:
        """Group and edge rows of ``schedules``, walking their objects (the reference path)."""
        n = len(schedules)
        gids: list[int] = []
        eids: list[int] = []
        e_slot: list[int] = []  # position in gids of each edge's consumer
        g_off = np.zeros(n, dtype=np.int64)
        e_off = np.zeros(n, dtype=np.int64)
        n_tr = np.zeros(n)
        group_get, edge_get = self.group_obj_ids.get, self.edge_ids.get
        ops_get = self.ops_ids.get
        g_info = self.g_info
        for k, s in enumerate(schedules):
            g_off[k] = len(gids)
            e_off[k] = len(eids)
            base = len(gids)
            prod: dict[str, tuple[int, int]] = {}
            for gr in s.groups:
                info = ops_get(id(gr.ops)) or self.opset_of(gr.ops)
                i = group_get((info.ident, *map(id, gr.chunks)))
                if i is None:
                    i = self.group_of(gr, info)
                gids.append(i)
                prod[info.out] = (i, gr.split)
            xfer = self.transfer_layouts(s) if s.transfers else {}
            for pos, gr in enumerate(s.groups):
                i = gids[base + pos]
                split = gr.split
                for t, ti, streams in g_info[i].edges:
                    pid, psplit = prod.get(t, (-1, 1))
                    mid = xfer.get((t, split), -1) if psplit != split else -1
                    ekey = (pid, i, ti, mid)
                    e = edge_get(ekey)
                    if e is None:
                        e = self.new_edge(ekey, streams)
                    eids.append(e)
                    e_slot.append(base + pos)
            n_tr[k] = len(s.transfers)
        # interleave: consecutive steps of different groups or transfers, within each schedule
        n_steps = np.fromiter(map(len, map(_ORDER, schedules)), dtype=np.int64, count=n)
        names = list(chain.from_iterable(map(_ORDER_NAMES, schedules)))
        differ = np.fromiter(map(str.__ne__, names, names[1:]), dtype=np.float64,
                             count=max(len(names) - 1, 0))
        misc = _misc(n_steps, n_tr, differ)
        return (np.asarray(gids, dtype=np.int64), g_off, np.asarray(eids, dtype=np.int64), e_off,
                np.asarray(e_slot, dtype=np.int64), misc)

    # ---- schedules with codes -----------------------------------------------------------------
    def _maps(self, table: ValueTable) -> _CodeMaps:
        m = self.code_maps.get(id(table))
        if m is None:
            if len(self.code_maps) >= 2:  # producers start new tables rarely: keep the last two
                del self.code_maps[next(iter(self.code_maps))]
            m = self.code_maps[id(table)] = _CodeMaps(table)
        return m

    def _gather(self, m: _CodeMaps, codes: list[ScheduleCodes]) -> _Walked:
        """:meth:`_walk` for schedules with codes in ``m.table``: the same rows, gathered with
        numpy (identical results: the same table rows, summed in the same order)."""
        n = len(codes)
        ar = np.arange(n)
        # groups
        n_g = np.fromiter(map(len, map(_GROUPS, codes)), dtype=np.int64, count=n)
        gid = self._code_groups(m, np.concatenate(list(map(_GROUPS, codes))))
        g_s = np.repeat(ar, n_g)
        meta = self._group_meta()[gid]
        ident, split, out_ti = meta[:, 0], meta[:, 1], meta[:, 2]
        # edges: each group's inputs, in order
        ptr, cnt, in_ti, in_streams = self._opset_inputs()
        e_cnt = cnt[ident]
        e_grp = np.repeat(np.arange(len(gid)), e_cnt)
        first = np.cumsum(e_cnt) - e_cnt
        src = ptr[ident][e_grp] + np.arange(len(e_grp)) - first[e_grp]
        eti, streams = in_ti[src], in_streams[src]
        e_s = g_s[e_grp]
        csplit = split[e_grp]
        # producers: the (last) group of the same schedule with the input as its result
        T = len(self.tensor_index) + 1
        gkey = g_s * T + out_ti
        order = np.argsort(gkey, kind="stable")
        sk = gkey[order]
        ekey = e_s * T + eti
        pos = np.maximum(np.searchsorted(sk, ekey, side="right") - 1, 0)
        found = sk[pos] == ekey
        p_occ = order[pos]
        pid = np.where(found, gid[p_occ], -1)
        psplit = np.where(found, split[p_occ], 1)
        # transfers' layouts, per (schedule, tensor, factor), for inputs re-chunked between splits
        n_t = np.fromiter(map(len, map(_TRANSFERS, codes)), dtype=np.int64, count=n)
        t_code = np.concatenate(list(map(_TRANSFERS, codes)))
        mid = np.full(len(e_grp), -1, dtype=np.int64)
        need = psplit != csplit
        if len(t_code) and need.any():
            t_ti, t_factor = self._code_transfers(m)
            F = int(max(t_factor[t_code].max(), split.max())) + 1
            tkey = (np.repeat(ar, n_t) * T + t_ti[t_code]) * F + t_factor[t_code]
            o = np.argsort(tkey, kind="stable")  # a tensor's transfers keep their order
            tk = tkey[o]
            starts = np.flatnonzero(np.concatenate([[True], tk[1:] != tk[:-1]]))
            uk, lay_a = tk[starts], self._code_layouts(m, m.t_item[t_code[o]], starts)
            q = (e_s * T + eti) * F + csplit
            at = np.minimum(np.searchsorted(uk, q), len(uk) - 1)
            mid = np.where(need & (uk[at] == q), lay_a[at], -1)
        cid = gid[e_grp]
        keys = np.column_stack([pid, cid, eti, mid])
        eids = self.find_edges(keys)
        miss = np.flatnonzero(eids < 0)
        if len(miss):
            km = keys[miss]
            _, first, inv = np.unique(_edge_hash(km), return_index=True, return_inverse=True)
            inv = inv.ravel()
            if not (km[first][inv] == km).all():  # two keys with one hash: sort the keys
                _, first, inv = np.unique(km, axis=0, return_index=True, return_inverse=True)
                inv = inv.ravel()
            at = self.new_edges(np.column_stack([km[first], streams[miss[first]]]))
            eids[miss] = at + inv
        g_off = np.cumsum(n_g) - n_g
        e_n = np.bincount(e_s, minlength=n)
        e_off = np.cumsum(e_n) - e_n
        # interleave, from the steps' names
        o_code = np.concatenate(list(map(_STEPS, codes)))
        n_steps = np.fromiter(map(len, map(_STEPS, codes)), dtype=np.int64, count=n)
        names = self._code_steps(m)[o_code]
        differ = (names[1:] != names[:-1]).astype(np.float64)
        return gid, g_off, eids, e_off, e_grp, _misc(n_steps, n_t.astype(np.float64), differ)

    def _code_groups(self, m: _CodeMaps, codes: np.ndarray) -> np.ndarray:
        """Group config of each group code (new ones registered in one go, from the codes of
        their op tuples and placements)."""
        table = m.table
        if len(m.group) < len(table.groups):
            grow = len(table.groups) - len(m.group)
            m.group = np.concatenate([m.group, np.full(grow, -1, dtype=np.int64)])
            m.g_ops = np.concatenate([m.g_ops, np.asarray(table.group_ops[-grow:], np.int64)])
            m.g_first = np.concatenate([m.g_first, np.asarray(table.group_first[-grow:],
                                                               np.int64)])
            m.g_places = np.concatenate([m.g_places, np.asarray(
                table.group_places[len(m.g_places):], dtype=np.int64)])
            m.g_split = np.concatenate([m.g_split, np.fromiter(
                (gr.split for gr in table.groups[-grow:]), dtype=np.int64, count=grow)])
            m.g_count = np.diff(np.append(m.g_first, len(m.g_places)))
        gid = m.group[codes]
        new = gid < 0
        if not new.any():
            return gid
        if len(m.ops_ident) < len(table.ops):
            m.ops_ident = np.concatenate([m.ops_ident, np.fromiter(
                ((self.ops_ids.get(id(ops)) or self.opset_of(ops)).ident
                 for ops in table.ops[len(m.ops_ident):]), dtype=np.int64)])
        if len(m.place_id) < len(table.placements):
            m.place_id = np.concatenate([m.place_id, np.fromiter(
                map(self.place_of, table.placements[len(m.place_id):]), dtype=np.int64)])
        nc = np.unique(codes[new])
        groups = table.groups
        grs = [groups[c] for c in nc.tolist()]
        cnt = m.g_count[nc]
        start = np.cumsum(cnt) - cnt
        at = np.repeat(m.g_first[nc] - start, cnt) + np.arange(int(cnt.sum()))
        flat_a = m.place_id[m.g_places[at]]
        ident = m.ops_ident[m.g_ops[nc]]
        infos = [self.opset_list[i] for i in ident.tolist()]
        base = len(self.g_info)
        out_index = np.fromiter((info.out_index for info in infos), dtype=np.int64,
                                count=len(infos))
        split = m.g_split[nc]
        self.g_meta.extend(np.column_stack([ident, split, out_index,
                                            self.g_place.n + start, cnt]))
        self.g_place.extend(flat_a[:, None])
        # as new_group, without the look-up by value: a producer's codes are values already
        # (a value under two codes would only cost a second, equal row)
        self.g_info.extend(infos)
        self.g_chunks.extend(gr.chunks for gr in grs)
        self.g_pending.extend(range(base, base + len(grs)))
        m.group[nc] = np.arange(base, base + len(grs))
        return m.group[codes]

    def _group_meta(self) -> np.ndarray:
        """Per group config: op set, split, result tensor index, first placement, placements."""
        return self.g_meta.a[: self.g_meta.n]

    def _group_places(self, gids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The placements of groups ``gids``, one after another, and how many each has."""
        meta = self.g_meta.a[gids]
        cnt = meta[:, 4]
        at = np.repeat(meta[:, 3] - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))
        return self.g_place.a[at, 0], cnt

    def _opset_inputs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Per op set: first input, inputs; per input: tensor index, streams (flat arrays)."""
        if self._inputs is None or len(self._inputs[0]) != len(self.os_in_ptr):
            self._inputs = (np.asarray(self.os_in_ptr, dtype=np.int64),
                            np.asarray(self.os_in_cnt, dtype=np.int64),
                            np.asarray(self.os_in_ti, dtype=np.int64),
                            np.asarray(self.os_in_streams, dtype=bool))
        return self._inputs

    def _code_transfers(self, m: _CodeMaps) -> tuple[np.ndarray, np.ndarray]:
        """Tensor index and destination factor of each transfer code."""
        items = m.table.transfers
        if len(m.t_ti) < len(items):
            new = items[len(m.t_ti):]
            m.t_ti = np.concatenate([m.t_ti, np.fromiter((self.tensor(it.tensor) for it in new),
                                                         dtype=np.int64, count=len(new))])
            m.t_factor = np.concatenate([m.t_factor, np.fromiter(
                (it.dst_factor for it in new), dtype=np.int64, count=len(new))])
            ids = m.item_ids
            item = []
            for it in new:  # the tensor aside: runs of other tensors' transfers share layouts
                p = it.placement
                b = self.bind_objs.get(id(p.core_bind))
                v = (it.dst_factor, it.dst_chunks, p.mem_scope,
                     self.bind_of(p.core_bind) if b is None else b)
                i = ids.get(v)
                if i is None:
                    i = ids[v] = len(m.items)
                    m.items.append(v)
                item.append(i)
            m.t_item = np.concatenate([m.t_item, np.asarray(item, dtype=np.int64)])
        return m.t_ti, m.t_factor

    def _code_layouts(self, m: _CodeMaps, oc: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """Layout of each run of transfer items ``oc[starts[j]:starts[j + 1]]`` (one tensor's
        transfers in one schedule): runs seen before are found by a sorted hash of the run,
        checked code by code against the run itself; the others by :meth:`_code_layout`."""
        n = len(oc)
        lens = np.diff(np.append(starts, n))
        pos = np.arange(n) - np.repeat(starts, lens)
        h = _run_hash(oc, starts, lens, pos)
        lay = np.full(len(starts), -1, dtype=np.int64)
        known = m.known_runs()
        if known is not None:
            hs, order, k_codes, k_first, k_len, k_lay = known
            k = order[np.minimum(np.searchsorted(hs, h), len(hs) - 1)]
            ok = (hs[np.minimum(np.searchsorted(hs, h), len(hs) - 1)] == h) & (k_len[k] == lens)
            at = np.minimum(np.repeat(k_first[k], lens) + pos, len(k_codes) - 1)
            ok &= np.logical_and.reduceat(k_codes[at] == oc, starts)
            lay = np.where(ok, k_lay[k], -1)
        miss = np.flatnonzero(lay < 0)
        if len(miss):
            # equal runs (equal hashes, checked code by code) are looked up once
            _, fi, inv = np.unique(h[miss], return_index=True, return_inverse=True)
            inv = inv.ravel()
            rep = miss[fi][inv]
            ln = lens[miss]
            same = lens[rep] == ln
            within = np.arange(int(ln.sum())) - np.repeat(np.cumsum(ln) - ln, ln)
            at_r = np.repeat(starts[miss], ln) + within
            at_p = np.minimum(np.repeat(starts[rep], ln) + within, n - 1)
            same &= np.logical_and.reduceat(oc[at_r] == oc[at_p], np.cumsum(ln) - ln)
            if not same.all():  # two runs with one hash
                fi, inv = np.arange(len(miss)), np.arange(len(miss))
            reps = miss[fi]
            ocl = oc.tolist()
            get = m.layouts.get
            rep_lay = []
            for j, a, b in zip(reps.tolist(), starts[reps].tolist(),
                               (starts[reps] + lens[reps]).tolist()):
                key = tuple(ocl[a:b])
                i = get(key)
                if i is None:
                    i = self._code_layout(m, key)
                    m.add_run(int(h[j]), key, i)
                rep_lay.append(i)
            lay[miss] = np.asarray(rep_lay, dtype=np.int64)[inv]
        return lay

    def _code_layout(self, m: _CodeMaps, key: tuple[int, ...]) -> int:
        """:meth:`transfer_layout` of the transfer items ``key`` (one tensor's, in order;
        item ids of ``m``)."""
        items = [m.items[c] for c in key]
        i = self.transfer_layout(items[0][0], [it[1:] for it in items])
        if len(m.layouts) >= _MAX_KEEP:
            m.layouts.clear()
            m.clear_runs()
        m.layouts[key] = i
        return i

    def _code_steps(self, m: _CodeMaps) -> np.ndarray:
        """A name id per step code (steps of one group or transfer share it)."""
        steps = m.table.steps
        if len(m.step_name) < len(steps):
            ids = m.names
            new = [ids.setdefault(st.name, len(ids)) for st in steps[len(m.step_name):]]
            m.step_name = np.concatenate([m.step_name, np.asarray(new, dtype=np.int64)])
        return m.step_name

    def _aggregate(self, gi: np.ndarray, g_off: np.ndarray, ei: np.ndarray, e_off: np.ndarray,
                   es: np.ndarray, misc: np.ndarray) -> np.ndarray:
        """Feature rows from the group and edge rows of each schedule (flushed)."""
        n = len(g_off)
        out = np.zeros((n, len(FEATURES)))
        nc, ng = self.n_cores, len(_G)
        rows = self.g_rows.a[gi, :ng + 2 * nc]  # the L1 results per core are for edges only
        total = np.add.reduceat(rows, g_off, axis=0)
        G = total[:, :ng]
        busy = total[:, ng:ng + nc]
        port = total[:, ng + nc:ng + 2 * nc]
        Gmax = np.maximum.reduceat(rows[:, _G_MAX], g_off, axis=0)
        n_groups = np.diff(np.append(g_off, len(gi)))
        E = np.zeros((n, len(_E)))
        Emax = np.zeros((n, len(_E_MAX)))
        has = np.diff(np.append(e_off, len(ei))) > 0
        # each group's own roofline: its compute and the traffic of its chunks and inputs
        tg = self.t
        g_ddr = rows[:, _GI["ddr_w"]] + rows[:, _GI["ddr_act"]]
        g_llb = rows[:, _GI["llb"]].copy()
        g_noc = np.zeros(len(gi))
        g_port = rows[:, ng + nc:ng + 2 * nc].copy()
        g_ddr_st = np.zeros(len(gi))
        g_llb_st = np.zeros(len(gi))
        if has.any():
            e_rows, e_port = self.e_rows.a[ei], self.e_port.a[ei]
            E[has] = np.add.reduceat(e_rows, e_off[has], axis=0)
            Emax[has] = np.maximum.reduceat(e_rows[:, _E_MAX], e_off[has], axis=0)
            port[has] += np.add.reduceat(e_port, e_off[has], axis=0)
            ng_ = len(gi)

            def per_group(v: np.ndarray) -> np.ndarray:
                return np.bincount(es, weights=v, minlength=ng_)

            g_ddr += per_group(e_rows[:, _EI["ddr"]])
            g_llb += per_group(e_rows[:, _EI["llb"]])
            g_noc += per_group(e_rows[:, _EI["noc"]])
            for c in range(nc):
                g_port[:, c] += per_group(e_port[:, c])
            g_ddr_st += per_group(e_rows[:, _EI["ddr_staged"]])
            g_llb_st += per_group(e_rows[:, _EI["llb_staged"]])
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
