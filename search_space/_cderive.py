"""The compiled chunk DAG: pass 2 of decoding in C, :func:`compiler.derive.derive_transfers` as reference.

Pass 2 of decoding (:meth:`search_space._build.Decoding.derive`: the transfers the
shaped groups need, the chunk DAG, the output nodes, then the depth-first or
breadth-first order of :mod:`search_space._order`) runs in C
(``search_space/_cdag.c``) over integer tables this module fills from the Python
definitions, once per op set and once per space:

* per op set (kept in its :class:`~search_space._structure.GroupInfo` cache): its
  input tensors as (code, batched, producer op) and its output codes, from
  :func:`compiler.derive.group_io`;
* per space: the graph's outputs the same way, and the tensor codes (shared with
  the compiled walk, :mod:`search_space._ccore`).

The C code mirrors ``derive_transfers`` (``provide``/``_add``, the naming in DFS
post-order, the sort), ``dfs_postorder``, ``depth_order`` and ``breadth_order``
statement by statement, so the transfers, their names, the DAG (with the dict's
insertion order) and the order are the ones the Python code gives; the
differential tests (``tests/search_space/test_cdag.py``) compare them on every zoo
model. Transfer placements are the space's shared ``Placement`` values (equal to
the ones ``derive_transfers`` makes: DDR, on the consumer chunk's cores). The
``Transfer`` values are made anew by each decode, not interned: a table of them by
(kind, number, tensor, factors, chunks, binding identity) answered 1-3 % of a
decode's transfers on ResNet-50 and BERT-large (the number follows the DFS naming,
the binding the sample) and kept up to 200,000 of them alive (issue 20, h79).
A decode asks ``derive`` for them packed (``lazy``; issue 20, h90): int32 rows, their
bindings and names (:class:`PackedTransfers`, made by ``_cdag.make_transfers`` when first
read), and the chunk DAG as int32 rows (``Decoding.deps`` made by ``_cdag.deps_of`` when
first read; :class:`Derived` remembers them beside the schedule): a sampled, pre-checked
candidate reads the transfers' names only, and neither its transfers nor its DAG are made.

The same extension reads the blocks of pass 1 from a recorder's vector
(:func:`blocks`, ``_build.read_blocks``' loop) and computes op sets' class keys
(``_cdag.class_key``, for :mod:`search_space._cclass`).

``GRAPHTUNE_PURE_PYTHON=1`` forces the Python path; a missing extension warns once
(:func:`search_space._ccore.missing`) and decoding uses the Python path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import Any, overload

from compiler.derive import Node, group_io
from compiler.schedule import Placement, Transfer
from search_space._ccore import load_extension, tensor_codes
from search_space._cfirst import ascending, io_of
from search_space._cglue import c_values
from search_space._crows import RING
from search_space._dims import MODES

Decoding = Any  # a search_space._build.Decoding (importing it back would close a circle)

STATS = {"c": 0}


def _load() -> Any:
    """The compiled chunk DAG (``_cdag``), or None (pure Python forced, or not built: warned once)."""
    return load_extension("_cdag")


def _load_analyse() -> Any:
    """The compiled op-set analysis (``_canalyse``), or None."""
    return load_extension("_canalyse")


def available() -> bool:
    """Whether decoding derives the chunk DAG in C (built, importable and not disabled)."""
    return _load() is not None


def _triples(graph: Any, codes: dict[str, int], tensors: tuple[str, ...]) -> tuple[int, ...]:
    out: list[int] = []
    for t in tensors:
        code = codes.get(t)
        if code is None:
            code = codes[t] = len(codes)
        prod = graph.producer.get(t)
        out += (code, 1 if graph.tensors[t].batched else 0, -1 if prod is None else prod)
    return tuple(out)


def _group_row(dec: Decoding, gr: Any, codes: dict[str, int]) -> tuple[Any, ...]:
    """A group's chunk nodes, its inputs as (code, batched, producer op), its output codes
    (group_io), its ops and the code of its result (``GroupInfo.output``): kept in its op
    set's cache by (name, split), so the node tuples are the same objects from candidate to
    candidate."""
    cache = gr.info.cache
    key = ("cdag", gr.name, gr.split)
    hit = cache.get(key)
    if hit is None:
        io = cache.get("cdag.io")
        if io is None:
            ops = gr.info.ops
            # group_io's, from the C analysis (search_space/_cfirst.py) when ops ascend
            kept = gr.info.cache.pop("cio", None)  # an alike op set's, from its class key
            if kept is not None:
                g_in, g_out = kept
            elif ascending(ops):
                g_in, g_out = io_of(_load_analyse(), dec.graph, ops, gr.info.cache.pop("can", None))
            else:
                gio = group_io(dec.graph, ops)
                g_in, g_out = gio.inputs, gio.outputs
            outs = []
            for t in g_out:
                code = codes.get(t)
                if code is None:
                    code = codes[t] = len(codes)
                outs.append(code)
            io = cache["cdag.io"] = (_triples(dec.graph, codes, g_in), tuple(outs))
        nodes = tuple(("g", gr.name, c) for c in range(gr.split))
        out = codes.get(gr.info.output)
        if out is None:
            out = codes[gr.info.output] = len(codes)
        hit = cache[key] = (nodes, io[0], io[1], gr.info.ops, out)
    return hit  # type: ignore[no-any-return]


_RING = RING  # a transfer with no group chunk to follow runs on core 0
_TR_PACK = 8  # int32 per packed transfer (TR_PACK in _cdag.c: kind, tensor, factors, runs)


def derive(dec: Decoding) -> bool:
    """Set ``dec``'s transfers, chunk DAG, output nodes, order (``dec.c_order``), each
    step's reads by position (``dec.c_reads``) and what the compiled walk reads of the order
    and the transfers (``dec.c_walk``: the step references, graph outputs, answers in walk
    order, positions, each transfer's producer and its packed row, ``walk_index`` in
    ``_cdag.c``) from the compiled core; False (nothing set) when it is not available."""
    mod = _load()
    if mod is None:
        return False
    space, graph = dec.space, dec.graph
    codes = tensor_codes(space)
    groups = dec.groups
    rows: list[tuple[Any, ...]]
    gout: list[int]  # per group the code of its result (what a transfer's scope follows)
    glue = getattr(load_extension("_cshape"), "cdag_rows", None)
    if glue is not None:  # the loop below in C (cdag_rows in _cshape.c), _group_row on a miss
        # (a miss of an op set whose inputs and outputs are kept made in C, as _group_row does)
        rows, gout = glue(groups, lambda gr: _group_row(dec, gr, codes), codes)
    else:
        rows, gout = [], []
        for gr in groups:
            h = gr.info.cache.get(("cdag", gr.name, gr.split))
            if h is None:
                h = _group_row(dec, gr, codes)
            rows.append((h[0], h[1], h[2], h[3], gr.binds))
            gout.append(h[4])
    tables: dict[Any, Any] | None = getattr(space, "_cgraph", None)
    if tables is None:
        tables = space._cgraph = {}
    gkey = ("cdag.outputs", dec.batch)
    gouts = tables.get(gkey)
    if gouts is None:
        gouts = tables[gkey] = _triples(graph, codes, tuple(graph.outputs))
    tnodes = tables.get("cdag.tnodes")
    if tnodes is None:
        tnodes = tables["cdag.tnodes"] = [[], []]
    if dec.order == "breadth":
        index = {gr.name: i for i, gr in enumerate(groups)}
        topo = [index[n] for n in dec.topo]
    else:
        topo = []
    tnames = _names(space)
    packed, deps, outs, order, reads, walk = mod.derive(
        rows, len(graph.ops), len(codes), gouts, 1 if dec.order == "breadth" else 0,
        dec.lookahead, topo, tnodes, None, _RING, Transfer, space._places,
        Placement, tnames, gout, 1)  # transfers and DAG packed (lazy)
    dec.transfers = PackedTransfers(mod, tnames, space._places, *packed)
    dec.outs = outs
    dec.deps_later(_Once(partial(mod.deps_of, *deps)))  # the dict made when first read
    dec.c_order, dec.c_reads, dec.c_for = order, reads, (dec.order, dec.lookahead)
    dec.c_walk = walk  # what the compiled walk reads of the order and transfers (_ccore._step_rows)
    STATS["c"] += 1
    return True


class _Once:
    """The chunk DAG's maker, shared by a decode and the :class:`Derived` its schedule
    remembers: the dict made once, by whichever reads it first."""

    __slots__ = ("_made", "_make")

    def __init__(self, make: Callable[[], dict[Node, list[Node]]]) -> None:
        self._make: Callable[[], dict[Node, list[Node]]] | None = make
        self._made: dict[Node, list[Node]] | None = None

    def __call__(self) -> dict[Node, list[Node]]:
        if self._made is None:
            assert self._make is not None
            self._made, self._make = self._make(), None
        return self._made


class PackedTransfers(Sequence[Transfer]):
    """A decode's transfers as ``_cdag.derive`` packed them (int32 rows, their core bindings
    and names, ``derive``'s ``lazy``), made into :class:`~compiler.schedule.Transfer` values
    (``_cdag.make_transfers``: the values the eager ``derive`` makes) when first read: a
    sampled, pre-checked candidate reads only their names (:func:`search_space._crows.packed_rows`);
    its codes, identity text and objects read the values (:mod:`search_space._lazy`).
    Equal to the list of those values (not to a tuple); pickled and copied as that list."""

    __slots__ = ("_made", "_mod", "_packed", "names")

    def __init__(self, mod: Any, tnames: list[str], places: dict[Any, Placement], rows: bytes,
                 binds: tuple[Any, ...], names: list[str]) -> None:
        # the module that packed them (pure Python may be forced by the time they are read),
        # the tensor names by code and the space's placements (not the space: an unread
        # schedule does not keep it alive)
        self._mod = mod
        self._packed: tuple[Any, ...] | None = (rows, binds, tnames, places)
        self._made: list[Transfer] | None = None
        self.names = names

    def made(self) -> list[Transfer]:
        """The Transfer values (made once)."""
        if self._made is None:
            assert self._packed is not None
            rows, binds, tnames, places = self._packed
            self._made = self._mod.make_transfers(rows, binds, self.names, tnames, Transfer, places,
                                                  Placement)
            self._packed = None
        return self._made  # type: ignore[return-value]

    def tensor_of(self, j: int) -> str:
        """The tensor of transfer ``j`` (``self[j].tensor``) without making the values: a
        capacity issue names the tensor of a transfer it lists (:func:`search_space._crows._issue`),
        for up to a third of BERT-large's candidates, which are never made otherwise."""
        if self._packed is None:
            return self.made()[j].tensor
        rows, _, tnames, _ = self._packed
        n = len(self.names)
        if not -n <= j < n:
            raise IndexError("transfer index out of range")
        at = (j % n) * _TR_PACK + 1  # row[1]: the tensor's code (TR_PACK int32 per transfer, _cdag.c)
        code = memoryview(rows).cast("i")[at]
        if not 0 <= code < len(tnames):  # as make_transfers refuses it
            raise ValueError("packed transfers: a bad row")
        return tnames[code]  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self.names)

    @overload
    def __getitem__(self, i: int) -> Transfer: ...

    @overload
    def __getitem__(self, i: slice) -> list[Transfer]: ...

    def __getitem__(self, i: int | slice) -> Transfer | list[Transfer]:
        return self.made()[i]

    def __iter__(self) -> Iterator[Transfer]:
        return iter(self.made())

    def __eq__(self, other: object) -> bool:
        # as the list the eager derive makes: equal to such a list (not a tuple)
        if isinstance(other, PackedTransfers):
            return self.made() == other.made()
        return self.made() == other if isinstance(other, list) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        # pickled and copied (copy, deepcopy) as that list: the module is not pickled
        return (list, (self.made(),))

    def __repr__(self) -> str:
        return repr(self.made())


