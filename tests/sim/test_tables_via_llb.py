"""Issue 26: L1 tables may travel DDR -> LLB -> weight buffers (``sim/_gathers.py``).

An embedding table of at most half a weight buffer is gathered in L1. It can reach the
weight buffers straight from DDR (27 B/cycle, during the step) or be copied first into
the LLB by the cluster's DDR-to-LLB system DMA (hardware notes: sysdma_0 DDR->LLB), a
copy with no producer that may run during earlier steps, and then travel LLB -> each
core's weight buffer (64 B/cycle per core port, LLB broadcast). The engine takes the
LLB route for a step's L1 tables (all but the one staged before compute) when they
arrive sooner that way (``plan_via_llb``).

Invariants (hypothesis over table sets, the length of an earlier step, core bindings and
the LLB's size, full included):
* the copy crosses DDR once: its DDR bytes are the tables' bytes, once, and the
  result's DDR bytes cover every gather's table or rows (compulsory bytes crossed);
* the tables copied into the LLB (with the step's LLB tables) never exceed the LLB the
  memory plan leaves free; a schedule whose LLB is full keeps the direct path;
* a table's trip to the cores never starts before its copy ends: the last table
  arrives no earlier than the copy's end plus its own trip;
* the step is never shorter than the tables' arrival (compute waits for them);
* the result is never below the bound, and ``explain``'s terms still add up to the gap.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper
from onnx import helper as h

from compiler.capacity import plan_memory
from compiler.graph import Graph
from compiler.model import Model
from compiler.opshape import weight_path_bytes_per_cycle
from compiler.schedule import GraphSchedule, make_schedule
from compiler.target import Target
from sim import SimResult, simulate
from sim._dtype import in_compute_dtype
from sim._gathers import VIA_LLB, via_rate
from tests.sim.conftest import group
from tests.sim.test_explain import check as check_explain

WIDTH = 16  # FP16 columns per table row: 32 bytes
BATCH = 512
DENSE = 256  # columns of the dense input the earlier step works on
ALL8 = [list(range(8))]
EIGHT = [[c] for c in range(8)]


def via_graph(rows: list[int], exps: int) -> Graph:
    """A dense input through ``exps`` Exp ops (vector work, little DDR: the earlier step),
    then ``len(rows)`` tables of ``rows[i] x 16`` looked up once per sample and concatenated
    with the Exp chain's result, summed (a small output)."""
    nodes, inits = [], []
    prev = "x"
    for i in range(exps):
        nodes.append(h.make_node("Exp", [prev], [f"x{i}"]))
        prev = f"x{i}"
    for i, r in enumerate(rows):
        inits.append(numpy_helper.from_array(np.zeros((r, WIDTH), np.float32), f"t{i}"))
        nodes.append(h.make_node("Gather", [f"t{i}", "idx"], [f"e{i}"], axis=0))
    nodes.append(h.make_node("Concat", [prev] + [f"e{i}" for i in range(len(rows))], ["cat"],
                             axis=2))
    nodes.append(h.make_node("ReduceSum", ["cat", "axes"], ["out"], keepdims=1))
    inits.append(numpy_helper.from_array(np.array([2], dtype=np.int64), "axes"))
    g = helper.make_graph(
        nodes, "via",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [BATCH, 1, DENSE]),
         helper.make_tensor_value_info("idx", TensorProto.INT64, [BATCH, 1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [BATCH, 1, 1])],
        inits,
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name="via").graph


def two_steps(g: Graph, bind: list[list[int]]) -> GraphSchedule:
    """The Exp chain (output in L1), then the gathers and the concat (output in DDR)."""
    chain = [i for i, op in enumerate(g.ops) if op.op_type == "exp"]
    rest = [i for i in range(len(g.ops)) if i not in chain]
    if not chain:
        return make_schedule(g, [group("B", rest, "DDR", bind)])
    return make_schedule(g, [group("A", chain, "L1", bind), group("B", rest, "DDR", bind)])


