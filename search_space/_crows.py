"""The compiled walk's rows and what is read back from them (:mod:`search_space._ccore`).

:class:`_StepRows`: what the C walk reads of a decode, apart from the scopes its reader's
answers ask for: a row per group and per transfer, the order as step references
(``index`` in ``_cwalk.c``), the answers in walk order; :func:`packed_rows` makes them
from what ``_cdag.derive`` packed (no per-transfer Python). :class:`_ScopeDims`: each step's
scope parameter, looked up from the rows when asked. :func:`_issue`: the first overflow
as :class:`compiler.capacity.CapacityWalk` explains it, from what the C walk kept, and
:func:`l1_halo`: an L1 overflow's halo, window and attention parts.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache, partial
from operator import attrgetter
from typing import Any

from compiler.capacity import CapacityIssue, _facts, chunk_working_set, cut_sides, working_set_entries
from compiler.derive import Node
from compiler.footprint import sample_bytes
from search_space._cplan import streamed_of

Decoding = Any  # a search_space._build.Decoding (importing it would close a circle)

RING = ((0,),)  # a derived transfer with no group chunk to follow runs on core 0 (_cdag.c)


class _StepRows:
    """What the compiled walk reads of a Decoding's steps, apart from the scopes its reader's
    answers ask for (:func:`_step_rows`)."""

    __slots__ = ("_tidx", "_tnames", "asks", "gd", "gidx", "grows", "is_out", "kept", "names", "nodes",
                 "pd", "reads", "refs", "tiles", "tpack", "tprod", "trows")
    asks: list[int]  # the answers in walk order: group i, or -1 - producer p
    gd: list[int]  # per group: its scope parameter
    gidx: dict[str, int]  # group name -> index
    grows: list[tuple[Any, ...]]  # per group: its row (walk_rows in _cwalk.c)
    is_out: bytes  # per step: a graph output
    names: list[tuple[str, ...]]  # per group: its streamable inputs (the mask's bits)
    nodes: list[Node]  # the order
    pd: list[int]  # per group: its transfer-scope parameter
    reads: list[list[int]] | bytes  # per step: the steps it reads (or packed: unpack_reads)
    refs: bytes  # per step: (group, chunk) or (-1 - transfer, 0), int32
    tiles: list[float]  # per group: its LLB weight tiles
    tprod: list[int]  # per transfer: its producer group, -1: fixed
    trows: list[tuple[Any, ...]]  # per transfer: its row (empty: packed)
    # the transfers packed by _cdag.derive (packed rows, sizes per tensor code, batch, ring),
    # (None, None, 0, None) when trows has the rows
    tpack: tuple[Any, ...]
    kept: Any  # the first walk, kept when it overflowed (rewalk in _cwalk.c), else None

    def __init__(self, *, asks: list[int], gd: list[int], gidx: dict[str, int],
                 grows: list[tuple[Any, ...]], is_out: bytes, names: list[tuple[str, ...]],
                 nodes: list[Node], pd: list[int], reads: list[list[int]] | bytes, refs: bytes,
                 tiles: list[float], tprod: list[int], trows: list[tuple[Any, ...]],
                 tidx: dict[str, int] | None = None, tnames: list[str] | None = None,
                 tpack: tuple[Any, ...] = (None, None, 0, None)) -> None:
        # (the fields set directly, not by a loop of setattr over keywords)
        self.asks, self.gd, self.gidx, self.grows, self.is_out = asks, gd, gidx, grows, is_out
        self.names, self.nodes, self.pd, self.reads, self.refs = names, nodes, pd, reads, refs
        self.tiles, self.tprod, self.trows, self.tpack = tiles, tprod, trows, tpack
        self.kept = None
        self._tnames: list[str] = [] if tnames is None else tnames
        self._tidx: dict[str, int] | None = tidx

    @property
    def tidx(self) -> dict[str, int]:
        """Transfer name -> index (a name's last transfer), made when first read from the
        transfers' names (``tnames``): a decode that neither overflows nor is repaired (the
        walk's scope parameters by node, :class:`_ScopeDims`) never reads it (BERT-large:
        ~500 transfers)."""
        if self._tidx is None:
            self._tidx = dict(zip(self._tnames, range(len(self._tnames))))
        return self._tidx

    @tidx.setter
    def tidx(self, value: dict[str, int]) -> None:
        self._tidx = value

    @property
    def tnames(self) -> list[str]:
        """The transfers' names, in order (what :attr:`tidx` is made from)."""
        return self._tnames

    @tnames.setter
    def tnames(self, value: list[str]) -> None:
        self._tnames, self._tidx = value, None

    def names_of(self) -> Callable[[], list[tuple[str, ...] | None]]:
        """What makes each step's group's streamable inputs (None: a transfer) when called:
        what the plan's streamed sets are read with, made only when its steps are read
        (:mod:`search_space._cplan`); it holds the references and names, not these rows."""
        return partial(step_names, self.refs, self.names, len(self.nodes))


