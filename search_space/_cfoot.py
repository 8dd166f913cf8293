"""An op set's profile walk and halo terms in C: the packed rows ``search_space/_cprofile.c`` walks.

:func:`compiler.footprint.group_profile` (the walk ``footprint._profile`` over the
per-chain rows ``footprint._chain_rows`` gives) is the one definition of an op set's
live bytes chain by chain; :func:`compiler.capacity.chunk_working_set` adds, for a
chunk shape that cuts a windowed op's rows or splits attention over cores, each
chain's halo and attention terms. The compiled walk (``_cwalk.c``'s ``ws_compute``)
computes a working-set entry itself from:

* :func:`pack_rows`: once per op set, the chain rows as int64 (the group inputs'
  streamable bits and sizes; per chain the output's sizes and flags, the inputs dying
  there with their bits, sizes and flags, and the ops adding a halo or attention
  term), in the Python walk's order;
* :func:`halo_values`: per chunk shape, each such op's
  :func:`compiler.capacity.halo_bytes_per_core` and
  :func:`compiler.capacity.attention_excess_bytes` (the Python definitions).

``_cprofile.c`` repeats ``_profile``'s and ``capacity._work``'s statements over these
integers, in the same order, so the numbers are the same; the differential test
(``tests/search_space/test_cfoot.py``) compares both over every op set of decoded
schedules of several models.
"""

from __future__ import annotations

from array import array
from typing import Any

from compiler.capacity import attention_excess_bytes, halo_bytes_per_core
from compiler.footprint import _analysis, _chain_rows, _streams
from compiler.memo import memo_of
from compiler.opshape import OpKind, op_shapes
from compiler.views import view_sources

# an op set's chain rows packed, and the op of each halo / attention slot
Pack = tuple[bytes, tuple[int, ...]]


def pack_rows(graph: Any, ops: tuple[int, ...], names: tuple[str, ...]) -> Pack | None:
    """The op set's chain rows packed for ``_cprofile.c`` (layout in its header comment),
    streamable bit ``b`` standing for ``names[b]``; and the op of each halo/attention slot.
    None when a number does not fit an int64 or a dying tensor has no size (the Python
    walk would raise: the caller keeps the Python definition)."""
    an = _analysis(graph, ops)
    bit = {t: b for b, t in enumerate(names)}
    zero = (0, 0)
    out: list[int] = [len(an.group_inputs), len(an.chains), 0]
    for t in an.group_inputs:
        s, f = an.size.get(t, zero)
        out += (bit.get(t, -1), s, f)
    shapes = op_shapes(graph)
    roots = view_sources(graph, ops)
    slots: list[int] = []
    for (_out, out_s, out_f, dies_out, lives_kept, lives_out, dying_kept, dying_out, chained,
         anchor, first, chain_ops) in _chain_rows(graph, an):
        hx: list[int] = []
        for i in chain_ops:
            d = shapes[i]
            halo = bool(d.halo_bytes)
            attn = d.kind == OpKind.BATCHED_MATMUL and bool(d.batched)
            if not (halo or attn):
                continue
            src = graph.ops[i].inputs[0] if halo else ""
            hx += (len(slots), int(halo), bit.get(roots.get(src, src), -1), int(attn))
            slots.append(i)
        out += (out_s, out_f, int(dies_out), int(lives_kept), int(lives_out), int(chained),
                int(_streams(anchor, graph)), len(dying_kept), len(dying_out), len(hx) // 4)
        for dying in (dying_kept, dying_out):
            for r, sizes, produced, private in dying:
                if sizes is None:
                    return None
                out += (bit.get(r, -1), sizes[0], sizes[1], int(produced), int(private),
                        int(r == first))
        out += hx
    out[2] = len(slots)
    try:
        return array("q", out).tobytes(), tuple(slots)
    except OverflowError:  # a number beyond int64
        return None


def halo_values(graph: Any, slots: tuple[int, ...], spp: int, cpp: int) -> tuple[bytes, bytes]:
    """Per slot of :func:`pack_rows`, its op's halo bytes per core and attention excess for
    ``spp`` samples on ``cpp`` cores (the Python definitions), packed as doubles. Each op's
    pair is remembered per graph by (op, spp, cpp): an op is in many op sets (BERT-large's
    attention matmuls in every grouping of their layer), its values the same in each."""
    memo = memo_of(graph)
    known: dict[tuple[int, int, int], tuple[float, float]] | None = memo.get(_HALO_KEY)
    if known is None:
        known = memo[_HALO_KEY] = {}
    halo = array("d")
    attn = array("d")
    shapes = None
    for i in slots:
        hit = known.get((i, spp, cpp))
        if hit is None:
            if shapes is None:
                shapes = op_shapes(graph)
            d = shapes[i]
            hit = known[(i, spp, cpp)] = (
                halo_bytes_per_core(d, spp, cpp) if d.halo_bytes else 0.0,
                attention_excess_bytes(d, spp, cpp, graph.float_bytes)
                if d.kind == OpKind.BATCHED_MATMUL and d.batched else 0.0)
        halo.append(hit[0])
        attn.append(hit[1])
    return halo.tobytes(), attn.tobytes()


_HALO_KEY = "search_space._cfoot.halo_values"
