"""Op sets alike up to tensor names share their facts (the compiled core's pass 1).

The search meets new op sets all the time: a BERT-large candidate about four, a
ResNet-50 one about one, most of them the same ops as one met before in another layer
(the 24 layers of BERT-large, a stage's bottlenecks). Each new op set's facts
(:class:`search_space._structure.GroupInfo`: its inputs, output, streamable inputs;
the fit's answers; the working-set tables and profiles of the compiled walk) took
the Python definitions a fresh analysis (``compiler.footprint._analyse``, the chain
rows, ``compiler.capacity._facts``) and the working sets' computation.

Two op sets of one graph (at one batch) are *alike* when, walking both in op order,
every op has the same description (:func:`_op_desc`: type, attributes, flags, the
shapes, dtypes, kinds and sizes of its tensors, its :class:`compiler.opshape.OpShape`),
reads its inputs from the same places (the same earlier op of the set, or the same
outside tensor in order of first use), its output is read outside the set or is a
model output alike, each outside tensor is a model output or read outside the set
alike, and their outside tensors sort by name in the same order (the stream buffers
are summed in order of name). Everything the footprint and capacity model read of an
op set is one of these, so alike op sets have the same numbers: a new op set alike to
a known one takes the known one's (its *representative's*) streamable inputs by
position and shares its :attr:`GroupInfo.shared` (the fit's answers, the working-set
tables and profiles) instead of computing them.

Used only with the compiled core (:func:`search_space._ccore.available`), so
``GRAPHTUNE_PURE_PYTHON=1`` decodes every op set from scratch: the differential tests
and the same-seed check compare the two.
"""

from __future__ import annotations

from typing import Any

from compiler.footprint import sample_bytes
from compiler.graph import Graph
from compiler.opshape import op_shapes
from search_space._ccore import available, load_extension
from search_space._cfirst import ascending, first_info, graph_csr
from search_space._structure import GroupInfo, group_info

Space = Any  # a search_space._build.SpaceLike (importing _build back would close a circle)

STATS = {"shared": 0, "new": 0}


class _Classes:
    """Per (space, batch): each op's description code, the representatives by key and the
    compiled class key's tables (``_cdag.class_tables``), when built."""

    __slots__ = ("desc", "graph", "reps", "tables")

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        codes: dict[str, int] = {}
        shapes = op_shapes(graph)
        self.desc = [codes.setdefault(_op_desc(graph, op, shapes[op.index]), len(codes))
                     for op in graph.ops]
        self.reps: dict[tuple[object, ...], GroupInfo] = {}
        self.tables = class_tables(graph, self.desc)


def class_tables(graph: Graph, desc: list[int]) -> Any:
    """The tables :func:`class_key` reads, for ``_cdag.class_key``: per tensor (in the
    graph's order) its name, producer, consumers and whether it is a model output; per op
    its description code, output and inputs. None when the compiled core is not built."""
    mod = load_extension("_cdag")
    if mod is None or not hasattr(mod, "class_key"):
        return None
    names = tuple(graph.tensors)
    index = {t: k for k, t in enumerate(names)}
    in_at, ins, cons_at, cons = graph_csr(graph, names, index)
    outputs = set(graph.outputs)
    return mod.class_tables(names, desc, [index[op.output] for op in graph.ops], in_at, ins,
                            [graph.producer.get(t, -1) for t in names], cons_at, cons,
                            [1 if t in outputs else 0 for t in names])


def _tensor_desc(graph: Graph, t: str) -> tuple[object, ...]:
    x = graph.tensors[t]
    return (x.shape, x.dtype, x.kind, x.elements, x.batch_mult, x.batched, x.storage,
            sample_bytes(graph, t), graph.nbytes(t))


