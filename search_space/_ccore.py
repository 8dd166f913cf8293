"""The compiled scope walk: pass 3 of decoding in C, the Python walk as reference and fallback.

Decoding's third pass (:mod:`search_space._build`: every result's scope along the
capacity walk, with the look-ahead) runs step by step in the interpreter. Here the
same walk runs in C (``search_space/_cwalk.c``) over flat tables that this module
fills from the Python definitions, so every number has one definition:

* per step: kind (group chunk, transfer whose scope is free, fixed transfer), the
  scope asked for (the group's policy for its chunk, the transfer-scope choice, or
  ``auto``), the scopes the op may write, the steps it reads, its cores, its
  result's bytes per core in L1 (:func:`compiler.layout.samples_per_core` of its
  layout times :func:`compiler.footprint.sample_bytes`) and in the LLB; handed over
  per group and per transfer (:func:`_step_rows`), the C walk making each step's row
  from its group's or transfer's (``index`` and ``walk_rows`` in ``_cwalk.c``); when
  the chunk DAG was derived in C, the transfers' rows and the order's references come
  packed from ``_cdag.derive`` (:func:`search_space._crows.packed_rows`: no per-transfer
  Python);
* per group chunk: its inputs (source step, streamable bit) and its working-set
  table over (streamed inputs, output streamed out, an L1 input held), one per (op
  set, samples per part, cores per part) kept by the space, each entry computed when
  the walk first asks for it and kept in the table (later decodes, the group's other
  chunks and the fit find it there): in C (``ws_compute``, from the shape-independent
  parts :func:`_ws_def` takes from the Python definitions: the op set's profiles from
  :func:`compiler.footprint.group_profile`, its stream buffers' sizes and windows)
  when the chunk shape adds no halo or attention term, else by calling back
  :func:`compiler.capacity.chunk_working_set`; the same sums in the same order;
* per (reader, source) pair, the bytes of the source a reader finds in place: the
  C walk computes them from the layouts' pieces with
  :func:`compiler.layout.staying_fraction`'s arithmetic (same operations, same
  order), only for the pairs it asks about.

The C walk adds and compares these in the order the Python code does
(``CapacityWalk._evaluate_*``, ``Decoding._ahead_ok``/``_work_lb``/``commit``), so
a result at exactly capacity is decided the same way; the differential tests
(``tests/search_space/test_ccore.py``) decode the same vectors both ways and
compare the schedules, memory plans and pre-check verdicts.

When a step overflows even at its slowest scope (a schedule the capacity model
rejects: a few % of samples, a third of the children bred on ResNet-50 with the
capacity repair's re-decodes), the C walk goes on as the Python walk does (the
result is placed all the same) and keeps what the first overflow is explained
with: the live results at that moment and the bytes needed; :func:`_issue` writes
the :class:`compiler.capacity.CapacityIssue` exactly as ``CapacityWalk.l1_issue`` /
``llb_issue`` do, and the plan (up to the overflow) is remembered like any other.

The plan's per-step memory comes back packed and is built into ``StepMemory`` values
only when a reader asks for the plan's steps (:class:`search_space._cplan._LazyPlan`).

``GRAPHTUNE_PURE_PYTHON=1`` forces the Python walk; when the extension is missing
(no C compiler at install time) or fails to import, decoding warns once and uses
the Python walk.
"""

from __future__ import annotations

import importlib
import os
import sys
from array import array
from collections.abc import Callable, Mapping
from functools import partial
from operator import attrgetter
from typing import Any

from compiler.capacity import (
    chunk_working_set,
    llb_weight_tiles,
)
from compiler.derive import Node
from compiler.footprint import group_profile, sample_bytes, weight_bytes
from search_space._cfirst import ws_parts
from search_space._cfoot import halo_values
from search_space._cglue import CODE, wants
from search_space._cplan import _Walked, streamed_of
from search_space._crows import _cut_sides, _issue, _ScopeDims, _StepRows, l1_halo, packed_rows
from search_space._order import breadth_order, depth_order

# a search_space._build.Decoding and a search_space.Space; typed Any because _build
# calls this module (importing either back would close a circle, ARCHITECTURE.md)
Decoding = Any
Space = Any

_CODE = CODE
_NAME = ("L1", "LLB", "DDR")

