"""Step plans: what a simulation step moves and computes whatever the timeline, kept per
graph and target across simulations (used by :mod:`sim._engine`, whose ``_Sim`` is the
:class:`PlanContext`).

A tune's candidates share most of their steps with the ones they were bred from: a group
step's flows (loads and streams by source, the exchange between a part's cores, the
output's store), its compute cost when it gathers no tables and its host segment depend
only on its op set, its layout and its inputs' providers' layouts and cores, all taken
relative to the step's first sample (:func:`shift`), which its key says with tokens
(:func:`layout_token`: ints, cheap to hash and compare). Each simulation books the plans on
its timeline; made once, a plan is never mutated, so results are the same bit for bit
(``tests/sim/test_step_plans.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from itertools import count
from typing import TYPE_CHECKING, Any, Protocol

from compiler.footprint import sample_bytes
from compiler.layout import input_layout
from compiler.memo import BoundedDict, memo_of
from sim._ctime import built, pack_group
from sim._flows import Flows, GroupStatic
from sim._host import host_segment_cycles
from sim._model import ComputeCost, GroupWork, cuts_inside_samples, group_work, halo_reach
from sim._moves import Layout, MovePlan, exchange_plan, fixed_plan, move_plan
from sim._resources import Chip, chip_of

if TYPE_CHECKING:
    from compiler.capacity import MemoryPlan
    from compiler.graph import Graph
    from compiler.schedule import GroupSpec, Placement, Step, Transfer
    from compiler.target import Target

__all__ = ["PLAN_LIMIT", "TARGETS_KEPT", "PlanContext", "StepPlan", "exchange_flows",
           "group_token", "inputs_flows", "layout_token", "make_plan", "ops_token",
           "placement_cores", "plans_of", "shift", "step_facts", "step_label", "target_caches",
           "transfer_flows", "transfer_token"]

_MODEL_INPUT = -1
_NONE: Flows | None = Flows()  # "not kept" (a kept exchange may be None)


class PlanContext(Protocol):
    """What making a plan reads of a simulation (``sim._engine._Sim``)."""

    g: Graph
    t: Target
    chip: Chip
    moves: dict[object, MovePlan]
    plans: BoundedDict
    layouts: list[Layout]
    cores_of: list[tuple[int, ...]]
    cpack: Any  # the compiled plan maker (sim._ctime.load_pack), or None
    # latency_of's terms, which the compiled packer (sim/_cpack.c's pack_group) reads
    setup: float
    hop_lat: float
    ddr_lat: float

    def latency_of(self, fl: Flows) -> float: ...

    def part_cost(self, gr: GroupSpec, spp: int, cores: int, step_cores: int,
                  remote: frozenset[int], tables: float, wait: float) -> ComputeCost: ...

    def weight_flows(self, nbytes: float, cores: tuple[int, ...], count: bool = True
                     ) -> Flows: ...


# Step plans kept per graph and target (a BERT-base b8 tune of 400 measurements makes
# ~5,600 of them, 60 % of its 15,300 group steps finding theirs; they took ~70 MB of its
# process, ~12 KB each), and the targets whose plans a graph keeps at once: a sweep
# simulates one graph on many targets in the same processes, so without that bound a
# process would keep up to PLAN_LIMIT plans per variant.
PLAN_LIMIT = 8_000
TARGETS_KEPT = 2


@dataclass(frozen=True, eq=False)
class StepPlan:
    """What a group step moves and computes whatever the timeline (``_Sim.step_plan``).

    A step's flows depend only on its op set, its layout, the layouts and cores of its
    inputs' providers and what the capacity model streams; its compute cost, when it
    gathers no tables, only on those too. A tune's candidates share most of their steps
    with the candidates they were bred from, so the plans are kept per graph and target
    and each simulation only books them on the timeline. Never mutated once made.

    Attributes:
        info: The op set's :class:`~sim._flows.GroupStatic`.
        work: Its :class:`~sim._model.GroupWork`.
        staged: ``(source scope, flows)`` of the staged loads, in first-use order.
        streamed: Flows of the streamed inputs, by source scope in first-use order.
        kinds: ``(tensor, source scope)`` of each input another step provides (whose
            readiness the step waits for).
        ex: The exchange between a part's cores (None: nothing crosses).
        out: The output's store to LLB/DDR (None: it stays in L1).
        remote: Ops whose re-reads are charged at the source.
        cost_of: Cost per part size (None: the step gathers tables, priced on the timeline).
        first: The first weight tile's flows (None: none, or priced on the timeline).
        host: ``(cycles, FLOPs, PCIe bytes)`` of the step's host ops.
        packed: The plan packed for the compiled step (:func:`sim._ctime.pack_group`: the
            flat array and the slowest part's matrix and vector cycles), or None (the
            extension is not built, or the step is priced in Python).
    """

    info: GroupStatic
    work: GroupWork
    staged: tuple[tuple[str, Flows], ...]
    streamed: tuple[Flows, ...]
    kinds: tuple[tuple[str, str], ...]
    ex: Flows | None
    out: Flows | None
    remote: frozenset[int]
    cost_of: dict[int, ComputeCost] | None
    first: Flows | None
    host: tuple[float, float, float]
    packed: tuple[bytes, float, float] | None = None


_PLAN_FIELDS = tuple(f.name for f in fields(StepPlan))

# by id, each placement kept beside its tuple (hashing a Placement runs its dataclass
# __hash__ in Python; a decoder's placements are interned, so ids repeat)
_CORES: dict[int, tuple[Placement, tuple[int, ...]]] = {}


def placement_cores(place: Placement) -> tuple[int, ...]:
    """``place.cores`` (remembered: a property that makes its tuple on every read)."""
    hit = _CORES.get(id(place))
    if hit is None or hit[0] is not place:
        if len(_CORES) > PLAN_LIMIT:
            _CORES.clear()
        hit = _CORES[id(place)] = (place, place.cores)
    return hit[1]


# order steps' labels by id, each step kept beside its text (Step.__str__ runs in Python for
# every step of every run; a decoder's steps are interned)
_LABELS: dict[int, tuple[Step, str]] = {}


def step_label(step: Step) -> str:
    """``str(step)`` (remembered by identity)."""
    hit = _LABELS.get(id(step))
    if hit is None or hit[0] is not step:
        if len(_LABELS) > PLAN_LIMIT:
            _LABELS.clear()
        hit = _LABELS[id(step)] = (step, str(step))
    return hit[1]


_MOVE_CACHE_LIMIT = 200_000


@lru_cache(maxsize=32)
def _weight_cache(target: Target) -> dict[tuple[float, tuple[int, ...]], Flows]:
    """Weight flows of one target by (bytes, cores), shared by every simulation."""
    return {}


@lru_cache(maxsize=32)
def _move_cache(target: Target) -> dict[object, MovePlan]:
    """Movement plans of one target, shared by every simulation."""
    return {}


# by id, each target kept beside its chip and caches (the caches above are found by the
# target's value: hashing a Target runs its dataclasses' __hash__ in Python, three times a run)
_TARGETS: dict[int, tuple[Target, Chip, dict[object, MovePlan],
                          dict[tuple[float, tuple[int, ...]], Flows]]] = {}


def target_caches(target: Target) -> tuple[Chip, dict[object, MovePlan],
                                           dict[tuple[float, tuple[int, ...]], Flows]]:
    """A simulation's ``(chip_of(target), movement plans, weight flows)``, shared by every
    simulation on an equal target and found by the target's identity; each cache is
    emptied past 200,000 entries."""
    hit = _TARGETS.get(id(target))
    if hit is None or hit[0] is not target:
        if len(_TARGETS) >= 32:
            _TARGETS.clear()
        hit = _TARGETS[id(target)] = (target, chip_of(target), _move_cache(target),
                                      _weight_cache(target))
    _, chip, moves, wcache = hit
    if len(wcache) > _MOVE_CACHE_LIMIT:
        wcache.clear()
    if len(moves) > _MOVE_CACHE_LIMIT:
        moves.clear()
    return chip, moves, wcache


# Tokens: small ints standing for a value in the step plans' keys, so a key is a short tuple
# of ints (hashed and compared in a few instructions) instead of nested layout tuples
# hashed and compared element by element on every step of every run. A token stands for
# one value for the life of the process (numbers are never reused, even when the table is
# cleared: a value met again after a clear gets a new number, which only misses the plans
# kept under the old one), so equal tokens mean equal values.
_NEXT = count()
_TOKENS: dict[object, int] = {}
# by id, each object kept beside its token (the decoder interns placements, op tuples and
# transfers, so ids repeat across candidates)
_BY_ID: dict[tuple[int, int], tuple[object, int]] = {}


def layout_token(norm: Layout, cores: tuple[int, ...]) -> int:
    """The token of a layout taken relative to its first sample (``shift(layout,
    first)``) with the cores of its placement."""
    key = (norm, cores)
    tok = _TOKENS.get(key)
    if tok is None:
        if len(_TOKENS) >= 4 * PLAN_LIMIT:
            _TOKENS.clear()
        tok = _TOKENS[key] = next(_NEXT)
    return tok


def _by_id(obj: object, n: int) -> int | None:
    hit = _BY_ID.get((id(obj), n))
    return hit[1] if hit is not None and hit[0] is obj else None


def _keep(obj: object, n: int, tok: int) -> int:
    if len(_BY_ID) >= 4 * PLAN_LIMIT:
        _BY_ID.clear()
    _BY_ID[(id(obj), n)] = (obj, tok)
    return tok


def ops_token(ops: tuple[int, ...]) -> int:
    """The token of an op set (an op tuple), remembered by the tuple's identity."""
    tok = _by_id(ops, -1)
    if tok is None:
        tok = _keep(ops, -1, layout_token(("ops", ops), ()))  # type: ignore[arg-type]
    return tok