class Derived(Sequence[Any]):
    """(transfers, chunk DAG, output nodes) as :func:`compiler.derive.derived` remembers them
    beside a decoded schedule, the DAG made when first read (``make``: ``_cdag.deps_of`` of
    what ``derive`` packed): the pre-check reads the remembered plan, not the DAG."""

    __slots__ = ("_deps", "_make", "outs", "transfers")

    def __init__(self, transfers: Sequence[Transfer], deps: dict[Node, list[Node]] | None,
                 make: Callable[[], dict[Node, list[Node]]] | None, outs: list[Node]) -> None:
        self.transfers, self._deps, self._make, self.outs = transfers, deps, make, outs

    def deps(self) -> dict[Node, list[Node]]:
        if self._deps is None:
            assert self._make is not None
            self._deps, self._make = self._make(), None
        return self._deps

    def __len__(self) -> int:
        return 3

    def __getitem__(self, i: Any) -> Any:
        return (self.transfers, self.deps(), self.outs)[i]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.transfers, self.deps(), self.outs))


def blocks(space: Any, get: Any, lens: list[int], below: int) -> list[Any] | None:
    """:func:`search_space._build.read_blocks`' loop in C (``_cdag.blocks``) when ``get`` is a
    recorder over a whole assignment (``Space.sample``/``decode``: its ``values``, ``rep`` and
    ``active``); per block the space's known ``Block`` or (first segment, last segment,
    mode) to make. None: not compiled, or another reader (a trial, a projection)."""
    values, rep, active = (getattr(get, a, None) for a in ("values", "rep", "active"))
    values = c_values(values)
    if values is None or type(rep) is not list or type(active) is not bytearray:
        return None
    mod = _load()
    if mod is None or not hasattr(mod, "blocks"):
        return None
    opts = space.options
    mx = opts.max_group_ops
    return mod.blocks(values, rep, active, lens, below, space.d_cut, space.d_mode,  # type: ignore[no-any-return]
                      opts.min_group_ops, -1 if mx is None else mx, MODES, space._blocks)


def _names(space: Any) -> list[str]:
    """Tensor names by code (the inverse of the space's codes, extended as codes are added)."""
    codes = tensor_codes(space)
    names: list[str] | None = getattr(space, "_cnames", None)
    if names is None or len(names) != len(codes):
        names = [""] * len(codes)
        for t, c in codes.items():
            names[c] = t
        space._cnames = names
    return names


__all__ = ["Node", "available", "derive"]
