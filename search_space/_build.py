"""Decoding parameters into a GraphSchedule (the one code path every view shares).

A *reader* answers "which choice does parameter ``d`` take?"; decoding asks only
for the parameters that matter given the earlier answers (define-by-run), so the
same walk serves a numeric vector and an Optuna trial; projection
(:mod:`search_space._project`) drives the same :class:`Decoding` with a known
schedule's values.

Decoding runs in three passes:

1. **groups, shapes and cores**, producers first: the blocks (granularity, cut
   ranks, modes), then per group its samples per core part, cores per part,
   parts, core order (a rotation or its producer's cores) and spread;
2. the **chunk DAG** of those groups (:func:`compiler.derive.derive_transfers`)
   and the **order** (depth-first with look-ahead, or breadth-first): neither
   depends on where results live;
3. **scopes, along the capacity walk**: :class:`compiler.capacity.CapacityWalk`
   walks the order, and each step's result gets the scope its group's policy
   (a group chunk) or transfer-scope choice (a transfer; ``auto`` is the slowest
   source, as the compiler derives) asks for, or the next slower one (L1 -> LLB
   -> DDR) while the op may not write it, the step would overflow now, or (for
   L1) the result would crowd a later step on its cores out of L1 (below).

The walk is the capacity model the simulator and :meth:`Space.precheck` use, so
the LLB never overflows, and a step overflows L1 only when even its output
streamed out does not fit next to what earlier steps left in L1. The look-ahead
that keeps L1 results from causing that adds, at every later group chunk on the
result's cores, the L1 results already placed and still live there, the result
itself (less what a reader finds in place), and that chunk's working set with its
inputs as placed so far (the least over those not placed yet) and its output
streamed out. That is a lower bound of what the walk will count, up to one
stream buffer (a later step that keeps its output in L1 needs no output buffer):
so a schedule that fits is, except within that margin, never changed by it.

The other repairs are plain consistency, also no-ops on schedules that fit: a
split that does not divide the batch becomes the largest divisor below it; a
group that cannot be split along the batch gets split 1; core parts become
``gcd(parts, cores, samples per chunk)``; a chunk shape whose least working set
(:func:`compiler.capacity.chunk_working_set`, the least over inputs streamed or
staged and the output kept or streamed) does not fit a core's L1 gets fewer
samples per part, then more cores per part.

Every decoded schedule is a fixed point: projecting it finds choices whose
decoding repeats every decision. The optional capacity repair
(``SpaceOptions.repair_rounds``) re-decodes with the scope parameter of a result
crowding an overflow demoted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache, partial
from math import gcd
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from compiler.capacity import CapacityWalk, chunk_working_set, in_compute_dtype, remember_plan
from compiler.codes import LazySchedule
from compiler.derive import Node, derive_transfers
from compiler.layout import Layout, staying_fraction
from compiler.memo import memo_of
from compiler.schedule import GraphSchedule, GroupSpec, Transfer
from search_space._cblocks import partition as partition_compiled
from search_space._cclass import shared_info
from search_space._ccore import fits_l1 as fits_compiled
from search_space._ccore import scope_walk, walk_whole
from search_space._cderive import Derived, PackedTransfers
from search_space._cderive import blocks as blocks_compiled
from search_space._cderive import derive as derive_compiled
from search_space._cgroups import decode_groups as groups_compiled
from search_space._cgroups import set_reference_fit
from search_space._cgroups import unit_slots as unit_slots_compiled
from search_space._cplan import _Walked, walk_issue, walk_partial
from search_space._dims import (
    CUT_BELOW,
    GRANULARITIES,
    LOOKAHEADS,
    MODES,
    ORDERS,
    SCOPE_POLICIES,
    TRANSFER_SCOPES,
    perm_order,
    unshuffle,
)
from search_space._lazy import Decoded, flat_groups, interned
from search_space._order import breadth_order, depth_order, group_topo_order
from search_space._structure import GroupInfo, anchor_partition, partition_is_valid

if TYPE_CHECKING:
    from compiler.codes import ValueTable
    from compiler.graph import Graph
    from compiler.schedule import Placement, Step
    from compiler.target import Target
    from search_space._dims import Dim
    from search_space._structure import Structure

SLOWER = {"L1": ("L1", "LLB", "DDR"), "LLB": ("LLB", "DDR"), "DDR": ("DDR",)}
_OPTIONS: dict[tuple[str, tuple[str, ...]], tuple[str, ...]] = {}
_RANK = {"DDR": 0, "LLB": 1, "L1": 2}
_SCOPE_CODE = {"L1": 0, "LLB": 1, "DDR": 2}

Reader = Callable[[int], int]
CoreBind = tuple[tuple[int, ...], ...]


class _Options(Protocol):
    """What decoding reads of :class:`search_space.SpaceOptions`."""

    @property
    def ties(self) -> bool: ...

    @property
    def min_group_ops(self) -> int: ...

    @property
    def max_group_ops(self) -> int | None: ...


class SpaceLike(Protocol):
    """What decoding and projection read of a :class:`search_space.Space` (a ``Space`` is one).

    A protocol, so that this module need not import :mod:`search_space._space`, which
    decodes through it.
    """

    graph: Graph
    target: Target
    batch: int
    structure: Structure
    batches: tuple[int, ...]
    divisors: dict[int, list[int]]
    dims: tuple[Dim, ...]
    free: tuple[Dim, ...]
    rep: np.ndarray
    slot: dict[int, int]
    d_batch: int
    d_order: int
    d_lookahead: int
    d_gran: int
    d_cut: list[int]
    d_mode: list[int]
    d_scope: list[int]
    _blocks: dict[tuple[int, int, str], Block]
    _infos: dict[tuple[object, ...], GroupInfo]
    _op_sets: dict[tuple[int, ...], tuple[int, ...]]
    _binds: dict[tuple[object, ...], tuple[tuple[int, ...], ...]]

    @property
    def options(self) -> _Options: ...

    def graph_for(self, batch: int) -> Graph: ...

    def placement(self, scope: str, bind: tuple[tuple[int, ...], ...]) -> Placement: ...

    def values(self) -> ValueTable: ...

    def step(self, node: tuple[str, str, int]) -> Step: ...


@dataclass(slots=True)
class _G:
    """One group being decoded (slots: ``_cshape.groups`` sets every field of ~100 per
    decode)."""

    name: str
    start: int
    slot: int  # op index whose slot parameters it uses
    scope_at: int  # op index whose scope parameter it uses
    info: GroupInfo
    split: int = 1
    cores: int = 1
    parts: int = 1
    perm: tuple[int, ...] = ()
    spread: bool = False
    binds: tuple[CoreBind, ...] = ()
    wave: int = 1
    samples: int = 0  # samples of one chunk
    deps: list[str] = field(default_factory=list)
    consumers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Block:
    """A run of segments and how it becomes groups.

    ``slots`` gives each part the first op of its *unit*: the shortest run of the
    block's segments that no group crosses. A unit's groups share its slot
    parameters, so the slots are a function of the groups alone and a projection,
    which sees only groups, finds them again.
    """

    first_seg: int
    last_seg: int
    mode: str  # the mode in effect (after fallbacks)
    parts: tuple[tuple[int, ...], ...]
    slots: tuple[int, ...]


def block_parts(space: SpaceLike, a: int, b: int, mode: str) -> Block:
    """Groups of segments ``a..b`` under ``mode`` (falling back when the partition is invalid)."""
    key = (a, b, mode)
    hit = space._blocks.get(key)
    if hit is not None:
        return hit
    g = space.graph
    segs = space.structure.segments
    compiled = partition_compiled(space, segs[a][0], segs[b][1], mode)  # the same in C
    parts: Sequence[tuple[int, ...]]
    if compiled is not None:
        found, parts = compiled
    else:
        ops = tuple(range(segs[a][0], segs[b][1] + 1))
        tries = {"whole": ("whole", "anchors"), "anchors": ("anchors", "whole"), "ops": ()}[mode]
        found = "ops"
        parts = [(i,) for i in ops]
        for m in tries:
            cand = [ops] if m == "whole" else anchor_partition(g, ops, space.structure.anchors)
            if partition_is_valid(g, cand):
                found, parts = m, cand
                break
    # the space's one tuple per op set (as Decoding.info keeps it): a new block of known op
    # sets holds no copies of them (fewer objects the caches grow by, issue 20)
    op_sets = space._op_sets
    parts = tuple([op_sets.setdefault(p, p) for p in parts])
    result = Block(a, b, found, parts, unit_slots(space, parts))
    space._blocks[key] = result
    return result


def unit_slots(space: SpaceLike, parts: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """Per part, the first op of its unit (see :class:`Block`)."""
    compiled = unit_slots_compiled(space, parts)  # the same in C (search_space/_cgroups.py)
    return compiled if compiled is not None else unit_slots_py(space, parts)


def unit_slots_py(space: SpaceLike, parts: Sequence[tuple[int, ...]]) -> tuple[int, ...]:
    """:func:`unit_slots` in Python (the reference)."""
    st = space.structure
    seg_of = st.seg_of_op
    spans = [(seg_of[p[0]], seg_of[p[-1]]) for p in parts]
    lo = min(a for a, _ in spans)
    hi = max(b for _, b in spans)
    crossed = [False] * (hi - lo + 1)  # crossed[j]: the boundary after segment lo + j
    for a, b in spans:
        for j in range(a, b):
            crossed[j - lo] = True
    unit_start = [0] * (hi - lo + 1)
    start = lo
    for j in range(lo, hi + 1):
        unit_start[j - lo] = start
        if not crossed[j - lo]:
            start = j + 1
    return tuple(st.segments[unit_start[a - lo]][0] for a, _ in spans)


def read_blocks(space: SpaceLike, get: Reader) -> list[Block]:
    """The grouping: which segments form blocks (granularity, cut ranks, min/max size), modes."""
    segs = space.structure.segments
    opts = space.options
    lens: list[int] | None = getattr(space, "_seg_lens", None)  # per space (~10 us on BERT-large)
    if lens is None or len(lens) != len(segs):
        lens = [b - a + 1 for a, b in segs]
        space._seg_lens = lens  # type: ignore[attr-defined]
    below = CUT_BELOW[GRANULARITIES[get(space.d_gran)]] if space.d_gran >= 0 else 0
    found = blocks_compiled(space, get, lens, below)  # the same loop in C (_cderive.py)
    if found is not None:
        return [b if type(b) is Block else block_parts(space, *b) for b in found]
    blocks: list[Block] = []
    a = 0
    size = lens[0]
    mode = MODES[get(space.d_mode[0])]
    for k in range(len(segs) - 1):
        nxt = lens[k + 1]
        if opts.max_group_ops is not None and size + nxt > opts.max_group_ops:
            cut = True
        elif size < opts.min_group_ops or below == 0:
            cut = False
        else:
            cut = get(space.d_cut[k]) < below
        if cut:
            blocks.append(block_parts(space, a, k, mode))
            a = k + 1
            size = nxt
            mode = MODES[get(space.d_mode[a])]
        else:
            size += nxt
    blocks.append(block_parts(space, a, len(segs) - 1, mode))
    return blocks


def core_perm(choice: str, n: int, producer: _G | None, samples: int, batch: int) -> tuple[int, ...]:
    """The core order of a group: a rotation or an interleaved order
    (:func:`search_space._dims.perm_order`), or the producer's order unshuffled (reuse)."""
    if choice != "reuse":
        return perm_order(choice, n)
    if producer is None:
        return tuple(range(n))
    prod_samples = batch // producer.split
    r = samples // prod_samples if samples > prod_samples and samples % prod_samples == 0 else 1
    return unshuffle(producer.perm, r)