def group_token(place: Placement, layout: Layout, cores: tuple[int, ...]) -> int:
    """:func:`layout_token` of a group chunk's ``layout`` at ``place`` (its
    :func:`compiler.layout.group_layout`), remembered by the placement's identity with the
    samples per part (relative to its first sample, the layout depends on nothing else)."""
    spp = layout[1][0][1]
    tok = _by_id(place, spp)
    if tok is None:
        tok = _keep(place, spp, layout_token(shift(layout, layout[1][0][0]), cores))
    return tok


def transfer_token(tr: Transfer, layout: Layout, cores: tuple[int, ...], batch: int) -> int:
    """:func:`layout_token` of a transfer's ``layout`` (its
    :func:`compiler.layout.transfer_layout` at ``batch``), remembered by the transfer's
    identity."""
    tok = _by_id(tr, batch)
    if tok is None:
        tok = _keep(tr, batch, layout_token(shift(layout, layout[1][0][0]), cores))
    return tok


def step_facts(memory: MemoryPlan) -> tuple[list[tuple[tuple[int, float], ...]],
                                            list[frozenset[str]]]:
    """Each step's ``l1_bytes`` and ``streamed`` of a memory plan, as two lists: a compiled
    walk's plan gives them without making its ``StepMemory`` values
    (:meth:`search_space._cplan._LazyPlan.step_facts`), any other plan from its steps."""
    facts = getattr(memory, "step_facts", None)
    if facts is not None:
        return facts()  # type: ignore[no-any-return]
    steps = memory.steps
    return [m.l1_bytes for m in steps], [m.streamed for m in steps]


