"""Decoding parameters into a GraphSchedule (the one code path every view shares).

A *reader* answers "which choice does parameter ``d`` take?"; decoding asks only
for the parameters that matter given the earlier answers (define-by-run), so the
same walk serves a numeric vector, an Optuna trial and a projection check.

Decoding repairs choices that cannot work, deterministically, and only those
(so every valid schedule is a fixed point):

* a split that does not divide the batch becomes the largest divisor below it;
  a group that cannot be split along the batch gets split 1;
* core parts become ``gcd(parts, cores, samples per chunk)``;
* when even the least working set of a chunk (every streamable input streamed,
  the output streamed out; :mod:`compiler.footprint`) exceeds a core's L1, the
  split grows (then shrinks), then all cores are used, until it fits;
* a chunk output in a scope its op may not use, in L1 when the working set with
  the output kept does not fit, or in the LLB when it is larger than the LLB,
  goes one scope slower.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from math import gcd
from typing import TYPE_CHECKING

from compiler.plan import derive_transfers
from compiler.schedule import GraphSchedule, Group, Placement, Step, Transfer
from search_space._dims import LOOKAHEADS, MODES, ORDERS, SCOPE_POLICIES, TRANSFER_SCOPES, unshuffle
from search_space._order import breadth_order, depth_order, group_topo_order
from search_space._structure import GroupInfo, anchor_partition, group_info, partition_is_valid

if TYPE_CHECKING:
    from compiler.graph import Graph
    from search_space._space import Space

_SLOWER = {"L1": ("L1", "LLB", "DDR"), "LLB": ("LLB", "DDR"), "DDR": ("DDR",)}

Reader = Callable[[int], int]


@dataclass
class _G:
    """One group being decoded."""

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
    xscope: str = "auto"
    chunks: tuple[Placement, ...] = ()


@dataclass(frozen=True)
class Block:
    """A run of segments and how it becomes groups."""

    first_seg: int
    last_seg: int
    mode: str  # the mode in effect (after fallbacks)
    parts: tuple[tuple[int, ...], ...]


def block_parts(space: Space, a: int, b: int, mode: str) -> Block:
    """Groups of segments ``a..b`` under ``mode`` (falling back when the partition is invalid)."""
    key = (a, b, mode)
    hit = space._blocks.get(key)
    if hit is not None:
        return hit
    g = space.graph
    segs = space.structure.segments
    ops = tuple(range(segs[a][0], segs[b][1] + 1))
    tries = {"whole": ("whole", "anchors"), "anchors": ("anchors", "whole"), "ops": ()}[mode]
    result = Block(a, b, "ops", tuple((i,) for i in ops))
    for m in tries:
        parts = [ops] if m == "whole" else anchor_partition(g, ops, space.structure.anchors)
        if partition_is_valid(g, parts):
            result = Block(a, b, m, tuple(parts))
            break
    space._blocks[key] = result
    return result


def read_blocks(space: Space, get: Reader) -> list[Block]:
    """The grouping: which segments form blocks (cut dims, min/max size) and their modes."""
    st = space.structure
    segs = st.segments
    opts = space.options
    lens = [b - a + 1 for a, b in segs]
    blocks: list[Block] = []
    a = 0
    size = lens[0]
    mode = MODES[get(space.d_mode[0])]
    for k in range(len(segs) - 1):
        nxt = lens[k + 1]
        if opts.max_group_ops is not None and size + nxt > opts.max_group_ops:
            cut = True
        elif size < opts.min_group_ops:
            cut = False
        else:
            cut = bool(space.dims[space.d_cut[k]].choices[get(space.d_cut[k])])
        if cut:
            blocks.append(block_parts(space, a, k, mode))
            a = k + 1
            size = nxt
            mode = MODES[get(space.d_mode[a])]
        else:
            size += nxt
    blocks.append(block_parts(space, a, len(segs) - 1, mode))
    return blocks


def _info(space: Space, graph: Graph, ops: tuple[int, ...], key: tuple[object, ...]) -> GroupInfo:
    hit = space._infos.get(key)
    if hit is None:
        hit = space._infos[key] = group_info(graph, ops)
    return hit


def core_perm(choice: str, n: int, producer: _G | None, samples: int, batch: int) -> tuple[int, ...]:
    """The core order of a group: a rotation, or the producer's order unshuffled (reuse)."""
    if choice != "reuse":
        k = int(choice[3:])
        return tuple((k + i) % n for i in range(n))
    if producer is None:
        return tuple(range(n))
    prod_samples = batch // producer.split
    r = samples // prod_samples if samples > prod_samples and samples % prod_samples == 0 else 1
    return unshuffle(producer.perm, r)