# how many decodes took which path (the differential tests check the C path ran)
STATS = {"c": 0, "overflow": 0, "wide": 0}
_MAX_STREAMED = 61  # streamable inputs of one group the C walk's masks can hold (64-bit)
_LIST_STREAMED = 16  # up to this many, the working-set table is a list; wider, a dict
_FIT_STREAMED = 8  # up to this many, the fit reads the walk's table (made for every shape it tries)


_state = {"warned": False}
_modules: dict[str, Any] = {}
_UNSET = object()


def load_extension(name: str) -> Any:
    """The compiled module ``search_space.<name>``, or None: pure Python forced
    (``GRAPHTUNE_PURE_PYTHON``) or not built (one import attempt per process; the first
    missing part warns once, :func:`missing`)."""
    if _PURE_OFF is not None:  # _pure_forced() inlined: ~20-50 calls per candidate
        v = _ENV_DATA.get(_PURE_KEY)
        if v is not None and v not in _PURE_OFF:
            return None
    elif _pure_forced():
        return None
    mod = _modules.get(name, _UNSET)
    if mod is not _UNSET:
        return mod
    if name not in _modules:
        try:
            mod = importlib.import_module(f"search_space.{name}")
            for need in _NEEDS.get(name, ()):
                if not hasattr(mod, need):  # a build older than this source
                    raise ImportError(f"search_space.{name} is an older build (no {need}); "
                                      "reinstall: pip install -e .")
            _modules[name] = mod
        except ImportError as exc:
            _modules[name] = None
            missing(exc)
    return _modules[name]


# GRAPHTUNE_PURE_PYTHON is read at every call (tests and benches set it at run time), from
# os.environ's own table: a dictionary look-up, not os.environ's encode and decode (every
# decode asks ~20 times)
_ENV_DATA: Any = getattr(os.environ, "_data", None)
_PURE_KEY: Any = os.environ.encodekey("GRAPHTUNE_PURE_PYTHON") if type(_ENV_DATA) is dict else None
_PURE_OFF = frozenset(os.environ.encodevalue(v) for v in ("", "0")) if _PURE_KEY is not None else None


def _pure_forced() -> bool:
    """Whether ``GRAPHTUNE_PURE_PYTHON`` forces the Python decoder (set and neither "" nor "0")."""
    if _PURE_OFF is not None:
        v = _ENV_DATA.get(_PURE_KEY)
        return v is not None and v not in _PURE_OFF
    return os.environ.get("GRAPHTUNE_PURE_PYTHON", "") not in ("", "0")


# what each extension's current build has that older builds lack: an extension left from an
# older build (the editable install not redone) is treated as missing, not called wrongly
_NEEDS = {"_cwalk": ("rewalk", "fits", "ws_halo"), "_cdag": ("WALK_INDEX",),
          "_cshape": ("CROW_TAB", "CTAB_PARTS", "FITS_FAST", "block_rows", "CDAG_IO")}


def _load() -> Any:
    """The compiled walk (``_cwalk``), or None."""
    return load_extension("_cwalk")


def missing(exc: ImportError) -> None:
    """Warn, once per process, that a part of the compiled search core is missing."""
    if _state.get("warned"):
        return
    _state["warned"] = True
    sys.stderr.write(f"graphtune: warning: the compiled search core is not available ({exc}); "
                     "decoding runs in Python (slower; see README, Install)\n")


def available() -> bool:
    """Whether decoding uses the compiled walk (built, importable and not disabled)."""
    return _load() is not None


def walk_whole(dec: Decoding, walk: Any) -> None:
    """``dec.walk`` made the whole walk of the partial ``walk`` (a walk of ``dec``'s kept
    steps, :func:`scope_walk` with ``partial``): the kept steps walked again with its
    answers, on past its first overflow as a whole walk goes; its issue is the one the
    partial walk explained (the same first overflow: nothing before it differs)."""
    assert isinstance(walk, _Walked) and walk.partial is not None
    sr: _StepRows = walk._raw[1][1]
    res = _load().rewalk(sr.kept, *walk.partial)
    scopes, masks, helds, usage, peak_l1, peak_llb = res[:6]
    over = res[6] if len(res) > 6 else -1
    dec.nodes = sr.nodes
    dec.walk = _Walked(scopes, walk.issue,
                       (dec.space, sr, over, usage, masks, helds, peak_l1, peak_llb))


