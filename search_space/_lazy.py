"""A decoded schedule built when read: codes, identity text and objects from the decoder's state.

Decoding (:meth:`search_space._build.Decoding.schedule`) ends with every group's
ops, split and chunk bindings, the transfers, the order and each step's scope. The
:class:`compiler.codes.LazySchedule` it returns holds a :class:`Decoded` of those and
builds, each when first asked for:

* the **codes** (:class:`compiler.codes.ScheduleCodes`: what the cost model's
  featuriser gathers by): each group's spec, each placed transfer and each step
  interned in the space's value table, as before. A group's code is found by a key of
  what its spec is made of (its name, op set, split, core order, cores, parts, spread
  and its chunks' scopes: :meth:`search_space._build.Decoding.set_binding` makes the
  chunk bindings from exactly these), so the chunks' ``Placement`` values are looked
  up only the first time a group spec is met;
* the **identity text** (``repr(structural_key())``, what ``candidate_id`` hashes and
  ``Space.mutate`` compares): :func:`compiler.key_text.coded_text` over the codes, each
  placed transfer's entry kept with its code;
* the **objects** (``groups``, ``transfers``, ``order``): the values the codes name,
  when a reader first touches one of those fields (the simulator, the log writer,
  JSON, validation of a copy...).

The codes and the text are made together in one C call (``search_space/_ccodes.c``,
:meth:`Decoded._code_compiled`) when the compiled decoder packed the state (its transfers'
rows, the walk's chunk positions): hash tables by value from what a group, a placed
transfer and a name's steps are made of to their codes and text pieces. A group spec or
placed transfer met the first time is interned by the C code too (the space's placements,
the value table's lists and dicts, the text pieces: the same objects in the same order as
:meth:`Interned.group_code`, :meth:`Interned.placement` and the value table make them; a
new step by the Python code here, a callback), in the order :meth:`Decoded._code` interns,
so the table, the codes and the text are the same (issue 20: codes and text 0.23 against
0.38 ms per decoded BERT-base candidate in a tune; the Python callbacks for first-time
values were ~110 us of a mutated BERT-base child, now in C). :meth:`Decoded._code`
and ``coded_text`` are the reference and the fallback (``GRAPHTUNE_PURE_PYTHON=1``, not
built, a state the C code declines); ``tests/search_space/test_ccodes.py`` compares them.

A candidate that is only pre-checked (its memory plan is remembered beside it, the
issue read from the plan) never computes any of them; one that is identified and
featurised computes the codes and the text, not the objects.

The state held refers to the space's shared tables (value table, placements, steps),
never to the space: a schedule kept by a cache keyed weakly by
its space (``autotune.sampling._breed._PARENTS``) must not keep the space alive.
"""

from __future__ import annotations

import dataclasses
import inspect
from itertools import chain
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from compiler.codes import ScheduleCodes, TransferItem, ValueTable
from compiler.key_text import coded_text, text_pieces, transfer_entries
from compiler.schedule import GroupSpec, Placement, Step, Transfer

if TYPE_CHECKING:
    from collections.abc import Sequence

    from compiler.derive import Node

_NAME = ("L1", "LLB", "DDR")
_CODE = {"L1": 0, "LLB": 1, "DDR": 2}
_BOUND = 200_000  # entries of a per-table cache before it starts again (bounded memory)


