"""Projection: the parameters that decode to a given schedule, or why there are none.

It drives the same :class:`~search_space._build.Decoding` as decoding does, with
the schedule's own values: units, blocks and modes from the groups; per group its
samples, cores, parts, core order (rotation or reuse, made to agree along reuse
chains) and spread; the chunk DAG; the order (which of depth-first with
look-ahead 0-3 or breadth-first reproduces it); then, along the same capacity
walk, the scope policies and transfer-scope choices whose decoding gives every
step the schedule's scope. The caller decodes the result and compares structural
keys, so a projection is exact or refused, never approximate.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING

from compiler.derive import Node
from compiler.schedule import GraphSchedule, GroupSpec
from search_space._build import (
    Decoding,
    block_parts,
    chunk_bind,
    core_perm,
)
from search_space._dims import (
    GRANULARITIES,
    LOOKAHEADS,
    RANKS,
    SCOPE_POLICIES,
    TRANSFER_SCOPES,
    perm_choices,
)
from search_space._order import breadth_order, depth_order

if TYPE_CHECKING:
    from search_space._build import SpaceLike


class NotInSpace(Exception):
    """The schedule cannot be expressed; the message says why."""


_PREFER = {"samples": max, "parts": max, "cpp": min}


class _Assign:
    """A full-length assignment being built; conflicting writes are refusals.

    Slot parameters shared by several groups (one group per op, ties) are
    *offered* instead: the choices each group accepts are intersected, and when
    nothing is common the unrepaired value wins (most samples, fewest cores per
    part: decoding only ever lowers samples and raises cores). The caller's
    decode-and-compare settles the rest.
    """

    def __init__(self, space: SpaceLike) -> None:
        self.space = space
        self.values: dict[int, int] = {}  # free parameter -> choice index
        self.offers: dict[int, list[set[int]]] = {}

    def set(self, d: int, value: object, what: str) -> None:
        dim = self.space.dims[d]
        f = int(self.space.rep[d])  # tied parameters are one
        if value not in dim.choices:
            raise NotInSpace(f"{what}: {value!r} is not a choice of {dim.name} {list(dim.choices)}")
        idx = dim.choices.index(value)
        old = self.values.get(f)
        if old is not None and old != idx:
            tie = " (tied)" if self.space.options.ties else ""
            raise NotInSpace(f"{what}: {dim.name}{tie} would need both {dim.choices[old]!r} "
                             f"and {value!r}")
        self.values[f] = idx

    def offer(self, d: int, values: Sequence[object], what: str) -> None:
        dim = self.space.dims[d]
        idx = {dim.choices.index(v) for v in values if v in dim.choices}
        if not idx:
            raise NotInSpace(f"{what}: {values[0]!r} is not a choice of {dim.name} "
                             f"{list(dim.choices)}")
        self.offers.setdefault(int(self.space.rep[d]), []).append(idx)

    def resolve(self) -> None:
        for f, sets in self.offers.items():
            common = set.intersection(*sets)
            dim = self.space.free[f]
            if common:
                self.values[f] = min(common)
                continue
            pick = _PREFER.get(dim.kind)
            every = set.union(*sets)
            if pick is None:
                self.values[f] = min(sets[0])
            else:
                self.values[f] = dim.choices.index(pick(dim.choices[i] for i in every))


def project(space: SpaceLike, s: GraphSchedule, nearest: bool = False) -> list[dict[int, int]]:
    """Assignments of free parameters (one per matching order) that may decode to ``s``.

    With ``nearest``, a step whose scope no remaining choice of its group's scope policy
    (or transfer scope) gives along the capacity walk does not refuse the projection:
    the choices whose scope is nearest it (L1, LLB, DDR in that order; the slower of two
    as near) are kept, and the walk goes on with that scope. The assignments then
    decode to ``s`` with the scopes the space's capacity walk allows where ``s``'s
    do not fit (a schedule made for a larger memory: :meth:`Space.project_nearest`).

    Raises:
        NotInSpace: the groups, bindings, order, scopes or transfers cannot be expressed.
    """
    if s.batch not in space.batches:
        raise NotInSpace(f"batch {s.batch} is not a batch of this space {list(space.batches)}")
    graph = space.graph_for(s.batch)
    if s.workload_key and s.workload_key != graph.workload_key:
        raise NotInSpace("the schedule was made for another model (workload key differs)")
    out: list[dict[int, int]] = []
    first: NotInSpace | None = None
    for kind in ("depth", "breadth"):
        try:
            out.extend(_project_for(space, s, kind, nearest))
        except NotInSpace as exc:
            first = first or exc
    if not out:
        assert first is not None
        raise first
    return out


def _project_for(space: SpaceLike, s: GraphSchedule, kind: str,
                 nearest: bool = False) -> list[dict[int, int]]:
    asg = _Assign(space)
    if space.d_batch >= 0:
        asg.set(space.d_batch, s.batch, "batch")
    dec = Decoding(space, s.batch, kind, 0)
    groups = sorted(s.groups, key=lambda g: min(g.ops) if g.ops else -1)
    target = _blocks(space, asg, dec, groups)
    _shapes(space, asg, dec, target)
    dec.derive()
    lookaheads = _orders(dec, s, kind)
    dec.lookahead = lookaheads[0]
    asg.set(space.d_order, kind, "order")
    _scopes(space, asg, dec, s, target, nearest)
    asg.resolve()
    result = []
    for la in lookaheads:
        values = dict(asg.values)
        values[int(space.rep[space.d_lookahead])] = LOOKAHEADS.index(la)
        result.append(values)
    return result


def _blocks(space: SpaceLike, asg: _Assign, dec: Decoding, groups: list[GroupSpec]) -> dict[str, GroupSpec]:
    """Blocks and modes from the groups: sets granularity, cut ranks and modes, adds the
    group records to ``dec``; returns the schedule's group by record name.

    Every *unit* (the shortest run of segments no group crosses) starts as its own
    block; with ties, a cut point whose tied twin must stay inside a block stops
    being a boundary too, merging the two blocks around it (when one mode gives
    their groups).
    """
    st = space.structure
    segs = st.segments
    n = len(space.graph.ops)
    owner: dict[int, GroupSpec] = {}
    for g in groups:
        for i in g.ops:
            if i >= n:
                raise NotInSpace(f"group {g.name}: op {i} does not exist")
            owner[i] = g
    missing = [i for i in range(n) if i not in owner]
    if missing:
        raise NotInSpace(f"op {missing[0]} is in no group")
    starts: list[int] = []  # first segment of every block
    k = 0
    while k < len(segs):
        b = _closure(st.seg_of_op, segs, owner, k)
        if b is None:
            g = owner[segs[k][0]]
            raise NotInSpace(f"group {g.name} crosses the cut point before op {segs[k][0]}")
        starts.append(k)
        k = b + 1
    modes_of = space.dims[space.d_mode[0]].choices

    def block_end(i: int) -> int:
        return (starts[i + 1] if i + 1 < len(starts) else len(segs)) - 1

    def modes(first: int, last: int) -> list[str]:
        want = {tuple(sorted(owner[i].ops)) for i in range(segs[first][0], segs[last][1] + 1)}
        return [m for m in modes_of if set(block_parts(space, first, last, m).parts) == want]

    ok = [modes(s0, block_end(i)) for i, s0 in enumerate(starts)]
    for i, s0 in enumerate(starts):
        if not ok[i]:
            g = owner[segs[s0][0]]
            raise NotInSpace(
                f"group {g.name} (ops {min(g.ops)}..{max(g.ops)}) is neither whole segments "
                "between cut points, the anchor partition of a block, nor one op")
    if space.options.ties:
        _untie_cuts(space, starts, ok, modes, block_end)
    target: dict[str, GroupSpec] = {}
    boundary: dict[int, bool] = {}
    for i, s0 in enumerate(starts):
        last = block_end(i)
        asg.offer(space.d_mode[s0], ok[i], f"block at op {segs[s0][0]}")
        blk = block_parts(space, s0, last, ok[i][0])
        for kk in range(s0, last):
            boundary[kk] = False
        if last + 1 < len(segs):
            boundary[last] = True
        for idx, part in enumerate(blk.parts):
            name = f"g{part[0]}"
            dec.add_group(name, part[0], blk.slots[idx], dec.info(blk, idx))
            target[name] = owner[part[0]]
    dec.link()
    if space.d_gran >= 0:
        if any(boundary.values()):
            asg.set(space.d_gran, GRANULARITIES[0], "grouping")
            for kk, on in boundary.items():
                asg.set(space.d_cut[kk], 0 if on else RANKS - 1, f"cut point after op {segs[kk][1]}")
        else:
            asg.set(space.d_gran, "0", "grouping")
    return target


def _untie_cuts(space: SpaceLike, starts: list[int], ok: list[list[str]],
                modes: Callable[[int, int], list[str]], block_end: Callable[[int], int]) -> None:
    """Merge blocks (in place) until tied cut points agree on being boundaries and the
    blocks that start at tied segments have a mode in common.

    (A unit that a sample's block began earlier, in a mode its tied twin's block does
    not share, is merged back into the block before it.)
    """
    rep = space.rep
    while True:
        inside: set[int] = set()
        for i, s0 in enumerate(starts):
            for kk in range(s0, block_end(i)):
                inside.add(int(rep[space.d_cut[kk]]))
        merge = [i for i in range(1, len(starts))
                 if int(rep[space.d_cut[starts[i] - 1]]) in inside]
        if not merge:
            span = _mode_conflict(space, starts, ok, modes, block_end)
            if span is None:
                return
            j, i = span
            ok[j:i + 1] = [modes(starts[j], block_end(i))]
            del starts[j + 1:i + 1]
            continue
        i = merge[0]
        first, last = starts[i - 1], block_end(i)
        both = modes(first, last)
        if not both:
            raise NotInSpace(f"cut point after op {space.structure.segments[starts[i] - 1][1]} "
                             "(tied) is a boundary here and not where its twin is")
        del starts[i]
        ok[i - 1:i + 1] = [both]


def _mode_conflict(space: SpaceLike, starts: list[int], ok: list[list[str]],
                   modes: Callable[[int, int], list[str]],
                   block_end: Callable[[int], int]) -> tuple[int, int] | None:
    """Blocks ``j..i`` to merge: block ``i``'s mode is shared by no block at a tied
    segment, and it merges with the fewest blocks before it that one mode gives;
    None when the tied modes agree (or no such merge exists)."""
    rep = space.rep
    by_rep: dict[int, list[int]] = {}
    for i, s0 in enumerate(starts):
        by_rep.setdefault(int(rep[space.d_mode[s0]]), []).append(i)
    for idxs in by_rep.values():
        if len(idxs) < 2 or set.intersection(*(set(ok[i]) for i in idxs)):
            continue
        for i in idxs:
            for j in range(i - 1, -1, -1):
                if modes(starts[j], block_end(i)):
                    return j, i
    return None


def _closure(seg_of_op: tuple[int, ...], segs: tuple[tuple[int, int], ...],
             owner: dict[int, GroupSpec], k: int) -> int | None:
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


def _shapes(space: SpaceLike, asg: _Assign, dec: Decoding, target: dict[str, GroupSpec]) -> None:
    """Offers for every group's shape and binding; records the schedule's in ``dec``."""
    batch, n, divs = dec.batch, dec.n, dec.divs
    alts: dict[str, list[tuple[int, ...]]] = {}
    match_of: dict[str, list[tuple[str, tuple[int, ...], bool, tuple[int, ...] | None]]] = {}
    for name in dec.topo:
        r = dec.by_name[name]
        g = target[name]
        slot = space.slot[r.slot]
        what = f"group {g.name}"
        if len(g.chunks) != g.split or not g.chunks:
            raise NotInSpace(f"{what}: {len(g.chunks)} chunk placements for split {g.split}")
        if g.split != 1 and not r.info.separable:
            raise NotInSpace(f"{what}: split {g.split} of a group that cannot be split")
        if batch % g.split:
            raise NotInSpace(f"{what}: split {g.split} does not divide the batch {batch}")
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
            asg.offer(slot, [spp], what)
        asg.offer(slot + 1, [cpp], what)
        asg.offer(slot + 2, [parts], what)
        dec.set_shape(r, spp, cpp, parts)
        producer = dec.producer(r)
        spreads = (False, True) if cores < n and g.split > 1 else (False,)
        # the producer's full core order is known only up to its choice: try each it allows
        prods: list[object] = [None] if producer is None else [
            SimpleNamespace(split=producer.split, perm=pi) for pi in alts[producer.name]]
        matches = []  # (choice, core order, spread, the producer's order it reuses)
        for choice in perm_choices(n):
            for prod in prods if choice == "reuse" else prods[:1]:
                pi = core_perm(choice, n, prod, samples, batch)  # type: ignore[arg-type]
                for sp in spreads:
                    if all(c.core_bind == chunk_bind(pi, cores, parts, k, sp)
                           for k, c in enumerate(g.chunks)):
                        matches.append((choice, pi, sp, getattr(prod, "perm", None)))
                        break
        if not matches:
            raise NotInSpace(f"{what}: core binding {[list(p) for p in bind0]} is neither a "
                             "rotation or interleaved order of the cluster nor a reuse of its "
                             "producer's cores")
        asg.offer(slot + 3, [m[0] for m in matches], what)
        dec.set_binding(r, matches[0][1], matches[0][2])
        alts[name] = list(dict.fromkeys(m[1] for m in matches))
        match_of[name] = matches
        if len(spreads) > 1:
            asg.offer(slot + 4, sorted({int(m[2]) for m in matches}), what)
    _pin_reuse(space, asg, dec, match_of)


def _pin_reuse(space: SpaceLike, asg: _Assign, dec: Decoding,
               match_of: dict[str, list[tuple[str, tuple[int, ...], bool,
                                              tuple[int, ...] | None]]]) -> None:
    """Narrow every group's core-order choices until they agree along ``reuse`` chains.

    A binding fixes only the cores a group uses; the rest of its core order is what a
    consumer that reuses its cores unshuffles. So each group keeps the orders still
    possible: a reuse match needs its producer's order to be possible, and a group
    that can only reuse pins its producer to the orders that reuse follows. The
    choices left are offered to the unit's slot (shared with the unit's other
    groups) until nothing changes.
    """
    dims = space.dims
    possible = {name: {m[1] for m in ms} for name, ms in match_of.items()}
    changed = True
    while changed:
        changed = False
        for name, matches in match_of.items():
            r = dec.by_name[name]
            producer = dec.producer(r)
            d = space.slot[r.slot] + 3
            f = int(space.rep[d])
            choices = {dims[d].choices[i] for i in set.intersection(*asg.offers[f])}
            prod_ok = possible[producer.name] if producer is not None else set()
            ok = [m for m in matches if m[0] in choices and m[1] in possible[name]
                  and (m[0] != "reuse" or producer is None or m[3] in prod_ok)]
            orders = {m[1] for m in ok}
            if orders != possible[name]:
                possible[name] = orders
                changed = True
            picked = {dims[d].choices.index(m[0]) for m in ok}
            if picked and not set.intersection(*asg.offers[f]) <= picked:
                asg.offers[f].append(picked)
                changed = True
            if producer is not None and ok and all(m[0] == "reuse" for m in ok):
                need = {m[3] for m in ok if m[3] is not None}
                if not possible[producer.name] <= need:
                    possible[producer.name] &= need
                    changed = True


def _orders(dec: Decoding, s: GraphSchedule, kind: str) -> list[int]:
    """Look-aheads (0 for breadth-first) whose order of ``kind`` is the schedule's."""
    rename = {g.name: f"g{min(g.ops)}" for g in s.groups}
    want: list[Node] = [("g", rename.get(st.name, st.name), st.chunk) if st.kind == "group"
                        else ("t", st.name, 0) for st in s.order]
    splits = {gr.name: gr.split for gr in dec.groups}
    if kind == "breadth":
        if breadth_order(dec.deps, dec.topo, splits) == want:
            return [0]
    else:
        found = [la for la in LOOKAHEADS if depth_order(dec.deps, dec.outs, splits, la) == want]
        if found:
            return found
    raise NotInSpace("the order is neither depth-first (look-ahead 0-3) nor breadth-first "
                     "over the chunk DAG")


