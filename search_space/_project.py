"""Projection: the parameters that decode to a given schedule, or why there are none.

The walk mirrors :func:`search_space._build.decode_with`: blocks of segments and
their mode from the groups, then per group its split, cores, parts, core order
(rotation or reuse), spread and scope policy, then the transfers' scopes. The
caller decodes the result and compares structural keys, so a projection is
exact or refused, never approximate.
"""

from __future__ import annotations

from math import gcd
from typing import TYPE_CHECKING

from compiler.plan import derive_transfers
from compiler.schedule import GraphSchedule, Group
from search_space._build import (
    _G,
    block_parts,
    chunk_bind,
    chunk_scopes,
    core_perm,
    repair_scope,
    transfer_scope,
)
from search_space._dims import LOOKAHEADS, ORDERS, SCOPE_POLICIES, TRANSFER_SCOPES, perm_choices
from search_space._order import group_topo_order
from search_space._structure import group_info

if TYPE_CHECKING:
    from search_space._space import Space

ORDER_CANDIDATES = (("depth", 0), ("breadth", 0), ("depth", 1), ("depth", 2), ("depth", 3))


class NotInSpace(Exception):
    """The schedule cannot be expressed; the message says why."""


class _Assign:
    """A full-length assignment being built; conflicting writes are refusals."""

    def __init__(self, space: Space) -> None:
        self.space = space
        self.values: dict[int, int] = {}

    def set(self, d: int, value: object, what: str) -> None:
        dim = self.space.dims[d]
        if value not in dim.choices:
            raise NotInSpace(f"{what}: {value!r} is not a choice of {dim.name} {list(dim.choices)}")
        idx = dim.choices.index(value)
        old = self.values.get(d)
        if old is not None and old != idx:
            raise NotInSpace(f"{what}: {dim.name} would need both {dim.choices[old]!r} and {value!r}")
        self.values[d] = idx


def project(space: Space, s: GraphSchedule) -> list[dict[int, int]]:
    """Full assignments (one per order candidate) that may decode to ``s``.

    Raises:
        NotInSpace: the groups, bindings, scopes or transfers cannot be expressed.
    """
    if s.batch not in space.batches:
        raise NotInSpace(f"batch {s.batch} is not a batch of this space {list(space.batches)}")
    graph = space.graph_for(s.batch)
    if s.workload_key and s.workload_key != graph.workload_key:
        raise NotInSpace("the schedule was made for another model (workload key differs)")
    asg = _Assign(space)
    if space.d_batch >= 0:
        asg.set(space.d_batch, s.batch, "batch")
    groups = sorted(s.groups, key=lambda g: min(g.ops) if g.ops else -1)
    recs = _blocks(space, asg, groups)
    _groups(space, asg, s, recs)
    out = []
    for order, la in ORDER_CANDIDATES:
        values = dict(asg.values)
        values[space.d_order] = ORDERS.index(order)
        values[space.d_lookahead] = LOOKAHEADS.index(la)
        out.append(values)
    return out


