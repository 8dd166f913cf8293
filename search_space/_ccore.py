"""The compiled scope walk: pass 3 of decoding in C, the Python walk as reference and fallback.

Decoding's third pass (:mod:`search_space._build`: every result's scope along the
capacity walk, with the look-ahead) runs step by step in the interpreter. Here the
same walk runs in C (``search_space/_cwalk.c``) over flat tables that this module
fills from the Python definitions, so every number has one definition:

* per step: kind (group chunk, transfer whose scope is free, fixed transfer), the
  scope asked for (the group's policy for its chunk, the transfer-scope choice, or
  ``auto``), the scopes the op may write, the steps it reads, its cores, its
  result's bytes per core in L1 (:func:`compiler.layout.samples_per_core` of its
  layout times :func:`compiler.footprint.sample_bytes`) and in the LLB;
* per group chunk: its inputs (source step, streamable bit) and its working-set
  table over (streamed inputs, output streamed out, an L1 input held) from
  :func:`compiler.capacity.chunk_working_set`, built once per (op set, samples per
  part, cores per part) and kept by the space;
* per (reader, source) pair: the bytes of the source a reader finds in place
  (:func:`compiler.layout.staying_fraction`), kept by the space per layout pair.

The C walk adds and compares these in the order the Python code does
(``CapacityWalk._evaluate_*``, ``Decoding._ahead_ok``/``_work_lb``/``commit``), so
a result at exactly capacity is decided the same way; the differential tests
(``tests/search_space/test_ccore.py``) decode the same vectors both ways and
compare the schedules, memory plans and pre-check verdicts.

When a step overflows even at its slowest scope (a schedule the capacity model
rejects: rare, ~1% of samples), the C walk stops and the decode is redone in
Python, which also explains the overflow (:class:`compiler.capacity.CapacityIssue`).

``GRAPHTUNE_PURE_PYTHON=1`` forces the Python walk; when the extension is missing
(no C compiler at install time) or fails to import, decoding warns once and uses
the Python walk.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from compiler.capacity import MemoryPlan, StepMemory, chunk_working_set
from compiler.derive import Node
from compiler.footprint import sample_bytes
from compiler.layout import Piece, staying_fraction
from search_space._dims import SCOPE_POLICIES, TRANSFER_SCOPES
from search_space._order import breadth_order, depth_order

if TYPE_CHECKING:
    from search_space._build import Decoding
    from search_space._space import Space

_CODE = {"L1": 0, "LLB": 1, "DDR": 2}
_NAME = ("L1", "LLB", "DDR")
_AUTO = 3

# how many decodes took which path (the differential tests check the C path ran)
STATS = {"c": 0, "overflow": 0}

_module: Any = None
_state = {"tried": False}


def _load() -> Any:
    """The extension module, or None (pure Python forced, or not built: warned once)."""
    if os.environ.get("GRAPHTUNE_PURE_PYTHON", "") not in ("", "0"):
        return None
    if _state["tried"]:
        return _module
    _state["tried"] = True
    try:
        from search_space import _cwalk  # type: ignore[attr-defined]
    except ImportError as exc:
        warnings.warn(f"graphtune: the compiled search core is not available ({exc}); "
                      "decoding runs in Python (slower; see README, Install)",
                      RuntimeWarning, stacklevel=3)
        return None
    globals()["_module"] = _cwalk
    return _cwalk


def available() -> bool:
    """Whether decoding uses the compiled walk (built, importable and not disabled)."""
    return _load() is not None


class _Walked:
    """What :meth:`Decoding.schedule` reads of a walk: each step's scope and the plan."""

    __slots__ = ("layouts", "_plan")

    def __init__(self, scopes: list[str], plan: MemoryPlan) -> None:
        self.layouts = [(s, None) for s in scopes]
        self._plan = plan

    def plan(self) -> MemoryPlan:
        return self._plan


def _tables(space: Space) -> dict[str, dict[Any, Any]]:
    t: dict[str, dict[Any, Any]] | None = getattr(space, "_ctables", None)
    if t is None:
        t = {"result": {}, "work": {}, "edge": {}, "streamed": {}, "inputs": {}}
        space._ctables = t  # type: ignore[attr-defined]
        return t
    if sum(len(v) for v in t.values()) > 400_000:  # bounded, like the value table
        for v in t.values():
            v.clear()
    return t


