"""Where a step's output lives, sample by sample: the geometry shared by capacity and timing.

A *layout* says where a node's output lives: its memory scope and *pieces*,
each ``(first sample, samples per part, parts)``; part ``p`` of a piece holds
samples ``first + p*spp .. first + (p+1)*spp`` and a sample held by a part of
``k`` cores is cut in ``k`` equal slices, slice ``i`` on the part's ``i``-th
core. A group chunk has one piece; a split transfer has one per output chunk;
a model input is one DDR piece.

The capacity model (:mod:`compiler.capacity`) uses it to count what each L1
holds and what a step finds already in place; the simulator's movement plans
(``sim/_moves.py``) use the same pieces to route bytes.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from compiler.schedule import GroupSpec, Transfer

__all__ = [
    "Layout",
    "Piece",
    "group_layout",
    "input_layout",
    "part_ranges",
    "samples_per_core",
    "slices",
    "staying_fraction",
    "transfer_layout",
]

Piece = tuple[int, int, tuple[tuple[int, ...], ...]]
Layout = tuple[str, tuple[Piece, ...]]


def group_layout(gr: GroupSpec, chunk: int, batch: int) -> Layout:
    """Layout of chunk ``chunk`` of group ``gr``."""
    samples = batch // gr.split
    place = gr.chunks[chunk]
    parts = place.core_bind
    return (place.mem_scope, ((chunk * samples, samples // len(parts), parts),))


def transfer_layout(tr: Transfer, batch: int) -> Layout:
    """Layout of a split/concat transfer's result (one piece per output chunk)."""
    samples = batch // tr.dst_factor
    parts = tr.placement.core_bind
    spp = samples // len(parts)
    return (tr.placement.mem_scope, tuple((d * samples, spp, parts) for d in tr.dst_chunks))


@lru_cache(maxsize=64)
def input_layout(batch: int) -> Layout:
    """A model input: the whole batch in DDR (one tuple per batch: the plan maker asks on
    every new step plan)."""
    return ("DDR", ((0, batch, ((-1,),)),))


def part_ranges(pieces: tuple[Piece, ...]) -> list[tuple[int, int, tuple[int, ...]]]:
    """``(first sample, end sample, cores)`` of every part, sorted by first sample."""
    out = []
    for first, spp, parts in pieces:
        for p, cores in enumerate(parts):
            lo = first + p * spp
            out.append((lo, lo + spp, cores))
    out.sort()
    return out


def slices(src: tuple[int, ...], dst: tuple[int, ...]) -> list[tuple[int, int, float]]:
    """``(src core, dst core, fraction of a sample)`` for equal contiguous slices."""
    out = []
    ks, kd = len(src), len(dst)
    for j, d in enumerate(dst):
        lo, hi = j / kd, (j + 1) / kd
        for i, s in enumerate(src):
            a, b = max(lo, i / ks), min(hi, (i + 1) / ks)
            if b > a:
                out.append((s, d, b - a))
    return out


@lru_cache(maxsize=65536)
def samples_per_core(layout: Layout) -> dict[int, float]:
    """Samples' worth of bytes each core holds (a part of ``k`` cores: ``spp / k`` each).

    Cached per layout: do not mutate the returned dict.
    """
    per: dict[int, float] = {}
    for _, spp, parts in layout[1]:
        for part in parts:
            share = spp / len(part)
            for c in part:
                per[c] = per.get(c, 0.0) + share
    return per


@lru_cache(maxsize=65536)
def staying_fraction(src: Layout, dst: Layout) -> dict[int, float]:
    """Per destination core, samples' worth of ``src`` already in its L1 for ``dst``.

    Only an L1 source can leave bytes in place; the rest must move (see
    ``sim/_moves.py``). Units: bytes of one sample. Cached per layout pair: do not
    mutate the returned dict.
    """
    if src[0] != "L1" or dst[0] != "L1":
        return {}
    out: dict[int, float] = {}
    s_parts, d_parts = part_ranges(src[1]), part_ranges(dst[1])
    i = 0
    for d_lo, d_hi, d_cores in d_parts:
        while i < len(s_parts) and s_parts[i][1] <= d_lo:
            i += 1
        j = i
        while j < len(s_parts) and s_parts[j][0] < d_hi:
            s_lo, s_hi, s_cores = s_parts[j]
            n = min(s_hi, d_hi) - max(s_lo, d_lo)
            j += 1
            if n <= 0:
                continue
            for a, b, frac in slices(s_cores, d_cores):
                if a == b:
                    out[b] = out.get(b, 0.0) + n * frac
    return out
