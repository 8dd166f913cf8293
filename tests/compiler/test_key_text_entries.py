"""``transfer_entries`` (a decoded schedule's transfers' entries in the key's text,
remembered per value table by what they are made of) gives byte for byte the repr of each
transfer's entry in ``structural_key()``, whichever transfers met before share a code.

Property: random transfers over a few values each (so names, kinds, factors and chunks
collide across codes and codes across transfers), fed one decode at a time; every entry
against the plain repr of the transfer's tuple.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler import key_text as kt
from compiler.codes import TransferItem, ValueTable
from compiler.schedule import GraphSchedule, GroupSpec, Placement, Step, Transfer

_PLACES = [Placement("DDR", ((0,),)), Placement("L1", ((0, 1), (2, 3))),
           Placement("LLB", ((4,), (5,)))]
_chunks = st.lists(st.integers(0, 3), min_size=1, max_size=3).map(tuple)
_transfer = st.tuples(st.sampled_from(["t0", "t1", "t'2"]), st.sampled_from(["split", "concat"]),
                      st.sampled_from(["x", "y"]), st.integers(1, 4), st.integers(1, 4),
                      _chunks, _chunks, st.integers(0, len(_PLACES) - 1))


def _entry(t: Transfer) -> str:
    return repr((t.name, t.kind, t.tensor, t.src_factor, t.dst_factor, t.src_chunks,
                 t.dst_chunks, t.placement))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(_transfer, max_size=6), min_size=1, max_size=6))
def test_transfer_entries_are_the_entries_repr(
        decodes: list[list[tuple[str, str, str, int, int, tuple[int, ...], tuple[int, ...], int]]]
) -> None:
    table = ValueTable()
    for rows_in in decodes:
        rows: list[list[Any]] = []
        for name, kind, tensor, sf, df, sc, dc, p in rows_in:
            place = _PLACES[p]
            key = (tensor, df, dc, id(place))
            c = table.transfer_code(key)
            if c is None:
                c = table.add_transfer(key, TransferItem(tensor, df, dc, place))
            # the derived transfer's own placement differs (the decoder places its result)
            t = Transfer(name, kind, tensor, sf, df, sc, dc, Placement("DDR", place.core_bind))
            rows.append([t, None, c, None, place])
        got = kt.transfer_entries(table, rows)
        # the entry names the placement the decoder placed the result in (row item 4)
        want = [_entry(replace(r[0], placement=r[4])) for r in rows]
        assert [g[1] for g in got] == want
        assert [g[0] for g in got] == [r[0].name for r in rows]
        # kept in the rows: asked again, the same entries
        assert kt.transfer_entries(table, rows) == got


def test_transfer_entries_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the bound the older half is dropped: the newer entries stay remembered (a
    memo dropped whole would make the next decodes format every entry again)."""
    monkeypatch.setattr(kt, "_BOUND", 4)
    table = ValueTable()
    place = _PLACES[1]
    c = table.add_transfer("k", TransferItem("x", 2, (0, 1), place))
    for k in range(20):
        t = Transfer(f"t{k}", "split", "x", 1, 2, (0,), (0, 1), place)
        [(name, text)] = kt.transfer_entries(table, [[t, None, c, None, place]])
        assert text == _entry(t) and name == f"t{k}"
        kept = [key[0] for key in kt.text_pieces(table).entries]
        assert len(kept) <= 5
        # the newest entries, in order of first use, always include the last three
        assert kept == [f"t{i}" for i in range(max(0, k + 1 - len(kept)), k + 1)]
        assert len(kept) >= min(k + 1, 3)


_group = st.tuples(st.sampled_from(["a", "b", "c"]),
                   st.lists(st.integers(0, 9), max_size=3, unique=True).map(lambda x: tuple(sorted(x))),
                   st.integers(1, 2), st.integers(0, len(_PLACES) - 1))
# a group step names one of its schedule's groups (by index), as in every valid schedule
_step = st.one_of(st.tuples(st.just("group"), st.integers(0, 3), st.integers(0, 1)),
                  st.tuples(st.just("transfer"), st.sampled_from([0, 1]), st.just(0)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.lists(_group, min_size=1, max_size=4),
                          st.lists(_step, max_size=8)), min_size=1, max_size=6))
def test_coded_text_is_the_structural_keys_repr(
        schedules: list[tuple[list[tuple[str, tuple[int, ...], int, int]],
                              list[tuple[str, int, int]]]]) -> None:
    """Schedules of one value table whose group names come with other first ops in other
    schedules (the table-wide order texts must not be reused for them). Group steps name a
    group of their schedule (a step naming no group of its schedule, which no valid
    schedule has, would get the table's text: not covered by the codes path)."""
    table = ValueTable()
    ops_pool: dict[tuple[int, ...], tuple[int, ...]] = {}  # one tuple object per value
    for groups_in, steps_in in schedules:
        groups, g_codes = [], []
        for name, ops, split, p in groups_in:
            ops = ops_pool.setdefault(ops, ops)
            spec = GroupSpec(name, ops, split, (_PLACES[p],) * split)
            key = (name, id(ops), split, p)
            c = table.group_code(key)
            if c is None:
                c = table.add_group(key, spec)
            groups.append(table.groups[c])
            g_codes.append(c)
        order, s_codes = [], []
        for kind, at, chunk in steps_in:
            name = groups_in[at % len(groups_in)][0] if kind == "group" else f"t{at}"
            c = table.step_code((kind, name, chunk))
            if c is None:
                c = table.add_step((kind, name, chunk), Step(kind, name, chunk))
            order.append(table.steps[c])
            s_codes.append(c)
        s = GraphSchedule(4, tuple(groups), (), tuple(order))
        assert kt.coded_text(4, table, g_codes, [], s_codes) == repr(s.structural_key())