def _result(tab: dict[Any, Any], pieces: tuple[Piece, ...], sizes: tuple[int, int]
            ) -> tuple[tuple[tuple[int, float], ...], float, tuple[int, ...], tuple[int, ...]]:
    """Bytes per core in L1 (``CapacityWalk.node_l1``), in the LLB (``node_total``), the
    cores of the parts in order, and the same without repeats (a transfer's usage)."""
    key = (pieces, sizes)
    hit = tab.get(key)
    if hit is None:
        sb, fb = sizes
        per: dict[int, float] = {}
        for _, spp, parts in pieces:  # compiler.layout.samples_per_core
            for part in parts:
                share = spp / len(part)
                for c in part:
                    per[c] = per.get(c, 0.0) + share
        l1 = tuple((c, spc * sb + fb) for c, spc in per.items())
        total = sum(spp * len(parts) for _, spp, parts in pieces) * sb + fb
        flat = tuple(c for _, _, parts in pieces for p in parts for c in p)
        hit = tab[key] = (l1, float(total), flat, tuple(dict.fromkeys(flat)))
    return hit  # type: ignore[no-any-return]


def _edge(tab: dict[Any, Any], src: tuple[Piece, ...], dst: tuple[Piece, ...],
          sizes: tuple[int, int]) -> tuple[tuple[tuple[int, float], ...], float, tuple[int, ...]]:
    """Bytes of a source result a group chunk finds in its L1 (``Decoding._staying``)."""
    key = (src, dst, sizes)
    hit = tab.get(key)
    if hit is None:
        sb, fb = sizes
        frac = staying_fraction(("L1", src), ("L1", dst)) if sb else {}
        stay = tuple((c, n * sb) for c, n in frac.items())
        cores: tuple[int, ...] = ()
        if fb:
            src_cores = {c for _, _, parts in src for p in parts for c in p}
            cores = tuple(c for _, _, parts in dst for p in parts for c in p if c in src_cores)
        hit = tab[key] = (stay, float(fb), cores)
    return hit  # type: ignore[no-any-return]


def _work(tab: dict[Any, Any], dec: Decoding, info: Any, spp: int, cpp: int
          ) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """A chunk shape's working sets by (streamed mask, output streamed out, held)."""
    key = (info.ops, spp, cpp)
    hit = tab.get(key)
    if hit is None:
        names = tuple(t for t in info.inputs if t in info.streamable)
        table = []
        for mask in range(1 << len(names)):
            st = frozenset(t for b, t in enumerate(names) if mask >> b & 1)
            for off in (False, True):
                for held in (False, True):
                    table.append(chunk_working_set(dec.mem, info.ops, st, off, held, spp, cpp))
        hit = tab[key] = (names, tuple(table))
    return hit  # type: ignore[no-any-return]