def step_names(refs: bytes, names: list[tuple[str, ...]], n: int) -> list[tuple[str, ...] | None]:
    """Per step of ``refs`` (``_StepRows.refs``: (group, chunk) or (-1 - transfer, 0) as
    int32 pairs) its group's streamable inputs, None for a transfer; the first ``n`` steps
    (ValueError when ``refs`` holds fewer: not a shorter list)."""
    ints = memoryview(refs).cast("i")
    if not 0 <= n <= len(ints) // 2:
        raise ValueError(f"packed step references: {len(ints) // 2} steps, {n} asked")
    return [names[g] if g >= 0 else None for g in ints[0:2 * n:2].tolist()]


class _ScopeDims(Mapping[Node, int]):
    """Each step node's scope parameter (what :func:`search_space._build.walk_scopes`
    returns): a group chunk's the group's scope policy, a transfer whose scope is free its
    producer's transfer scope; a fixed transfer has none. Looked up from the per-group and
    per-transfer rows, not built per step (a capacity repair asks a few)."""

    __slots__ = ("_sr",)

    def __init__(self, sr: _StepRows) -> None:
        self._sr = sr

    def __getitem__(self, node: Node) -> int:
        sr = self._sr
        if node[0] == "g":
            i = sr.gidx[node[1]]
            if not (isinstance(node[2], int) and 0 <= node[2] < sr.grows[i][10].__len__()):
                raise KeyError(node)
            return sr.gd[i]  # type: ignore[no-any-return]
        if node[0] != "t" or node[2] != 0:  # a transfer step is ("t", name, 0)
            raise KeyError(node)
        j = sr.tidx[node[1]]
        p = sr.tprod[j]
        if p < 0:
            raise KeyError(node)
        return sr.pd[p]  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[Node]:
        return (node for node in self._sr.nodes if node in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, node: object) -> bool:
        try:
            self[node]  # type: ignore[index]
        except (KeyError, IndexError, TypeError):
            return False
        return True


def _issue(dec: Decoding, nodes: list[Node], k: int, found: tuple[Any, ...],
           halo: tuple[float, float, float], tiles: float,
           tidx: dict[str, int] | None = None) -> CapacityIssue:
    """The first overflow as :meth:`compiler.capacity.CapacityWalk.l1_issue` /
    ``llb_issue`` describe it, from what the C walk kept (``explain`` in ``_cwalk.c``):
    the same entries, labels, rounding and order. A transfer's tensor is read from the
    packed transfers (``tensor_of``, by its index in ``tidx``: a name's last transfer, as
    ``transfer_by_name`` keeps it) when they are packed: the Transfer values (BERT-large:
    ~500, 0.2 ms) are not made for an issue."""
    llb, core, needed, work, _, llb_live, live = found
    tensor_of = getattr(dec.transfers, "tensor_of", None) if tidx is not None else None

    def label(i: int) -> str:
        node = nodes[i]
        return f"{node[1]}[{node[2]}]" if node[0] == "g" else node[1]

    def provides(i: int) -> str:
        node = nodes[i]
        if node[0] == "g":
            return dec.by_name[node[1]].info.output  # type: ignore[no-any-return]
        if tensor_of is not None:
            return tensor_of(tidx[node[1]])  # type: ignore[index,no-any-return]
        return dec.transfer_by_name[node[1]].tensor  # type: ignore[no-any-return]

    items = [(f"{label(i)} ({provides(i)})", int(b)) for i, b in live if b > 0]
    steps = tuple((i, int(b)) for i, b in live if b > 0)
    target = dec.space.target
    if not llb:
        items.extend(working_set_entries(label(k), work, halo))
        items.sort(key=lambda x: -x[1])
        return CapacityIssue(f"L1 of core {core}", core, label(k), k, math.ceil(needed),
                             target.l1.data_bytes, tuple(items), steps)
    if nodes[k][0] == "t":  # llb_issue(k, live, resident, live): nothing more
        llb_live, tiles = needed, 0.0
    if tiles > 0:
        items.append((f"{label(k)} weight tiles in flight", int(tiles)))
    if needed > llb_live + tiles:
        items.append((f"{label(k)} output ({provides(k)})", int(needed - llb_live - tiles)))
    items.sort(key=lambda x: -x[1])
    return CapacityIssue("LLB of cluster 0", -1, label(k), k, math.ceil(needed), target.llb.bytes,
                         tuple(items), steps)