def tensor_codes(space: Space) -> dict[str, int]:
    """The space's tensor codes (name -> code, grown as decoding meets tensors)."""
    codes: dict[str, int] | None = getattr(space, "_ctensors", None)
    if codes is None:
        codes = space._ctensors = {}  # type: ignore[attr-defined]
    return codes


def _work(dec: Decoding, info: Any, spp: int, cpp: int) -> tuple[Any, ...]:
    """A chunk shape's working sets by (streamed mask, output streamed out, held), from
    :func:`compiler.capacity.chunk_working_set`; the streamable inputs (the mask's bits),
    the inputs as (tensor code, bit), the scopes the output may use (a mask), the output's
    code and sizes (:func:`compiler.footprint.sample_bytes`). Kept in the op set's cache; the
    table (and the filler and C definition that fill it) in its ``shared`` cache, which op
    sets alike up to tensor names share (:mod:`search_space._cclass`)."""
    key = ("ctab", spp, cpp)
    hit = info.cache.get(key)
    if hit is not None:
        return hit  # type: ignore[no-any-return]
    tables = _shape_tables(dec.space)
    ops_code = info.cache.get("cops")  # the op set as an int: its tuple hashed twice was ~1 us
    if ops_code is None:
        by_ops = dec.space.__dict__.setdefault("_cops", {})  # the space's op sets by code
        ops_code = info.cache["cops"] = by_ops.setdefault(info.ops, len(by_ops))
    skey = (ops_code, spp, cpp)
    hit = tables.get(skey)
    if hit is None:
        # what no chunk shape changes, once per op set: its streamable inputs, its inputs as
        # (tensor code, bit), the scopes its output may use, the output's code and sizes
        # (a decode meets ~9 new shapes of ResNet-50's op sets, ~24 of BERT-large's)
        own = info.cache.get("cwork")
        if own is None:
            codes = tensor_codes(dec.space)
            names = tuple(t for t in info.inputs if t in info.streamable)
            inputs = tuple((codes.setdefault(t, len(codes)), names.index(t) if t in names else -1)
                           for t in info.inputs)
            allowed = 0
            for sc in info.scopes:
                allowed |= 1 << _CODE[sc]
            own = info.cache["cwork"] = (names, inputs, allowed, codes.setdefault(info.output, len(codes)),
                                         *sample_bytes(dec.mem, info.output))
        names, inputs, allowed, code, sb, fb = own
        wkey = ("wtab", spp, cpp)
        shared = info.shared.get(wkey)  # op sets alike up to names share it (_cclass.py)
        if shared is None:
            # filled as the walk asks: a list of 4 << inputs entries, or a dict when that is
            # too long (DLRM's interaction concat streams up to 27 inputs: 2^29 entries)
            table: list[float | None] | dict[int, float] = (
                [None] * (4 << len(names)) if len(names) <= _LIST_STREAMED else {})
            shared = info.shared[wkey] = (table, partial(_fill, dec.mem, info.ops, names, spp, cpp, table),
                                          _ws_def(dec.mem, info, names, spp, cpp, table))
        table, fill, ws = shared
        hit = tables[skey] = (names, table, inputs, allowed, code, sb, fb, fill, ws)
    info.cache[key] = hit
    return hit  # type: ignore[no-any-return]


def _ws_def(mem: Any, info: Any, names: tuple[str, ...], spp: int, cpp: int,
            table: list[float | None] | dict[int, float]) -> tuple[Any, ...] | None:
    """What the C walk computes a list table's entries from (``ws_compute`` in
    ``_cwalk.c``), or None: the filler computes them (a wide table, or a chunk shape whose
    working set adds a windowed op's halo or attention's excess when the chain rows could
    not be packed). The parts of :func:`compiler.capacity.chunk_working_set` that do not
    depend on the shape come from its own definitions: the op set's profiles
    (:func:`compiler.footprint.group_profile`, per entry index, shared by every shape of the
    op set; walked in C from the chain rows :func:`search_space._cfoot.pack_rows` packs, or
    by :class:`_Profiler` when they could not be packed), the stream tile, the output's
    sizes and each streamable input's sizes and window (``_stream_buffers``), in order of
    name; per shape, the halo and attention terms' values
    (:func:`search_space._cfoot.halo_values`) when the shape has them."""
    if not isinstance(table, list):
        return None
    shared = info.shared.get("cws")
    if shared is None or shared[0] is not mem or len(shared[3]) != len(table):
        # once per op set: its facts, the shape-independent parts (from the C analysis,
        # search_space/_cfirst.py) and the profile table
        f, ok, tile, out_sizes, bits, pack = ws_parts(load_extension("_canalyse"), mem,
                                                      info.ops, names, info.cache.get("can"))
        profiles: list[bytes | None] = [None] * len(table)
        shared = info.shared["cws"] = (
            mem, f, ok, profiles, _Profiler(mem, info.ops, names, profiles), tile, out_sizes,
            bits, pack)
    return _ws_at(shared, spp, cpp)