def check_via(g: Graph, s: GraphSchedule, target: Target) -> SimResult:
    """Simulate and check the invariants of the module doc; return the result."""
    r = simulate(g, s, target)
    assert isinstance(r, SimResult), r
    sized = in_compute_dtype(g, target)
    free = target.llb.bytes - plan_memory(sized, s, target).peak_llb_bytes
    copied = sum(x.table_bytes for x in r.gathers if x.scope in (VIA_LLB, "LLB"))
    assert copied <= free + 1e-6
    assert r.peak_llb_bytes <= target.llb.bytes
    # compulsory DDR bytes: every gather's table (once) or its rows
    assert r.ddr_bytes >= sum(x.ddr_bytes for x in r.gathers) - 1e-6
    for rec in r.steps:
        via = [x for x in r.gathers if x.step == rec.name and x.scope == VIA_LLB]
        if not via:
            continue
        nbytes = sum(x.table_bytes for x in via)
        assert all(x.ddr_bytes == x.table_bytes for x in via)  # once, into the LLB
        (copy,) = [e for e in r.dma_events
                   if e.label == f"{rec.name} table to LLB" and e.resource == "ddr"]
        assert copy.nbytes == pytest.approx(nbytes)  # the copy crosses DDR once
        trips = [e for e in r.dma_events
                 if e.label == f"{rec.name} table to L1" and e.resource.endswith(".dma")]
        assert {e.resource for e in trips} == {f"core{c}.dma" for c in rec.cores}
        assert all(e.nbytes == pytest.approx(nbytes) for e in trips)
        arrival = via[0].arrival_cycles
        assert all(x.arrival_cycles == arrival for x in via)
        # the copy's bytes have crossed, then its descriptor and DDR latency
        copy_end = (copy.start_cycles + copy.duration_cycles + target.dma.setup_cycles
                    + target.ddr.latency_cycles)
        # the last table's trip starts when its copy (the last bytes of the copy) has ended
        last = via[-1].table_bytes
        assert arrival >= copy_end + last / via_rate(target, len(rec.cores)) - 1e-6
        assert all(e.start_cycles >= rec.start_cycles - 1e-6 for e in trips)
        # the step lasts until the tables have arrived, and they came sooner than direct
        assert rec.end_cycles >= arrival - 1e-6
        assert arrival - rec.start_cycles < nbytes / weight_path_bytes_per_cycle(
            target, len(rec.cores))
    assert r.latency_us >= r.lower_bound_us * (1 - 1e-9)
    return r


def test_tables_travel_via_the_llb_during_an_earlier_step(target: Target) -> None:
    """DLRM's 26 tables of 1,000 rows x 32 B after 40 Exp ops on 8 cores, one sample a core part.

    First principles: the Exp chain is 40 x 512 x 256 / 8 elements x 4 cycles / 64 lanes =
    40,960 cycles per core and needs only its 262,144-byte input from DDR (9,709 cycles),
    so the DDR channel is idle for ~30k cycles of it: the system DMA copies the 26 tables
    (832,000 B, 30,815 cycles; the weight path's first item, staged, is the ids'
    normalisation constants) into the LLB meanwhile; the gathers' step then receives
    them from the LLB at 64 B/cycle per core (13,000 cycles) instead of from DDR at
    27 B/cycle (30,815). Before, every table came from DDR during the step: its compute
    lasted at least 832,000 / 27 = 30,815 cycles.
    """
    g = via_graph([1000] * 26, 40)
    r = check_via(g, two_steps(g, EIGHT), target)
    b = r.steps[-1]
    via = [x for x in r.gathers if x.scope == VIA_LLB]
    assert len(via) == 26 and sum(x.table_bytes for x in via) == 832_000
    assert b.end_cycles - b.start_cycles < 0.6 * 832_000 / 27
    assert b.end_cycles - b.start_cycles >= 832_000 / 64
    check_explain(g, two_steps(g, EIGHT), target)


def test_a_copy_that_cannot_hide_costs_its_ddr_time(target: Target) -> None:
    """The same tables behind an earlier step too short to hide the copy (10 Exp ops:
    10,240 cycles per core), yet long enough that the engine sends them via the LLB.

    Every table must cross the DDR channel at 27 B/cycle before the gathers' step can
    end, whichever path it takes: the step ends no sooner than (the dense input, the ids,
    the tables) / 27 cycles = (262,144 + 4,096 + 832,000) / 27 = 40,676 cycles. A copy
    that took no DDR time would let the tables arrive ~13k cycles after compute starts
    (~10k) and end the step well before that.
    """
    g = via_graph([1000] * 26, 10)
    r = check_via(g, two_steps(g, EIGHT), target)
    assert VIA_LLB in {x.scope for x in r.gathers}
    ddr_time = (BATCH * DENSE * 2 + BATCH * 8 + 26 * 32_000) / target.ddr.bytes_per_cycle
    assert r.steps[-1].end_cycles >= ddr_time - 1e-6