def _blocks(space: Space, asg: _Assign, groups: list[Group]) -> list[tuple[_G, Group]]:
    """Blocks and modes from the groups; the decode records of every group."""
    st = space.structure
    segs = st.segments
    n = len(space.graph.ops)
    owner: dict[int, Group] = {}
    for g in groups:
        for i in g.ops:
            if i >= n:
                raise NotInSpace(f"group {g.name}: op {i} does not exist")
            owner[i] = g
    missing = [i for i in range(n) if i not in owner]
    if missing:
        raise NotInSpace(f"op {missing[0]} is in no group")
    recs: list[tuple[_G, Group]] = []
    k = 0
    while k < len(segs):
        a_op = segs[k][0]
        first = owner[a_op]
        ops = tuple(sorted(first.ops))
        blk = None
        last_seg = st.seg_of_op[ops[-1]]
        if ops[0] == a_op and ops[-1] - ops[0] + 1 == len(ops) and segs[last_seg][1] == ops[-1]:
            cand = block_parts(space, k, last_seg, "whole")
            if cand.parts == (ops,):
                blk, mode = cand, "whole"
        if blk is None:
            b = _closure(st.seg_of_op, segs, owner, k)
            if b is not None:
                cand = block_parts(space, k, b, "anchors")
                want = {tuple(sorted(g.ops)) for g in {id(owner[i]): owner[i]
                                                        for i in range(a_op, segs[b][1] + 1)}.values()}
                if set(cand.parts) == want:
                    blk, mode = cand, "anchors"
        if blk is None and all(len(owner[i].ops) == 1 for i in range(a_op, segs[k][1] + 1)):
            blk, mode = block_parts(space, k, k, "ops"), "ops"
        if blk is None:
            raise NotInSpace(
                f"group {first.name} (ops {ops[0]}..{ops[-1]}) is neither whole segments between "
                "single-tensor cut points, the anchor partition of a block, nor one op")
        asg.set(space.d_mode[k], mode, f"block at op {a_op}")
        for kk in range(k, blk.last_seg):
            asg.set(space.d_cut[kk], 0, f"block at op {a_op}")
        if blk.last_seg + 1 < len(segs):
            asg.set(space.d_cut[blk.last_seg], 1, f"block at op {a_op}")
        for part in blk.parts:
            g = owner[part[0]]
            slot = segs[k][0] if blk.mode == "ops" else part[0]
            recs.append((_G(g.name, part[0], slot, part[0], group_info(space.graph_for(
                _batch_of(space, asg)), part)), g))
        k = blk.last_seg + 1
    return recs


def _batch_of(space: Space, asg: _Assign) -> int:
    if space.d_batch < 0:
        return space.batch
    return int(space.dims[space.d_batch].choices[asg.values[space.d_batch]])


def _closure(seg_of_op: tuple[int, ...], segs: tuple[tuple[int, int], ...],
             owner: dict[int, Group], k: int) -> int | None:
    """Smallest last segment b such that the groups touching segments k..b stay inside them."""
    lo = segs[k][0]
    b = k
    while True:
        hi = segs[b][1]
        nb = b
        for i in range(lo, hi + 1):
            ops = owner[i].ops
            if min(ops) < lo:
                return None
            nb = max(nb, seg_of_op[max(ops)])
        if nb == b:
            return b
        b = nb


