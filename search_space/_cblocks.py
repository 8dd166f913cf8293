"""A block's groups in C: :func:`search_space._build.block_parts` over the graph's integer tables.

Pass 1 of decoding forms each block's groups: the whole block, or its anchor partition
(:func:`search_space._structure.anchor_partition`), whichever
:func:`search_space._structure.partition_is_valid` accepts first in the mode's order,
else one group per op. A new block (a range of segments never met under that mode)
asks this once; the search meets new ones all the time. ``search_space/_cpart.c``
repeats those two functions (and the output count of :func:`compiler.derive.group_io`)
over integer tables of the graph this module fills once per space from
:class:`compiler.graph.Graph` (producers per op in ``Graph.preds`` order, consumers of
each op's output, NPU / graph-output / anchor flags), so the parts are the Python
ones (``tests/search_space/test_cblocks.py`` compares every block of several models).

``GRAPHTUNE_PURE_PYTHON=1`` forces the Python functions; a missing extension warns once
(:func:`search_space._ccore.missing`).
"""

from __future__ import annotations

from array import array
from typing import Any

from search_space._ccore import load_extension

Space = Any  # a search_space._build.SpaceLike (importing _build back would close a circle)

MODES = ("whole", "anchors", "ops")
_CODE = {m: k for k, m in enumerate(MODES)}


def _tables(space: Space) -> tuple[bytes, ...]:
    """The graph's tables (see the module doc), once per space."""
    hit: tuple[bytes, ...] | None = getattr(space, "_cblock_tables", None)
    if hit is None:
        g = space.graph
        anchors = space.structure.anchors
        outputs = set(g.outputs)
        pp, pi, cp, ci, fl = [0], [], [0], [], []
        for op in g.ops:
            pi += g.preds(op.index)
            pp.append(len(pi))
            ci += g.consumers.get(op.output, ())
            cp.append(len(ci))
            fl.append((1 if op.on_npu else 0) | (2 if op.output in outputs else 0)
                      | (4 if op.index in anchors else 0))
        hit = tuple(array("i", x).tobytes() for x in (pp, pi, cp, ci, fl))
        space._cblock_tables = hit
    return hit


def partition(space: Space, lo: int, hi: int, mode: str) -> tuple[str, tuple[tuple[int, ...], ...]] | None:
    """(mode found, parts) of the block of ops ``lo..hi`` under ``mode``, as
    :func:`search_space._build.block_parts` finds them; None when the extension is not
    available (the caller runs the Python functions)."""
    mod = load_extension("_cpart")
    if mod is None:
        return None
    found, parts = mod.partition(_tables(space), lo, hi, _CODE[mode])
    return MODES[found], parts


def available() -> bool:
    """Whether block partitions are found in C (built, importable and not disabled)."""
    return load_extension("_cpart") is not None
