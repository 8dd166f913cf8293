"""An op set met for the first time, analysed in C (``search_space/_canalyse.c``).

Decoding meets new op sets all the time (BERT-large: about one new class of op sets per
candidate, :mod:`search_space._cclass`). Each took the Python analysis twice over:
:func:`search_space._structure.group_info` (``compiler.derive.group_io`` and
``compiler.footprint.streamable_inputs``, that is ``footprint._analyse``) and, for the
compiled walk's working sets, ``compiler.capacity._facts`` and
:func:`search_space._cfoot.pack_rows` (``footprint._chain_rows``). ``_canalyse.c`` walks
the same statements over integer tables this module fills once per graph from the Python
definitions (``compiler.views.VIEW_OPS``, ``footprint.is_elementwise``/``_streams``/
``_MOVE_OPS``, ``compiler.opshape.op_shapes``, ``footprint.sample_bytes``), so every
number keeps its one definition:

* :func:`first_info`: the op set's :class:`~search_space._structure.GroupInfo` (inputs,
  output, streamable inputs; scopes and splittability as ``GroupInfo`` finds them);
* :func:`io_of`: its inputs and outputs (:func:`compiler.derive.group_io`), for the
  compiled chunk DAG's rows (``search_space._cderive``);
* :func:`ws_parts`: the shape-independent parts of the compiled walk's working sets
  (``search_space._ccore._ws_def``): the stream buffers' sizes and windows
  (:func:`compiler.capacity.stream_window`), the output's sizes, the packed chain rows
  and whether the op set has windowed or attention ops.

A first-of-class op set is analysed once: :func:`first_info` keeps its analysis in the op
set's cache, :func:`ws_parts` (for names in its order) and :func:`io_of` read it there, and
``_cderive`` drops it with the chunk DAG's rows (issue 20: three analyses were ~3 % of a
ResNet-50 candidate's instructions at warm 100). An op set alike to a known one is not
analysed at all: ``search_space._cclass.shared_info`` reads its ``group_io`` from its class
key.

The extension module is handed in by the caller (``search_space._ccore.load_extension``:
None when pure Python is forced or it is not built), and without it, or where the C
analysis gives no packed rows (``pack_rows`` would return None or raise), the Python
definitions answer: ``GRAPHTUNE_PURE_PYTHON=1`` never comes here. The differential test
``tests/search_space/test_cfirst.py`` compares both over the op sets of decoded schedules
of several models and random op ranges.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import lt
from typing import Any

from compiler.capacity import STREAM_TILE_ELEMENTS, _facts, _stream_buffers, stream_window
from compiler.derive import group_io
from compiler.footprint import _MOVE_OPS, _sample_table, _streams, is_elementwise
from compiler.memo import memo_of
from compiler.opshape import OpKind, op_shapes
from compiler.views import VIEW_OPS
from search_space._cfoot import pack_rows
from search_space._structure import GroupInfo, group_info

_KEY = "search_space._cfirst.tables"
# op flags (``_canalyse.c``)
_VIEW, _EW, _STREAMS, _MOVE, _HALO, _ATTN = 1, 2, 4, 8, 16, 32

STATS = {"c": 0}


class _Tables:
    """Per graph: the capsule ``_canalyse.analyse`` reads, the tensor names by index and
    the indices by name."""

    __slots__ = ("cap", "index", "names")

    def __init__(self, cap: Any, names: tuple[str, ...], index: dict[str, int]) -> None:
        self.cap, self.names, self.index = cap, names, index


def tables(mod: Any, graph: Any) -> _Tables | None:
    """The graph's tables (made once per graph object: the sizes are its own), or None
    when a number does not fit the C tables (the Python definitions answer)."""
    memo = memo_of(graph)
    hit = memo.get(_KEY, False)
    if hit is not False:
        return hit  # type: ignore[no-any-return]
    names = tuple(graph.tensors)
    index = {t: k for k, t in enumerate(names)}
    shapes = op_shapes(graph)
    sizes = _sample_table(graph)
    out: list[int] = []
    flags: list[int] = []
    in_at, ins, cons_at, cons = graph_csr(graph, names, index)
    for op in graph.ops:
        out.append(index[op.output])
        d = shapes[op.index]
        flags.append((_VIEW if op.op_type in VIEW_OPS and len(op.inputs) == 1 else 0)
                     | (_EW if is_elementwise(op, graph) else 0)
                     | (_STREAMS if _streams(op, graph) else 0)
                     | (_MOVE if op.op_type in _MOVE_OPS else 0)
                     | (_HALO if d.halo_bytes else 0)
                     | (_ATTN if d.kind == OpKind.BATCHED_MATMUL and d.batched else 0))
    outputs = set(graph.outputs)
    result: _Tables | None
    try:
        cap = mod.tables(names, out, in_at, ins, flags, [sizes[t][0] for t in names],
                         [sizes[t][1] for t in names], [graph.tensors[t].elements for t in names],
                         [1 if t in outputs else 0 for t in names], cons_at, cons)
        result = _Tables(cap, names, index)
    except (OverflowError, ValueError):  # a size past int64: the Python definitions
        result = None
    memo[_KEY] = result
    return result


def graph_csr(graph: Any, names: tuple[str, ...], index: dict[str, int]
              ) -> tuple[list[int], list[int], list[int], list[int]]:
    """Per op its input tensors' indices and per tensor (``names``, indexed by ``index``) its
    consumer ops, as CSR offsets and entries: (in_at, ins, cons_at, cons)."""
    in_at: list[int] = [0]
    ins: list[int] = []
    for op in graph.ops:
        ins += [index[t] for t in op.inputs]
        in_at.append(len(ins))
    cons_at: list[int] = [0]
    cons: list[int] = []
    for t in names:
        cons += graph.consumers.get(t, ())
        cons_at.append(len(cons))
    return in_at, ins, cons_at, cons


class Analysis:
    """What ``_canalyse.analyse`` found of an op set, by tensor name (see its header)."""

    __slots__ = ("attention", "inputs", "output", "outputs", "pack", "readers", "streamable",
                 "windowed")

    def __init__(self, tb: _Tables, graph: Any, ops: tuple[int, ...], raw: tuple[Any, ...]) -> None:
        names = tb.names
        ins, outs, st, rd, pack, slots, self.windowed, self.attention = raw
        self.inputs = tuple([names[k] for k in ins])
        self.outputs = tuple([names[k] for k in outs])
        self.output = self.outputs[0] if self.outputs else graph.ops[ops[-1]].output
        self.streamable = frozenset([names[k] for k in st])
        self.readers = {names[k]: r for k, r in zip(st, rd)}
        self.pack: tuple[bytes, tuple[int, ...]] | None = None if pack is None else (pack, slots)


def analyse(mod: Any, graph: Any, ops: tuple[int, ...],
            names: Sequence[str] | None = None) -> Analysis | None:
    """The C analysis of ``ops`` (ascending) with the packed rows' streamable bits standing
    for ``names`` (None: its own streamable inputs in the inputs' order); None without the
    extension or its tables."""
    if mod is None:
        return None
    tb = tables(mod, graph)
    if tb is None:
        return None
    idx = None if names is None else tuple([tb.index[t] for t in names])
    STATS["c"] += 1
    return Analysis(tb, graph, ops, mod.analyse(tb.cap, ops, idx))


def ascending(ops: tuple[int, ...]) -> bool:
    """Whether ``ops`` strictly ascend (what the C analysis and class keys take), compared in
    C (``map``), not one generator step per pair: a decode asks it of every op set it meets
    first (a quarter of a new op set's facts on BERT-large, measured)."""
    return all(map(lt, ops, ops[1:]))


def first_info(mod: Any, graph: Any, ops: tuple[int, ...]) -> GroupInfo:
    """:func:`search_space._structure.group_info` of an op set (``ops`` ascending), from
    the C analysis when ``mod`` (``_canalyse``) is given."""
    an = analyse(mod, graph, ops)
    if an is None:
        return group_info(graph, ops)
    info = GroupInfo.made(graph, ops, an.inputs, an.output, an.streamable)
    # kept for ws_parts and io_of of the same op set: one analysis, not three (~33k
    # instructions each, ~0.7 first-of-class op sets a ResNet-50 candidate at warm 100)
    cache: dict[Any, Any] = info.cache  # typed for its working sets; others keep more there
    cache["can"] = an
    return info


def io_of(mod: Any, graph: Any, ops: tuple[int, ...], an: Analysis | None = None
          ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """:func:`compiler.derive.group_io`'s (inputs, outputs) of ``ops`` (ascending), from
    the C analysis when ``mod`` (``_canalyse``) is given: ``an`` (the analysis
    :func:`first_info` kept, of ``ops`` in the same model: inputs and outputs are the
    graph's structure, the same at any dtype) when given, else a new one."""
    if an is None or mod is None:
        an = analyse(mod, graph, ops)
    if an is None:
        io = group_io(graph, ops)
        return io.inputs, io.outputs
    return an.inputs, an.outputs


class _Flags:
    """``windowed`` and ``attention`` of an op set (what ``_ws_def`` reads of its facts)."""

    __slots__ = ("attention", "windowed")

    def __init__(self, windowed: bool, attention: bool) -> None:
        self.windowed, self.attention = windowed, attention


def ws_parts(mod: Any, mem: Any, ops: tuple[int, ...], names: tuple[str, ...],
             kept: Analysis | None = None
             ) -> tuple[Any, bool, int, tuple[int, int], tuple[tuple[int, int, int, float | None], ...],
                        tuple[bytes, tuple[int, ...]] | None]:
    """The shape-independent parts of an op set's working sets the compiled walk reads
    (``search_space._ccore._ws_def``): (what has ``windowed``/``attention``, whether
    ``names`` are all streamable, the stream tile's bytes, the output's sizes, per name in
    order of name (its bit, bytes per sample, fixed bytes, window), the packed chain rows or
    None). From the C analysis when ``mod`` is given (``kept``, :func:`first_info`'s of
    ``ops`` in ``mem``, when ``names`` are its streamable inputs in the inputs' order: the
    bits its packed rows stand for), else the Python definitions (``capacity._facts``,
    ``_stream_buffers``, :func:`search_space._cfoot.pack_rows`)."""
    tile = STREAM_TILE_ELEMENTS * mem.float_bytes
    if mod is not None and kept is not None and \
            names == tuple([t for t in kept.inputs if t in kept.streamable]):
        an: Analysis | None = kept
    else:
        an = analyse(mod, mem, ops, names)
    order = sorted(range(len(names)), key=names.__getitem__)
    if an is None:
        f = _facts(mem, ops)
        bits = []
        for b in order:
            ((sb, fb, window),) = _stream_buffers(mem, f, frozenset((names[b],)))
            bits.append((b, sb, fb, window))
        ok = set(names) <= f.streamable
        return (f, ok, tile, f.sizes[f.output], tuple(bits),
                pack_rows(mem, ops, names) if ok else None)
    sizes = _sample_table(mem)
    bits = []
    for b in order:
        t = names[b]
        sb, fb = sizes[t]
        bits.append((b, sb, fb, stream_window(mem, an.readers.get(t), sb, fb)))
    ok = set(names) <= an.streamable
    pack = an.pack if ok else None
    if ok and pack is None:  # the Python definition decides (None, or its exception)
        pack = pack_rows(mem, ops, names)
    return _Flags(an.windowed, an.attention), ok, tile, sizes[an.output], tuple(bits), pack