def chunk_bind(perm: tuple[int, ...], cores: int, parts: int, chunk: int,
               spread: bool) -> CoreBind:
    """Core parts of one chunk: ``parts`` runs of ``cores // parts`` cores along ``perm``."""
    n = len(perm)
    shift = (chunk * cores) % n if spread else 0
    per = cores // parts
    return tuple(tuple(perm[(shift + j * per + m) % n] for m in range(per)) for j in range(parts))


def _bind_sets(space: SpaceLike) -> dict[tuple[object, ...], tuple[CoreBind, ...]]:
    sets: dict[tuple[object, ...], tuple[CoreBind, ...]] | None = getattr(space, "_bind_sets", None)
    if sets is None:
        sets = space._bind_sets = {}  # type: ignore[attr-defined]
    return sets


def bind_set(space: SpaceLike, perm: tuple[int, ...], cores: int, parts: int, split: int,
             spread: bool) -> tuple[CoreBind, ...]:
    """Every chunk's binding of a group (``split`` chunks on ``cores`` cores in ``parts``
    parts along ``perm``), each chunk's the space's shared value (identities are keys);
    remembered by the space under ``(perm, cores, parts, split, spread)``."""
    cache = space._binds
    binds = []
    for c in range(split):
        key = (perm, cores, parts, c if spread else 0, spread)
        b = cache.get(key)
        if b is None:
            b = cache[key] = chunk_bind(perm, cores, parts, c, spread)
        binds.append(b)
    hit = _bind_sets(space)[(perm, cores, parts, split, spread)] = tuple(binds)
    return hit


