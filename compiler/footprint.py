"""Activation footprint of an op set: how many bytes must sit in L1 while it runs.

Shared by the automatic levels (to size groups and splits) and the simulator
(capacity checks), so both agree on what fits. Pure Python, no heavy imports;
results are cached per ``(graph, ops)`` because the tuner asks millions of times.

The model (in the target's compute type, FP16 by default) follows how the NPU
compiler executes a group: ops run one after another in topological order,
each tile by tile, and

* **views** (``reshape``, ``squeeze``, ``expand_dims``, ``flatten``) alias their
  input: no bytes;
* **fused chains**: an op whose only consumer is the next op, an elementwise
  one (``add``, ``nn.relu``, ``nn.batch_norm``, ``erf``, ...), hands its output
  over tile by tile, so the intermediate never exists in full (conv + bn + relu,
  matmul + bias, the erf-GELU chain);
* **in place**: a fused chain ending in an elementwise op writes its output over
  a same-sized tensor that dies in the chain (the residual ``add``);
* **rolling buffers**: a streaming op (matrix ops, pooling, reductions,
  ``softmax``, ``layer_norm``, elementwise) whose streamed (first) input dies at
  it releases input tiles as it writes output tiles, so it needs
  ``max(input, output)`` instead of the sum;
* everything else (transposes, concat, gathers) needs its inputs and its output
  at once;
* a group input stays live until its last use in the set and is overwritten
  only if no other group reads it (with ``held=True``, see
  :attr:`Footprint.held_profile`, inputs stay live to the end and are never
  overwritten); the group's output stays live to the end.

Bytes are counted per sample for tensors that carry the batch, and whole for
the rest ("fixed" bytes, replicated on every core that runs the group).

Example:
    >>> fp = group_footprint(graph, tuple(range(10)))
    >>> fp.peak_sample_bytes, fp.peak_bytes(samples=2, cores=1)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.memo import memo_of
from compiler.optable import op_spec
from compiler.views import view_sources

if TYPE_CHECKING:
    from compiler.graph import Graph, Op

__all__ = [
    "ChainPoint",
    "Footprint",
    "Profile",
    "batched_tensors",
    "chain_points",
    "group_footprint",
    "group_profile",
    "is_elementwise",
    "peak_of",
    "sample_bytes",
    "stream_readers",
    "streamable_inputs",
    "weight_bytes",
]

# Vector-unit ops that are not elementwise (they reduce, window or normalise rows).
_ROW_OPS = frozenset({
    "sum", "mean", "max", "min", "argmax", "argmin", "nn.softmax", "nn.layer_norm",
    "nn.max_pool2d", "nn.avg_pool2d", "nn.adaptive_avg_pool2d",
})
# Data-movement ops whose data input a DMA can fetch block by block from LLB/DDR (a
# blocked transpose reads the block each output tile needs; a gather, the rows). Only a
# group input streams this way: inside L1 a transpose still needs its whole input.
_MOVE_OPS = frozenset({"permute_dims", "take", "gather_nd"})
_NOT_EW = _ROW_OPS | {"vision.roi_align", "vision.roi_pool", "vision.non_max_suppression", "topk"}
GATHER_OPS = frozenset({"take", "gather_nd"})

_CACHE_KEY = "footprint"
_BATCHED_KEY = "footprint.batched"

Profile = tuple[tuple[int, int], ...]
# (live sample bytes, live fixed bytes, op indices of the chain running then)
ChainPoint = tuple[int, int, tuple[int, ...]]


@dataclass(frozen=True)
class Footprint:
    """Live activation bytes of an op set, per sample (batched) and fixed (unbatched).

    Attributes:
        peak_sample_bytes: Largest batched live bytes per sample at any op.
        peak_fixed_bytes: Largest unbatched live bytes at any op.
        profile: ``(sample_bytes, fixed_bytes)`` live during each op, pruned to the
            points that can be the maximum for some sample count.
        held_profile: The same with the group's inputs kept live to the end (what
            the memory holds when another group still needs an input afterwards).
        input_sample_bytes: Group inputs (distinct, weights excluded), per sample.
        input_fixed_bytes: Unbatched group inputs.
        output_sample_bytes: The group output(s), per sample.
        output_fixed_bytes: Unbatched group output(s).
        weight_bytes: Weights loaded into the weight buffer (gather tables excluded).
        max_op_weight_bytes: Largest weights of a single op (gather tables excluded).
        gather_sample_bytes: Rows gathered from tables (``take``) per sample; they
            come from DDR, not through the weight buffer.
        gather_fixed_bytes: Unbatched gathered bytes.
        peak_op: Op index where the per-sample peak occurs (-1 for an empty set).
    """

    peak_sample_bytes: int
    peak_fixed_bytes: int
    profile: Profile
    held_profile: Profile
    input_sample_bytes: int
    input_fixed_bytes: int
    output_sample_bytes: int
    output_fixed_bytes: int
    weight_bytes: int
    max_op_weight_bytes: int
    gather_sample_bytes: int
    gather_fixed_bytes: int
    peak_op: int

    def peak_bytes(self, samples: int = 1, cores: int = 1, held: bool = False) -> int:
        """Peak bytes on one core when ``samples`` samples are spread over ``cores`` cores.

        The batched part divides over the cores that share the samples; the fixed
        part is replicated on each.

        Args:
            samples: Samples the cores process together.
            cores: Cores sharing those samples.
            held: Keep the group's inputs live to the end (see :attr:`held_profile`).
        """
        return peak_of(self.held_profile if held else self.profile, samples, cores)


def is_elementwise(op: Op, graph: Graph) -> bool:
    """Whether an op maps element to element (fusable as an epilogue, in place)."""
    if op.op_type in _NOT_EW or op_spec(op.op_type).unit not in ("vector", "special"):
        return False
    out = graph.tensors[op.output].elements
    return all(graph.tensors[t].elements <= out for t in op.inputs)


def batched_tensors(graph: Graph) -> frozenset[str]:
    """Names of the tensors that carry the batch in dim 0: ``Tensor.batched``, nothing more.

    There is one definition of "batched": the import's (``Tensor.batch_mult``,
    which follows embedding lookups and a batch moved off axis 0 and back). An
    older rule here also counted any value whose dim 0 was a multiple of the batch
    when its producer read a batched tensor; it added nothing at batch 16 on any
    zoo or PyTorch-exported model and marked everything at batch 1.
    """
    memo = memo_of(graph)
    cached = memo.get(_BATCHED_KEY)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    result = frozenset(n for n, t in graph.tensors.items() if t.batched)
    memo[_BATCHED_KEY] = result
    return result


def sample_bytes(graph: Graph, tensor: str) -> tuple[int, int]:
    """``(bytes per sample, fixed bytes)`` of a tensor: one of the two is zero."""
    return _sample_table(graph)[tensor]


def _sample_table(graph: Graph) -> dict[str, tuple[int, int]]:
    """:func:`sample_bytes` of every tensor, once per graph."""
    memo = memo_of(graph)
    table: dict[str, tuple[int, int]] | None = memo.get("sample_bytes")
    if table is None:
        batched = batched_tensors(graph)
        table = memo["sample_bytes"] = {
            t: ((graph.nbytes(t) // graph.batch, 0) if t in batched else (0, graph.nbytes(t)))
            for t in graph.tensors
        }
    return table


def group_footprint(graph: Graph, ops: Iterable[int]) -> Footprint:
    """The activation footprint of an op set (see the module docstring for the model).

    Every input is staged in L1 and the output kept to the end (the conservative
    case: inputs and output placed in L1); :func:`group_profile` gives the
    variants where inputs stream in from LLB/DDR or the output streams out.

    Args:
        graph: The model.
        ops: Op indices of the set (any order; duplicates ignored).

    Returns:
        The :class:`Footprint`, cached per graph and op set.
    """
    an = _analysis(graph, tuple(sorted(set(ops))))
    if an.footprint is None:
        an.footprint = _summary(graph, an)
    return an.footprint


def weight_bytes(graph: Graph, ops: Iterable[int]) -> int:
    """:attr:`Footprint.weight_bytes` of an op set without the rest of its footprint
    (whose summary walks two profiles): the weights of its ops, gathers' tables aside
    (each op's bytes found once per graph: the search asks for every new op set)."""
    memo = memo_of(graph)
    per_op: tuple[int, ...] | None = memo.get("footprint.op_weights")
    if per_op is None:
        per_op = memo["footprint.op_weights"] = tuple(
            0 if op.op_type in GATHER_OPS else graph.weight_bytes_of(op) for op in graph.ops)
    return sum(per_op[i] for i in sorted(set(ops)))


def streamable_inputs(graph: Graph, ops: Iterable[int]) -> frozenset[str]:
    """Group inputs that can stream from LLB/DDR tile by tile instead of being staged.

    An input streams when a single op of the set reads it, as its streamed (first)
    operand, and that op consumes it in output order (matrix ops, elementwise,
    pooling, row-wise normalisation).
    """
    return _analysis(graph, tuple(sorted(set(ops)))).streamable


def group_profile(
    graph: Graph,
    ops: Iterable[int],
    streamed: frozenset[str] = frozenset(),
    stream_output: bool = False,
    held: bool = False,
) -> Profile:
    """Live ``(sample bytes, fixed bytes)`` during each op, pruned (see :attr:`Footprint.profile`).

    Args:
        graph: The model.
        ops: The op set.
        streamed: Inputs that stream in from LLB/DDR (a subset of
            :func:`streamable_inputs`; others are ignored): only a tile is in L1.
        stream_output: The output goes to LLB/DDR as it is produced: it occupies L1
            only while ops of the set still read it.
        held: Inputs stay live to the end and are never overwritten (another step
            still reads them from this L1).
    """
    an = _analysis(graph, tuple(sorted(set(ops))))
    key = (streamed & an.streamable, stream_output, held)
    hit = an.profiles.get(key)
    if hit is None:
        hit = _profiled(graph, an, key)[0]
    return hit


def chain_points(
    graph: Graph,
    ops: Iterable[int],
    streamed: frozenset[str] = frozenset(),
    stream_output: bool = False,
    held: bool = False,
) -> tuple[ChainPoint, ...]:
    """Live ``(sample bytes, fixed bytes, ops running)`` at every fused chain, unpruned.

    The points :func:`group_profile` prunes, with the op indices of the chain each
    belongs to: what the capacity model needs to add what one op needs besides the
    live tensors (a convolution's halo rows when a sample is cut between cores).
    Arguments as for :func:`group_profile`.
    """
    an = _analysis(graph, tuple(sorted(set(ops))))
    key = (streamed & an.streamable, stream_output, held)
    hit = an.points.get(key)
    if hit is None:
        hit = _profiled(graph, an, key)[1]
    return hit


def _profiled(graph: Graph, an: _Analysis, key: tuple[frozenset[str], bool, bool]
              ) -> tuple[Profile, tuple[ChainPoint, ...]]:
    """One :func:`_profile` walk for ``key``, both of its results kept (group_profile and
    chain_points each ask for one; the capacity model asks for both of a key)."""
    prof, _, _, _, points = _profile(graph, an, *key)
    an.profiles.setdefault(key, prof)
    an.points[key] = points
    return an.profiles[key], points


def stream_readers(graph: Graph, ops: Iterable[int]) -> dict[str, int]:
    """The op index reading each :func:`streamable_inputs` tensor (its window sizes the buffer)."""
    return _analysis(graph, tuple(sorted(set(ops)))).stream_readers


def peak_of(profile: Profile, samples: int = 1, cores: int = 1) -> int:
    """Peak bytes on one core of a profile for ``samples`` samples shared by ``cores`` cores."""
    best = 0
    for s, f in profile:
        v = -(-s * samples // cores) + f
        if v > best:
            best = v
    return best


# ---- the computation ------------------------------------------------------------------


class _Analysis:
    """Structure of an op set: views resolved, fused chains, lifetimes (mutable cache)."""

    __slots__ = (
        "chains",
        "footprint",
        "group_inputs",
        "last",
        "ops",
        "outside_use",
        "points",
        "private",
        "produced",
        "profiles",
        "root",
        "seq",
        "size",
        "stream_readers",
        "streamable",
        "virtual",
        "walk",
    )

    ops: tuple[int, ...]
    size: dict[str, tuple[int, int]]
    root: dict[str, str]
    seq: list[Op]
    produced: set[str]
    outside_use: set[str]
    group_inputs: list[str]
    private: frozenset[str]
    streamable: frozenset[str]
    virtual: set[str]
    chains: list[list[int]]
    last: dict[str, int]
    profiles: dict[tuple[frozenset[str], bool, bool], Profile]
    points: dict[tuple[frozenset[str], bool, bool], tuple[ChainPoint, ...]]
    stream_readers: dict[str, int]
    footprint: Footprint | None
    walk: list[_ChainRow] | None

    def __init__(self) -> None:
        self.profiles = {}
        self.points = {}
        self.footprint = None
        self.walk = None


def _analysis(graph: Graph, ops: tuple[int, ...]) -> _Analysis:
    memo = memo_of(graph)
    key = (_CACHE_KEY, ops)
    hit: _Analysis | None = memo.get(key)
    if hit is None:
        hit = memo[key] = _analyse(graph, ops)
    return hit


def _analyse(graph: Graph, ops: tuple[int, ...]) -> _Analysis:
    # the graph's tables as locals, set operations for membership over consumers: the search
    # analyses every op set it meets (new ones on BERT-large have ~60 ops)
    an = _Analysis()
    an.ops = ops
    members = set(ops)
    sizes = _sample_table(graph)
    g_ops, consumers = graph.ops, graph.consumers
    an.size = size = {t: sizes[t] for op in (g_ops[i] for i in ops) for t in (*op.inputs, op.output)}

    # views alias their source tensor (compiler.views: the one place that follows them)
    alias = view_sources(graph, ops)
    alias_get = alias.get

    def root(t: str) -> str:
        return alias_get(t, t)

    seq: list[Op] = [op for op in (g_ops[i] for i in ops) if op.output not in alias]
    an.root = {t: alias_get(t, t) for t in size}
    an.seq = seq
    graph_outputs = set(graph.outputs)
    end = len(seq)

    an.produced = produced = {op.output for op in seq}
    outside: set[str] = set()
    for i in ops:
        out = g_ops[i].output
        if out in graph_outputs or not members.issuperset(consumers.get(out, ())):
            outside.add(alias_get(out, out))
    an.outside_use = outside

    pos: dict[str, list[int]] = {}  # root tensor -> positions (in seq) of its readers
    for p, op in enumerate(seq):
        for t in dict.fromkeys([alias_get(x, x) for x in op.inputs]):
            pos.setdefault(t, []).append(p)
    an.group_inputs = [t for t in pos if t not in produced]
    # a group input nobody else reads may be overwritten once it dies here
    an.private = frozenset(
        t for t in an.group_inputs
        if t not in graph_outputs and members.issuperset(consumers.get(t, ()))
    )
    an.streamable = frozenset(
        t for t in an.group_inputs
        if len(pos[t]) == 1 and _streams_input(seq[pos[t][0]], t, root, graph)
    )
    an.stream_readers = {t: seq[pos[t][0]].index for t in an.streamable}

    # fused chains: seq[p] feeds only seq[p+1], an elementwise op of the same size
    virtual: set[str] = set()
    tensors = graph.tensors
    for p in range(end - 1):
        out = seq[p].output
        nxt = seq[p + 1]
        if out in outside or pos.get(out) != [p + 1]:
            continue
        if is_elementwise(nxt, graph) and tensors[nxt.output].elements >= tensors[out].elements:
            virtual.add(out)
    an.virtual = virtual
    chains: list[list[int]] = []
    for p in range(end):
        if chains and seq[p - 1].output in virtual:
            chains[-1].append(p)
        else:
            chains.append([p])
    an.chains = chains

    # last reader of every materialised tensor, in chain units
    chain_of = {p: c for c, chain in enumerate(chains) for p in chain}
    an.last = {t: chain_of[ps[-1]] for t, ps in pos.items()}
    return an


# Per fused chain, what _profile reads of it whatever the key: the output (name, sizes),
# whether it dies here once streamed out (in the outside use, read no later), whether it
# stays live after the chain (kept: outside use; streamed out), the inputs dying here
# (kept, streamed out) as (root, sizes or None, produced here, private), whether the
# chain may run in place, the anchor op and the root of its first input, the op indices.
_Dying = tuple[str, "tuple[int, int] | None", bool, bool]
_ChainRow = tuple[str, int, int, bool, bool, bool, "list[_Dying]", "list[_Dying]", bool, "Op",
                  "str | None", "tuple[int, ...]"]


def _chain_rows(graph: Graph, an: _Analysis) -> list[_ChainRow]:
    """The per-chain facts :func:`_profile` walks (see ``_ChainRow``), once per op set."""
    if an.walk is not None:
        return an.walk
    size, root, seq = an.size, an.root, an.seq
    n_chains = len(an.chains)
    kept_last = dict(an.last)  # the output kept: read outside, it never dies in the set
    for t in an.outside_use:
        kept_last[t] = n_chains
    rows: list[_ChainRow] = []
    for c, chain in enumerate(an.chains):
        out = seq[chain[-1]].output
        out_s, out_f = size[out]
        roots: dict[str, None] = {}
        for p in chain:
            for t in seq[p].inputs:
                r = root[t]
                if r not in an.virtual:
                    roots[r] = None
        dying = [[(r, size.get(r), r in an.produced, r in an.private) for r in roots
                  if last.get(r) == c] for last in (kept_last, an.last)]
        anchor = seq[chain[0]]
        rows.append((out, out_s, out_f, out in an.outside_use and an.last.get(out, c) <= c,
                     kept_last.get(out, c) > c, an.last.get(out, c) > c, dying[0], dying[1],
                     len(chain) > 1 or is_elementwise(seq[chain[-1]], graph), anchor,
                     root[anchor.inputs[0]] if anchor.inputs else None,
                     tuple(seq[p].index for p in chain)))
    an.walk = rows
    return rows


def _profile(
    graph: Graph, an: _Analysis, streamed: frozenset[str], stream_output: bool, held: bool
) -> tuple[Profile, int, int, int, tuple[ChainPoint, ...]]:
    """(pruned profile, peak sample bytes, peak fixed bytes, op index of the peak, the
    unpruned points with their chains' op indices).

    Walks the fused chains in order: the group inputs not streamed are live from the
    start; during a chain its output is live beside what is live (not when streamed
    out and read by no later op of the set; in place over a same-sized tensor dying in
    the chain, or over its first input when the anchor streams it); then the inputs
    whose last reader it is die (an input of the set stays when ``held``) and the output
    stays live when a later chain (or, kept, the outside) reads it."""
    size = an.size
    zero = (0, 0)
    live_s = live_f = 0
    for t in an.group_inputs:
        if t in streamed:
            continue
        s, f = size.get(t, zero)
        live_s += s
        live_f += f
    points: list[tuple[int, int]] = []
    raw: list[ChainPoint] = []
    best_s, best_f, best_op = 0, 0, -1
    for (_out, out_s, out_f, dies_out, lives_kept, lives_out, dying_kept, dying_out, chained,
         anchor, first, ops) in _chain_rows(graph, an):
        if stream_output:
            if dies_out:
                out_s = out_f = 0  # written out tile by tile, nobody here reads it later
            lives = lives_out
            cands = dying_out
        else:
            lives = lives_kept
            cands = dying_kept
        dying = [d for d in cands if d[0] not in streamed and (d[2] or not held)]
        reusable = [d for d in dying if d[2] or (d[3] and not held)]
        during_s, during_f = live_s + out_s, live_f + out_f
        if chained:
            # in place over a same-sized tensor that dies in the chain
            if any(_sizes(d)[0] >= out_s and _sizes(d)[1] >= out_f for d in reusable):
                during_s, during_f = live_s, live_f
        if (during_s, during_f) != (live_s, live_f) and any(d[0] == first for d in reusable) \
                and _streams(anchor, graph):
            in_s, in_f = size[first]  # type: ignore[index]
            during_s = live_s - in_s + max(in_s, out_s)
            during_f = live_f - in_f + max(in_f, out_f)
        points.append((during_s, during_f))
        raw.append((during_s, during_f, ops))
        if during_s > best_s:
            best_s, best_op = during_s, anchor.index
        best_f = max(best_f, during_f)
        for d in dying:
            s, f = d[1] or zero
            live_s -= s
            live_f -= f
        if lives:
            live_s += out_s
            live_f += out_f
    return _prune(points), best_s, best_f, best_op, tuple(raw)


def _sizes(d: _Dying) -> tuple[int, int]:
    """A dying tensor's sizes (a tensor of the set: sized; the KeyError of a lookup if not)."""
    if d[1] is None:
        raise KeyError(d[0])
    return d[1]


def _summary(graph: Graph, an: _Analysis) -> Footprint:
    prof, peak_s, peak_f, peak_op, points = _profile(graph, an, frozenset(), False, False)
    held = _profile(graph, an, frozenset(), False, True)
    an.profiles[(frozenset(), False, False)] = prof
    an.profiles[(frozenset(), False, True)] = held[0]
    an.points.setdefault((frozenset(), False, False), points)
    an.points.setdefault((frozenset(), False, True), held[4])
    zero = (0, 0)
    in_s = sum(an.size.get(t, zero)[0] for t in an.group_inputs)
    in_f = sum(an.size.get(t, zero)[1] for t in an.group_inputs)
    out_s = sum(an.size[t][0] for t in an.outside_use if t in an.size)
    out_f = sum(an.size[t][1] for t in an.outside_use if t in an.size)
    w_total = weight_bytes(graph, an.ops)
    w_max = g_s = g_f = 0
    for i in an.ops:
        op = graph.ops[i]
        if op.op_type in GATHER_OPS:
            s, f = an.size[op.output]
            g_s += s
            g_f += f
            continue
        w_max = max(w_max, graph.weight_bytes_of(op))
    return Footprint(
        peak_sample_bytes=peak_s,
        peak_fixed_bytes=peak_f,
        profile=prof,
        held_profile=held[0],
        input_sample_bytes=in_s,
        input_fixed_bytes=in_f,
        output_sample_bytes=out_s,
        output_fixed_bytes=out_f,
        weight_bytes=w_total,
        max_op_weight_bytes=w_max,
        gather_sample_bytes=g_s,
        gather_fixed_bytes=g_f,
        peak_op=peak_op,
    )


def _streams(op: Op, graph: Graph) -> bool:
    """Whether an op consumes its first input tile by tile in output order."""
    unit = op_spec(op.op_type).unit
    return unit == "matrix" or op.op_type in _ROW_OPS or is_elementwise(op, graph)


def _streams_input(op: Op, t: str, root: Callable[[str], str], graph: Graph) -> bool:
    """Whether ``op`` reads tensor ``t`` once, tile by tile in output order."""
    roots = [root(x) for x in op.inputs]
    if roots.count(t) != 1:
        return False
    if is_elementwise(op, graph):
        return True  # every operand is read at the output tile's position
    return roots[0] == t and (_streams(op, graph) or op.op_type in _MOVE_OPS)


def _prune(points: Sequence[tuple[int, int]]) -> Profile:
    """Keep the points not dominated in both coordinates (the only possible maxima)."""
    out: list[tuple[int, int]] = []
    for s, f in sorted(set(points), key=lambda p: (-p[0], -p[1])):
        if not out or f > max(q[1] for q in out):
            out.append((s, f))
    return tuple(out)
