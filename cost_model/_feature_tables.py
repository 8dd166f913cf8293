"""The featuriser's value tables: row layouts, code maps, per-op costs, and its state.

Part of :mod:`cost_model._features` (see its docstring for the design). The featuriser
is one class built in layers, each a module: :class:`_TableState` (here: the tables it
keeps), :class:`cost_model._feature_parts._PartTables` (op sets, tensors, per-core
compute, core parts, bindings, placements), :class:`cost_model._feature_groups._GroupTables`
(groups, layouts, edges), :class:`cost_model._feature_walk._ObjectWalk` (schedules walked
as objects; rows into features), :class:`cost_model._feature_gather._CodedGather`
(schedules gathered by code), and :class:`cost_model._features._Featuriser` on top.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.capacity import in_compute_dtype
from compiler.codes import ValueTable
from compiler.footprint import (
    GATHER_OPS,
    sample_bytes,
)
from compiler.layout import slices
from compiler.opshape import OpKind, OpShape, matrix_tiles, op_shapes
from cost_model._feature_set import reference_cycles

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule, Placement
    from compiler.target import Target


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


class _TableState:
    """The tables of one (graph, target): what every layer of the featuriser reads and fills."""

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
        # op set ident -> its chain rows packed by the C analysis (for the C profile walk)
        self.os_pack: dict[int, bytes] = {}
        self.op_tables: dict[tuple[int, int, float], np.ndarray] = {}
        self.opsets: dict[tuple[int, ...], _OpSet] = {}
        # per op: weights (gather tables excluded) and rows gathered (per sample, fixed), as
        # compiler.footprint counts them
        self.op_weights = [0 if op.op_type in GATHER_OPS else self.g.weight_bytes_of(op)
                           for op in self.g.ops]
        self.op_gathered = [sample_bytes(self.g, op.output) if op.op_type in GATHER_OPS
                            else (0, 0) for op in self.g.ops]
        # the same per op as three int lists, when every one is an int (an op set's sums are
        # then exact in any order and summed with sum(map(...)), not a loop; else None)
        per_op = (self.op_weights, [a for a, _ in self.op_gathered],
                  [b for _, b in self.op_gathered])
        self.op_int_facts = per_op if all(type(x) is int for col in per_op for x in col) \
            else None
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