class Interned:
    """Per space: the shared tables decoded schedules are interned in (see the module doc).

    ``places`` and ``steps`` are the space's own dicts (``Space.placement``,
    ``Space.step`` share them); the fast group keys are per value table, so they start
    again with a new table. Placed transfers are not kept: each decode derives new
    transfers, so a table keyed by their identity would only hold them alive (review).
    """

    __slots__ = ("ccache", "groups", "places", "steps", "table")

    def __init__(self, places: dict[tuple[str, tuple[tuple[int, ...], ...]], Placement],
                 steps: dict[tuple[str, str, int], Step]) -> None:
        self.places, self.steps = places, steps
        self.table: ValueTable | None = None
        # (name, id(ops), split, perm, cores, parts, spread, chunk scopes) -> group code
        self.groups: dict[tuple[Any, ...], int] = {}
        # the compiled codes' caches for ``table`` (search_space._ccodes.Cache; made on first use)
        self.ccache: Any = None

    def use(self, table: ValueTable) -> None:
        """Intern in ``table`` from now on (the caches of another table are dropped)."""
        if table is not self.table or len(self.groups) > _BOUND:
            if table is not self.table:
                self.ccache = None
            self.table = table
            self.groups = {}

    def group_code(self, table: ValueTable, name: str, info: Any, split: int,
                   scopes: Sequence[int], binds: Sequence[tuple[tuple[int, ...], ...]]) -> int:
        """The code in ``table`` of the group spec a decoder's group record makes with its
        chunks' ``scopes`` (interned when new)."""
        places = tuple(self.placement(_NAME[s], b) for s, b in zip(scopes, binds))
        # identities are stable keys: the space keeps its op tuples and placements alive
        tkey = (name, id(info.ops), split, *map(id, places))
        c = table.group_code(tkey)
        if c is None:
            c = table.add_group(tkey, GroupSpec(name, info.ops, split, places))
        return c

    def step_code(self, table: ValueTable, node: Node) -> int:
        """The code in ``table`` of an order node's step (interned when new)."""
        c = table.step_code(node)
        if c is None:
            c = table.add_step(node, self.step(node))
        return c

    def compiled(self, table: ValueTable) -> Any:
        """The compiled codes' caches for ``table`` (:mod:`search_space._ccodes`), or None
        (pure Python forced, not built, or ``table`` not the one interned in)."""
        if table is not self.table:
            return None
        mod = _ccodes()
        if mod is None:
            return None
        if self.ccache is None:
            self.ccache = _compiled_cache(mod, self, table)
        return self.ccache

    def placement(self, scope: str, bind: tuple[tuple[int, ...], ...]) -> Placement:
        """The space's shared Placement (as ``Space.placement``)."""
        key = (scope, bind)
        p = self.places.get(key)
        if p is None:
            p = self.places[key] = Placement(scope, bind)
        return p

    def step(self, node: Node) -> Step:
        """The space's shared Step of a chunk-DAG node (as ``Space.step``)."""
        st = self.steps.get(node)
        if st is None:
            st = self.steps[node] = (Step("group", node[1], node[2]) if node[0] == "g"
                                     else Step("transfer", node[1]))
        return st


def interned(space: Any) -> Interned:
    """The space's :class:`Interned` (made on first use)."""
    it: Interned | None = getattr(space, "_interned", None)
    if it is None:
        it = space._interned = Interned(space._places, space._steps)
    return it


_NF = 8  # fields per group in a flat state (flat_groups)
_FIELDS = attrgetter("name", "info", "split", "perm", "cores", "parts", "spread", "binds")


def flat_groups(groups: Sequence[Any]) -> tuple[Any, ...]:
    """What :class:`Decoded` reads of the decoder's group records, flat: per record its
    name, facts, split, perm, cores, parts, spread and binds (one tuple of values the space
    shares, instead of the records and the lists they hold)."""
    return tuple(chain.from_iterable(map(_FIELDS, groups)))