def _ws_at(parts: tuple[Any, ...], spp: int, cpp: int) -> tuple[Any, ...] | None:
    """:func:`_ws_def`'s C definition of one chunk shape from the op set's shape-independent
    ``parts`` (its ``shared["cws"]``), or None (the filler computes)."""
    mem, f, ok, profiles, profiler, tile, out, bits_t, pack = parts
    halo = (f.windowed and _cut_sides(spp, cpp)) or (f.attention and cpp > 1)
    if not ok or (halo and pack is None):
        return None
    # the profile walk (and a halo or attention term) in C from the packed chain rows
    # (search_space/_cfoot.py); without them the profiler asks footprint.group_profile
    return (profiles, profiler, spp, cpp, tile, out, bits_t, pack[0] if pack else None,
            halo_values(mem, pack[1], spp, cpp) if halo and pack else None)


def fits_l1(dec: Decoding, info: Any, spp: int, cpp: int) -> bool | None:
    """:meth:`search_space._build.Decoding.fits_l1` from the chunk shape's working-set
    table, its missing entries computed in C (``ws_compute``) and kept there for the walk:
    whether any of the four least working sets (inputs streamed or staged, output streamed
    out or kept, not held) fits a core's L1, asked in the same order and stopping at the
    first that fits (one ``fits`` call in ``_cwalk.c`` for the four). The table is made
    here, not only for the shape the walk takes: ~60 % of the shapes a fit asks about new
    are walked, and made here (one Python frame) it costs less than made for the walk
    (``_crow``). None when the C walk would not compute them (not built, a halo or
    attention term without packed chain rows, more than ``_FIT_STREAMED`` streamable
    inputs, a table not of the op set's streamable inputs): the caller asks
    :func:`compiler.capacity.chunk_working_set`."""
    mod = _load()
    n = len(info.streamable)
    if mod is None or n > _FIT_STREAMED:
        return None
    hit = _work(dec, info, spp, cpp)
    ws = hit[8]
    if ws is None or len(hit[0]) != n:
        return None
    return mod.fits(ws, 4 << n, float(dec.l1), hit[1])  # type: ignore[no-any-return]


class _Profiler:
    """Entry ``i`` = (mask * 2 + output streamed out) * 2 + held of an op set's profile
    table: :func:`compiler.footprint.group_profile` packed as int64 (sample bytes, fixed
    bytes) pairs, computed when the C walk first needs it (a class: spaces pickle)."""

    __slots__ = ("mem", "names", "ops", "table")

    def __init__(self, mem: Any, ops: tuple[int, ...], names: tuple[str, ...],
                 table: list[bytes | None]) -> None:
        self.mem, self.ops, self.names, self.table = mem, ops, names, table

    def __call__(self, i: int) -> bytes:
        mask, off, held = i >> 2, bool(i >> 1 & 1), bool(i & 1)
        st = streamed_of(self.names, mask)
        prof = group_profile(self.mem, self.ops, st, off, held)
        v = array("q", [x for point in prof for x in point]).tobytes()
        self.table[i] = v
        return v


def _fill(mem: Any, ops: tuple[int, ...], names: tuple[str, ...], spp: int, cpp: int,
          table: list[float | None] | dict[int, float], i: int) -> float:
    """Entry ``i`` = (mask * 2 + output streamed out) * 2 + held of a working-set table,
    computed when the C walk first asks for it and kept there: the table's filler is
    ``partial(_fill, mem, ops, names, spp, cpp, table)`` (a module function: spaces
    pickle; ``fits_fast`` in ``_cshape.c`` makes the same)."""
    mask, off, held = i >> 2, bool(i >> 1 & 1), bool(i & 1)
    v = chunk_working_set(mem, ops, streamed_of(names, mask), off, held, spp, cpp)
    table[i] = v
    return v