def test_a_full_llb_keeps_the_direct_path(target: Target) -> None:
    """The LLB the memory plan leaves free is smaller than one table: no copy, all direct."""
    g = via_graph([1000] * 26, 40)
    s = two_steps(g, EIGHT)
    peak = plan_memory(in_compute_dtype(g, target), s, target).peak_llb_bytes
    full = target.replace(llb={"bytes": peak + 31_999})
    r = check_via(g, s, full)
    assert {x.scope for x in r.gathers} == {"L1"}
    half = target.replace(llb={"bytes": peak + 13 * 32_000})
    r = check_via(g, s, half)
    assert [x.scope for x in r.gathers].count(VIA_LLB) == 13


def two_llb_steps(rows: int, batch: int) -> Graph:
    """Two gathers of wide rows (256 FP16 = 512 B) from two ``rows``-row tables, each
    over half a weight buffer (so not gathered in L1), summed."""
    width = 256
    inits = [numpy_helper.from_array(np.zeros((rows, width), np.float32), f"t{i}")
             for i in range(2)]
    nodes = [h.make_node("Gather", [f"t{i}", "idx"], [f"e{i}"], axis=0) for i in range(2)]
    nodes.append(h.make_node("Add", ["e0", "e1"], ["out"]))
    g = helper.make_graph(
        nodes, "llb2", [helper.make_tensor_value_info("idx", TensorProto.INT64, [batch, 1])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, 1, width])], inits)
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name="llb2").graph


def test_steps_do_not_share_the_llb_left_for_tables(target: Target) -> None:
    """Two steps each gathering from a 153,600-byte table (300 rows of 512 B, over half a
    weight buffer), 2,048 lookups each: from the LLB a table costs 5.7k cycles of copy plus
    2,048 / 8 rows x (8 + 100) cycles of descriptors = 33.3k, from DDR 2,048 x 512 / 27 =
    38.8k, so each step alone takes the LLB. With LLB room for one table only, the first
    step's copy (ready at 0, resident while the second runs) leaves the second too little:
    it fetches its rows from DDR. (Before measurer version 5 both took the same room.)"""
    g = two_llb_steps(300, 2048)
    # A: the first table's index normalisation and gather; B: the rest
    first = [i for i, op in enumerate(g.ops) if op.name in ("less_0", "add_0", "where_0",
                                                             "take_0")]
    s = make_schedule(g, [group("A", first, "L1", ALL8),
                          group("B", [i for i in range(len(g.ops)) if i not in first], "DDR",
                                ALL8)])
    peak = plan_memory(in_compute_dtype(g, target), s, target).peak_llb_bytes
    roomy = check_via(g, s, target)
    assert [x.scope for x in roomy.gathers] == ["LLB", "LLB"]
    one = target.replace(llb={"bytes": peak + 200_000})
    r = check_via(g, s, one)
    assert [x.scope for x in r.gathers] == ["LLB", "DDR"]
    assert r.peak_llb_bytes <= peak + 153_600 + 1e-6


ROWS = st.one_of(st.integers(1, 4096), st.sampled_from([1, 1000, 4096]))


@settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
@given(rows=st.one_of(st.lists(ROWS, min_size=1, max_size=12),
                      st.lists(st.just(1000), min_size=20, max_size=30)),
       exps=st.sampled_from([0, 1, 10, 40]),
       bind=st.sampled_from([EIGHT, ALL8, [[0, 1], [2, 3]]]),
       llb=st.sampled_from([None, 1, 40_000, 400_000]),
       broadcast=st.booleans())
def test_tables_via_the_llb_keep_the_invariants(rows: list[int], exps: int,
                                                bind: list[list[int]], llb: int | None,
                                                broadcast: bool) -> None:
    """Random and adversarial table sets (DLRM-like many equal tables), an earlier step of
    0 to 40 Exp ops, four or eight cores, and an LLB of the default size or with only 1,
    40,000 or 400,000 bytes left beside the memory plan's peak, with and without the
    LLB's broadcast: the module doc's invariants hold, and ``explain`` still adds up."""
    target = Target.default().replace(llb={"broadcast": broadcast})
    g = via_graph(rows, exps)
    s = two_steps(g, bind)
    if llb is not None:
        peak = plan_memory(in_compute_dtype(g, target), s, target).peak_llb_bytes
        target = target.replace(llb={"bytes": peak + llb})
    r = check_via(g, s, target)
    if llb == 1:
        assert VIA_LLB not in {x.scope for x in r.gathers}
    check_explain(g, s, target)
