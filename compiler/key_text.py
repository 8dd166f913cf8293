"""The text of a schedule's structural key, built from its codes: ``repr(s.structural_key())``.

A schedule's identity (``candidate_id`` in the tuner, "is the child its parent?" in the
search space's ``mutate``) is a hash of ``repr(schedule.structural_key())``. Most of that
repr's time goes into the same few shared values again and again: the placements of a
group's chunks and of a transfer (dataclass reprs), and the op tuples of groups. A
schedule made by the search space's decoder carries :class:`compiler.codes.ScheduleCodes`
(the codes of its interned group specs, transfer items and steps), so
:func:`key_text` reprs each interned value once per value table and joins the pieces in
the structural key's order: byte for byte the same text as ``repr(structural_key())``
(records already in logs keep their ids), at a fraction of the cost.

A schedule without codes, or one whose values are not the ones its codes name (the
codes are checked by identity, value by value), gets the plain ``repr``. A
:class:`compiler.codes.LazySchedule` asks its source, which joins the same pieces
(:func:`coded_text`) without building the schedule's objects.

Example:
    >>> key_text(s) == repr(s.structural_key())
    True
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from itertools import islice
from operator import itemgetter
from typing import Any, cast

from compiler.codes import LazySchedule, ScheduleCodes, ValueTable, codes_of
from compiler.memo import peek_memo
from compiler.schedule import GraphSchedule, Placement

__all__ = ["coded_text", "key_text", "text_pieces", "transfer_entries", "transfer_tail",
           "transfer_text"]


class _Pieces:
    """Reprs of one value table's interned values, by code (filled as codes are met)."""

    def __init__(self) -> None:
        # group code -> (its ops (the sort key), repr((ops, split, chunks)),
        # repr of its first op (what its steps in the order are named by))
        self.groups: list[tuple[tuple[int, ...], str, str] | None] = []
        # transfer code -> repr((dst_chunks, placement))[1:] : "dst_chunks, placement)"
        self.transfers: list[str | None] = []
        # step code -> (group step?, name, ", chunk)" of a group step or repr(name))
        self.steps: list[tuple[bool, str, str] | None] = []
        # reprs of the table's op tuples and placements by code (table.ops, table.placements)
        self.ops: list[str | None] = []
        self.places: list[str | None] = []
        # step code -> its entry in the order's text, for group steps made with the first op
        # every schedule of the table has for the group's name (first_of: name -> that repr)
        self.full: list[str | None] = []
        self.first_of: dict[str, str] = {}
        # group code -> whether its first op is the one its name was first met with
        self.agrees: list[bool | None] = []
        # reprs of other placements by identity (each kept alive here with its repr)
        self.other_places: dict[int, tuple[Placement, str]] = {}
        # (name, kind, src_factor, src_chunks, transfer code) -> (name, the transfer's entry):
        # the code names the rest (tensor, dst_factor, dst_chunks, placement), so decodes
        # that derive equal transfers share the text instead of formatting it again
        self.entries: dict[tuple[Any, ...], tuple[str, str]] = {}

    def group(self, table: ValueTable, c: int) -> tuple[tuple[int, ...], str, str]:
        """The pieces of group code ``c``: ``repr((ops, split, chunks))`` joined from the
        reprs of its op tuple and placements (each made once per table)."""
        g = table.groups[c]
        o = table.group_ops[c]
        ops_text = self.ops
        _grow(ops_text, len(table.ops))  # type: ignore[arg-type]
        text = ops_text[o]
        if text is None:
            text = ops_text[o] = repr(g.ops)
        first = table.group_first[c]
        place_codes = table.group_places[first:first + len(g.chunks)]
        places = self.places
        _grow(places, len(table.placements))  # type: ignore[arg-type]
        chunks = []
        for k in place_codes:
            p = places[k]
            if p is None:
                p = places[k] = repr(table.placements[k])
            chunks.append(p)
        return (g.ops, f"({text}, {g.split!r}, {_tuple(chunks)})",
                repr(min(g.ops) if g.ops else -1))

    def placement(self, p: Placement) -> str:
        """``repr(p)``, remembered by identity."""
        hit = self.other_places.get(id(p))
        if hit is None or hit[0] is not p:
            if len(self.other_places) > 100_000:
                self.other_places = {}
            hit = self.other_places[id(p)] = (p, repr(p))
        return hit[1]