def shift(layout: Layout, off: int) -> Layout:
    """``layout`` with every piece's first sample ``off`` earlier."""
    if not off:
        return layout
    return (layout[0], tuple((first - off, spp, parts) for first, spp, parts in layout[1]))


def plans_of(graph: Graph, target: Target) -> BoundedDict:
    """The step plans of a graph (as simulated: its compute dtype) on a target; the graph
    keeps those of its last :data:`TARGETS_KEPT` targets (a new one drops the oldest's)."""
    memo = memo_of(graph)
    kept: dict[str, BoundedDict] | None = memo.get("sim.steps")
    if kept is None:
        kept = memo["sim.steps"] = {}
    plans = kept.get(target.hash)
    if plans is None:
        while len(kept) >= TARGETS_KEPT:
            del kept[next(iter(kept))]
        plans = kept[target.hash] = BoundedDict(PLAN_LIMIT)
    return plans



def inputs_flows(
    sim: PlanContext, tensors: tuple[tuple[str, int, int], ...],
    srcs: tuple[tuple[Layout, tuple[int, ...]] | None, ...],
    dst: Layout, dst_cores: tuple[int, ...], streamed_names: frozenset[str],
    work: GroupWork | None = None,
) -> tuple[dict[str, Flows], dict[str, Flows]]:
    """Flows bringing ``tensors`` from their providers (``srcs[i]``: the layout and cores
    of tensor ``i``'s provider, None for a model input) to layout ``dst``.

    Returns the staged loads and the streamed loads (``streamed_names``: inputs
    in LLB/DDR that the step reads tile by tile, as the capacity model decided),
    each by source scope (separate DMA requests). A streamed input that an op
    re-reads once per extra weight tile (``work.rereads``) crosses its path once
    per pass. With the compiled plan maker (``sim.cpack``) the loop below runs in C
    (``sim/_cpack.c``'s ``inputs_flows``: the same caches read, the same plans made on a
    miss by :func:`~sim._moves.move_plan` and :func:`~sim._moves.fixed_plan`, the same
    sums in the same order).
    """
    cpack = sim.cpack
    if cpack is not None:
        return cpack.inputs_flows(  # type: ignore[no-any-return]
            tensors, srcs, dst, dst_cores, streamed_names, () if work is None else work.rereads,
            input_layout(sim.g.batch), sim.moves, move_plan, fixed_plan, Flows, sim.chip, cpack)
    staged: dict[str, Flows] = {}
    streamed: dict[str, Flows] = {}
    for (name, sb, fb), got in zip(tensors, srcs):
        if got is None:
            src: Layout = input_layout(sim.g.batch)
            src_cores: tuple[int, ...] = ()
        else:
            src, src_cores = got
        bucket = staged
        passes = 1
        if name in streamed_names:
            bucket = streamed
            if work is not None:
                passes += sum(x for _, t, x in work.rereads if t == name)
        fl = bucket.get(src[0])
        if fl is None:
            fl = bucket[src[0]] = Flows()
        if sb:
            fl.add(move_plan(sim.chip, src, dst, sim.moves, sim.cpack), sb * passes, sim.cpack)
        if fb:
            fl.add(fixed_plan(sim.chip, src[0], src_cores, dst[0], dst_cores, sim.moves),
                   fb * passes, sim.cpack)
    return staged, streamed


