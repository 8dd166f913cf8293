"""What the space is built from: segments between single-tensor cut points, anchors, ties.

All of it is found from the graph, never hard-coded per model:

* **segments** — maximal op ranges (topological order) between the *cut points*
  (:func:`group_cuts`): the points after which exactly one tensor is live
  (:func:`compiler.derive.single_tensor_cuts`, the same cut points O3 uses:
  ResNet's residual adds and block ends, BERT's LayerNorms), and the points where
  several tensors cross but only one of them was made since the previous cut point
  (inside a residual block, with the shortcut passing over; DLRM's bottom MLP, with
  the sparse ids passing over it). Every segment has one output; a *block* (a run of
  consecutive segments) that leaves more than one tensor to later ops is not a valid
  group and falls back to its anchor partition or one group per op.
* **anchors** — the guide's finer boundaries inside a block ("from a single
  Encoding Block, matmuls are the boundaries"): a matrix op starts a new group
  when it reads two activations (attention scores, context) or a tensor other
  ops read too (the Q/K/V projections of one ``x``, ResNet's shortcut conv).
  Every other op joins the group of its first producer inside the block. On
  BERT this gives exactly the guide's Q, K, V, scores+softmax,
  context+projection+residual+LayerNorm and FFN groups.
* **signatures** — a structural hash per segment (op types, attributes, shapes,
  internal wiring by relative index); segments with equal signatures are
  repeated blocks (BERT layers, the bottlenecks of one ResNet stage) and may
  share their parameters (ties).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

from compiler.derive import group_io, single_tensor_cuts
from compiler.footprint import streamable_inputs
from compiler.graph import Graph
from compiler.optable import op_spec

__all__ = ["GroupInfo", "Structure", "analyse", "group_cuts", "group_info"]


@dataclass(frozen=True)
class Structure:
    """The batch-independent skeleton of a graph the space is built on.

    Attributes:
        segments: ``(first, last)`` op indices (inclusive) of each segment, in order.
        seg_of_op: Segment index of every op.
        anchors: Ops that start a group in the anchor partition whatever the block.
        starts: Every op that can start a group (segment starts, anchors, ops with no
            producer inside their segment), sorted.
        signature: Structural hash of each segment (equal hash = repeated block): its
            own structure, where it starts in its single-tensor segment and that one's.
        single: Per cut point (the end of every segment but the last), whether exactly
            one tensor crosses it (a :func:`compiler.derive.single_tensor_cuts` point);
            the others are boundaries half as often (:data:`search_space._dims.RANKS`).
    """

    segments: tuple[tuple[int, int], ...]
    seg_of_op: tuple[int, ...]
    anchors: frozenset[int]
    starts: tuple[int, ...]
    signature: tuple[str, ...]
    single: tuple[bool, ...] = ()


def analyse(graph: Graph, wide: bool = True) -> Structure:
    """Segments, anchors, possible group starts and segment signatures of ``graph``.

    ``wide``: segments between every :func:`group_cuts` point; otherwise between the
    single-tensor cut points only (the space with ties).
    """
    n = len(graph.ops)
    cuts = [c for c in (group_cuts(graph) if wide else single_tensor_cuts(graph))
            if 0 <= c < n - 1]
    segments: list[tuple[int, int]] = []
    start = 0
    for end in [*cuts, n - 1]:
        if end >= start:
            segments.append((start, end))
            start = end + 1
    seg_of_op = [0] * n
    for k, (a, b) in enumerate(segments):
        for i in range(a, b + 1):
            seg_of_op[i] = k
    anchors = frozenset(i for i in range(n) if _is_anchor(graph, i))
    starts: set[int] = {a for a, _ in segments} | set(anchors)
    for a, b in segments:
        for i in range(a, b + 1):
            if not any(a <= p <= b for p in graph.preds(i)):
                starts.add(i)
    single = set(single_tensor_cuts(graph))
    # a segment repeats another when their single-tensor segments repeat and it sits at
    # the same place in its own (a bottleneck's second conv, not the Q and K projections
    # of one layer, which look alike)
    coarse_sig: list[str] = []
    start = 0
    for k, (a, b) in enumerate(segments):
        if k == 0 or segments[k - 1][1] in single:
            start = a
            end = next((c for c in sorted(single) if c >= a), n - 1)
            outer = _signature(graph, start, end)
        coarse_sig.append(hashlib.sha256(
            f"{outer}:{a - start}:{_signature(graph, a, b)}".encode()).hexdigest()[:16])
    sigs = tuple(coarse_sig)
    return Structure(tuple(segments), tuple(seg_of_op), anchors, tuple(sorted(starts)), sigs,
                     tuple(b in single for _, b in segments[:-1]))


def group_cuts(graph: Graph) -> list[int]:
    """Op indices after which a group may end: the cut points of the segments.

    A point after op ``i`` is one when exactly one tensor is live there
    (:func:`compiler.derive.single_tensor_cuts`), or when, of the tensors live there,
    exactly one was made after the previous cut point (the others, older, pass over:
    a residual block's shortcut, the model inputs a branch reads later). So every
    segment has exactly one output and the single-tensor cuts are among the points
    (O0-O3 and the guide's plans group along them). The last op is never one.
    """
    n = len(graph.ops)
    last: dict[str, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            last[t] = op.index
    for t in graph.outputs:
        last[t] = n
    single = set(single_tensor_cuts(graph))
    cuts: list[int] = []
    pending: set[str] = set()  # tensors made after the previous cut point, still live
    for op in graph.ops:
        i = op.index
        pending = {t for t in pending if last.get(t, -1) > i}
        if last.get(op.output, -1) > i:
            pending.add(op.output)
        if i >= n - 1:
            break
        if i in single or (len(pending) == 1 and _starts_group(graph, i + 1, pending)):
            cuts.append(i)
            pending = set()
    return cuts


def _starts_group(graph: Graph, i: int, pending: set[str]) -> bool:
    """Whether op ``i`` may usefully start a group: a matrix op, a join (it reads two or
    more activations: a residual add), or the first op of another branch (it reads
    nothing made since the previous cut point). Elementwise ops after a matrix op stay
    with it: a cut there only adds a round trip of its output."""
    op = graph.ops[i]
    if op_spec(op.op_type).unit == "matrix":
        return True
    acts = [t for t in op.inputs if graph.tensors[t].kind != "weight"]
    return len(acts) >= 2 or not any(t in pending for t in acts)


def _is_anchor(graph: Graph, i: int) -> bool:
    op = graph.ops[i]
    if op_spec(op.op_type).unit != "matrix" or not op.inputs:
        return False
    acts = [t for t in op.inputs if graph.tensors[t].kind != "weight"]
    if len(acts) >= 2:
        return True
    first = op.inputs[0]
    return first not in graph.producer or len(graph.consumers.get(first, ())) > 1


def anchor_partition(graph: Graph, ops: Sequence[int], anchors: frozenset[int]) -> list[tuple[int, ...]]:
    """The anchor partition of a block's ops (see the module doc), groups by first op."""
    members = set(ops)
    owner: dict[int, int] = {}
    groups: dict[int, list[int]] = {}
    first_op = ops[0]
    for i in ops:
        inside = [p for p in graph.preds(i) if p in members]
        if i == first_op or i in anchors or not inside:
            owner[i] = i
            groups[i] = [i]
        else:
            root = owner[inside[0]]
            owner[i] = root
            groups[root].append(i)
    return [tuple(g) for _, g in sorted(groups.items())]


def partition_is_valid(graph: Graph, parts: Sequence[tuple[int, ...]]) -> bool:
    """Every part has one output, mixes no host (CPU) op with NPU ops, and the parts form no cycle."""
    for p in parts:
        host = sum(1 for i in p if not graph.ops[i].on_npu)
        if host and host < len(p):
            return False
    owner = {i: k for k, p in enumerate(parts) for i in p}
    deps: dict[int, set[int]] = {k: set() for k in range(len(parts))}
    for k, p in enumerate(parts):
        if len(group_io(graph, p).outputs) != 1:
            return False
        for i in p:
            for q in graph.preds(i):
                o = owner.get(q)
                if o is not None and o != k:
                    deps[k].add(o)
    # Kahn's algorithm over the parts
    indeg = {k: len(d) for k, d in deps.items()}
    users: dict[int, list[int]] = {k: [] for k in deps}
    for k, d in deps.items():
        for o in d:
            users[o].append(k)
    ready = [k for k, v in indeg.items() if v == 0]
    seen = 0
    while ready:
        k = ready.pop()
        seen += 1
        for u in users[k]:
            indeg[u] -= 1
            if indeg[u] == 0:
                ready.append(u)
    return seen == len(parts)


def _signature(graph: Graph, a: int, b: int) -> str:
    """Hash of a segment's structure with tensors named relative to the segment."""

    def ref(t: str) -> list[object]:
        p = graph.producer.get(t)
        tensor = graph.tensors[t]
        where = f"r{p - a}" if p is not None and a <= p <= b else "ext"
        return [where, list(tensor.shape), tensor.dtype]

    rows = []
    for i in range(a, b + 1):
        op = graph.ops[i]
        rows.append([
            op.op_type,
            [ref(t) for t in op.inputs],
            [list(graph.tensors[w].shape) for w in op.weights],
            list(graph.tensors[op.output].shape),
            repr(op.attrs),
            op.on_npu,
        ])
    text = json.dumps(rows, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class GroupInfo:
    """Placement-independent facts about one op set at one batch (what decoding asks).

    Internal to the space (never handed out), so it keeps its own caches of
    working sets by chunk shape.

    Attributes:
        ops: The op set, sorted.
        output: Its one output tensor.
        scopes: Scopes the output may live in (its producer's).
        separable: Whether it may be split along the batch.
        streamable: Inputs that can stream from LLB/DDR tile by tile.
        inputs: Input tensors (weights excluded).
    """

    __slots__ = ("cache", "inputs", "ops", "output", "scopes", "separable", "shared", "streamable")

    def __init__(self, graph: Graph, ops: tuple[int, ...]) -> None:
        io = group_io(graph, ops)
        out = io.outputs[0] if io.outputs else graph.ops[ops[-1]].output
        self._set(graph, ops, io.inputs, out, streamable_inputs(graph, ops))

    def _set(self, graph: Graph, ops: tuple[int, ...], inputs: tuple[str, ...], out: str,
             streamable: frozenset[str]) -> None:
        out_op = graph.ops[graph.producer[out]]
        self.ops = ops
        self.output = out
        self.inputs = inputs
        self.scopes = out_op.allowed_scopes if out_op.on_npu else ("DDR", "LLB", "L1")
        self.separable = all(graph.ops[i].batch_separable for i in ops) and graph.tensors[out].batched
        self.streamable = streamable
        self.cache: dict[tuple[object, ...], float] = {}
        # what does not name tensors (the fit's answers, working-set tables): shared by op
        # sets alike up to tensor names (search_space/_cclass.py), else this op set's own
        self.shared: dict[object, object] = {}

    @classmethod
    def made(cls, graph: Graph, ops: tuple[int, ...], inputs: tuple[str, ...], output: str,
             streamable: frozenset[str]) -> GroupInfo:
        """The facts of ``ops`` given its inputs (:func:`compiler.derive.group_io`'s), its
        output (as :class:`GroupInfo` finds it) and its streamable inputs
        (:func:`compiler.footprint.streamable_inputs`), found elsewhere (the compiled
        analysis, :mod:`search_space._cfirst`); scopes and splittability as here."""
        info = cls.__new__(cls)
        info._set(graph, ops, inputs, output, streamable)
        return info

    @classmethod
    def alike(cls, rep: GroupInfo, ops: tuple[int, ...], inputs: tuple[str, ...],
              streamable: frozenset[str], output: str) -> GroupInfo:
        """The facts of ``ops``, an op set alike to ``rep``'s up to tensor names (its
        inputs, streamable inputs and output given, mapped by position): ``rep``'s scopes
        and splittability, and ``rep``'s :attr:`shared` caches."""
        info = cls.__new__(cls)
        info.ops, info.output, info.inputs, info.streamable = ops, output, inputs, streamable
        info.scopes, info.separable = rep.scopes, rep.separable
        info.cache = {}
        info.shared = rep.shared
        return info


def group_info(graph: Graph, ops: tuple[int, ...]) -> GroupInfo:
    """Facts about an op set (``graph`` sized in the target's compute type)."""
    return GroupInfo(graph, ops)