def unpack_reads(packed: bytes) -> list[list[int]]:
    """Reads packed as ``_cdag.derive`` packs them (int32: the count of steps, then per step
    its count and the positions it reads) as lists, per step."""
    ints = memoryview(packed).cast("i").tolist()
    out: list[list[int]] = []
    at = 1
    for _ in range(ints[0]):
        out.append(ints[at + 1:at + 1 + ints[at]])
        at += 1 + ints[at]
    return out


def packed_rows(dec: Decoding, nodes: list[Node], reads: list[list[int]] | bytes, packed: tuple[Any, ...],
                group_rows: tuple[Any, ...], codes: dict[str, int]) -> tuple[Any, ...] | None:
    """:func:`search_space._ccore._step_rows` from what ``_cdag.derive`` computed beside the
    order (``walk_index`` in ``_cdag.c``: the step references, graph outputs, answers in
    walk order, positions, each transfer's producer and its packed row) and the group rows
    (``_ccore._group_rows``): no per-transfer Python; the C walk makes each transfer's row
    (``packed_step`` in ``_cwalk.c``) from its packed row, its binding group's chunk
    binding and the tensor sizes (:func:`size_table`). None: a group too wide for the C
    walk."""
    refs, is_out, asks, chunk_at, step_at, tprod, tpack = packed
    gidx, grows, gnames, gtiles, gd, pd, _, wide = group_rows
    if wide:
        return None
    tl = dec.transfers
    names = getattr(tl, "names", None)  # packed transfers (_cderive.PackedTransfers): not made here
    sr = _StepRows(asks=asks, gd=gd, gidx=gidx, grows=grows, is_out=is_out, names=gnames, nodes=nodes,
                   pd=pd, reads=reads, refs=refs, tiles=gtiles, tprod=tprod, trows=[],
                   tpack=(tpack, size_table(dec, codes), dec.batch, RING),
                   tnames=names if names is not None else list(map(_NAME_OF, tl)))
    return sr, _Positions(gidx, chunk_at, sr.tnames, step_at)


class _Positions:
    """(each group's chunk positions by name, each transfer's position by name) in the order,
    what :class:`search_space._lazy.Decoded` unpacks when it builds a schedule's codes: the
    two dicts made when first unpacked (a candidate only pre-checked never builds them:
    BERT-large ~130 groups and ~500 transfers). A name's last transfer is the one named, as
    :attr:`_StepRows.tidx` has it. Equal to the pair of dicts.

    Until then the positions are what ``_cdag.derive`` packed (``walk_index``): ``chunk_at``
    int32 bytes (``G + 1`` offsets, then each group's chunks' positions), ``step_at`` int32
    bytes per transfer (-1: not in the order): untracked objects, so a kept candidate does not
    hold a list per group for the garbage collector to walk (issue 20)."""

    __slots__ = ("_made", "_parts")

    def __init__(self, gidx: dict[str, int], chunk_at: bytes, tnames: list[str],
                 step_at: bytes) -> None:
        self._parts: tuple[Any, ...] | None = (gidx, chunk_at, tnames, step_at)
        self._made: tuple[dict[str, list[int]], dict[str, int | None]] | None = None

    def made(self) -> tuple[dict[str, list[int]], dict[str, int | None]]:
        if self._made is None:
            assert self._parts is not None
            gidx, chunk_b, tnames, step_b = self._parts
            ca = memoryview(chunk_b).cast("i").tolist()
            n = len(gidx)
            if len(ca) < n + 1 or ca[n] != len(ca):
                raise ValueError("packed chunk positions: a bad table")
            chunk_at = [ca[ca[g]:ca[g + 1]] for g in range(n)]
            sa = memoryview(step_b).cast("i").tolist()
            # one entry per transfer (_cdag.derive writes one placeholder when there are none)
            if len(sa) != len(tnames) and (tnames or len(sa) != 1):
                raise ValueError("packed transfer positions: a bad table")
            step_at: list[int | None] = [None if k < 0 else k for k in sa[:len(tnames)]]
            tidx = dict(zip(tnames, range(len(tnames))))
            t_at = dict(zip(tidx, step_at)) if len(tidx) == len(tnames) else \
                dict(zip(tidx, (step_at[j] for j in tidx.values())))
            self._made, self._parts = (dict(zip(gidx, chunk_at)), t_at), None
        return self._made

    def __iter__(self) -> Iterator[Any]:
        return iter(self.made())

    def __len__(self) -> int:
        return 2

    def __getitem__(self, i: int) -> Any:
        return self.made()[i]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Positions):
            return self.made() == other.made()
        return self.made() == tuple(other) if isinstance(other, (tuple, list)) else NotImplemented

    __hash__ = None  # type: ignore[assignment]