def exchange_flows(sim: PlanContext, ops: tuple[int, ...], work: GroupWork, spp: int,
                   parts: tuple[tuple[int, ...], ...]) -> Flows | None:
    """What the cores of each part of a step of ``ops`` exchange (halos at cuts inside a
    sample, batched matmuls' operands), None when nothing crosses; kept with the step plans
    (by op set, samples per part and parts: many plans share it)."""
    key = ("exchange", ops, spp, parts)
    hit: Flows | None = sim.plans.get(key, _NONE)
    if hit is not _NONE:
        return hit
    ex = Flows()
    for part in parts:
        cuts = cuts_inside_samples(spp, len(part))
        if work.operands:  # attention's K and V, split as its compute is
            ex.add(exchange_plan(sim.chip, part, sim.moves),
                   work.operand_exchange(spp, len(part)), sim.cpack)
        if not cuts or not work.cut_bytes:
            continue
        near = work.cut_bytes
        # a halo reaching past the neighbour's rows comes from further away
        for hb, side_rows, in_rows in work.halos:
            reach = halo_reach(in_rows * spp / len(part), side_rows, len(part))
            if len(reach) > 1:
                near -= hb
                ex.add(exchange_plan(sim.chip, part, sim.moves, reach), cuts * hb, sim.cpack)
        ex.add(exchange_plan(sim.chip, part, sim.moves), cuts * near, sim.cpack)
    kept = sim.plans[key] = ex if ex.flows else None
    return kept