def _shape_tables(space: Space) -> dict[tuple[Any, ...], Any]:
    tables: dict[tuple[Any, ...], Any] | None = getattr(space, "_cshapes", None)
    if tables is None or len(tables) > 200_000:  # bounded, like the value table
        tables = space._cshapes = {}  # type: ignore[attr-defined]
    return tables


def scope_walk(dec: Decoding, get: Callable[[int], int],
               chunk_scopes: Callable[..., Any], partial: bool = False) -> Mapping[Node, int] | None:
    """Order the chunk DAG and walk the scopes in C; the scope parameter of each step.

    Returns None (nothing decided, ``dec`` untouched) when the compiled walk is not
    available: the caller walks in Python.
    The reader is asked the same parameters in the same order as the Python walk
    (``index`` in ``_cwalk.c`` lists them in walk order: a group's policy at its first
    chunk, a producer's transfer scope at its first transfer whose scope is free);
    ``chunk_scopes`` is :func:`search_space._build.chunk_scopes` (the scopes a policy
    gives a group's chunks). The C walk makes every step's row from its group's or its
    transfer's row (:func:`_step_rows`): no per-step Python. A walk that overflows is kept
    (``walk_rows`` with ``keep``): a capacity repair round walks the same parsed steps
    again with its answers (``rewalk``), not parsing the rows again. With ``partial`` a
    walk that overflows stops there once the overflow is explained (``dec.walk`` is then
    partial: its issue only, what a repair round reads of a walk it does not return).
    """
    mod = _load()
    if mod is None:
        return None
    rows = getattr(dec, "_crows", None)
    if rows is None:  # once per Decoding: a repair round walks the same steps again
        rows = _step_rows(dec, dec.space, mod)
        if rows is None:
            STATS["wide"] += 1
            return None
        dec._crows = rows
    sr: _StepRows = rows[0]
    groups = dec.groups
    # the answers in walk order, in C when built (search_space/_cglue.py)
    gwants, pwants = wants(_glue(), sr.asks, sr.gd, sr.pd, groups, get, chunk_scopes)
    if sr.kept is not None:  # a repair round: the kept walk walked again (rewalk in _cwalk.c)
        res = mod.rewalk(sr.kept, gwants, pwants, partial)
    else:
        target = dec.space.target
        res, sr.kept = mod.walk_rows(float(target.l1.data_bytes), float(target.llb.bytes),
                                     target.chip.cores_per_cluster, sr.refs, sr.is_out, sr.reads,
                                     sr.grows, gwants, sr.trows, sr.tprod, pwants, True, *sr.tpack,
                                     True, partial)
    scopes, masks, helds, usage, peak_l1, peak_llb = res[:6]
    over = res[6] if len(res) > 6 else -1  # a step overflows: the walk went on as Python's does
    STATS["overflow" if over >= 0 else "c"] += 1
    issue = None
    nodes = sr.nodes
    if over >= 0:
        node = nodes[over]
        halo = (0.0, 0.0, 0.0)
        tiles = 0.0
        if node[0] == "g":
            i = sr.gidx[node[1]]
            gr = groups[i]
            tiles = sr.tiles[i]
            if not res[7]:  # an L1: the working set's halo, window and attention parts
                halo = l1_halo(dec, gr.info, sr.names[i], memoryview(masks).cast("Q")[over],
                               scopes[over] != 0, helds[over] != 0, gr.samples // gr.parts,
                               gr.cores // gr.parts,
                               mod, _ws_at)
        issue = _issue(dec, nodes, over, res[7:], halo, tiles, sr.tidx)
    dec.nodes = nodes
    dec.walk = _Walked(scopes, issue, (dec.space, sr, over, usage, masks, helds, peak_l1, peak_llb),
                       (gwants, pwants) if partial and over >= 0 else None)
    return _ScopeDims(sr)


def _glue() -> Any:
    """``_cshape`` when it has the scope walk's glue (``wants``, ``group_rows``), else None."""
    mod = load_extension("_cshape")
    return mod if mod is not None and hasattr(mod, "group_rows") else None


