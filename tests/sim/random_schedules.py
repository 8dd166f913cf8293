"""Random and mutated GraphSchedules: every move the schedule format can express.

Used by the property tests (``tests/sim/test_properties.py``, driven by a
hypothesis-controlled ``random.Random``) and by the simulator attack
(``bench/sim_attack.py``). Moves:

* regroup: cut the topological order anywhere (or only where one tensor
  crosses), split a group at an op, merge a group with its neighbour, move a
  boundary op across, merge two arbitrary groups (op sets);
* split factors: any divisor of the batch, 1 and the batch itself;
* placements: any scope, any number of parts dividing the samples, uneven parts,
  any subset of cores, parts of one chunk overlapping other chunks' cores;
* order: depth-first, breadth-first, a random topological order;
* transfer placements;
* malformed values (``bad=True``): a split that does not divide the batch, a
  missing core, a repeated core, empty parts, a shuffled order.

A move may produce a schedule ``make_schedule`` refuses (``ScheduleError``) or
one the simulator rejects (``SimError``); both are expected outcomes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from compiler.derive import derive_transfers, group_io
from compiler.errors import ScheduleError
from compiler.graph import Graph
from compiler.schedule import SCOPES, GraphSchedule, GroupSpec, Placement, Step, make_schedule

__all__ = [
    "MOVES",
    "chain",
    "mutate",
    "random_groups",
    "random_placement",
    "random_schedule",
    "single_tensor_cuts",
]

Node = tuple[str, str, int]


def single_tensor_cuts(graph: Graph) -> list[int]:
    """Op indices ``i`` such that exactly one tensor made at ops ``<= i`` is read later."""
    last_use: dict[str, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            last_use[t] = op.index
    for t in graph.outputs:
        last_use[t] = len(graph.ops)
    live: set[str] = set()
    cuts = []
    for op in graph.ops[:-1]:
        live.add(op.output)
        live = {t for t in live if last_use.get(t, -1) > op.index}
        if len(live) == 1:
            cuts.append(op.index)
    return cuts


def divisors(n: int) -> list[int]:
    """Divisors of ``n`` in increasing order."""
    return [d for d in range(1, n + 1) if n % d == 0]


def random_placement(rng: random.Random, samples: int, cores: int, bad: bool = False,
                     scope: str | None = None) -> Placement:
    """A placement of ``samples`` samples on a random subset of ``cores`` cores.

    Parts get random (uneven) core counts; the number of parts divides ``samples``.
    With ``bad``, sometimes a malformed one (missing or repeated core, empty part,
    parts not dividing the samples).
    """
    scope = scope or rng.choice(SCOPES)
    if bad and rng.random() < 0.3:
        kind = rng.randrange(4)
        if kind == 0:
            return Placement(scope, ((cores,),))  # a core that does not exist
        if kind == 1:
            return Placement(scope, ((0, 0),))
        if kind == 2:
            return Placement(scope, ((),))
        return Placement(scope, tuple((c,) for c in range(min(cores, samples + 1))))
    # a bad schedule's split may exceed the batch (0 samples a chunk): one part then
    ps = [p for p in divisors(samples) if p <= cores] or [1]
    p = rng.choice(ps) if rng.random() < 0.7 else max(ps)
    m = rng.randint(p, cores) if rng.random() < 0.7 else cores
    chosen = rng.sample(range(cores), m)
    cuts = sorted(rng.sample(range(1, m), p - 1)) if p > 1 else []
    bounds = [0, *cuts, m]
    parts = tuple(tuple(chosen[bounds[i]:bounds[i + 1]]) for i in range(p))
    return Placement(scope, parts)


def random_groups(graph: Graph, rng: random.Random, cores: int, bad: bool = False,
                  max_groups: int = 12, max_split: int | None = None) -> list[GroupSpec]:
    """Contiguous op ranges with random splits (at most ``max_split``) and placements."""
    n = len(graph.ops)
    pool = single_tensor_cuts(graph)
    if not pool or rng.random() < 0.25:
        pool = list(range(n - 1))
    k = rng.randint(0, min(max_groups - 1, len(pool)))
    ends = [*sorted(rng.sample(pool, k)), n - 1]
    groups = []
    start = 0
    for i, end in enumerate(ends):
        ops = tuple(range(start, end + 1))
        start = end + 1
        groups.append(_random_group(graph, rng, f"g{i}", ops, cores, bad, max_split=max_split))
    return groups


def _separable(graph: Graph, ops: Sequence[int]) -> bool:
    if not all(graph.ops[i].batch_separable for i in ops):
        return False
    outs = group_io(graph, tuple(ops)).outputs
    return len(outs) == 1 and graph.tensors[outs[0]].batched


def _random_group(graph: Graph, rng: random.Random, name: str, ops: tuple[int, ...],
                  cores: int, bad: bool, split: int | None = None,
                  max_split: int | None = None) -> GroupSpec:
    b = graph.batch
    if split is None:
        options = divisors(b) if _separable(graph, ops) else [1]
        options = [d for d in options if max_split is None or d <= max_split]
        split = rng.choice(options)
        if rng.random() < 0.2:
            split = rng.choice([1, max(options)])
        if bad and rng.random() < 0.1:
            split = rng.choice([0, b + 1, 3 if b % 3 else b * 2])
    samples = b // split if split > 0 else b
    chunks = tuple(random_placement(rng, max(samples, 1), cores, bad)
                   for _ in range(max(split, 1)))
    return GroupSpec(name, ops, split, chunks)


def random_order(graph: Graph, groups: Sequence[GroupSpec], rng: random.Random) -> list[Step]:
    """A random topological order of the chunk DAG (transfers included)."""
    _, deps, _ = derive_transfers(graph, groups)
    missing = {n: len(set(ds)) for n, ds in deps.items()}
    users: dict[Node, list[Node]] = {}
    for n, ds in deps.items():
        for d in set(ds):
            users.setdefault(d, []).append(n)
    steps = []
    ready = [n for n, k in missing.items() if not k]
    while ready:
        i = rng.randrange(len(ready))
        ready[i], ready[-1] = ready[-1], ready[i]
        node = ready.pop()
        steps.append(Step("group", node[1], node[2]) if node[0] == "g" else Step("transfer", node[1]))
        for m in users.get(node, ()):
            missing[m] -= 1
            if not missing[m]:
                ready.append(m)
    return steps


def build(graph: Graph, groups: Sequence[GroupSpec], rng: random.Random, cores: int,
          order: str | None = None, bad: bool = False,
          keep: dict[str, Placement] | None = None) -> GraphSchedule:
    """``make_schedule`` with a random order and random transfer placements.

    Raises:
        ScheduleError: the groups are not a schedule (multi-output group, cycle, ...).
    """
    transfers, _, _ = derive_transfers(graph, groups)
    tp: dict[str, Placement] = {}
    for t in transfers:
        if keep and t.name in keep and rng.random() < 0.8:
            tp[t.name] = keep[t.name]
        elif rng.random() < 0.5:
            samples = graph.batch // max(t.dst_factor, 1)
            tp[t.name] = random_placement(rng, max(samples, 1), cores, bad)
    how = order or rng.choice(["depth", "depth", "breadth", "random"])
    steps: str | list[Step] = how
    if how == "random":
        steps = random_order(graph, groups, rng)
        if bad and rng.random() < 0.2 and len(steps) > 1:
            i = rng.randrange(len(steps) - 1)
            steps[i], steps[i + 1] = steps[i + 1], steps[i]
    return make_schedule(graph, groups, order=steps, transfer_placements=tp, source="random")


def random_schedule(graph: Graph, rng: random.Random, cores: int, bad: bool = False,
                    max_split: int | None = None) -> GraphSchedule:
    """A random schedule from scratch (may raise ScheduleError, see :func:`build`)."""
    return build(graph, random_groups(graph, rng, cores, bad, max_split=max_split), rng, cores,
                 bad=bad)


# ---- mutations of a schedule --------------------------------------------------------------------
def _renamed(groups: list[GroupSpec]) -> list[GroupSpec]:
    return [GroupSpec(f"m{i}", g.ops, g.split, g.chunks) for i, g in enumerate(groups)]


def _sorted_groups(groups: list[GroupSpec]) -> list[GroupSpec]:
    return sorted(groups, key=lambda g: g.ops[0])


def mutate(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
           bad: bool = False, max_split: int | None = None) -> GraphSchedule:
    """One random move applied to ``s`` (see the module doc); may raise ScheduleError.

    ``max_split`` caps the split factors a move picks (a search on a large batch
    keeps its simulations short); None: any divisor of the batch.
    """
    move = rng.choice(MOVES)
    if move is _resplit:
        return _resplit(graph, s, rng, cores, bad, max_split)
    return move(graph, s, rng, cores, bad)


def _keep(s: GraphSchedule) -> dict[str, Placement]:
    return {t.name: t.placement for t in s.transfers}


def _regroup_split(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
                   bad: bool) -> GraphSchedule:
    groups = _sorted_groups(list(s.groups))
    cand = [i for i, g in enumerate(groups) if len(g.ops) > 1]
    if not cand:
        raise ScheduleError("nothing to split")
    i = rng.choice(cand)
    g = groups[i]
    cuts = [j for j in range(1, len(g.ops)) if g.ops[j - 1] in _cut_set(graph)] or \
        list(range(1, len(g.ops)))
    j = rng.choice(cuts)
    a = GroupSpec(g.name + "a", g.ops[:j], g.split, g.chunks)
    b = _random_group(graph, rng, g.name + "b", g.ops[j:], cores, bad, split=g.split) \
        if rng.random() < 0.5 else GroupSpec(g.name + "b", g.ops[j:], g.split, g.chunks)
    groups[i:i + 1] = [a, b]
    return build(graph, _renamed(groups), rng, cores, bad=bad)


_CUTS: dict[int, frozenset[int]] = {}


def _cut_set(graph: Graph) -> frozenset[int]:
    hit = _CUTS.get(id(graph))
    if hit is None:
        hit = _CUTS[id(graph)] = frozenset(single_tensor_cuts(graph))
    return hit


def _regroup_merge(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
                   bad: bool) -> GraphSchedule:
    groups = _sorted_groups(list(s.groups))
    if len(groups) < 2:
        raise ScheduleError("nothing to merge")
    if rng.random() < 0.85:
        i = rng.randrange(len(groups) - 1)
        j = i + 1
    else:  # any two groups: an op set that need not be contiguous
        i, j = sorted(rng.sample(range(len(groups)), 2))
    a, b = groups[i], groups[j]
    ops = tuple(sorted(a.ops + b.ops))
    keep = rng.choice([a, b])
    split = keep.split
    if split > 1 and not _separable(graph, ops):
        split = 1
    merged = _random_group(graph, rng, a.name, ops, cores, bad, split=split) \
        if split != keep.split or rng.random() < 0.3 else GroupSpec(a.name, ops, split, keep.chunks)
    groups[i] = merged
    del groups[j]
    return build(graph, _renamed(groups), rng, cores, bad=bad)


def _regroup_shift(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
                   bad: bool) -> GraphSchedule:
    groups = _sorted_groups(list(s.groups))
    if len(groups) < 2:
        raise ScheduleError("no boundary")
    i = rng.randrange(len(groups) - 1)
    a, b = groups[i], groups[i + 1]
    if rng.random() < 0.5 and len(a.ops) > 1:
        a, b = GroupSpec(a.name, a.ops[:-1], a.split, a.chunks), \
            GroupSpec(b.name, (a.ops[-1], *b.ops), b.split, b.chunks)
    elif len(b.ops) > 1:
        a, b = GroupSpec(a.name, (*a.ops, b.ops[0]), a.split, a.chunks), \
            GroupSpec(b.name, b.ops[1:], b.split, b.chunks)
    else:
        raise ScheduleError("no op to move")
    groups[i], groups[i + 1] = a, b
    fixed = [g if g.split == 1 or _separable(graph, g.ops)
             else _random_group(graph, rng, g.name, g.ops, cores, bad, split=1) for g in groups]
    return build(graph, _renamed(fixed), rng, cores, bad=bad)


def _resplit(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
             bad: bool, max_split: int | None = None) -> GraphSchedule:
    groups = list(s.groups)
    i = rng.randrange(len(groups))
    g = groups[i]
    groups[i] = _random_group(graph, rng, g.name, g.ops, cores, bad, max_split=max_split)
    return build(graph, groups, rng, cores, bad=bad, keep=_keep(s))


def _replace_chunk(s: GraphSchedule, i: int, c: int, place: Placement) -> list[GroupSpec]:
    groups = list(s.groups)
    g = groups[i]
    chunks = list(g.chunks)
    chunks[c] = place
    groups[i] = GroupSpec(g.name, g.ops, g.split, tuple(chunks))
    return groups


def _rescope(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
             bad: bool) -> GraphSchedule:
    i = rng.randrange(len(s.groups))
    g = s.groups[i]
    c = rng.randrange(len(g.chunks))
    scope = rng.choice(SCOPES)
    targets = range(len(g.chunks)) if rng.random() < 0.5 else [c]
    groups = list(s.groups)
    for cc in targets:
        groups = _replace_chunk(GraphSchedule(s.batch, tuple(groups), s.transfers, s.order), i,
                                cc, Placement(scope, g.chunks[cc].core_bind))
    return make_schedule(graph, groups, order=list(s.order), transfer_placements=_keep(s),
                         source="random")


def _rebind(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
            bad: bool) -> GraphSchedule:
    i = rng.randrange(len(s.groups))
    g = s.groups[i]
    c = rng.randrange(len(g.chunks))
    samples = graph.batch // max(g.split, 1)
    place = random_placement(rng, samples, cores, bad, scope=g.chunks[c].mem_scope)
    groups = _replace_chunk(s, i, c, place)
    if rng.random() < 0.3:  # the same binding for every chunk of the group
        groups[i] = GroupSpec(g.name, g.ops, g.split, tuple(
            Placement(ch.mem_scope, place.core_bind) for ch in g.chunks))
    return make_schedule(graph, groups, order=list(s.order), transfer_placements=_keep(s),
                         source="random")


def _reorder(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
             bad: bool) -> GraphSchedule:
    return build(graph, list(s.groups), rng, cores, order=rng.choice(["depth", "breadth", "random"]),
                 bad=bad, keep={t.name: t.placement for t in s.transfers})


def _retransfer(graph: Graph, s: GraphSchedule, rng: random.Random, cores: int,
                bad: bool) -> GraphSchedule:
    if not s.transfers:
        raise ScheduleError("no transfer")
    t = rng.choice(s.transfers)
    tp = _keep(s)
    tp[t.name] = random_placement(rng, max(graph.batch // max(t.dst_factor, 1), 1), cores, bad)
    return make_schedule(graph, list(s.groups), order=list(s.order), transfer_placements=tp,
                         source="random")


MOVES = (_regroup_split, _regroup_merge, _regroup_shift, _resplit, _rescope, _rebind, _rebind,
         _reorder, _retransfer)


def chain(graph: Graph, rng: random.Random, cores: int, n: int) -> list[GraphSchedule]:
    """``n`` schedules, each a mutation of the one before (a fresh random one after a move
    that fails, and one time in five)."""
    out: list[GraphSchedule] = []
    s: GraphSchedule | None = None
    while len(out) < n:
        try:
            s = (random_schedule(graph, rng, cores) if s is None or rng.random() < 0.2
                 else mutate(graph, s, rng, cores))
        except ScheduleError:
            s = None
            continue
        out.append(s)
    return out