_SPEED = {"L1": 0, "LLB": 1, "DDR": 2}


def _nearness(got: str, want: str) -> tuple[int, int]:
    """How far scope ``got`` is from ``want`` (the slower of two as far ranks first)."""
    a, b = _SPEED.get(got, 2), _SPEED.get(want, 2)
    return abs(a - b), -a


def _scopes(space: SpaceLike, asg: _Assign, dec: Decoding, s: GraphSchedule,
            target: dict[str, GroupSpec], nearest: bool = False) -> None:
    """Offers for every group's scope policy and transfer scope: the choices whose
    decoding gives each step the schedule's scope, along the same capacity walk
    (with ``nearest``, where none does, those giving the nearest scope: :func:`project`)."""
    given = {t.name: t for t in s.transfers}
    derived = dec.transfer_by_name
    for name in given:
        if name not in derived:
            raise NotInSpace(f"transfer {name} is not one these groups need")
    for name, t in derived.items():
        got = given.get(name)
        if got is None:
            raise NotInSpace(f"transfer {name} ({t.kind} of {t.tensor}) is missing")
        if got.placement.core_bind != t.placement.core_bind:
            raise NotInSpace(f"transfer {name}: binding "
                             f"{[list(p) for p in got.placement.core_bind]} is not its consumer's")
        if name in dec.fixed or dec.by_out.get(t.tensor) is None:
            if got.placement.mem_scope != t.placement.mem_scope:
                raise NotInSpace(f"transfer {name}: {got.placement.mem_scope} where the space "
                                 f"keeps {t.placement.mem_scope} (model input or output)")
    want: dict[Node, str] = {("t", t.name, 0): t.placement.mem_scope for t in s.transfers}
    for name, g in target.items():
        for c, p in enumerate(g.chunks):
            want[("g", name, c)] = p.mem_scope
    dec.start_walk()
    kept: dict[str, set[str]] = {}
    dims: dict[str, int] = {}
    for k, node in enumerate(dec.nodes):
        kind, owner = dec.step_kind(k)
        scope = want[node]
        if owner is None:
            dec.commit(k, scope)
            continue
        key = owner.name if kind == "g" else "t:" + owner.name
        if key not in kept:
            kept[key] = set(SCOPE_POLICIES if kind == "g" else TRANSFER_SCOPES)
            dims[key] = space.d_scope[owner.scope_at] if kind == "g" else space.slot[owner.slot] + 5
        outcome: dict[str, str] = {}
        keep = set()
        for choice in kept[key]:
            w = dec.want(k, choice)
            if w not in outcome:
                outcome[w] = dec.pick(k, w)
            if outcome[w] == scope:
                keep.add(choice)
        if not keep and nearest and outcome:
            off = {c: _nearness(outcome[dec.want(k, c)], scope) for c in kept[key]}
            keep = {c for c in kept[key] if off[c] == min(off.values())}
            scope = outcome[dec.want(k, min(keep))]
        if not keep:
            what = (f"group {target[owner.name].name} chunk {node[2]}" if kind == "g"
                    else f"transfer {node[1]}")
            raise NotInSpace(f"{what}: {scope} follows no remaining "
                             f"{'scope policy' if kind == 'g' else 'transfer scope'} "
                             f"(decoding would give {sorted(set(outcome.values()))})")
        kept[key] = keep
        dec.commit(k, scope)
    for key, keep in kept.items():
        d = dims[key]
        asg.offer(d, [c for c in space.dims[d].choices if c in keep], key)
