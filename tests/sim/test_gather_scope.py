"""Issue 25 item 5, the rest: gathered rows priced where the table is (sim/_gathers.py).

A table of at most half a weight buffer is loaded whole into L1 and gathered on
chip; one that fits the free LLB may be copied there once and its rows fetched
from the LLB; otherwise rows come from DDR, a burst and a descriptor each. Each
step takes the place where its rows arrive soonest, and the result says which.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx import helper as h

from compiler.graph import Graph
from compiler.model import Model
from compiler.target import Target
from sim import SimResult, simulate
from tests.sim.test_cost_terms import gather_graph, single

EIGHT = [[c] for c in range(8)]


def ok(r: object) -> SimResult:
    assert isinstance(r, SimResult), r
    return r


def pooled_gather(batch: int, lookups: int, rows: int, width: int) -> Graph:
    """out = sum over the lookups of table[idx]: the rows' bytes never leave the chip."""
    table = np.random.default_rng(0).standard_normal((rows, width)).astype(np.float32)
    g = helper.make_graph(
        [h.make_node("Gather", ["table", "idx"], ["e"], axis=0),
         h.make_node("ReduceSum", ["e", "axes"], ["out"], keepdims=0)], "pooled",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, [batch, lookups])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [batch, width])],
        [numpy_helper.from_array(table, "table"),
         numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")],
    )
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Model(proto, name="pooled").graph


def test_a_wide_row_table_that_fits_the_llb_is_read_from_there(target: Target) -> None:
    """8 samples x 1,024 lookups of 512-byte rows (256 FP16) from a 512 KiB table, one sample a core.

    First principles: from DDR the 8,192 rows need 8,192 x 512 / 27 = 155,345 cycles of the
    DDR channel (each core's 1,024 descriptors only 1,024 x (8 + 100) = 110,592); copying
    the table into the LLB once costs 524,288 / 27 = 19,418 cycles, then the rows come
    over the LLB port (16,384 cycles) as fast as the descriptors let them: 130,010
    cycles, and 3.7 MB less DDR traffic. Before the fix every row came from DDR
    (ddr_bytes >= 4,194,304 B).
    """
    g = pooled_gather(8, 1024, 1024, 256)
    r = ok(simulate(g, single(g, "DDR", EIGHT), target))
    assert [(x.scope, x.rows) for x in r.gathers] == [("LLB", 8192)]
    table = 1024 * 256 * 2
    assert r.gathers[0].ddr_bytes == table
    out_bytes = 8 * 256 * 2
    assert g.weight_bytes == table + 8  # the table and the int64 axes
    assert r.ddr_bytes == pytest.approx(g.weight_bytes + out_bytes + g.nbytes("idx"), rel=1e-6)
    assert r.peak_llb_bytes >= table
    assert r.latency_cycles >= table / 27 + 1024 * (512 / 64 + 100)
    assert r.latency_cycles < 8192 * 512 / 27  # the rows from DDR alone would take longer


def test_without_room_in_the_llb_the_rows_come_from_ddr(target: Target) -> None:
    """The same gather on a target whose LLB (256 KiB) cannot hold the 512 KiB table.

    First principles: 8,192 rows x 512 B from DDR at 27 B/cycle = 155,345 cycles.
    """
    small = target.replace(llb={"bytes": 1 << 18})
    g = pooled_gather(8, 1024, 1024, 256)
    r = ok(simulate(g, single(g, "DDR", EIGHT), small))
    assert [x.scope for x in r.gathers] == ["DDR"]
    assert r.gathers[0].ddr_bytes == 8192 * 512
    assert r.latency_cycles >= 8192 * 512 / 27
    llb = ok(simulate(g, single(g, "DDR", EIGHT), target))
    assert llb.latency_cycles < r.latency_cycles


def test_narrow_rows_stay_in_ddr_when_descriptors_dominate(target: Target) -> None:
    """8 x 1,024 lookups of 16-byte rows from a 1.6 MB table (100,000 rows).

    First principles: each core's 1,024 descriptors take 1,024 x (32/64 + 100) = 102,912
    cycles either way; from DDR the rows add no more (8,192 x 32 / 27 = 9,709 cycles of
    channel), from the LLB the table copy adds 1,600,000 / 27 = 59,259 cycles first.
    """
    g = gather_graph(8, 1024, 100_000, 8)
    r = ok(simulate(g, single(g, "DDR", EIGHT), target))
    assert [x.scope for x in r.gathers] == ["DDR"]
    assert r.latency_cycles >= 1024 * (32 / 64 + 100)


def test_a_small_table_is_gathered_in_l1_and_said_so(target: Target) -> None:
    """The guide's DeepFM keeps its tables in L1: 518 B and 4 KiB, under half a weight buffer."""
    g = gather_graph(64, 64, 64, 4)  # 512-byte table
    r = ok(simulate(g, single(g, "DDR", EIGHT), target))
    assert [(x.scope, x.rows, x.ddr_bytes) for x in r.gathers] == [("L1", 0, 512)]
    assert r.to_json()["gathers"][0]["scope"] == "L1"


def test_descriptors_are_issued_on_every_core_of_the_step(target: Target) -> None:
    """The same 8,192 rows on 1, 2 and 8 cores: one DMA engine per core, in parallel.

    First principles: 8,192 rows x (0.5 + 100) cycles = 823,296 on one core's engine,
    half on two, an eighth (102,912) on eight.
    """
    g = gather_graph(8, 1024, 100_000, 8)
    lat = {}
    for n in (1, 2, 8):
        bind = [list(range(n))] if n < 8 else EIGHT
        lat[n] = ok(simulate(g, single(g, "DDR", bind), target)).latency_cycles
        assert lat[n] >= math.ceil(8192 / n) * 100.5
    assert lat[1] > 1.9 * lat[2] > 3.5 * lat[8]


def test_the_bound_counts_the_descriptors_of_rows_no_schedule_avoids(target: Target) -> None:
    """8 x 1,024 lookups of 16-byte rows from a 1.6 MB table (over half a weight buffer).

    First principles: no schedule can gather in L1 from a table that does not fit
    half the weight buffer, so each of the 8,192 rows takes a descriptor on some
    core's DMA port: 8,192 x (100 + 16 / 64) / 8 cores = 102,656 cycles at least.
    Before, the bound was the roofline (15,777 cycles with the 10 µs launch: the rows'
    bursts and the output over DDR) and every schedule looked 7x off it.
    """
    from compiler.bound import lower_bound_cycles

    g = gather_graph(8, 1024, 100_000, 8)
    launch = target.host.launch_overhead_us * target.clock_hz / 1e6
    floor = 8192 * (100 + 16 / 64) / 8
    assert lower_bound_cycles(g, 8, target) >= floor + launch - 1e-6
    for bind in ([[c] for c in range(8)], [list(range(8))], [[0, 1], [2, 3]]):
        r = ok(simulate(g, single(g, "DDR", bind), target))
        assert r.latency_us >= r.lower_bound_us