_MEMO_KEY = "compiler.key_text"
_FIRST = itemgetter(0)
# transfer entries remembered per table: past it, the older half is dropped (~400 bytes
# an entry: ~13 MB at most; ResNet-50 b16 makes ~29,000 in 3,000 decodes)
_BOUND = 32_768
_PIECES: weakref.WeakKeyDictionary[ValueTable, _Pieces] = weakref.WeakKeyDictionary()


def _tuple(parts: list[str]) -> str:
    """``repr`` of a tuple whose items' reprs are ``parts``."""
    if len(parts) == 1:
        return f"({parts[0]},)"
    return "(" + ", ".join(parts) + ")"


def transfer_tail(table: ValueTable, dst_chunks: tuple[int, ...], placement: Placement) -> str:
    """``repr((dst_chunks, placement))[1:]``, the placement's repr remembered."""
    return f"{dst_chunks!r}, {text_pieces(table).placement(placement)})"


def _grow(cache: list[object | None], n: int) -> None:
    if len(cache) < n:
        cache.extend([None] * (n - len(cache)))


def key_text(schedule: GraphSchedule) -> str:
    """``repr(schedule.structural_key())``, from the schedule's codes when it has them.

    Remembered beside a schedule that has a memo (a decoded one): ``mutate`` asks for
    the text of each child it makes, the tuner for the same child's id right after.
    """
    if isinstance(schedule, LazySchedule):
        src = schedule.built_by()
        if src is not None:
            return src.key_text()
    memo = peek_memo(schedule)
    if memo is not None:
        text: str | None = memo.get(_MEMO_KEY)
        if text is not None:
            return text
        codes = codes_of(schedule)
        text = _from_codes(schedule, codes) if codes is not None else None
        if text is None:
            text = repr(schedule.structural_key())
        memo[_MEMO_KEY] = text
        return text
    return repr(schedule.structural_key())


def text_pieces(table: ValueTable) -> _Pieces:
    """The reprs of ``table``'s values made so far (made on first use; kept while the
    table lives): its ``group(table, code)`` is a group code's (ops, text, first op repr)."""
    pieces = _PIECES.get(table)
    if pieces is None:
        pieces = _PIECES[table] = _Pieces()
    return pieces


def transfer_text(name: str, kind: str, tensor: str, src_factor: int, dst_factor: int,
                  src_chunks: tuple[int, ...], tail: str) -> str:
    """``repr`` of a transfer's entry in the structural key, ``tail`` being
    ``repr((dst_chunks, placement))[1:]``."""
    return (f"({name!r}, {kind!r}, {tensor!r}, {src_factor!r}, {dst_factor!r}, "
            f"{src_chunks!r}, {tail}")


