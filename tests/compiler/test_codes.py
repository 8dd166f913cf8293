"""compiler.codes: the search space's decoder leaves codes of its shared values beside schedules."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from compiler import codes as codes_mod
from compiler.codes import TransferItem, ValueTable, codes_of
from compiler.schedule import GraphSchedule, Step
from compiler.target import Target
from search_space import build_space
from tests.sim.conftest import zoo_graph


def test_decoded_schedules_carry_the_codes_of_their_values() -> None:
    graph = zoo_graph("tiny_cnn", 8)
    space = build_space(graph, Target.default())
    rng = np.random.default_rng(0)
    seen = [space.sample(rng) for _ in range(20)]
    seen.append(space.mutate(seen[0], rng))
    for s in seen:
        c = codes_of(s)
        assert c is not None and c.table is space.values()
        assert c.groups.dtype == c.transfers.dtype == c.order.dtype == np.int32
        # the schedule's values are the table's (shared between schedules)
        assert all(c.table.groups[k] is g for k, g in zip(c.groups.tolist(), s.groups))
        assert all(c.table.steps[k] is st for k, st in zip(c.order.tolist(), s.order))
        assert len(c.transfers) == len(s.transfers)
        for k, t in zip(c.transfers.tolist(), s.transfers):
            assert c.table.transfers[k] == TransferItem(t.tensor, t.dst_factor, t.dst_chunks,
                                                        t.placement)
    # copies carry none: codes live beside a value, never in it
    s = seen[0]
    assert codes_of(GraphSchedule.loads(s.dumps())) is None
    assert codes_of(dataclasses.replace(s, source="copy")) is None


def test_a_full_table_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    table = ValueTable()
    assert table.step_code(("g", "a", 0)) is None
    assert table.add_step(("g", "a", 0), Step("group", "a", 0)) == 0
    assert table.step_code(("g", "a", 0)) == 0
    assert not table.full()
    graph = zoo_graph("tiny_cnn", 8)
    space = build_space(graph, Target.default())
    first = space.values()
    assert codes_of(space.sample(np.random.default_rng(1))) is not None  # interned when asked
    monkeypatch.setattr(codes_mod, "MAX_VALUES", 0)  # bounded memory: a new table past the cap
    assert first.full() and space.values() is not first