def chunk_bind(perm: tuple[int, ...], cores: int, parts: int, chunk: int,
               spread: bool) -> tuple[tuple[int, ...], ...]:
    """Core parts of one chunk: ``parts`` runs of ``cores // parts`` cores along ``perm``."""
    n = len(perm)
    shift = (chunk * cores) % n if spread else 0
    per = cores // parts
    return tuple(tuple(perm[(shift + j * per + m) % n] for m in range(per)) for j in range(parts))


def chunk_scopes(policy: str, split: int, wave: int) -> list[str]:
    """Scope of each chunk under a policy (see :data:`search_space._dims.SCOPE_POLICIES`)."""
    if policy in ("L1", "LLB", "DDR"):
        return [policy] * split
    out = []
    for c in range(split):
        pos = c % wave
        if policy == "LLB/2":
            out.append("LLB" if pos < wave // 2 else "L1")
        else:
            out.append(policy[:3] if pos < wave - 1 else "L1")
    return out


def repair_scope(scope: str, info: GroupInfo, spp: int, cpp: int, samples: int,
                 l1_bytes: int, llb_bytes: int) -> str:
    """One scope slower while the scope cannot work (see the module doc)."""
    for s in _SLOWER[scope]:
        if s not in info.scopes:
            continue
        if s == "L1" and not info.fits(spp, cpp, l1_bytes, True):
            continue
        if s == "LLB" and info.out_bytes(samples) > llb_bytes:
            continue
        return s
    return scope if scope in info.scopes or not info.scopes else info.scopes[0]


def decode_with(space: Space, get: Reader, overrides: dict[int, int] | None = None
                ) -> tuple[GraphSchedule, dict[tuple[str, str, int], int]]:
    """Build the schedule the reader's answers describe (see the module doc).

    Args:
        space: The space.
        get: The reader.
        overrides: Choice indices that replace the reader's answer for scope and
            transfer-scope parameters (the capacity repair's demotions).

    Returns:
        The schedule, and for each step node the parameter that sets its scope.
    """
    if overrides:
        base = get

        def get(d: int) -> int:
            v = base(d)
            return overrides.get(d, v)

    batch = space.batches[get(space.d_batch)] if space.d_batch >= 0 else space.batch
    graph = space.graph_for(batch)
    order = ORDERS[get(space.d_order)]
    lookahead = LOOKAHEADS[get(space.d_lookahead)] if order == "depth" else 0
    target = space.target
    n = target.chip.cores_per_cluster
    l1 = target.l1.data_bytes
    llb = target.llb.bytes
    dims = space.dims

    groups: list[_G] = []
    scope_dim: dict[tuple[str, str, int], int] = {}
    for blk in read_blocks(space, get):
        block_start = blk.parts[0][0] if blk.mode != "ops" else space.structure.segments[blk.first_seg][0]
        for k, ops in enumerate(blk.parts):
            info = _info(space, graph, ops, (batch, blk.first_seg, blk.last_seg, blk.mode, k))
            start = ops[0]
            slot = block_start if blk.mode == "ops" else start
            groups.append(_G(f"g{start}", start, slot, start, info))
    by_out = {gr.info.output: gr for gr in groups}
    deps = {gr.name: [by_out[t].name for t in gr.info.inputs if t in by_out] for gr in groups}
    by_name = {gr.name: gr for gr in groups}
    topo = group_topo_order([gr.name for gr in groups], {gr.name: gr.start for gr in groups}, deps)
    divs = space.divisors[batch]

    # pass 1: chunk shape and cores, producers first (reuse needs the producer's cores)
    for name in topo:
        gr = by_name[name]
        slot = space.slot[gr.slot]
        spp = 0
        if gr.info.separable and len(divs) > 1:
            want = dims[slot].choices[get(slot)]
            spp = max(d for d in divs if d <= want) if want >= 1 else 1
        cpp = dims[slot + 1].choices[get(slot + 1)]
        parts = dims[slot + 2].choices[get(slot + 2)]
        spp, cpp, parts = fit_chunk(gr.info, batch, divs, spp, cpp, parts, n, l1)
        gr.split, gr.cores, gr.parts = batch // (spp * parts), cpp * parts, parts
        perm_choice = dims[slot + 3].choices[get(slot + 3)]
        producer = next((by_name[d] for d in deps[name]), None)
        gr.perm = core_perm(perm_choice, n, producer, batch // gr.split, batch)
        if gr.cores < n and gr.split > 1:
            gr.spread = bool(dims[slot + 4].choices[get(slot + 4)])
        gr.xscope = TRANSFER_SCOPES[get(slot + 5)]

    # pass 2: scopes, by wave (the chunks one consumer chunk gathers)
    consumer: dict[str, _G] = {}
    for gr in groups:  # ascending start: the first consumer wins
        for d in deps[gr.name]:
            consumer.setdefault(d, gr)
    built: list[Group] = []
    for gr in groups:
        cons = consumer.get(gr.name)
        wave = gr.split // gcd(gr.split, cons.split) if cons is not None else gr.split
        policy = SCOPE_POLICIES[get(space.d_scope[gr.scope_at])]
        samples = batch // gr.split
        spp, cpp = samples // gr.parts, gr.cores // gr.parts
        chunks = []
        for c, want in enumerate(chunk_scopes(policy, gr.split, wave)):
            scope = repair_scope(want, gr.info, spp, cpp, samples, l1, llb)
            chunks.append(space.placement(scope, chunk_bind(gr.perm, gr.cores, gr.parts, c,
                                                            gr.spread)))
        gr.chunks = tuple(chunks)
        for c in range(gr.split):
            scope_dim[("g", gr.name, c)] = space.d_scope[gr.scope_at]
        built.append(Group(gr.name, gr.info.ops, gr.split, gr.chunks))

    transfers, cdeps, outs = derive_transfers(graph, built)
    transfers = _transfer_scopes(graph, transfers, outs, by_out, llb)
    for t in transfers:
        producer = by_out.get(t.tensor)
        if producer is not None:
            scope_dim[("t", t.name, 0)] = space.slot[producer.slot] + 5
    splits = {gr.name: gr.split for gr in groups}
    if order == "depth":
        nodes = depth_order(cdeps, outs, splits, lookahead)
    else:
        nodes = breadth_order(cdeps, topo, splits)
    steps = tuple(Step("group", nd[1], nd[2]) if nd[0] == "g" else Step("transfer", nd[1])
                  for nd in nodes)
    return GraphSchedule(batch=batch, groups=tuple(built), transfers=tuple(transfers), order=steps,
                         workload_key=graph.workload_key, source="search_space"), scope_dim


# Demotion of a scope policy when the memory named overflows (each step slower).
_L1_NEXT = {"L1": "LLB/2", "LLB/2": "LLB>L1", "LLB>L1": "LLB", "LLB": "DDR", "DDR>L1": "DDR"}
_LLB_NEXT = {"LLB": "DDR", "LLB>L1": "DDR>L1", "LLB/2": "DDR>L1"}
_X_L1_NEXT = {"auto": "LLB", "L1": "LLB", "LLB": "DDR"}
_X_LLB_NEXT = {"auto": "DDR", "LLB": "DDR"}


def decode_fitted(space: Space, get: Reader, max_rounds: int = 64) -> GraphSchedule:
    """Decode, then demote scope policies while the capacity model reports an overflow.

    Each round asks :func:`compiler.capacity.check_capacity` for the first
    overflow and moves the scope policy of one result occupying that memory one
    step slower (largest first; the overflowing step's own output last), so
    the result stays a point of the space. Stops when it fits, when nothing
    occupying the memory can be demoted (a working set that does not fit), or
    after ``max_rounds``.
    """
    from compiler.capacity import check_capacity

    overrides: dict[int, int] = {}
    schedule, scope_dim = decode_with(space, get)
    graph = space.graph_for(schedule.batch)
    free_choices = space.dims
    for _ in range(max_rounds):
        issue = check_capacity(graph, schedule, space.target)
        if issue is None:
            break
        llb = issue.core < 0
        order = schedule.order
        cands = [i for i, _ in sorted(issue.live_steps, key=lambda x: -x[1])]
        cands.append(issue.step_index)
        changed = False
        for i in cands:
            st = order[i]
            node = ("g", st.name, st.chunk) if st.kind == "group" else ("t", st.name, 0)
            d = scope_dim.get(node)
            if d is None:
                continue
            choices = free_choices[d].choices
            cur = choices[overrides.get(d, get(d))]
            if free_choices[d].kind == "scope":
                nxt = (_LLB_NEXT if llb else _L1_NEXT).get(cur)
            else:
                nxt = (_X_LLB_NEXT if llb else _X_L1_NEXT).get(cur)
            if nxt is None:
                continue
            overrides[d] = choices.index(nxt)
            changed = True
            break
        if not changed:
            break
        schedule, scope_dim = decode_with(space, get, overrides)
    return schedule


def fit_chunk(info: GroupInfo, batch: int, divs: Sequence[int], spp: int, cpp: int, parts: int,
              n: int, l1: int) -> tuple[int, int, int]:
    """(samples per part, cores per part, parts) of a chunk, made consistent and fitted.

    ``spp == 0`` means the group cannot be split: the whole batch is one chunk.
    Parts divide the cores left (``n // cpp``) and the samples; when the least
    working set does not fit one core, first fewer samples per part, then more
    cores per part (the guide: "more cores per image").
    """

    def shape(s: int, c: int) -> tuple[int, int, int]:
        if s == 0:
            p = gcd(gcd(parts, n // c), batch)
            return batch // p, c, p
        return s, c, gcd(gcd(parts, n // c), batch // s)

    first = shape(spp, cpp)
    if info.fits(first[0], first[1], l1, False):
        return first
    for c in (d for d in divisors_of(n) if d >= cpp):
        if spp == 0:
            for p in (d for d in divisors_of(gcd(n // c, batch)) if d >= first[2]):
                if info.fits(batch // p, c, l1, False):
                    return batch // p, c, p
            continue
        for s in (d for d in reversed(divs) if d <= spp):
            if info.fits(s, c, l1, False):
                return shape(s, c)
    return first


def divisors_of(n: int) -> list[int]:
    """Divisors of ``n``, ascending."""
    return [d for d in range(1, n + 1) if n % d == 0]


def transfer_scope(xscope: str, default: str, nbytes: float, llb: int) -> str:
    """Scope of a transfer of a group's output under its ``xscope`` parameter."""
    if xscope == "auto":
        return default
    if xscope == "LLB" and nbytes > llb:
        return "DDR"
    return xscope


def _transfer_scopes(graph: Graph, transfers: list[Transfer], outs: Sequence[tuple[str, str, int]],
                     by_out: dict[str, _G], llb: int) -> list[Transfer]:
    fixed = {nd[1] for nd in outs if nd[0] == "t"}
    out = []
    for t in transfers:
        gr = by_out.get(t.tensor)
        if gr is None or t.name in fixed or gr.xscope == "auto":
            out.append(t)
            continue
        nbytes = graph.nbytes(t.tensor) * len(t.dst_chunks) / t.dst_factor
        scope = transfer_scope(gr.xscope, t.placement.mem_scope, nbytes, llb)
        if scope == t.placement.mem_scope:
            out.append(t)
            continue
        out.append(Transfer(t.name, t.kind, t.tensor, t.src_factor, t.dst_factor, t.src_chunks,
                            t.dst_chunks, Placement(scope, t.placement.core_bind)))
    return out