_NAME_OF = attrgetter("name")


def size_table(dec: Decoding, codes: dict[str, int]) -> bytes:
    """Per tensor code (the space's ``codes``) at the decode's batch:
    :func:`compiler.footprint.sample_bytes` as int64 (bytes per sample, fixed bytes) pairs,
    kept by the space and made again when it has met more tensors (every code derive()
    gives a transfer is known by then)."""
    space = dec.space
    tables: dict[int, list[Any]] | None = getattr(space, "_csize_table", None)
    if tables is None:
        tables = space._csize_table = {}
    hit = tables.get(dec.batch)
    if hit is None or hit[0] != len(codes):
        names = [""] * len(codes)
        for t, c in codes.items():
            names[c] = t
        flat = array("q", [x for t in names for x in sample_bytes(dec.mem, t)])
        hit = tables[dec.batch] = [len(codes), flat.tobytes()]
    return hit[1]  # type: ignore[no-any-return]


_NO_HALO = (0.0, 0.0, 0.0)
# how many overflow explanations found no halo term without asking chunk_working_set (tests)
HALO = {"free": 0, "c": 0, "asked": 0}
# compiler.capacity.cut_sides by (samples, cores): a loop over the cores, once per new chunk shape
_cut_sides = lru_cache(maxsize=4096)(cut_sides)


def l1_halo(dec: Decoding, info: Any, names: tuple[str, ...], mask: int, off: bool, held: bool,
            spp: int, cpp: int, walk: Any = None, ws_at: Callable[..., Any] | None = None
            ) -> tuple[float, float, float]:
    """The halo, window and attention parts of an overflowing chunk's working set (what
    :func:`compiler.capacity.chunk_working_set` keeps in its facts' ``halo``, which an L1
    issue lists), the inputs ``mask`` stands for (bits of ``names``) streamed.

    (0.0, 0.0, 0.0) without asking ``chunk_working_set`` (a Python analysis of an op set met
    first: ~0.1 ms, 30 per 200 ResNet-50 candidates) when the op set's shape-independent
    parts (``search_space._ccore._ws_def``'s, shared by op sets alike) show that
    ``_work`` adds none: no
    halo or attention term at this shape (the condition ``_work`` and ``_ws_def`` test)
    and no streamed input read through a window (``_work``'s window rows come only from
    such an input; the C walk's working sets, which the differential tests compare with
    ``chunk_working_set``, read the same windows). Else, given the compiled walk ``walk``
    and ``ws_at`` (``search_space._ccore._ws_at``: the shape's C definition from those
    parts), ``ws_halo`` in ``_cwalk.c`` computes them from that definition as ``_work``
    does; without a definition (no packed chain rows) ``chunk_working_set`` computes them."""
    parts = info.shared.get("cws")
    if parts is not None and parts[0] is dec.mem and parts[2] and len(parts[7]) == len(names):
        f = parts[1]
        if not ((f.windowed and _cut_sides(spp, cpp)) or (f.attention and cpp > 1)) and \
                all(window is None for b, _, _, window in parts[7] if mask >> b & 1):
            HALO["free"] += 1
            return _NO_HALO
        ws = ws_at(parts, spp, cpp) if walk is not None and ws_at is not None and \
            len(parts[3]) == 4 << len(names) else None
        if ws is not None:
            HALO["c"] += 1
            return walk.ws_halo(ws, len(parts[3]), (mask * 2 + off) * 2 + held)  # type: ignore[no-any-return]
    HALO["asked"] += 1
    wkey = (streamed_of(names, mask), off, held, spp, cpp)
    chunk_working_set(dec.mem, info.ops, *wkey)  # the C walk may have computed it
    return _facts(dec.mem, info.ops).halo.get(wkey, _NO_HALO)  # type: ignore[no-any-return]