def _step_rows(dec: Decoding, space: Space, mod: Any) -> tuple[Any, ...] | None:
    """What the compiled walk reads of a Decoding's steps (a :class:`_StepRows`), and the
    position of each group chunk's step (by group) and of each transfer's (what
    :mod:`search_space._lazy` reads the scopes at).

    Per group its row (allowed scopes, output code and sizes, inputs, working-set table,
    filler and C definition, LLB weight tiles, samples per chunk, each chunk's binding),
    its scope parameter and its transfer-scope parameter; per transfer its row (layout
    pieces, initial scope, code and sizes) and its producer (-1: fixed); ``index`` in
    ``_cwalk.c`` resolves the order's nodes to them and lists the answers in the order the
    walk asks for them. None: a group reads more streamable inputs than the C walk's masks
    hold (``_MAX_STREAMED``): the caller walks in Python."""
    if dec.compiled_order() is not None:  # ordered with the chunk DAG (_cderive.py)
        nodes, all_reads = dec.c_order, dec.c_reads
        packed = dec.c_walk
        if packed is not None:
            return packed_rows(dec, nodes, all_reads, packed, _group_rows(dec, space),
                               tensor_codes(space))
    else:
        splits = {gr.name: gr.split for gr in dec.groups}
        if dec.order == "depth":
            nodes = depth_order(dec.deps, dec.outs, splits, dec.lookahead)
        else:
            nodes = breadth_order(dec.deps, dec.topo, splits)
        pos = {node: i for i, node in enumerate(nodes)}
        all_reads = [[pos[d] for d in dec.deps.get(node, ())] for node in nodes]
    gidx, grows, gnames, gtiles, gd, pd, gsplit, wide = _group_rows(dec, space)
    if wide:
        return None
    # per transfer: its row and producer (rows are not kept between decodes: the derive
    # makes new transfers every time, so an identity-keyed cache only held them alive: review)
    known: dict[int, tuple[Any, ...]] = {}
    tl = dec.transfers
    tidx = {t.name: j for j, t in enumerate(tl)}
    rows: list[Any] = list(map(known.get, map(id, tl)))
    for j in [j for j, (row, t) in enumerate(zip(rows, tl)) if row is None or row[0] is not t]:
        rows[j] = _transfer_row(space, dec, known, tl[j])
    trows = [row[1] for row in rows]
    by_out, fixed = dec.by_out, dec.fixed
    tprod = [-1 if p is None or t.name in fixed else gidx[p.name]
             for p, t in zip(map(by_out.get, map(_TENSOR, tl)), tl)]
    refs, is_out, asks, chunk_at, step_at = mod.index(
        nodes if isinstance(nodes, list) else list(nodes), gidx, gsplit, tidx, tprod, list(dec.outs))
    # (packed by _cdag.derive: bytes, which walk_rows reads as they are)
    reads = all_reads if isinstance(all_reads, (list, bytes)) else list(all_reads)
    sr = _StepRows(asks=asks, gd=gd, gidx=gidx, grows=grows, is_out=is_out, names=gnames, nodes=nodes,
                   pd=pd, reads=reads, refs=refs, tidx=tidx, tiles=gtiles, tprod=tprod, trows=trows)
    # names are unique, else a name's last transfer is the one tidx (and the order) name
    t_at = dict(zip(tidx, step_at)) if len(tidx) == len(tl) else \
        dict(zip(tidx, (step_at[j] for j in tidx.values())))
    return sr, (dict(zip(gidx, chunk_at)), t_at)


