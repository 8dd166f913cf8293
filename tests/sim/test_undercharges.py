"""Issue 25: places where the simulator charged less than the hardware would.

Each test failed on the code before its fix; its docstring gives the
first-principles figure it checks against.
"""

from __future__ import annotations

import pytest

from compiler.derive import make_schedule
from compiler.graph import Graph
from compiler.schedule import GraphSchedule
from compiler.target import Target
from sim import SimError, SimResult, simulate
from tests.sim.conftest import group

ONE_PER_CORE = [[c] for c in range(8)]


def ok(r: SimResult | SimError) -> SimResult:
    assert isinstance(r, SimResult), r
    return r


def step(r: SimResult, name: str) -> float:
    """Compute time of one step, in cycles."""
    s = next(s for s in r.steps if s.name == name)
    return s.end_cycles - s.start_cycles


# ---- item 1: a view opening a group does not move its input into L1 ---------------------------
def bert_projection_cut(g: Graph, first: int) -> GraphSchedule:
    """BERT-base layer 0 with its attention output projection alone in a group.

    Ops 7-23 are the attention up to ``permute_dims_3``, op 24 the reshape back to
    (tokens, 768), 25-26 the projection matmul and its bias add. ``first`` is 24
    (the reshape opens the projection's group) or 25 (it closes the producer's
    group): physically the same schedule, every result in DDR.
    """
    assert g.ops[24].op_type == "reshape" and g.ops[25].op_type == "matmul"
    n = len(g.ops)
    return make_schedule(g, [
        group("embed", range(0, 7), "DDR", ONE_PER_CORE),
        group("attention", range(7, first), "DDR", ONE_PER_CORE),
        group("projection", range(first, 27), "DDR", ONE_PER_CORE),
        group("rest", range(27, n), "DDR", ONE_PER_CORE),
    ])


def test_a_view_opening_a_group_still_streams_its_input_per_weight_tile(
        bert128: Graph, target: Target) -> None:
    """BERT-base s128 b8, attention output projection, input in DDR.

    First principles: the projection's 768 x 768 FP16 weights (1,179,648 B) pass
    the weight buffer in 9 tiles of 128 KiB, so the 8 x 128 x 768 FP16 input
    (1,572,864 B) is read 9 times from DDR at 27 B/cycle: at least 524,288
    cycles, wherever the reshape sits. Before the fix the reshape opening the
    group hid the input "inside" it: 155,801 cycles (8 passes at L1 speed)
    against 621,835 with the reshape in the producer's group.
    """
    opened = ok(simulate(bert128, bert_projection_cut(bert128, 24), target))
    closed = ok(simulate(bert128, bert_projection_cut(bert128, 25), target))
    floor = 9 * 1_572_864 / target.ddr.bytes_per_cycle
    assert floor == pytest.approx(524_288)
    a, b = step(opened, "projection[0]"), step(closed, "projection[0]")
    assert a >= floor and b >= floor
    assert a == pytest.approx(b, rel=0.01)
    assert opened.latency_us == pytest.approx(closed.latency_us, rel=0.01)
    assert opened.ddr_bytes == pytest.approx(closed.ddr_bytes, rel=0.01)
