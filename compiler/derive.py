"""Building schedules: group boundaries, derived split/concat transfers, chunk DAG, orders.

:func:`make_schedule` is how the manual primitives, the automatic levels and the
search space all turn "these groups, split like this, placed like that" into a
complete :class:`~compiler.schedule.GraphSchedule`: it derives the transfers
the vendor's ``SplitGroups`` would insert, names them in the guide's order
(``concat_0`` is the first concatenate in DFS post-order), and orders the steps.

Transfer rules, for a batched tensor made by a group split ``a`` ways and read by
a group split ``b`` ways: ``a == b`` nothing; ``a % b == 0`` ``b`` concats of
``a/b`` chunks each; ``b % a == 0`` ``a`` splits into ``b/a`` pieces each;
otherwise one concat of everything then one split. Model inputs count as split
1; a model output made by a split group is concatenated back (into DDR).
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler._schedule_parts import GroupSpec, Placement, ScheduleLike, Transfer
from compiler.errors import ScheduleError
from compiler.graph import dfs_postorder
from compiler.memo import memo_of

if TYPE_CHECKING:
    from compiler.graph import Graph

Node = tuple[str, str, int]  # ("g", group, chunk) | ("t", transfer, 0)


@dataclass(frozen=True)
class GroupIO:
    """Boundary of an op set: tensors read from outside, tensors used outside."""

    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def group_io(graph: Graph, ops: Sequence[int]) -> GroupIO:
    """Input and output tensors of an op set (weights excluded); cached per graph."""
    key = ("group_io", tuple(ops))
    memo = memo_of(graph)
    hit = memo.get(key)
    if hit is None:
        hit = memo[key] = _group_io(graph, ops)
    return hit  # type: ignore[no-any-return]


def _group_io(graph: Graph, ops: Sequence[int]) -> GroupIO:
    members = set(ops)
    produced = {graph.ops[i].output for i in members}
    inputs: dict[str, None] = {}
    for i in sorted(members):
        for t in graph.ops[i].inputs:
            if t not in produced:
                inputs[t] = None
    graph_outputs = set(graph.outputs)
    outputs = []
    for i in sorted(members):
        out = graph.ops[i].output
        used_outside = any(c not in members for c in graph.consumers.get(out, ()))
        if used_outside or out in graph_outputs:
            outputs.append(out)
    return GroupIO(tuple(inputs), tuple(outputs))


def _last_use(graph: Graph) -> dict[str, int]:
    last: dict[str, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            last[t] = op.index
    for t in graph.outputs:
        last[t] = len(graph.ops)
    return last


def single_tensor_cuts(graph: Graph) -> list[int]:
    """Op indices after which exactly one tensor is live (model inputs included).

    Cutting the op order there leaves one tensor crossing the boundary (ResNet's
    residual adds, BERT's block ends): O3 builds its segments on these points and
    the search space its group boundaries. The last op is never a cut.
    """
    last = _last_use(graph)
    born = {op.output: op.index for op in graph.ops}
    for t in graph.inputs:
        born[t] = -1
    cuts = []
    # sweep: live count after op i = tensors born <= i with last use > i
    events: dict[int, int] = {}
    for t, b in born.items():
        lu = last.get(t, b)
        if lu > b:
            events[b] = events.get(b, 0) + 1
            events[lu] = events.get(lu, 0) - 1
    live = events.get(-1, 0)
    for op in graph.ops:
        live += events.get(op.index, 0)
        if live == 1 and op.index < len(graph.ops) - 1:
            cuts.append(op.index)
    return cuts


def group_order(graph: Graph, groups: Sequence[GroupSpec], *, every_op: bool = False) -> list[str]:
    """GroupSpec names in a topological order (ties: smallest op index first).

    Args:
        every_op: walk every op's predecessors, not the outside predecessors kept per op
            set (the reference the kept ones are tested against; the same order).

    Raises:
        ScheduleError: the groups form a cycle (named).
    """
    owner = {i: g.name for g in groups for i in g.ops}
    deps: dict[str, set[str]] = {g.name: set() for g in groups}
    if not every_op and len(owner) == sum([len(g.ops) for g in groups]):
        # no op in two groups: an op's predecessors inside its own op set are its group's,
        # so only those outside it (remembered per op set) can add a dependency
        memo = memo_of(graph)
        for g in groups:
            key = ("outside preds", g.ops)
            outside = memo.get(key)
            if outside is None:
                outside = memo[key] = _outside_preds(graph, g.ops)
            for p in outside:
                o = owner.get(p)
                if o is not None and o != g.name:
                    deps[g.name].add(o)
    else:
        for g in groups:
            for i in g.ops:
                for p in graph.preds(i):
                    if owner.get(p) not in (None, g.name):
                        deps[g.name].add(owner[p])
    first = {g.name: min(g.ops) if g.ops else 0 for g in groups}
    users: dict[str, list[str]] = {g.name: [] for g in groups}
    waiting = {n: len(d) for n, d in deps.items()}
    for n, d in deps.items():
        for m in d:
            users[m].append(n)
    ready = [(first[n], n) for n, k in waiting.items() if k == 0]
    heapq.heapify(ready)
    done: list[str] = []
    while ready:  # Kahn's algorithm; ties by smallest first op
        _, n = heapq.heappop(ready)
        done.append(n)
        for m in users[n]:
            waiting[m] -= 1
            if waiting[m] == 0:
                heapq.heappush(ready, (first[m], m))
    if len(done) != len(groups):
        left = [n for n in deps if n not in done]
        cycle = _find_cycle({n: deps[n] & set(left) for n in left})
        raise ScheduleError(
            "groups form a cycle: " + " -> ".join(cycle) + " (split them at a single tensor)"
        )
    return done


def _outside_preds(graph: Graph, ops: tuple[int, ...]) -> tuple[int, ...]:
    """The ops outside ``ops`` whose outputs an op of ``ops`` reads (first-read order)."""
    inside = set(ops)
    return tuple(dict.fromkeys(p for i in ops for p in graph.preds(i) if p not in inside))


def _find_cycle(deps: dict[str, set[str]]) -> list[str]:
    start = next(iter(deps))
    path = [start]
    seen = {start: 0}
    cur = start
    while True:
        nxt = sorted(deps[cur])[0]
        if nxt in seen:
            return [*path[seen[nxt] :], nxt]
        seen[nxt] = len(path)
        path.append(nxt)
        cur = nxt


@dataclass
class _Chunking:
    """Which node provides chunk ``c`` of a tensor cut ``f`` ways."""

    providers: dict[tuple[str, int, int], Node]


def derive_transfers(
    graph: Graph, groups: Sequence[GroupSpec]
) -> tuple[list[Transfer], dict[Node, list[Node]], list[Node]]:
    """Transfers the groups need, the chunk DAG (node -> deps) and the output nodes.

    Transfers come back named ``split_<k>`` / ``concat_<k>`` in DFS post-order
    from the outputs, with a default placement (see :func:`default_transfer_placement`).
    """
    by_name = {g.name: g for g in groups}
    owner = {i: g.name for g in groups for i in g.ops}
    producer_group: dict[str, str] = {}
    for i, gname in owner.items():
        producer_group[graph.ops[i].output] = gname
    providers: dict[tuple[str, int, int], Node] = {}
    for g in groups:
        out = group_io(graph, g.ops).outputs
        for t in out:
            for c in range(g.split):
                providers[(t, g.split, c)] = ("g", g.name, c)
    deps: dict[Node, list[Node]] = {}
    specs: dict[str, Transfer] = {}
    counter = [0]

    def factor_of(t: str) -> int:
        pg = producer_group.get(t)
        return by_name[pg].split if pg is not None else 1

    def provide(
        t: str, f: int, c: int, consumers: Sequence[Placement] | None
    ) -> Node | None:
        """Node providing chunk c of t cut f ways (None: a model input, always there)."""
        tensor = graph.tensors[t]
        src_f = factor_of(t)
        if not tensor.batched:
            pg = producer_group.get(t)
            return None if pg is None else ("g", pg, 0)
        if f == src_f:
            return providers.get((t, f, c))
        key = (t, f, c)
        if key in providers:
            return providers[key]
        if src_f % f == 0:
            r = src_f // f
            for j in range(f):
                src = tuple(range(j * r, (j + 1) * r))
                _add("concat", t, src_f, f, src, (j,), _at(consumers, j))
        elif f % src_f == 0:
            r = f // src_f
            for i in range(src_f):
                dst = tuple(range(i * r, (i + 1) * r))
                _add("split", t, src_f, f, (i,), dst, _at(consumers, dst[0]))
        else:
            if (t, 1, 0) not in providers:
                _add("concat", t, src_f, 1, tuple(range(src_f)), (0,), _at(consumers, 0))
            _add("split", t, 1, f, (0,), tuple(range(f)), _at(consumers, 0))
        return providers[key]

    def _add(
        kind: str,
        t: str,
        sf: int,
        df: int,
        src: tuple[int, ...],
        dst: tuple[int, ...],
        consumer: Placement | None,
    ) -> None:
        tmp = f"~{kind}{counter[0]}"
        counter[0] += 1
        node: Node = ("t", tmp, 0)
        src_nodes = [provide(t, sf, i, None) for i in src]
        deps[node] = [n for n in src_nodes if n is not None]
        src_places = [by_name[n[1]].chunks[n[2]] for n in src_nodes if n and n[0] == "g"]
        place = default_transfer_placement(kind, src_places, consumer, graph.tensors[t].kind)
        specs[tmp] = Transfer(tmp, kind, t, sf, df, src, dst, place)
        for c in dst:
            providers[(t, df, c)] = node

    for g in groups:
        io = group_io(graph, g.ops)
        for c in range(g.split):
            node: Node = ("g", g.name, c)
            ds: list[Node] = []
            for t in io.inputs:
                p = provide(t, g.split, c, g.chunks)
                if p is not None and p not in ds:
                    ds.append(p)
            deps[node] = ds
    out_nodes: list[Node] = []
    for t in graph.outputs:
        p = provide(t, 1, 0, None) if graph.tensors[t].batched else providers.get(
            (t, factor_of(t), 0)
        )
        if p is not None and p not in out_nodes:
            out_nodes.append(p)
    # fix transfers feeding model outputs: they land in DDR
    out_tmp = {n[1] for n in out_nodes if n[0] == "t"}
    # name transfers in DFS post-order from the outputs (the guide's ListOps order)
    post = postorder(deps, out_nodes)
    names: dict[str, str] = {}
    counts = {"split": 0, "concat": 0}
    for n in post:
        if n[0] == "t":
            kind = specs[n[1]].kind
            names[n[1]] = f"{kind}_{counts[kind]}"
            counts[kind] += 1
    for tmp, spec in specs.items():
        if tmp not in names:
            names[tmp] = f"{spec.kind}_{counts[spec.kind]}"
            counts[spec.kind] += 1
    transfers = []
    for tmp, spec in specs.items():
        place = spec.placement
        if tmp in out_tmp:
            place = Placement("DDR", place.core_bind)
        transfers.append(
            Transfer(names[tmp], spec.kind, spec.tensor, spec.src_factor, spec.dst_factor,
                     spec.src_chunks, spec.dst_chunks, place)
        )
    transfers.sort(key=lambda t: (t.kind, int(t.name.rsplit("_", 1)[1])))

    def rn(n: Node) -> Node:
        return ("t", names[n[1]], 0) if n[0] == "t" else n

    new_deps = {rn(k): [rn(d) for d in v] for k, v in deps.items()}
    return transfers, new_deps, [rn(n) for n in out_nodes]


def _at(places: Sequence[Placement] | None, i: int) -> Placement | None:
    return places[i] if places is not None and i < len(places) else None


def default_transfer_placement(
    kind: str,
    sources: Sequence[Placement],
    consumer: Placement | None,
    tensor_kind: str,
) -> Placement:
    """Where a split/concat puts its result when nobody said.

    Splits of model inputs stay in DDR (a split there is a view). Otherwise the
    result goes where the consumer computes (its cores), in L1 when every source
    was in L1, else in the slowest scope among the sources.
    """
    order = {"DDR": 0, "LLB": 1, "L1": 2}
    if consumer is not None:
        bind = consumer.core_bind
    elif sources:
        bind = sources[0].core_bind
    else:
        bind = ((0,),)
    if not sources:
        return Placement("DDR", bind)
    slowest = min((s.mem_scope for s in sources), key=order.__getitem__)
    return Placement(slowest, bind)


def postorder(deps: dict[Node, list[Node]], roots: Sequence[Node]) -> list[Node]:
    """DFS post-order of the chunk DAG from ``roots``; unreachable nodes are appended."""
    return dfs_postorder(deps, roots)


def _breadth(graph: Graph, groups: Sequence[GroupSpec], deps: dict[Node, list[Node]]) -> list[Node]:
    by_name = {g.name: g for g in groups}
    out: list[Node] = []
    placed: set[Node] = set()

    def place(n: Node) -> None:
        if n in placed:
            return
        for d in deps.get(n, []):
            place(d)
        placed.add(n)
        out.append(n)

    for name in group_order(graph, groups):
        for c in range(by_name[name].split):
            place(("g", name, c))
    for n in deps:
        place(n)
    return out


def derived(
    graph: Graph, schedule: ScheduleLike
) -> tuple[list[Transfer], dict[Node, list[Node]], list[Node]]:
    """:func:`derive_transfers` of a schedule's groups, remembered per (schedule, graph)."""
    memo = memo_of(schedule, limit=8)
    key = ("derived", id(graph))
    cached = memo.get(key)
    if cached is None or cached[0] is not graph:
        cached = memo[key] = (graph, derive_transfers(graph, schedule.groups))
    return cached[1]  # type: ignore[no-any-return]


def chunk_dag(graph: Graph, schedule: ScheduleLike) -> tuple[dict[Node, list[Node]], list[Node]]:
    """The dependency DAG between the schedule's steps, and the output nodes."""
    _, deps, outs = derived(graph, schedule)
    return deps, outs


_MOVED = {"make_schedule", "single_group_schedule"}


def __getattr__(name: str) -> object:
    # make_schedule and single_group_schedule build a GraphSchedule, whose validate() uses
    # this module: they moved to compiler.schedule in 0.1. The old path warns until 0.2.
    if name in _MOVED:
        import importlib
        import warnings

        warnings.warn(f"compiler.derive.{name} moved to compiler.schedule.{name}; the old path "
                      "goes after graphtune 0.2", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module("compiler.schedule"), name)
    raise AttributeError(f"module 'compiler.derive' has no attribute {name!r}")