def transfer_entries(table: ValueTable, rows: Sequence[list[Any]]) -> list[tuple[str, str]]:
    """The (name, :func:`transfer_text`) entry of each placed transfer of a decoded schedule.

    ``rows``: per transfer, a list whose items 0, 2, 3 and 4 are the derived transfer (its
    ``name``, ``kind``, ``tensor``, ``src_factor``, ``dst_factor``, ``src_chunks`` and
    ``dst_chunks`` are read), its code in ``table`` (its tensor, destination factor and
    chunks and placement: the item interned under it), its entry (None until made; set
    here) and its placement. Entries are remembered per table by what they are made of
    (the code standing for the item), so a transfer derived again by a later decode is
    one dict look-up, not a text formatted again (bounded: past :data:`_BOUND` entries
    the older half, by first use, is dropped and the newer half kept).
    """
    pieces = text_pieces(table)
    memo = pieces.entries
    if len(memo) > _BOUND:
        memo = pieces.entries = dict(islice(memo.items(), len(memo) - _BOUND // 2, None))
    get = memo.get
    out = []
    for row in rows:
        text = row[3]
        if text is None:
            t = row[0]
            key = (t.name, t.kind, t.src_factor, t.src_chunks, row[2])
            text = get(key)
            if text is None:
                tail = transfer_tail(table, t.dst_chunks, row[4])
                text = memo[key] = (t.name, transfer_text(t.name, t.kind, t.tensor,
                                                          t.src_factor, t.dst_factor,
                                                          t.src_chunks, tail))
            row[3] = text
        out.append(text)
    return out


def coded_text(batch: int, table: ValueTable, g_codes: list[int],
               transfers: list[tuple[str, str]], s_codes: list[int]) -> str:
    """The key's text of a schedule whose groups and steps are the table's values of
    ``g_codes`` and ``s_codes`` (in its order) and whose transfers' entries are
    ``transfers`` as (name, :func:`transfer_text`)."""
    pieces = text_pieces(table)
    cached = pieces.groups
    n_groups = len(table.groups)
    _grow(cached, n_groups)  # type: ignore[arg-type]
    agrees = pieces.agrees
    _grow(agrees, n_groups)  # type: ignore[arg-type]
    interned = table.groups
    groups = [cached[c] for c in g_codes]
    if None in groups:
        for k, c in enumerate(g_codes):
            if groups[k] is None:
                groups[k] = cached[c] = pieces.group(table, c)
    # every group's name has the first op it has in the table's other schedules: per code,
    # against the first op its name was met with (fixed once met), found once
    agree = True
    for c in g_codes:
        ok = agrees[c]
        if ok is None:
            first_op = cached[c][2]  # type: ignore[index]
            ok = agrees[c] = pieces.first_of.setdefault(interned[c].name, first_op) == first_op
        if not ok:
            agree = False
    transfers = sorted(transfers, key=_FIRST)
    texts = pieces.steps
    _grow(texts, len(table.steps))  # type: ignore[arg-type]
    steps = table.steps
    full = pieces.full
    _grow(full, len(table.steps))  # type: ignore[arg-type]
    order: list[str | None] = [full[c] for c in s_codes] if agree else [None] * len(s_codes)
    if None in order:
        # group name -> repr of its first op in this schedule
        first = {interned[c].name: p[2] for c, p in zip(g_codes, groups)}  # type: ignore[index]
        for k, c in enumerate(s_codes):
            if order[k] is not None:
                continue
            text = texts[c]
            if text is None:
                st = steps[c]
                grouped = st.kind == "group"
                text = texts[c] = (grouped, st.name,
                                   f", {st.chunk!r})" if grouped else repr(st.name))
            if not text[0]:
                order[k] = full[c] = text[2]
                continue
            f = first.get(text[1])
            order[k] = "(" + (f or repr(text[1])) + text[2]
            if f is not None and agree:  # the name's first op in every schedule of the table
                full[c] = order[k]
    done = cast("list[tuple[tuple[int, ...], str, str]]", groups)  # every piece made above
    done.sort(key=_FIRST)
    return _tuple([repr(batch), _tuple([p for _, p, _ in done]),
                   _tuple([p for _, p in transfers]), _tuple(order)])  # type: ignore[arg-type]


def _from_codes(s: GraphSchedule, codes: ScheduleCodes) -> str | None:
    """The key's text, or None when the codes do not name the schedule's values."""
    table = codes.table
    g_codes, t_codes, s_codes = codes.groups.tolist(), codes.transfers.tolist(), \
        codes.order.tolist()
    if (len(g_codes) != len(s.groups) or len(t_codes) != len(s.transfers)
            or len(s_codes) != len(s.order)):
        return None
    interned = table.groups
    for g, c in zip(s.groups, g_codes):
        if interned[c] is not g:
            return None
    steps = table.steps
    for st, c in zip(s.order, s_codes):
        if steps[c] is not st:
            return None
    # transfers: (name, kind, tensor, src_factor, dst_factor, src_chunks, dst_chunks,
    # placement), sorted by name; the interned item gives the costly tail
    pieces = text_pieces(table)
    _grow(pieces.transfers, len(table.transfers))  # type: ignore[arg-type]
    transfers = []
    for t, c in zip(s.transfers, t_codes):
        item = table.transfers[c]
        if (item.placement is not t.placement or item.dst_chunks != t.dst_chunks):
            return None
        tail = pieces.transfers[c]
        if tail is None:
            tail = pieces.transfers[c] = transfer_tail(table, t.dst_chunks, t.placement)
        transfers.append((t.name, transfer_text(t.name, t.kind, t.tensor, t.src_factor,
                                                t.dst_factor, t.src_chunks, tail)))
    return coded_text(s.batch, table, g_codes, transfers, s_codes)