class Decoded:
    """What a decoded schedule is built from (:class:`compiler.codes.ScheduleSource`).

    Args:
        it: The space's interned tables (``use`` set to the value table to intern in).
        batch: The schedule's batch.
        groups: What is read of the decoder's group records, flat (:func:`flat_groups`):
            per group its name, facts (``info.ops`` is read), split, perm, cores, parts,
            spread and binds, in the records' order.
        transfers: The chunk DAG's transfers (their results in DDR).
        nodes: The order, as chunk-DAG nodes.
        scopes: Each step's scope (0 L1, 1 LLB, 2 DDR), in the order (the walk's list:
            one object; made bytes it cost ~8,000 instructions per ResNet-50 candidate).
        at: The position in the order of each group's chunks (by group name) and of each
            transfer (by name), when known (else found from ``nodes``).

    A candidate kept and never coded holds this state until it is dropped: it is kept
    compact (one flat tuple of shared values, the scopes' list, the packed positions),
    not the decoder's records and their lists, so the garbage collector has a handful of
    objects per kept candidate to walk instead of ~120 (ResNet-50) or ~600 (BERT-large)
    (issue 20).
    """

    __slots__ = ("_codes", "_made", "_objects", "_state", "_text", "_transfers", "batch", "it",
                 "table")

    def __init__(self, it: Interned, batch: int, groups: tuple[Any, ...], transfers: Sequence[Transfer],
                 nodes: list[Node], scopes: Sequence[int],
                 at: tuple[dict[str, list[int]], dict[str, int]] | None = None) -> None:
        self.it, self.table, self.batch = it, it.table, batch
        self._state: tuple[Any, ...] | None = (groups, transfers, nodes, scopes, at)
        self._codes: ScheduleCodes | None = None
        self._transfers: Sequence[list[Any]] = ()  # rows, made with the codes
        self._text: str | None = None
        self._objects: tuple[Any, ...] | None = None
        # coded in C: the transfers and each one's placement (the rows made with the objects)
        self._made: tuple[Sequence[Transfer], tuple[Placement, ...]] | None = None

    def codes(self) -> ScheduleCodes:
        if self._codes is None:
            if not self._code_compiled():
                self._code()
        assert self._codes is not None
        return self._codes

    def _code_compiled(self) -> bool:
        """The codes and the text in one C call (:mod:`search_space._ccodes`) from what the
        compiled decoder packed; False (nothing set) when that is not at hand: pure Python
        forced, not built, transfers already made or the walk's positions unpacked (then
        :meth:`_code`, the reference)."""
        state = self._state
        assert state is not None
        groups, transfers, nodes, scopes, at = state
        packed = getattr(transfers, "_packed", None)
        parts = getattr(at, "_parts", None)
        if packed is None or parts is None or type(scopes) is not list:
            return False
        assert self.table is not None
        cache = self.it.compiled(self.table)
        if cache is None:
            return False
        got = cache.encode(self.batch, groups, parts[0], parts[1], scopes, nodes, packed[0],
                           packed[1], transfers.names, packed[2], parts[3])
        if got is None:  # a state the C code does not take: the Python code
            return False
        g, t, st, self._text, places = got
        self._codes = ScheduleCodes(self.table, np.frombuffer(g, dtype=np.int32),
                                    np.frombuffer(t, dtype=np.int32),
                                    np.frombuffer(st, dtype=np.int32))
        self._made = (transfers, places)
        self._state = None
        return True

    def _code(self) -> None:
        state = self._state
        assert state is not None
        groups, transfers, nodes, scopes, at = state
        it, table = self.it, self.table
        assert table is not None
        # each group chunk's and each transfer's position in the order
        if at is None:
            chunk_at: dict[str, list[int]] = {groups[i]: [0] * groups[i + 2]
                                              for i in range(0, len(groups), _NF)}
            step_at: dict[str, int] = {}
            for k, nd in enumerate(nodes):
                if nd[0] == "g":
                    chunk_at[nd[1]][nd[2]] = k
                else:
                    step_at[nd[1]] = k
        else:
            chunk_at, step_at = at
        fast = it.groups if it.table is table else {}
        g_codes = []
        for i in range(0, len(groups), _NF):
            name, info, split, perm, cores, parts, spread, binds = groups[i:i + _NF]
            at = chunk_at[name]
            sc = itemgetter(*at)(scopes) if len(at) > 1 else (scopes[at[0]],)
            key = (name, id(info.ops), split, perm, cores, parts, spread, sc)
            c = fast.get(key)
            if c is None:
                c = fast[key] = it.group_code(table, name, info, split, sc, binds)
            g_codes.append(c)
        t_codes = []
        rows = []
        for t in transfers:
            sc = scopes[step_at[t.name]]
            # the space's shared Placement (the cost model looks placements up by identity)
            place = it.placement(_NAME[sc], t.placement.core_bind)
            tkey = (t.tensor, t.dst_factor, t.dst_chunks, id(place))
            c = table.transfer_code(tkey)
            if c is None:
                c = table.add_transfer(tkey, TransferItem(t.tensor, t.dst_factor,
                                                          t.dst_chunks, place))
            # [transfer, placed transfer (made when the objects are), code, key entry,
            # placement]; not kept between decodes (each decode derives new transfers)
            row = [t, None, c, None, place]
            t_codes.append(row[2])
            rows.append(row)
        s_codes = table.step_codes(nodes)
        for k, c in enumerate(s_codes):
            if c is None:
                s_codes[k] = it.step_code(table, nodes[k])
        self._codes = ScheduleCodes(table, np.array(g_codes, dtype=np.int32),
                                    np.array(t_codes, dtype=np.int32),
                                    np.array(s_codes, dtype=np.int32))
        self._transfers = rows
        self._state = None  # the decoder's records are no longer needed

    def key_text(self) -> str:
        if self._text is None:
            codes = self.codes()  # the compiled codes make the text with them
            if self._text is not None:
                return self._text
            table = codes.table
            entries = transfer_entries(table, self._transfers)
            self._text = coded_text(self.batch, table, codes.groups.tolist(), entries,
                                    codes.order.tolist())
        return self._text

    def objects(self) -> tuple[tuple[GroupSpec, ...], tuple[Transfer, ...], tuple[Step, ...]]:
        if self._objects is None:
            codes = self.codes()
            table = codes.table
            groups, steps = table.groups, table.steps
            if self._made is not None:  # coded in C: the rows as _code makes them
                made, places = self._made
                self._transfers = [[t, None, c, None, p]
                                   for t, c, p in zip(made, codes.transfers.tolist(), places)]
                self._made = None
            for row in self._transfers:
                if row[1] is None:  # the transfer with its result in its placement
                    t, place = row[0], row[4]
                    row[1] = t if place is t.placement else \
                        Transfer(t.name, t.kind, t.tensor, t.src_factor, t.dst_factor,
                                 t.src_chunks, t.dst_chunks, place)
            self._objects = (tuple([groups[c] for c in codes.groups.tolist()]),
                             tuple([row[1] for row in self._transfers]),
                             tuple([steps[c] for c in codes.order.tolist()]))
        return self._objects  # type: ignore[return-value]