def scope_walk(dec: Decoding, get: Callable[[int], int]) -> dict[Node, int] | None:
    """Order the chunk DAG and walk the scopes in C; the scope parameter of each step.

    Returns None (nothing decided, ``dec`` untouched but for its order) when the
    compiled walk is not available or a step overflows: the caller walks in Python.
    The reader is asked the same parameters in the same order as the Python walk.
    """
    mod = _load()
    if mod is None:
        return None
    from search_space._build import chunk_scopes
    space = dec.space
    tabs = _tables(space)
    splits = {gr.name: gr.split for gr in dec.groups}
    if dec.order == "depth":
        nodes = depth_order(dec.deps, dec.outs, splits, dec.lookahead)
    else:
        nodes = breadth_order(dec.deps, dec.topo, splits)
    pos = {node: i for i, node in enumerate(nodes)}
    deps = dec.deps
    outs = set(dec.outs)
    batch = dec.batch
    g = dec.mem
    by_name, by_out, transfer_by_name, fixed = dec.by_name, dec.by_out, dec.transfer_by_name, dec.fixed
    rtab, wtab, etab = tabs["result"], tabs["work"], tabs["edge"]
    pieces_of: list[tuple[Piece, ...]] = []
    sizes_of: list[tuple[int, int]] = []
    provides: list[str] = []
    rows: list[tuple[Any, ...]] = []  # per step, all but the staying tables
    infos: list[Any] = []
    work_names: list[tuple[str, ...]] = []
    scope_dim: dict[Node, int] = {}
    choice: dict[str, str] = {}
    d_scope, slot_of = space.d_scope, space.slot
    for node in nodes:
        if node[0] == "g":
            gr = by_name[node[1]]
            samples = batch // gr.split
            parts = gr.binds[node[2]]
            pieces: tuple[Piece, ...] = ((node[2] * samples, samples // len(parts), parts),)
            out = gr.info.output
            key = gr.name
            d = d_scope[gr.scope_at]
            ch = choice.get(key)
            if ch is None:
                ch = choice[key] = SCOPE_POLICIES[get(d)]
            scope_dim[node] = d
            want = _CODE[chunk_scopes(ch, gr.split, gr.wave)[node[2]]]
            allowed = 0
            for s in gr.info.scopes:
                allowed |= 1 << _CODE[s]
            rows.append((0, want, allowed, 2))
            infos.append(gr)
        else:
            t = transfer_by_name[node[1]]
            samples = batch // t.dst_factor
            parts = t.placement.core_bind
            spp = samples // len(parts)
            pieces = tuple((dc * samples, spp, parts) for dc in t.dst_chunks)
            out = t.tensor
            prod = by_out.get(t.tensor)
            init = _CODE[t.placement.mem_scope]
            if prod is None or t.name in fixed:
                rows.append((2, 2, 7, init))
            else:
                key = "t:" + prod.name
                d = slot_of[prod.slot] + 5
                ch = choice.get(key)
                if ch is None:
                    ch = choice[key] = TRANSFER_SCOPES[get(d)]
                scope_dim[node] = d
                rows.append((1, _AUTO if ch == "auto" else _CODE[ch], 7, init))
            infos.append(None)
        pieces_of.append(pieces)
        sizes_of.append(sample_bytes(g, out))
        provides.append(out)
    edges: list[tuple[Any, ...]] = []
    edge_at: dict[tuple[Any, ...], int] = {}
    steps: list[tuple[Any, ...]] = []
    for k, node in enumerate(nodes):
        reads = [pos[d] for d in deps.get(node, ())]
        l1, total, flat, distinct = _result(rtab, pieces_of[k], sizes_of[k])
        gr = infos[k]
        if gr is None:
            steps.append((*rows[k], reads, [-1] * len(reads), distinct, l1, total, (), (),
                          node in outs))
            work_names.append(())
            continue
        info = gr.info
        redges = []
        for d in reads:
            ekey = (pieces_of[d], pieces_of[k], sizes_of[d])
            e = edge_at.get(ekey)
            if e is None:
                e = edge_at[ekey] = len(edges)
                edges.append(_edge(etab, pieces_of[d], pieces_of[k], sizes_of[d]))
            redges.append(e)
        names, work = _work(wtab, dec, info, gr.samples // gr.parts, gr.cores // gr.parts)
        work_names.append(names)
        src = {provides[d]: q for q, d in enumerate(reads)}  # the last read of a tensor wins
        inputs = []
        for t in info.inputs:
            q = src.get(t)
            bit = names.index(t) if t in info.streamable else -1
            inputs.append((-1, bit, -1) if q is None else (reads[q], bit, redges[q]))
        steps.append((*rows[k], reads, redges, flat, l1, total, inputs, work, node in outs))
    target = space.target
    res = mod.walk(float(target.l1.data_bytes), float(target.llb.bytes),
                   target.chip.cores_per_cluster, steps, edges)
    if res is None:
        STATS["overflow"] += 1
        return None
    STATS["c"] += 1
    scopes, masks, helds, usage, peak_l1, peak_llb = res
    stab = tabs["streamed"]
    mems = []
    empty: frozenset[str] = frozenset()
    for k in range(len(nodes)):
        st = steps[k]
        if infos[k] is None:
            mems.append(StepMemory(tuple(zip(st[6], usage[k])), empty, False))
            continue
        skey = (work_names[k], masks[k])
        streamed = stab.get(skey)
        if streamed is None:
            streamed = stab[skey] = frozenset(t for b, t in enumerate(work_names[k])
                                              if masks[k] >> b & 1)
        mems.append(StepMemory(tuple(zip(st[6], usage[k])), streamed, helds[k]))
    plan = MemoryPlan(tuple(mems), tuple(int(x) for x in peak_l1), int(peak_llb), None)
    dec.nodes = nodes
    dec.walk = _Walked([_NAME[s] for s in scopes], plan)  # type: ignore[assignment]
    return scope_dim