@lru_cache(maxsize=4096)
def chunk_scopes(policy: str, split: int, wave: int) -> tuple[str, ...]:
    """Scope of each chunk under a policy (see :data:`search_space._dims.SCOPE_POLICIES`)."""
    if policy in ("L1", "LLB", "DDR"):
        return (policy,) * split
    out = []
    for c in range(split):
        pos = c % wave
        if policy == "LLB/2":
            out.append("LLB" if pos < wave // 2 else "L1")
        else:
            out.append(policy[:3] if pos < wave - 1 else "L1")
    return tuple(out)


def divisors_of(n: int) -> list[int]:
    """Divisors of ``n``, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


class Decoding:
    """The state of one decode: groups, their shapes, the chunk DAG, decided scopes.

    Decoding (:func:`decode_with`) and projection (:mod:`search_space._project`) both
    drive it, so the repairs a decode applies are exactly those a projection expects.
    """

    def __init__(self, space: SpaceLike, batch: int, order: str = "depth", lookahead: int = 0) -> None:
        self.space = space
        self.batch = batch
        self.graph = space.graph_for(batch)
        self.mem = in_compute_dtype(self.graph, space.target)
        target = space.target
        self.n = target.chip.cores_per_cluster
        self.l1 = target.l1.data_bytes
        self.divs = space.divisors[batch]
        self.order = order
        self.lookahead = lookahead
        self.groups: list[_G] = []
        self.by_name: dict[str, _G] = {}
        self.by_out: dict[str, _G] = {}
        self.topo: list[str] = []
        self.waves = False  # whether the groups' waves are set (by the compiled group loop)
        # flat_groups(groups) when the compiled group loop made it (its records are not
        # changed after it: pass 1 is over), else None (made from the records when kept)
        self.flat: tuple[Any, ...] | None = None
        # filled by derive() and start_walk()
        self.draft: list[GroupSpec] = []
        self.transfers: list[Transfer] | PackedTransfers = []
        self._by_tname: dict[str, Transfer] | None = {}  # transfer_by_name once made
        self._deps: dict[Node, list[Node]] | None = {}  # the chunk DAG (deps), once made
        self._deps_make: Callable[[], dict[Node, list[Node]]] | None = None
        self.outs: list[Node] = []
        self.fixed: set[str] = set()
        self.nodes: list[Node] = []
        self.c_order: list[Node] | None = None  # the order, when derive() ran in C
        # and each step's reads by position (packed by _cdag.derive: _crows.unpack_reads)
        self.c_reads: list[list[int]] | bytes = []
        self.c_for: tuple[str, int] = ("", -1)  # the (order, look-ahead) they are for
        # what the compiled walk reads of the order and transfers, made with them (_cderive.py)
        self.c_walk: tuple[Any, ...] | None = None

    # ---- groups ----------------------------------------------------------------------------
    def add_blocks(self, blocks: Sequence[Block]) -> None:
        """GroupSpec records of the blocks, their dependencies and topological order."""
        for blk in blocks:
            for k, ops in enumerate(blk.parts):  # a unit's groups share its slot
                start = ops[0]
                self.groups.append(_G(f"g{start}", start, blk.slots[k], start, self.info(blk, k)))
        self._link()

    def info(self, blk: Block, k: int) -> GroupInfo:
        """Facts of part ``k`` of a block (remembered by the space)."""
        # one GroupInfo per (batch, op set), whichever block it comes from: its caches
        # (fits, working-set bounds, the compiled walk's tables) are then per op set
        key = (self.batch, blk.parts[k])
        info = self.space._infos.get(key)
        if info is None:
            # one tuple per op set: schedules share it (value tables code it by identity)
            ops = self.space._op_sets.setdefault(blk.parts[k], blk.parts[k])
            # with the compiled core, an op set alike to a known one up to tensor names
            # takes its facts (search_space/_cclass.py)
            info = self.space._infos[key] = shared_info(self.space, self.mem, self.batch, ops)
        return info

    def add_group(self, name: str, start: int, slot: int, info: GroupInfo) -> None:
        """One group record (projection builds them from a schedule's groups)."""
        self.groups.append(_G(name, start, slot, start, info))

    def link(self) -> None:
        """Dependencies and order once every group is added."""
        self._link()

    def _link(self) -> None:
        self.by_name = {gr.name: gr for gr in self.groups}
        self.by_out = {gr.info.output: gr for gr in self.groups}
        for gr in self.groups:
            gr.deps = [self.by_out[t].name for t in gr.info.inputs if t in self.by_out]
        for gr in self.groups:  # ascending start: the first consumer comes first
            for d in gr.deps:
                self.by_name[d].consumers.append(gr.name)
        self.topo = group_topo_order([gr.name for gr in self.groups],
                                     {gr.name: gr.start for gr in self.groups},
                                     {gr.name: gr.deps for gr in self.groups})

    def producer(self, gr: _G) -> _G | None:
        """The producer whose cores a ``reuse`` binding follows (the first input's)."""
        return self.by_name[gr.deps[0]] if gr.deps else None

    # ---- pass 1: shape and cores ----------------------------------------------------------
    def fits_l1(self, info: GroupInfo, spp: int, cpp: int) -> bool:
        """Whether a chunk's least working set, whatever the scopes around it (the least
        over its inputs streamed or staged and its output streamed out or kept), fits a
        core's L1: whether any of those four does, the first that fits ending the search
        (inputs streamed and output streamed out first), so the others of a chunk that
        fits are never computed."""
        key = ("fits", spp, cpp)
        hit = info.shared.get(key)
        if hit is None:
            hit = fits_compiled(self, info, spp, cpp)  # the same, from the walk's tables (C)
            if hit is None:
                ops, streams, l1 = info.ops, info.streamable, self.l1
                hit = any(chunk_working_set(self.mem, ops, s, off, False, spp, cpp) <= l1
                          for s in (streams, frozenset()) for off in (True, False))
            info.shared[key] = hit
        return bool(hit)

    def fit(self, info: GroupInfo, spp: int, cpp: int, parts: int) -> tuple[int, int, int]:
        """(samples per part, cores per part, parts) of a chunk, made consistent and fitted.

        ``spp == 0`` means the group cannot be split: the whole batch is one chunk.
        Parts divide the cores left (``n // cpp``) and the samples; when the least
        working set does not fit one core, first fewer samples per part, then more
        cores per part (the guide: "more cores per image").
        """
        key = ("fit", spp, cpp, parts)
        hit = info.shared.get(key)
        if hit is not None:
            return hit  # type: ignore[return-value]
        n, batch = self.n, self.batch

        def shape(s: int, c: int) -> tuple[int, int, int]:
            if s == 0:
                p = gcd(gcd(parts, n // c), batch)
                return batch // p, c, p
            return s, c, gcd(gcd(parts, n // c), batch // s)

        first = result = shape(spp, cpp)
        if not self.fits_l1(info, first[0], first[1]):
            found = None
            for c in (d for d in divisors_of(n) if d >= cpp):
                if spp == 0:
                    for p in (d for d in divisors_of(gcd(n // c, batch)) if d >= first[2]):
                        if self.fits_l1(info, batch // p, c):
                            found = (batch // p, c, p)
                            break
                else:
                    for s in (d for d in reversed(self.divs) if d <= spp):
                        cand = shape(s, c)
                        if self.fits_l1(info, cand[0], cand[1]):
                            found = cand
                            break
                if found is not None:
                    break
            result = found or first
        info.shared[key] = result
        return result

    def set_shape(self, gr: _G, spp: int, cpp: int, parts: int) -> None:
        """Record a fitted shape."""
        gr.split, gr.cores, gr.parts = self.batch // (spp * parts), cpp * parts, parts
        gr.samples = spp * parts

    def set_binding(self, gr: _G, perm: tuple[int, ...], spread: bool) -> None:
        """Record the core order and the chunk bindings it gives."""
        gr.perm, gr.spread = perm, spread
        whole = (perm, gr.cores, gr.parts, gr.split, spread)  # every chunk's at once
        hit = _bind_sets(self.space).get(whole)
        gr.binds = hit if hit is not None else bind_set(self.space, *whole)

    # ---- pass 2: the chunk DAG ---------------------------------------------------------------
    def derive(self) -> None:
        """Transfers and chunk DAG of the shaped groups (scopes are not decided yet)."""
        if not self.waves:  # the compiled group loop set them (search_space/_cgroups.py)
            by_name = self.by_name
            for gr in self.groups:
                cons = gr.consumers
                gr.wave = gr.split // gcd(gr.split, by_name[cons[0]].split) if cons else gr.split
        self.draft = []  # built when a Python walk needs it (_drafts)
        self.c_order = self.c_walk = None
        if not derive_compiled(self):  # the same in C (search_space/_cderive.py), with the order
            self.transfers, self.deps, self.outs = derive_transfers(self.graph, self._drafts())
        self._by_tname = None  # transfer_by_name, made when first read
        self.fixed = {nd[1] for nd in self.outs if nd[0] == "t"}

    @property
    def deps(self) -> dict[Node, list[Node]]:
        """The chunk DAG: each node's dependencies (made when first read when the compiled
        derive packed it, :meth:`deps_later`)."""
        found = self._deps
        if found is None:
            assert self._deps_make is not None
            found, self._deps_make = self._deps_make(), None
            self._deps = found
        return found

    @deps.setter
    def deps(self, value: dict[Node, list[Node]]) -> None:
        self._deps, self._deps_make = value, None

    def deps_later(self, make: Callable[[], dict[Node, list[Node]]]) -> None:
        """The chunk DAG is ``make()``, called when it is first read."""
        self._deps, self._deps_make = None, make

    @property
    def transfer_by_name(self) -> dict[str, Transfer]:
        """The transfers by name (made when first read: a decode that fits never reads it)."""
        found = self._by_tname
        if found is None:
            found = self._by_tname = {t.name: t for t in self.transfers}
        return found

    def compiled_order(self) -> list[Node] | None:
        """The order derive() computed in C, if it is for the current order and look-ahead
        (projection sets the look-ahead after deriving)."""
        if self.c_order is not None and self.c_for == (self.order, self.lookahead):
            return self.c_order
        return None

    def _drafts(self) -> list[GroupSpec]:
        """The shaped groups with every chunk in DDR (what ``derive_transfers`` reads)."""
        if not self.draft:
            self.draft = [GroupSpec(gr.name, gr.info.ops, gr.split,
                                    tuple(self.space.placement("DDR", b) for b in gr.binds))
                          for gr in self.groups]
        return self.draft

    # ---- pass 3: order, then scopes along a capacity walk -------------------------------------
    def start_walk(self) -> None:
        """Fix the order and start the capacity walk that decides every result's scope."""
        splits = {gr.name: gr.split for gr in self.groups}
        compiled = self.compiled_order()
        if compiled is not None:
            self.nodes = compiled
        elif self.order == "depth":
            self.nodes = depth_order(self.deps, self.outs, splits, self.lookahead)
        else:
            self.nodes = breadth_order(self.deps, self.topo, splits)
        self.walk = walk = CapacityWalk(self.graph, self.space.target, self._drafts(), self.transfers,
                                        self.deps, self.outs, self.nodes)
        n_steps = len(self.nodes)
        self.future: list[list[float]] = [[0.0] * self.n for _ in range(n_steps)]
        self.cores_of: list[tuple[int, ...] | None] = []
        self.masks: list[int] = []
        self.bounds: list[tuple[float, float]] = []
        for node in self.nodes:
            if node[0] == "g":
                gr = self.by_name[node[1]]
                cores = tuple(c for part in gr.binds[node[2]] for c in part)
                self.cores_of.append(cores)
                self.masks.append(sum(1 << c for c in cores))
                self.bounds.append(self._bounds(gr))
            else:
                self.cores_of.append(None)
                self.masks.append(0)
                self.bounds.append((0.0, 0.0))
        self.readers_at: list[set[int]] = [set() for _ in range(n_steps)]
        for j, reads in enumerate(walk.reads):
            for i in reads:
                self.readers_at[i].add(j)

    def step_kind(self, k: int) -> tuple[str, _G | None]:
        """What step ``k`` is: ``("g", group)``, ``("t", producing group)`` for a transfer
        whose scope is free, or ``("fixed", None)`` (model inputs and outputs)."""
        node = self.nodes[k]
        if node[0] == "g":
            return "g", self.by_name[node[1]]
        t = self.transfer_by_name[node[1]]
        prod = self.by_out.get(t.tensor)
        if prod is None or t.name in self.fixed:
            return "fixed", None
        return "t", prod

    def want(self, k: int, policy_or_xscope: str) -> str:
        """The scope step ``k`` asks for under its group's scope policy (group chunks) or
        transfer-scope choice (``auto``: the slowest source, as the compiler derives)."""
        node = self.nodes[k]
        if node[0] == "g":
            gr = self.by_name[node[1]]
            return chunk_scopes(policy_or_xscope, gr.split, gr.wave)[node[2]]
        if policy_or_xscope != "auto":
            return policy_or_xscope
        srcs = [self.walk.layouts[d][0] for d in self.walk.reads[k]]
        return min(srcs, key=_RANK.__getitem__) if srcs else "DDR"

    def pick(self, k: int, want: str) -> str:
        """The first scope from ``want`` down (L1, LLB, DDR) that step ``k`` may use:
        allowed for its op, not ruled out for the steps its result lives through, and
        fitting now (the capacity model's own walk)."""
        node = self.nodes[k]
        allowed = self.by_name[node[1]].info.scopes if node[0] == "g" else SLOWER["L1"]
        options = _OPTIONS.get((want, allowed))
        if options is None:
            options = _OPTIONS[(want, allowed)] = \
                tuple(s for s in SLOWER[want] if s in allowed) or (want,)
        for s in options[:-1]:
            if s == "L1" and not self._ahead_ok(k):
                continue
            if self.walk.fits(k, s):
                return s
        return options[-1]

    def _work_lb(self, j: int, k: int) -> float:
        """GroupSpec chunk ``j``'s working set per core with its output streamed out, its
        inputs as placed so far, step ``k``'s result (the next to commit) in L1, and the
        least over the inputs not placed yet (see the module doc)."""
        walk = self.walk
        gr = self.by_name[self.nodes[j][1]]
        info = gr.info
        src = {walk.provides[d]: d for d in walk.reads[j]}
        known: list[str] = []
        unknown: list[str] = []
        held = False
        for t in info.inputs:
            d = src.get(t)
            if d is None:
                scope = walk.input_scope
            elif d == k:
                scope = "L1"
            elif d < k:
                scope = walk.layouts[d][0]
            else:
                if t in info.streamable:
                    unknown.append(t)
                continue
            if scope == "L1":
                held = held or (d is not None and walk.last[d] > j)
            elif t in info.streamable:
                known.append(t)
        key = ("lb", gr.samples, gr.cores, gr.parts, frozenset(known), frozenset(unknown), held)
        hit = info.cache.get(key)
        if hit is None:
            spp, cpp = gr.samples // gr.parts, gr.cores // gr.parts
            base = frozenset(known)
            options = [base | frozenset(unknown), base] if unknown else [base]
            if len(unknown) == 2:
                options += [base | {u} for u in unknown]
            hit = min(chunk_working_set(self.mem, info.ops, st, True, held, spp, cpp)
                      for st in options)
            info.cache[key] = hit
        return hit

    def _staying(self, k: int, j: int) -> dict[int, float]:
        """Bytes of step ``k``'s result (in L1) that reader ``j`` finds in place, per core."""
        walk = self.walk
        src: Layout = ("L1", walk.layouts[k][1])
        dst: Layout = ("L1", walk.layouts[j][1])
        sb, fb = walk.sizes(k)
        out = {c: n * sb for c, n in staying_fraction(src, dst).items()} if sb else {}
        if fb:
            src_cores = {c for _, _, parts in src[1] for p in parts for c in p}
            for _, _, parts in dst[1]:
                for part in parts:
                    for c in part:
                        if c in src_cores:
                            out[c] = out.get(c, 0.0) + fb
        return out

    def _ahead_ok(self, k: int) -> bool:
        """Whether step ``k``'s result may sit in L1 through its lifetime without crowding
        a later group chunk on its cores out of L1 (see the module doc)."""
        walk = self.walk
        mine = walk.result_l1_bytes(k)
        cap = self.l1
        if max(mine.values(), default=0.0) > cap:
            return False
        end = min(walk.last[k], len(self.nodes) - 1)
        readers = self.readers_at[k]
        cores_of, masks, bounds, future = self.cores_of, self.masks, self.bounds, self.future
        here = 0
        for c in mine:
            here |= 1 << c
        for j in range(k + 1, end + 1):
            cores = cores_of[j]
            if cores is None:
                continue
            reader = j in readers
            if not reader and not masks[j] & here:
                continue
            row = future[j]
            stay = self._staying(k, j) if reader else None
            top = -1.0
            for c in cores:
                b = mine.get(c)
                if b is not None:
                    v = row[c] + b - (stay.get(c, 0.0) if stay else 0.0)
                    if v > top:
                        top = v
            if top < 0.0 and stay is None:
                continue  # neither on its cores nor read by it
            top = max(top, 0.0)
            least, most = bounds[j]
            if top + least > cap:
                return False
            if top + most > cap and top + self._work_lb(j, k) > cap:
                return False
        return True

    def _bounds(self, gr: _G) -> tuple[float, float]:
        """(least, most) of a chunk's working set per core, output streamed out, over its
        inputs streamed or staged and held or not: :meth:`_work_lb` lies between."""
        info = gr.info
        key = ("bounds", gr.samples, gr.cores, gr.parts)
        hit = info.shared.get(key)
        if hit is None:
            spp, cpp = gr.samples // gr.parts, gr.cores // gr.parts
            ws = [chunk_working_set(self.mem, info.ops, st, True, held, spp, cpp)
                  for st in (info.streamable, frozenset()) for held in (False, True)]
            hit = info.shared[key] = (min(ws), max(ws))
        return hit  # type: ignore[return-value]

    def commit(self, k: int, scope: str) -> None:
        """Walk step ``k`` with its result in ``scope`` (and remember what it occupies in
        L1 at the later steps it lives through; a reader counts what it does not find in
        place)."""
        walk = self.walk
        walk.commit(k, scope)
        if scope == "L1" and walk.last[k] > k:
            readers = self.readers_at[k]
            mine = walk.result_l1_bytes(k)
            for j in range(k + 1, min(walk.last[k], len(self.nodes) - 1) + 1):
                row = self.future[j]
                if j in readers:
                    stay = self._staying(k, j)
                    for c, b in mine.items():
                        row[c] += max(0.0, b - stay.get(c, 0.0))
                else:
                    for c, b in mine.items():
                        row[c] += b

    # ---- the schedule ----------------------------------------------------------------------
    def schedule(self) -> GraphSchedule:
        """The GraphSchedule of the walked groups, transfers and order, built when read.

        A :class:`compiler.codes.LazySchedule` (:mod:`search_space._lazy`): its codes (the
        space's shared values interned in its value table: the cost model gathers its
        table rows by code), its identity text and its objects are made when first asked
        for; its memory plan and chunk DAG are remembered beside it now (the pre-check
        and validation reuse them).
        """
        space, walk = self.space, self.walk
        it = interned(space)
        it.use(space.values())
        if isinstance(walk, _Walked):  # the compiled walk: its step rows know the positions
            scopes, at = walk.scopes, self._crows[-1]  # type: ignore[attr-defined]
        else:
            scopes, at = [_SCOPE_CODE[lay[0]] for lay in walk.layouts], None
        # the state kept compact: not the group records (issue 20, search_space._lazy)
        s = LazySchedule.deferred(self.batch, self.graph.workload_key, "search_space",
                                  Decoded(it, self.batch,
                                          self.flat if self.flat is not None else flat_groups(self.groups),
                                          self.transfers,
                                          self.nodes, scopes, at))
        # derived once and walked once: validation and the pre-check reuse both
        # (the DAG made when first read: Derived)
        memo_of(s, limit=8)[("derived", id(self.graph))] = (
            self.graph, Derived(self.transfers, self._deps, self._deps_make, self.outs))
        remember_plan(self.graph, s, space.target, walk.plan())
        return s


REFERENCE_FIT = Decoding.fit
"""``Decoding.fit`` as this module defines it: the C loop runs its shape search itself
(``fit_c``) only for a decode whose fit is this function; a fit patched on the class or
overridden in a subclass is called as it is (``search_space._cgroups._c_fit``)."""
set_reference_fit(REFERENCE_FIT, Decoding.fits_l1)

def decode_with(space: SpaceLike, get: Reader, overrides: dict[int, int] | None = None
                ) -> tuple[GraphSchedule, Mapping[Node, int]]:
    """Build the schedule the reader's answers describe (see the module doc).

    Args:
        space: The space.
        get: The reader.
        overrides: Choice indices by free parameter that replace the reader's answer
            (the capacity repair's demotions of scope parameters).

    Returns:
        The schedule, and for each step node the parameter that sets its scope.
    """
    read = _overridden(space, get, overrides)
    dec = decode_groups(space, read)
    scope_dim = walk_scopes(dec, read)
    return dec.schedule(), scope_dim


def _overridden(space: SpaceLike, get: Reader, overrides: dict[int, int] | None) -> Reader:
    """The reader with ``overrides`` (choice indices by free parameter) in place of its answers."""
    if not overrides:
        return get
    rep = getattr(space, "_rep_list", None)  # a list: no numpy scalar per read
    if rep is None:
        rep = space.rep.tolist()
    return _Overridden(get, rep, overrides)


class _Overridden:
    """A reader whose answers ``overrides`` replaces (by free parameter, ``rep[d]``); the
    inner reader is still asked (it records what was read). The compiled walk's glue reads
    its parts (:func:`search_space._cglue.reader_parts`)."""

    __slots__ = ("inner", "overrides", "rep")

    def __init__(self, inner: Reader, rep: list[int], overrides: dict[int, int]) -> None:
        self.inner, self.rep, self.overrides = inner, rep, overrides

    def __call__(self, d: int) -> int:
        v = self.inner(d)
        return self.overrides.get(self.rep[d], v)


def decode_groups(space: SpaceLike, get: Reader) -> Decoding:
    """Passes 1 and 2 (groups, shapes and cores; the chunk DAG and the order): they read
    no scope parameter, so a capacity repair round (:func:`decode_fitted`, which changes
    only scope parameters) walks the scopes of the same Decoding again."""
    batch = space.batches[get(space.d_batch)] if space.d_batch >= 0 else space.batch
    order = ORDERS[get(space.d_order)]
    lookahead = LOOKAHEADS[get(space.d_lookahead)] if order == "depth" else 0
    dec = Decoding(space, batch, order, lookahead)
    blocks = read_blocks(space, get)
    # the loop below in C, one call (search_space/_cgroups.py): the same reads, fits, bindings
    if groups_compiled(dec, get, blocks, dec.fit, partial(bind_set, space), _G):
        dec.derive()
        return dec
    dec.add_blocks(blocks)
    dims = space.dims
    divs = dec.divs

    for name in dec.topo:  # producers first: reuse needs the producer's cores
        gr = dec.by_name[name]
        slot = space.slot[gr.slot]
        spp = 0
        if gr.info.separable and len(divs) > 1:
            want = dims[slot].choices[get(slot)]
            spp = max(d for d in divs if d <= want) if want >= 1 else 1
        cpp = dims[slot + 1].choices[get(slot + 1)]
        parts = dims[slot + 2].choices[get(slot + 2)]
        dec.set_shape(gr, *dec.fit(gr.info, spp, cpp, parts))
        perm = core_perm(dims[slot + 3].choices[get(slot + 3)], dec.n, dec.producer(gr),
                         gr.samples, batch)
        spread = bool(dims[slot + 4].choices[get(slot + 4)]) if gr.cores < dec.n and gr.split > 1 \
            else False
        dec.set_binding(gr, perm, spread)
    dec.derive()
    return dec


def walk_scopes(dec: Decoding, get: Reader, partial: bool = False) -> Mapping[Node, int]:
    """Pass 3: every result's scope along the capacity walk (in C when built); for each
    step node the parameter that sets its scope. ``dec.schedule()`` then builds the
    schedule; a later call walks again from pass 2's results (the walk's state is new).
    With ``partial`` the compiled walk may stop at its first overflow (``dec.walk`` then
    has only its issue: :func:`search_space._cplan.walk_partial`); the Python walk ignores
    it."""
    space = dec.space
    # the same walk in C (search_space/_ccore.py)
    compiled = scope_walk(dec, get, chunk_scopes, partial)
    if compiled is not None:
        return compiled
    dec.start_walk()
    scope_dim: dict[Node, int] = {}
    choice: dict[str, str] = {}  # group -> its policy; "t:" + group -> its transfer scope
    for k, node in enumerate(dec.nodes):
        kind, owner = dec.step_kind(k)
        if owner is None:
            dec.commit(k, dec.walk.layouts[k][0])
            continue
        key = owner.name if kind == "g" else "t:" + owner.name
        d = space.d_scope[owner.scope_at] if kind == "g" else space.slot[owner.slot] + 5
        ch = choice.get(key)
        if ch is None:
            ch = choice[key] = (SCOPE_POLICIES if kind == "g" else TRANSFER_SCOPES)[get(d)]
        scope_dim[node] = d
        dec.commit(k, dec.pick(k, dec.want(k, ch)))
    return scope_dim


# Demotion of a scope policy when the memory named overflows (each step slower).
_L1_NEXT = {"L1": "LLB/2", "LLB/2": "LLB>L1", "LLB>L1": "LLB", "LLB": "DDR", "DDR>L1": "DDR"}
_LLB_NEXT = {"LLB": "DDR", "LLB>L1": "DDR>L1", "LLB/2": "DDR>L1"}
_X_L1_NEXT = {"auto": "LLB", "L1": "LLB", "LLB": "DDR"}
_X_LLB_NEXT = {"auto": "DDR", "LLB": "DDR"}


def decode_fitted(space: SpaceLike, get: Reader, max_rounds: int) -> GraphSchedule:
    """Decode; when the capacity model still reports an overflow, re-decode with the
    scope parameter of one result occupying that memory one step slower (largest
    first; the overflowing step's own output last), up to ``max_rounds`` times.

    Returns the first re-decode that fits, else the plain decode: so every result is
    a fixed point (a schedule that fits decodes from its projection without repair;
    one that does not, from the same failed repairs). A re-decode changes only scope
    parameters, so it walks the scopes of the same groups, chunk DAG and order again
    (:func:`decode_groups` runs once), and only the schedule returned is built: the
    overflow of a walk is its plan's (what :func:`compiler.capacity.check_capacity`
    of the built schedule returns, the same plan remembered beside it).
    """
    overrides: dict[int, int] = {}
    dec = decode_groups(space, get)
    # the walks a round reads only the issue of stop at their first overflow (compiled):
    # the plain decode is walked again in full when no repair fits (below)
    scope_dim = walk_scopes(dec, get, partial=max_rounds > 0)
    issue = walk_issue(dec.walk)
    if issue is None or max_rounds <= 0:
        return dec.schedule()
    first_walk = (dec.nodes, dec.walk)  # the plain decode, built only if no repair fits
    dims = space.dims
    for _ in range(max_rounds):
        if issue is None:
            return dec.schedule()
        llb = issue.core < 0
        nodes = dec.nodes
        cands = [i for i, _ in sorted(issue.live_steps, key=lambda x: -x[1])]
        cands.append(issue.step_index)
        changed = False
        for i in cands:
            node: Node = nodes[i]
            d = scope_dim.get(node)
            if d is None:
                continue
            f = int(space.rep[d])
            choices = dims[d].choices
            cur = choices[overrides.get(f, get(d))]
            if dims[d].kind == "scope":
                nxt = (_LLB_NEXT if llb else _L1_NEXT).get(cur)
            else:
                nxt = (_X_LLB_NEXT if llb else _X_L1_NEXT).get(cur)
            if nxt is None:
                continue
            overrides[f] = choices.index(nxt)
            changed = True
            break
        if not changed:
            break
        scope_dim = walk_scopes(dec, _overridden(space, get, overrides), partial=True)
        issue = walk_issue(dec.walk)
    if issue is None:
        return dec.schedule()
    if walk_partial(first_walk[1]):
        walk_whole(dec, first_walk[1])  # the same walk as the first, in full
    else:
        dec.nodes, dec.walk = first_walk
    return dec.schedule()