_MOD: list[Any] = []
# entries of each of a compiled cache's tables before it starts again: a placed transfer's
# entry holds its text (~300-400 bytes), as key_text's memo of them (_BOUND there, the same)
_CLIMIT = 32_768


def _ccodes() -> Any:
    """The compiled codes (``search_space._ccodes``), or None (pure Python forced, or not
    built: warned once by :func:`search_space._ccore.load_extension`)."""
    if not _MOD:
        from search_space._ccore import load_extension  # (it imports this module's users)

        _MOD.append(load_extension)
    return _MOD[0]("_ccodes")


def _compiled_cache(mod: Any, it: Interned, table: ValueTable, limit: int = _CLIMIT,
                    first: bool = True) -> Any:
    """A ``_ccodes.Cache`` for ``table``: a group spec or a placed transfer met the first time
    is interned by the C code itself (``first``: the space's places dict, the value types, the
    scope names and ``table``'s lists and dicts handed over; the same objects made in the same
    order as :meth:`Interned.group_code`, :meth:`Interned.placement`, ``ValueTable.add_group``
    and ``add_transfer`` and the callback below make them, and the text pieces
    ``key_text``'s ``_Pieces.group`` makes), else by the Python callbacks; a new step is
    always the callback's. Either way the table grows as :meth:`Decoded._code` grows it."""
    pieces = text_pieces(table)

    def new_group(groups: tuple[Any, ...], i: int, sc: tuple[int, ...]) -> int:
        name, info, split, _, _, _, _, binds = groups[i * _NF:(i + 1) * _NF]
        return it.group_code(table, name, info, split, sc, binds)

    def group_info(c: int) -> tuple[tuple[int, ...], str, str]:
        return pieces.group(table, c)

    def new_transfer(tensor: str, df: int, d0: int, dn: int, scope: int,
                     bind: tuple[tuple[int, ...], ...]) -> tuple[int, Placement, str]:
        dst = tuple(range(d0, d0 + dn))
        place = it.placement(_NAME[scope], bind)
        tkey = (tensor, df, dst, id(place))
        c = table.transfer_code(tkey)
        if c is None:
            c = table.add_transfer(tkey, TransferItem(tensor, df, dst, place))
        return c, place, pieces.placement(place)

    def step_code(node: Node) -> int:
        return it.step_code(table, node)

    made = tuple(map(plain_fields, (Placement, GroupSpec, TransferItem)))
    return mod.Cache(new_group, group_info, new_transfer, step_code, limit,
                     (it.places, Placement, GroupSpec, TransferItem, _NAME, table, made)
                     if first else None)


def plain_fields(cls: type) -> tuple[str, ...] | None:
    """The field names of a frozen dataclass whose instances are made by its generated
    ``__init__`` setting each field in order and nothing else (``object.__new__``, no
    ``__post_init__``, every field an argument in field order), so the C code may make one
    the same way (``object.__new__`` and ``object.__setattr__`` of each field, as that
    ``__init__`` does: the same instance dict, ~5,000 instructions less than a call);
    else None (the C code calls ``cls``)."""
    init = cls.__dict__.get("__init__")
    params = getattr(cls, "__dataclass_params__", None)
    if (not dataclasses.is_dataclass(cls) or params is None or not params.frozen
            or cls.__new__ is not object.__new__ or type(cls) is not type
            or hasattr(cls, "__post_init__") or init is None
            or getattr(getattr(init, "__code__", None), "co_filename", None) != "<string>"):
        return None
    names = tuple(f.name for f in dataclasses.fields(cls))
    if any(not f.init for f in dataclasses.fields(cls)) \
            or tuple(inspect.signature(init).parameters)[1:] != names:
        return None
    return names