def make_plan(sim: PlanContext, place: Layout, cores: tuple[int, ...], gr: GroupSpec, spp: int,
              samples: int, info: GroupStatic,
              srcs: tuple[tuple[Layout, tuple[int, ...]] | None, ...],
              streamed_names: frozenset[str]) -> StepPlan:
    """The :class:`_StepPlan` of a step of ``gr`` at layout ``place`` on ``cores``."""
    parts = place[1][0][2]
    work = group_work(sim.g, gr.ops, sim.t, sim.cpack)
    stage: Layout = ("L1", place[1])
    staged, streamed = inputs_flows(sim, info.inputs, srcs, stage, cores, streamed_names, work)
    kinds = tuple((name, src[0][0]) for (name, _, _), src in zip(info.inputs, srcs)
                  if src is not None)
    # the cores of a part exchange halos / operands at cuts inside a sample
    ex: Flows | None = None
    if work.cut_bytes or work.operands:
        ex = exchange_flows(sim, gr.ops, work, spp, parts)
    out: Flows | None = None
    if place[0] != "L1":
        out = Flows()
        out.add(move_plan(sim.chip, stage, place, sim.moves, sim.cpack), info.out_sample,
                sim.cpack)
        if info.out_fixed:
            out.add(fixed_plan(sim.chip, "L1", cores, place[0], cores, sim.moves),
                    info.out_fixed, sim.cpack)
    remote = work.remote_ops(streamed_names)
    cost_of: dict[int, ComputeCost] | None = None
    first: Flows | None = None
    if not work.gathers:  # no tables: the costs and the first weight tile are fixed
        cost_of = {n: sim.part_cost(gr, spp, n, len(cores), remote, 0.0, 0.0)
                   for n in {len(p) for p in parts}}
        if info.first_tile:
            first = sim.weight_flows(info.first_tile, cores, count=False)
    host = host_segment_cycles(sim.g, gr.ops, samples, sim.t)
    staged_t, streamed_t = tuple(staged.items()), tuple(streamed.values())
    packed = None
    if cost_of is not None and not host[0] and built() is not None:
        packed = pack_group(sim, info, staged_t, streamed_t, kinds, ex, out, cost_of, first,
                            cores, parts, sim.cpack)
    plan = object.__new__(StepPlan)  # the frozen dataclass's value, without its __init__'s
    plan.__dict__.update(zip(_PLAN_FIELDS, (info, work, staged_t, streamed_t, kinds, ex, out,
                                            remote, cost_of, first, host, packed), strict=True))
    return plan


def transfer_flows(sim: PlanContext, tensor: str, dst: Layout, cores: tuple[int, ...],
                   dep_idx: list[int]) -> Flows:
    """What a transfer of ``tensor`` to ``dst`` on ``cores`` moves from its sources
    (the steps ``dep_idx``, or the model input)."""
    sb, fb = sample_bytes(sim.g, tensor)
    fl = Flows()
    for d in dep_idx or [_MODEL_INPUT]:
        if d == _MODEL_INPUT:
            src: Layout = input_layout(sim.g.batch)
            src_cores: tuple[int, ...] = ()
        else:
            src = sim.layouts[d]
            src_cores = sim.cores_of[d]
        if sb:
            fl.add(move_plan(sim.chip, src, dst, sim.moves, sim.cpack), sb, sim.cpack)
        if fb:
            fl.add(fixed_plan(sim.chip, src[0], src_cores, dst[0], cores, sim.moves), fb, sim.cpack)
    return fl