def _group_rows(dec: Decoding, space: Space) -> tuple[Any, ...]:
    """Per group: its index by name, its row (what :func:`_work` gives for its chunk shape,
    its LLB weight tiles and samples per chunk, kept in its op set's cache by shape, then
    its chunk bindings), its streamable inputs, its LLB weight tiles, its scope and
    transfer-scope parameters and its split; and whether a group reads more streamable
    inputs than the C walk's masks hold (61 and the two flags in 64 bits: it walks in
    Python)."""
    glue = _glue()
    if glue is not None:  # the loop below in C (``group_rows`` in _cshape.c)
        # a shape row missing from the op set's cache is made in C from its walk table when
        # that is there (the decode's batch given), else by _crow
        # (and a missing walk table from the op set's kept parts and the shape's shared
        # table, as _work makes it: ctab_from_parts, ~3 a ResNet-50 candidate, ~18 BERT-large)
        return glue.group_rows(dec.groups, space.d_scope, space.slot,  # type: ignore[no-any-return]
                               partial(_crow, dec, space), dec.batch, _shape_tables(space))
    batch = dec.batch
    wide = False
    groups = dec.groups
    gidx = {gr.name: i for i, gr in enumerate(groups)}
    grows: list[tuple[Any, ...]] = []
    gnames: list[tuple[str, ...]] = []
    gtiles: list[float] = []
    gd: list[int] = []
    pd: list[int] = []
    d_scope, slot_of = space.d_scope, space.slot
    for gr in groups:  # per group: the shape's row (its op set's cache), then the bindings
        info, split, parts = gr.info, gr.split, gr.parts
        key = ("crow", gr.samples, gr.cores, parts, split)
        hit = info.cache.get(key)
        if hit is None:
            hit = info.cache[key] = _shape_row(dec, space, info, gr.samples // parts,
                                               gr.cores // parts, batch // split)
        if hit[3]:  # the lists are not used: the group walks in Python
            wide = True
            continue
        grows.append((*hit[0], gr.binds))
        gnames.append(hit[1])
        gtiles.append(hit[2])
        gd.append(d_scope[gr.scope_at])
        pd.append(slot_of[gr.slot] + 5)
    return gidx, grows, gnames, gtiles, gd, pd, [gr.split for gr in groups], wide


def _crow(dec: Decoding, space: Space, info: Any, samples: int, cores: int, parts: int,
          split: int) -> tuple[Any, ...]:
    """A group's shape row on a miss of its op set's cache (``group_rows`` in ``_cshape.c``
    reads it there): :func:`_shape_row` of its chunk shape, kept as :func:`_group_rows` keeps it.
    ``group_rows`` calls it only when the cache lacks the chunk shape's walk table
    (``("ctab", spp, cpp)``, :func:`_work`'s) or the LLB tiles; with both it makes the same
    row itself (``crow_from_cache``: a third of BERT-large's misses, half of ResNet-50's)."""
    hit = info.cache[("crow", samples, cores, parts, split)] = _shape_row(
        dec, space, info, samples // parts, cores // parts, dec.batch // split)
    return hit


def _shape_row(dec: Decoding, space: Space, info: Any, spp: int, cpp: int, samples: int
               ) -> tuple[Any, ...]:
    """A group row without its bindings (allowed scopes, output code and sizes, inputs,
    working-set table, filler and C definition, LLB weight tiles, samples per chunk), its
    streamable inputs, its LLB weight tiles and whether it reads more streamable inputs than
    the C walk's masks hold."""
    if len(info.streamable) > _MAX_STREAMED and \
            len(info.streamable & set(info.inputs)) > _MAX_STREAMED:
        return None, (), 0.0, True  # _work is not asked: the group walks in Python
    names, work, inputs, allowed, code, sb, fb, fill, ws = _work(dec, info, spp, cpp)
    tiles = info.cache.get("tiles")
    if tiles is None:
        tiles = info.cache["tiles"] = llb_weight_tiles(weight_bytes(dec.mem, info.ops), space.target)
    return (allowed, code, sb, fb, inputs, work, fill, tiles, ws, samples), names, tiles, False


_TENSOR = attrgetter("tensor")


def _transfer_row(space: Space, dec: Decoding, known: dict[int, tuple[Any, ...]], t: Any
                  ) -> tuple[Any, ...]:
    """A transfer's row, kept in ``known`` by its identity with the transfer: its layout's
    pieces, initial scope, tensor code and sizes (:func:`compiler.footprint.sample_bytes`)."""
    batch = dec.batch
    samples = batch // t.dst_factor
    parts = t.placement.core_bind
    spp = samples // len(parts)
    out = t.tensor
    sizes = _sizes(space, batch)
    hit = sizes.get(out)
    if hit is None:
        codes = tensor_codes(space)
        code = codes.get(out)
        if code is None:
            code = codes[out] = len(codes)
        hit = sizes[out] = (code, *sample_bytes(dec.mem, out))
    row = known[id(t)] = (t, (tuple((dc * samples, spp, parts) for dc in t.dst_chunks),
                              _CODE[t.placement.mem_scope], *hit))
    return row


def _sizes(space: Space, batch: int) -> dict[str, tuple[int, int, int]]:
    """Per tensor at ``batch``: its code and :func:`compiler.footprint.sample_bytes`."""
    tables: dict[int, dict[str, tuple[int, int, int]]] | None = getattr(space, "_csizes", None)
    if tables is None:
        tables = space._csizes = {}  # type: ignore[attr-defined]
    table = tables.get(batch)
    if table is None:
        table = tables[batch] = {}
    return table
