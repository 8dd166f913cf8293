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
codes are checked by identity, value by value), gets the plain ``repr``.

Example:
    >>> key_text(s) == repr(s.structural_key())
    True
"""

from __future__ import annotations

import weakref

from compiler.codes import ScheduleCodes, ValueTable, codes_of
from compiler.memo import peek_memo
from compiler.schedule import GraphSchedule

__all__ = ["key_text"]


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


_MEMO_KEY = "compiler.key_text"
_PIECES: weakref.WeakKeyDictionary[ValueTable, _Pieces] = weakref.WeakKeyDictionary()


def _tuple(parts: list[str]) -> str:
    """``repr`` of a tuple whose items' reprs are ``parts``."""
    if len(parts) == 1:
        return f"({parts[0]},)"
    return "(" + ", ".join(parts) + ")"


def _grow(cache: list[object | None], n: int) -> None:
    if len(cache) < n:
        cache.extend([None] * (n - len(cache)))


def key_text(schedule: GraphSchedule) -> str:
    """``repr(schedule.structural_key())``, from the schedule's codes when it has them.

    Remembered beside a schedule that has a memo (a decoded one): ``mutate`` asks for
    the text of each child it makes, the tuner for the same child's id right after.
    """
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


def _from_codes(s: GraphSchedule, codes: ScheduleCodes) -> str | None:
    """The key's text, or None when the codes do not name the schedule's values."""
    table = codes.table
    g_codes, t_codes, s_codes = codes.groups.tolist(), codes.transfers.tolist(), \
        codes.order.tolist()
    if (len(g_codes) != len(s.groups) or len(t_codes) != len(s.transfers)
            or len(s_codes) != len(s.order)):
        return None
    pieces = _PIECES.get(table)
    if pieces is None:
        pieces = _PIECES[table] = _Pieces()
    # groups: (ops, split, chunks), sorted by ops (stable: as sorted() on the key does)
    _grow(pieces.groups, len(table.groups))  # type: ignore[arg-type]
    groups = []
    first: dict[str, str] = {}  # group name -> repr of its first op
    interned, cached = table.groups, pieces.groups
    for g, c in zip(s.groups, g_codes):
        if interned[c] is not g:
            return None
        piece = cached[c]
        if piece is None:
            piece = cached[c] = (g.ops, repr((g.ops, g.split, g.chunks)),
                                 repr(min(g.ops) if g.ops else -1))
        groups.append(piece)
        first[g.name] = piece[2]
    groups.sort(key=lambda x: x[0])
    # transfers: (name, kind, tensor, src_factor, dst_factor, src_chunks, dst_chunks,
    # placement), sorted by name; the interned item gives the costly tail
    _grow(pieces.transfers, len(table.transfers))  # type: ignore[arg-type]
    transfers = []
    for t, c in zip(s.transfers, t_codes):
        item = table.transfers[c]
        if (item.placement is not t.placement or item.dst_chunks != t.dst_chunks):
            return None
        tail = pieces.transfers[c]
        if tail is None:
            tail = pieces.transfers[c] = repr((t.dst_chunks, t.placement))[1:]
        transfers.append((t.name, f"({t.name!r}, {t.kind!r}, {t.tensor!r}, {t.src_factor!r}, "
                                  f"{t.dst_factor!r}, {t.src_chunks!r}, {tail}"))
    transfers.sort(key=lambda x: x[0])
    # order: (first op of its group, chunk) for a group step, else the step's name
    _grow(pieces.steps, len(table.steps))  # type: ignore[arg-type]
    order = []
    steps, texts = table.steps, pieces.steps
    for st, c in zip(s.order, s_codes):
        if steps[c] is not st:
            return None
        text = texts[c]
        if text is None:
            grouped = st.kind == "group"
            text = texts[c] = (grouped, st.name,
                               f", {st.chunk!r})" if grouped else repr(st.name))
        if text[0]:
            order.append("(" + (first.get(text[1]) or repr(text[1])) + text[2])
        else:
            order.append(text[2])
    return _tuple([repr(s.batch), _tuple([p for _, p, _ in groups]),
                   _tuple([p for _, p in transfers]), _tuple(order)])