def _op_desc(graph: Graph, op: Any, shape: Any) -> str:
    """Everything about one op but its name, index and tensor names (an op whose text
    elides something, as a large array's repr does, is alike to no other)."""
    text = repr((op.op_type, op.attrs, op.macs, op.flops, op.on_npu, op.batch_separable,
                 op.allowed_scopes, graph.weight_bytes_of(op),
                 tuple(_tensor_desc(graph, t) for t in op.inputs),
                 tuple(_tensor_desc(graph, t) for t in op.weights),
                 _tensor_desc(graph, op.output), shape))
    return f"{text}#{op.index}" if "..." in text else text


def _classes(space: Space, graph: Graph, batch: int) -> _Classes:
    table: dict[int, _Classes] | None = getattr(space, "_cclasses", None)
    if table is None:
        table = space._cclasses = {}
    hit = table.get(batch)
    if hit is None or hit.graph is not graph:
        hit = table[batch] = _Classes(graph)
    return hit


def class_key(graph: Graph, desc: list[int], ops: tuple[int, ...]
              ) -> tuple[tuple[object, ...], tuple[str, ...], str]:
    """The key of an op set's class (see the module doc), its outside tensors in order of
    first use (:func:`compiler.derive.group_io`'s inputs) and its output as
    :class:`GroupInfo` finds it (the first read outside or a model output, else the last
    op's). ``ops`` ascending."""
    pos = {i: k for k, i in enumerate(ops)}
    producer, consumers, g_ops = graph.producer, graph.consumers, graph.ops
    outputs = set(graph.outputs)
    ext: dict[str, int] = {}
    rows: list[object] = []
    first_out = ""
    for i in ops:
        op = g_ops[i]
        refs = []
        for t in op.inputs:
            p = producer.get(t)
            k = pos.get(p) if p is not None else None
            refs.append(k if k is not None else -1 - ext.setdefault(t, len(ext)))
        out = op.output
        outside = out in outputs or any(c not in pos for c in consumers.get(out, ()))
        if outside and not first_out:
            first_out = out
        rows.append((desc[i], tuple(refs), outside))
    names = tuple(ext)
    flags = tuple((t in outputs, all(c in pos for c in consumers.get(t, ()))) for t in names)
    ranks = tuple(sorted(range(len(names)), key=names.__getitem__))
    return (tuple(rows), flags, ranks), names, first_out or g_ops[ops[-1]].output


def shared_info(space: Space, graph: Graph, batch: int, ops: tuple[int, ...]) -> GroupInfo:
    """The facts of op set ``ops`` (``graph`` sized in the target's compute type): with the
    compiled core, taken from an alike op set's where one is known (its ``shared`` caches
    too); else, or for the first of its class, :func:`search_space._structure.group_info`."""
    if not available() or not ascending(ops):
        return group_info(graph, ops)
    classes = _classes(space, graph, batch)
    if classes.tables is not None:  # the same key in C
        key, names, output = load_extension("_cdag").class_key(classes.tables, ops)
    else:
        key, names, output = class_key(graph, classes.desc, ops)
    rep = classes.reps.get(key)
    if rep is None:
        # the first of its class: its analysis in C (search_space/_cfirst.py)
        info = first_info(load_extension("_canalyse"), graph, ops)
        # the first of its class (its facts as the mapping below expects them: else none
        # of the class shares, each computes its own)
        if set(info.streamable) <= set(info.inputs) and info.inputs == names \
                and info.output == output:
            classes.reps[key] = info
        STATS["new"] += 1
        return info
    STATS["shared"] += 1
    where = {t: k for k, t in enumerate(rep.inputs)}
    info = GroupInfo.alike(rep, ops, names, frozenset(names[where[t]] for t in rep.streamable),
                           output)
    # compiler.derive.group_io of ops for the chunk DAG's rows (search_space._cderive, which
    # drops it): its inputs are the key's outside tensors, its outputs those of the ops the
    # key's rows mark as read outside or a model output, in op order (no new analysis: 3.3 an
    # alike op set a BERT-large candidate; tests/search_space/test_cclass.py compares)
    g_ops = graph.ops
    cache: dict[Any, Any] = info.cache
    cache["cio"] = (names, tuple([g_ops[i].output for i, row in zip(ops, key[0]) if row[2]]))
    return info
