"""Where bytes go when a tensor moves from one placement to another.

A *layout* says where a node's output lives: its memory scope and *pieces*,
each ``(first sample, samples per part, parts)``; part ``p`` of a piece holds
samples ``first + p*spp .. first + (p+1)*spp`` and a sample held by a part of
``k`` cores is cut in ``k`` equal slices, slice ``i`` on the part's ``i``-th
core. A group chunk has one piece; a split transfer has one per output chunk.

:func:`move_plan` compares a source and a destination layout sample by sample
range and returns, per byte of one sample, what every resource carries:

* L1 -> L1: each destination core needs its slice; overlapping bytes already on
  that core stay (free; in place), the rest comes from the source cores over
  the NoC (source DMA port, XY links, destination DMA port);
* LLB or DDR -> L1: the LLB port or DDR channel plus the destination port;
* L1 -> LLB or DDR: the source port plus the LLB port or DDR channel;
* LLB <-> DDR: the system DMAs (LLB port and DDR channel);
* the same off-core scope: a view, nothing moves.

Plans are linear in the bytes per sample, so they are cached per layout pair. With the
compiled plan maker (``sim/_cpack.c``, passed as ``cpack``) :func:`move_plan` makes a new
plan in C, the same plan bit for bit (:func:`_plan` is the reference).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from compiler.layout import Layout, part_ranges, slices
from sim._resources import Chip

__all__ = ["Layout", "MovePlan", "exchange_plan", "fixed_plan", "move_plan"]



@dataclass(frozen=True)
class MovePlan:
    """Coefficients (per byte of one sample, or per byte of a fixed tensor).

    Attributes:
        flows: Resource id -> bytes carried.
        incoming: Destination core -> bytes arriving in its L1.
        staying: Destination core -> bytes already in its L1 (reused in place).
        noc: Bytes crossing the NoC between cores.
        ddr: Bytes through the DDR channel.
        hops: Most links on one route (for the hop latency).
    """

    flows: tuple[tuple[int, float], ...]
    incoming: tuple[tuple[int, float], ...]
    staying: tuple[tuple[int, float], ...]
    noc: float
    ddr: float
    hops: int


_EMPTY = MovePlan((), (), (), 0.0, 0.0, 0)


def move_plan(chip: Chip, src: Layout, dst: Layout, cache: dict[object, MovePlan],
              cpack: Any = None) -> MovePlan:
    """Per-sample-byte movement from layout ``src`` to layout ``dst`` (see module doc);
    ``cpack``: the compiled plan maker (``sim._ctime.load_pack``), or None."""
    key = (src, dst)
    hit = cache.get(key)
    if hit is None:
        hit = _plan(chip, src, dst) if cpack is None else _plan_c(cpack, chip, src, dst)
        cache[key] = hit
    return hit


_SCOPES = {"L1": 0, "LLB": 1, "DDR": 2}  # sim/_cpack.c's scope codes
_FIELDS = ("flows", "incoming", "staying", "noc", "ddr", "hops")
# by id, each chip kept beside its routes as one flat tuple ((a, b)'s at a * cores + b; None
# where the chip has no route: the C raises if a plan needs it, and _plan says what is wrong)
_ROUTES: dict[int, tuple[Chip, tuple[tuple[int, ...] | None, ...]]] = {}


def _plan_c(cpack: Any, chip: Chip, src: Layout, dst: Layout) -> MovePlan:
    """:func:`_plan` made by ``sim/_cpack.c`` (the same plan; :func:`_plan` for a scope,
    core or route the C function does not take: its ValueError, TypeError or OverflowError
    falls back, and Python makes the plan or raises what it raises)."""
    s_scope, d_scope = src[0], dst[0]
    if s_scope == d_scope and s_scope != "L1":
        return _EMPTY
    sc, dc = _SCOPES.get(s_scope), _SCOPES.get(d_scope)
    if sc is None or dc is None:
        return _plan(chip, src, dst)
    hit = _ROUTES.get(id(chip))
    if hit is None or hit[0] is not chip:
        if len(_ROUTES) >= 32:
            _ROUTES.clear()
        n = chip.cores
        hit = _ROUTES[id(chip)] = (chip, tuple(chip.routes.get((a, b))
                                               for a in range(n) for b in range(n)))
    try:
        got = cpack.move_plan(sc, dc, src[1], dst[1], hit[1], chip.cores, len(chip.names),
                              chip.llb, chip.ddr)
    except (ValueError, TypeError, OverflowError):
        # a core or link out of range, a missing route, a value the C does not take (a core
        # past a C long, not an int): Python makes the plan or says what is wrong
        return _plan(chip, src, dst)
    plan = object.__new__(MovePlan)  # the frozen dataclass's value, without its __init__'s
    plan.__dict__.update(zip(_FIELDS, got, strict=True))
    return plan


# a move plan's pieces as part ranges, and the slices between two parts' cores: pure
# functions of tuples met again and again by the plans a tune makes (read, never mutated)
_ranges = lru_cache(maxsize=8192)(part_ranges)
_slices = lru_cache(maxsize=8192)(slices)


def _plan(chip: Chip, src: Layout, dst: Layout) -> MovePlan:
    s_scope, d_scope = src[0], dst[0]
    if s_scope == d_scope and s_scope != "L1":
        return _EMPTY
    flows: dict[int, float] = {}
    incoming: dict[int, float] = {}
    staying: dict[int, float] = {}
    noc = 0.0
    hops = 0
    off = {"LLB": chip.llb, "DDR": chip.ddr}
    s_parts, d_parts = _ranges(src[1]), _ranges(dst[1])
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
            if s_scope == "L1" and d_scope == "L1":
                for a, b, frac in _slices(s_cores, d_cores):
                    nb = n * frac
                    if a == b:
                        staying[b] = staying.get(b, 0.0) + nb
                        continue
                    incoming[b] = incoming.get(b, 0.0) + nb
                    flows[a] = flows.get(a, 0.0) + nb
                    flows[b] = flows.get(b, 0.0) + nb
                    route = chip.routes[(a, b)]
                    for link in route:
                        flows[link] = flows.get(link, 0.0) + nb
                    noc += nb
                    hops = max(hops, len(route))
            elif d_scope == "L1":
                r = off[s_scope]
                flows[r] = flows.get(r, 0.0) + n
                for c in d_cores:
                    flows[c] = flows.get(c, 0.0) + n / len(d_cores)
                    incoming[c] = incoming.get(c, 0.0) + n / len(d_cores)
            elif s_scope == "L1":
                r = off[d_scope]
                flows[r] = flows.get(r, 0.0) + n
                for c in s_cores:
                    flows[c] = flows.get(c, 0.0) + n / len(s_cores)
            else:  # LLB <-> DDR through the system DMAs
                flows[chip.llb] = flows.get(chip.llb, 0.0) + n
                flows[chip.ddr] = flows.get(chip.ddr, 0.0) + n
    return MovePlan(
        tuple(flows.items()), tuple(incoming.items()), tuple(staying.items()), noc,
        flows.get(chip.ddr, 0.0), hops,
    )


def fixed_plan(
    chip: Chip, src_scope: str, src_cores: tuple[int, ...], dst_scope: str,
    dst_cores: tuple[int, ...], cache: dict[object, MovePlan],
) -> MovePlan:
    """Movement of an unbatched tensor (every destination core needs all of it).

    An unbatched L1 tensor is replicated on every core that computed it; a core
    without a copy gets one from the first source core.
    """
    key = ("fixed", src_scope, src_cores, dst_scope, dst_cores)
    hit = cache.get(key)
    if hit is not None:
        return hit
    if src_scope == dst_scope and src_scope != "L1":
        cache[key] = _EMPTY
        return _EMPTY
    flows: dict[int, float] = {}
    incoming: dict[int, float] = {}
    staying: dict[int, float] = {}
    noc, hops = 0.0, 0
    off = {"LLB": chip.llb, "DDR": chip.ddr}
    targets = dst_cores if dst_scope == "L1" else (-1,)
    for c in targets:
        if src_scope == "L1":
            if c in src_cores:
                staying[c] = 1.0
                continue
            a = src_cores[0]
            flows[a] = flows.get(a, 0.0) + 1.0
            if c >= 0:
                route = chip.routes[(a, c)]
                flows[c] = flows.get(c, 0.0) + 1.0
                incoming[c] = 1.0
                for link in route:
                    flows[link] = flows.get(link, 0.0) + 1.0
                noc += 1.0
                hops = max(hops, len(route))
            else:
                r = off[dst_scope]
                flows[r] = flows.get(r, 0.0) + 1.0
        elif c >= 0:
            r = off[src_scope]
            flows[r] = flows.get(r, 0.0) + 1.0
            flows[c] = flows.get(c, 0.0) + 1.0
            incoming[c] = 1.0
        else:
            flows[chip.llb] = flows.get(chip.llb, 0.0) + 1.0
            flows[chip.ddr] = flows.get(chip.ddr, 0.0) + 1.0
    plan = MovePlan(tuple(flows.items()), tuple(incoming.items()), tuple(staying.items()), noc,
                    flows.get(chip.ddr, 0.0), hops)
    cache[key] = plan
    return plan


def exchange_plan(chip: Chip, part: tuple[int, ...], cache: dict[object, MovePlan],
                  reach: tuple[float, ...] = (1.0,)) -> MovePlan:
    """Per byte exchanged between the cores of one part (row cuts inside samples).

    The cores of a part hold consecutive pieces of the rows; what crosses a cut
    (halo rows, a batched matmul's second operand) goes between neighbouring cores
    of the part, spread evenly over the neighbour pairs, half in each direction.
    ``reach[d - 1]`` is the fraction that comes instead from the core ``d`` places
    away (a dilated kernel's halo reaching past the neighbour's rows): it crosses
    every link of that longer route (:func:`sim._model.halo_reach`).
    """
    key = ("exchange", part, reach)
    hit = cache.get(key)
    if hit is not None:
        return hit
    if len(part) < 2:
        cache[key] = _EMPTY
        return _EMPTY
    weighted: list[tuple[int, int, float]] = []
    for dist, frac in enumerate(reach, start=1):
        pairs = [(a, b) for i in range(len(part) - dist)
                 for a, b in ((part[i], part[i + dist]), (part[i + dist], part[i]))]
        weighted += [(a, b, frac / len(pairs)) for a, b in pairs]
    flows: dict[int, float] = {}
    incoming: dict[int, float] = {}
    hops = 0
    for a, b, share in weighted:
        route = chip.routes[(a, b)]
        for r in (a, b, *route):
            flows[r] = flows.get(r, 0.0) + share
        incoming[b] = incoming.get(b, 0.0) + share
        hops = max(hops, len(route))
    plan = MovePlan(tuple(flows.items()), tuple(incoming.items()), (), 1.0, 0.0, hops)
    cache[key] = plan
    return plan