def _groups(space: Space, asg: _Assign, s: GraphSchedule, recs: list[tuple[_G, Group]]) -> None:
    batch = _batch_of(space, asg)
    graph = space.graph_for(batch)
    target = space.target
    n = target.chip.cores_per_cluster
    l1, llb = target.l1.data_bytes, target.llb.bytes
    divs = space.divisors[batch]
    by_out = {r.info.output: r for r, _ in recs}
    deps = {r.name: [by_out[t].name for t in r.info.inputs if t in by_out] for r, _ in recs}
    by_name = {r.name: (r, g) for r, g in recs}
    topo = group_topo_order(list(by_name), {r.name: r.start for r, _ in recs}, deps)
    for name in topo:
        r, g = by_name[name]
        slot = space.slot[r.slot]
        what = f"group {g.name}"
        if len(g.chunks) != g.split or not g.chunks:
            raise NotInSpace(f"{what}: {len(g.chunks)} chunk placements for split {g.split}")
        if g.split != 1 and not r.info.separable:
            raise NotInSpace(f"{what}: split {g.split} of a group that cannot be split")
        bind0 = g.chunks[0].core_bind
        cores = len(g.chunks[0].cores)
        parts = len(bind0)
        cpp = len(bind0[0])
        if any(len(p) != cpp for p in bind0) or cores != parts * cpp:
            raise NotInSpace(f"{what}: core parts of unequal size {[list(p) for p in bind0]}")
        samples = batch // g.split
        if samples % parts:
            raise NotInSpace(f"{what}: {parts} parts do not divide {samples} samples")
        spp = samples // parts
        if r.info.separable and len(divs) > 1:
            asg.set(slot, spp, what)
        asg.set(slot + 1, cpp, what)
        asg.set(slot + 2, parts, what)
        r.split, r.cores, r.parts = g.split, cores, parts
        producer = next((by_name[d][0] for d in deps[name]), None)
        spreads = (False, True) if cores < n and g.split > 1 else (False,)
        found = None
        for choice in perm_choices(n):
            pi = core_perm(choice, n, producer, batch // g.split, batch)
            for sp in spreads:
                if all(c.core_bind == chunk_bind(pi, cores, parts, k, sp)
                       for k, c in enumerate(g.chunks)):
                    found = (choice, pi, sp)
                    break
            if found:
                break
        if found is None:
            raise NotInSpace(f"{what}: core binding {[list(p) for p in bind0]} is neither a "
                             "rotation of the cluster nor a reuse of its producer's cores")
        asg.set(slot + 3, found[0], what)
        r.perm, r.spread = found[1], found[2]
        if len(spreads) > 1:
            asg.set(slot + 4, int(found[2]), what)
    _scopes(space, asg, recs, deps, batch, l1, llb)
    _xscopes(space, asg, s, graph, recs, by_out, llb)


def _scopes(space: Space, asg: _Assign, recs: list[tuple[_G, Group]], deps: dict[str, list[str]],
            batch: int, l1: int, llb: int) -> None:
    consumer: dict[str, _G] = {}
    for r, _ in recs:
        for d in deps[r.name]:
            consumer.setdefault(d, r)
    for r, g in recs:
        cons = consumer.get(r.name)
        wave = r.split // gcd(r.split, cons.split) if cons is not None else r.split
        samples = batch // r.split
        spp, cpp = samples // r.parts, r.cores // r.parts
        want = [c.mem_scope for c in g.chunks]
        for policy in SCOPE_POLICIES:
            got = [repair_scope(x, r.info, spp, cpp, samples, l1, llb)
                   for x in chunk_scopes(policy, r.split, wave)]
            if got == want:
                asg.set(space.d_scope[r.scope_at], policy, f"group {g.name}")
                break
        else:
            raise NotInSpace(f"group {g.name}: chunk scopes {want} follow no scope policy "
                             f"({', '.join(SCOPE_POLICIES)}) for waves of {wave}")


def _xscopes(space: Space, asg: _Assign, s: GraphSchedule, graph: object,
             recs: list[tuple[_G, Group]], by_out: dict[str, _G], llb: int) -> None:
    from compiler.graph import Graph

    assert isinstance(graph, Graph)
    groups = [g for _, g in recs]
    defaults, _, outs = derive_transfers(graph, groups)
    default = {t.name: t for t in defaults}
    fixed = {nd[1] for nd in outs if nd[0] == "t"}
    per_group: dict[str, list[tuple[str, str, float]]] = {}
    for t in s.transfers:
        d = default.get(t.name)
        if d is None:
            raise NotInSpace(f"transfer {t.name} is not one these groups need")
        if t.placement.core_bind != d.placement.core_bind:
            raise NotInSpace(f"transfer {t.name}: binding {[list(p) for p in t.placement.core_bind]}"
                             " is not its consumer's")
        r = by_out.get(t.tensor)
        if r is None or t.name in fixed:
            if t.placement.mem_scope != d.placement.mem_scope:
                raise NotInSpace(f"transfer {t.name}: {t.placement.mem_scope} where the space "
                                 f"keeps {d.placement.mem_scope} (model input or output)")
            continue
        nbytes = graph.nbytes(t.tensor) * len(t.dst_chunks) / t.dst_factor
        per_group.setdefault(r.name, []).append((t.placement.mem_scope, d.placement.mem_scope,
                                                 nbytes))
    for r, g in recs:
        items = per_group.get(r.name)
        if not items:
            continue
        for xs in TRANSFER_SCOPES:
            if all(transfer_scope(xs, dflt, nb, llb) == got for got, dflt, nb in items):
                asg.set(space.slot[r.slot] + 5, xs, f"group {g.name}")
                break
        else:
            raise NotInSpace(f"group {g.name}: its transfers' scopes {[x[0] for x in items]} "
                             "differ from one another")
